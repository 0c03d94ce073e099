// Index arithmetic shared by gather.cc and scatter.cc: the "batch" space of start indices (the
// indices dims without index_vector_dim), reading one component of the index vectors, batching
// dims as iotas, and start indices of any integer dtype brought to int64 without overflow.
// Header-only; pure functions of their arguments (they build lazy MLX graphs).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "lower/shape_util.h"
#include "lower/util.h"
#include "mlx/ops.h"

namespace jaxmlx::lower {
// scatter.cc's rules; register_gather (gather.cc) adds them to the family.
void register_scatter_ops(Registry& r);
}  // namespace jaxmlx::lower

namespace jaxmlx::lower::gather_util {

// True when every entry of `dims` is in [0, rank) and none repeats.
inline bool valid_dims(const std::vector<int64_t>& dims, int64_t rank) {
  std::vector<bool> seen(static_cast<size_t>(rank > 0 ? rank : 0), false);
  for (int64_t d : dims) {
    if (d < 0 || d >= rank || seen[d]) return false;
    seen[d] = true;
  }
  return true;
}

inline bool contains(const std::vector<int64_t>& v, int64_t x) {
  for (int64_t e : v)
    if (e == x) return true;
  return false;
}

// The batch shape: the dims of `indices` without index_vector_dim (which may equal the rank,
// meaning each index vector is one implicit scalar).
inline mx::Shape batch_shape(const mx::Shape& indices, int64_t index_vector_dim) {
  mx::Shape b;
  for (size_t d = 0; d < indices.size(); ++d)
    if (static_cast<int64_t>(d) != index_vector_dim) b.push_back(indices[d]);
  return b;
}

// Where dim `d` of the indices lands in the batch shape.
inline int batch_pos(int64_t d, int64_t index_vector_dim) {
  return static_cast<int>(d > index_vector_dim ? d - 1 : d);
}

// Component k of every index vector; shape = batch shape, the indices' dtype. Views (a slice
// and a squeeze), where a take would be a gather kernel. A one-component vector is the indices
// reshaped (shape_util::reshape_view: jax's index vectors are often its own reshape of an index
// array of the batch shape, which is then used as it is).
inline mx::array index_component(const mx::array& indices, int64_t index_vector_dim, int k) {
  if (index_vector_dim >= static_cast<int64_t>(indices.ndim())) return indices;
  const int v = static_cast<int>(index_vector_dim);
  if (indices.shape(v) == 1) {
    mx::Shape batch = indices.shape();
    batch.erase(batch.begin() + v);
    return shape_util::reshape_view(indices, batch);
  }
  mx::Shape start(indices.ndim(), 0), stop = indices.shape();
  start[v] = k;
  stop[v] = k + 1;
  return mx::squeeze(mx::slice(indices, start, stop), v);
}

// The batch coordinate along batch dim `pos`, as int32, broadcast to the batch shape: the start
// an operand batching dim takes (it is paired with the indices batching dim at `pos`).
inline mx::array batch_iota(const mx::Shape& batch, int pos) {
  mx::Shape one(batch.size(), 1);
  one[pos] = batch[pos];
  return mx::broadcast_to(mx::reshape(mx::arange(batch[pos], mx::int32), one), batch);
}

// Start indices of any integer dtype as int64. uint64 values above `cap` (>= 0) become `cap`
// first, so that huge unsigned starts clamp high instead of wrapping negative.
inline mx::array starts_as_i64(const mx::array& s, int64_t cap) {
  mx::array x = s;
  if (x.dtype() == mx::uint64) x = mx::minimum(x, int_scalar(cap, mx::uint64));
  return mx::astype(x, mx::int64);
}

// spec: gather — each start is clamped into [0, hi] so the whole slice fits; as int32 (int32
// starts, jax's, are clamped as they are).
inline mx::array clamp_start(const mx::array& s, int64_t hi) {
  if (s.dtype() == mx::int32 && hi >= 0 && hi <= std::numeric_limits<int32_t>::max())
    return mx::clip(s, int_scalar(0, mx::int32), int_scalar(hi, mx::int32));
  mx::array x = starts_as_i64(s, hi);
  x = mx::clip(x, int_scalar(0, mx::int64), int_scalar(hi, mx::int64));
  return mx::astype(x, mx::int32);
}

// Permutation that places `n_batch` leading dims and the window dims (which follow them, in
// order) so that window dim j lands at `window_pos[j]` of a rank-`rank` result; the batch dims
// fill the other positions in order. Trailing storage dims (c128) stay last.
inline std::vector<int> place_window_dims(const std::vector<int64_t>& window_pos, int rank,
                                          int n_batch, int trailing) {
  std::vector<int> perm;
  int b = 0;
  size_t j = 0;
  for (int p = 0; p < rank; ++p) {
    if (j < window_pos.size() && window_pos[j] == p)
      perm.push_back(n_batch + static_cast<int>(j++));
    else
      perm.push_back(b++);
  }
  for (int t = 0; t < trailing; ++t) perm.push_back(rank + t);
  return perm;
}

}  // namespace jaxmlx::lower::gather_util
