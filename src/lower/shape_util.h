// Small helpers shared by the shape, reduce and dot rules: storage shapes of IR types (c128
// carries a trailing storage dim of 2, see dtypes.h) and int conversions for MLX shapes.
// Header-only; every function is a pure function of its arguments.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/module.h"
#include "lower/dtypes.h"
#include "lower/lowering.h"
#include "lower/util.h"
#include "mlx/ops.h"
#include "mlx/primitives.h"

namespace jaxmlx::lower::shape_util {

// 1 when arrays of this element type carry an extra trailing storage dim (c128), else 0.
inline int trailing_rank(const ir::Type& t) { return storage_trailing_dim(t.dtype) > 0 ? 1 : 0; }

// The MLX shape of a tensor type's storage form.
inline mx::Shape storage_shape(const ir::Type& t) {
  mx::Shape s;
  s.reserve(t.dims.size() + 1);
  for (int64_t d : t.dims) s.push_back(static_cast<int32_t>(d));
  if (int extra = storage_trailing_dim(t.dtype)) s.push_back(extra);
  return s;
}

inline mx::Shape to_shape(const std::vector<int64_t>& v) {
  return mx::Shape(v.begin(), v.end());
}

inline std::vector<int> to_ints(const std::vector<int64_t>& v) {
  return std::vector<int>(v.begin(), v.end());
}

// Extends per-dimension vectors over the trailing storage dims of `t` (identity there).
inline void extend_trailing(const ir::Type& t, mx::Shape* start, mx::Shape* stop,
                            mx::Shape* strides) {
  if (int extra = storage_trailing_dim(t.dtype)) {
    if (start) start->push_back(0);
    if (stop) stop->push_back(extra);
    if (strides) strides->push_back(1);
  }
}

// Whether `dims` holds each of 0 .. rank-1 once (a transpose's permutation, a layout).
inline bool is_permutation(const std::vector<int64_t>& dims, int64_t rank) {
  if (static_cast<int64_t>(dims.size()) != rank) return false;
  std::vector<int64_t> sorted = dims;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != static_cast<int64_t>(i)) return false;
  return true;
}

inline bool is_identity(const std::vector<int>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int>(i)) return false;
  return true;
}

// An array as the source it transposes: a pending (unevaluated) MLX transpose is looked through,
// so that dim i of the array is dim axes[i] of `source` (axes the identity for anything else).
struct Untransposed {
  mx::array source;
  std::vector<int> axes;
};
inline Untransposed untransposed(const mx::array& a) {
  if (a.has_primitive() && std::string_view(a.primitive().name()) == "Transpose")
    return {a.inputs()[0], static_cast<const mx::Transpose&>(a.primitive()).state()};
  std::vector<int> axes(a.ndim());
  std::iota(axes.begin(), axes.end(), 0);
  return {a, std::move(axes)};
}

// The shape of `a` with its dims in the order `perm`: what permute(a, perm) has.
inline mx::Shape permuted_shape(const mx::array& a, const std::vector<int>& perm) {
  mx::Shape s;
  for (int p : perm) s.push_back(a.shape(p));
  return s;
}

// mx::transpose, except that the identity permutation is no MLX op at all (MLX would add a
// Transpose primitive: a few microseconds of dispatch on every run), and a transpose of a pending
// transpose is one transpose of its source (none when they cancel: a convolution's operands
// permuted to MLX's layout and its result permuted back; MLX keeps a node for each).
inline mx::array permute(const mx::array& a, const std::vector<int>& perm) {
  if (is_identity(perm)) return a;
  const Untransposed u = untransposed(a);
  std::vector<int> composed(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) composed[i] = u.axes[perm[i]];
  return is_identity(composed) ? u.source : mx::transpose(u.source, composed);
}

// `s` without its leading size-1 dims: all that numpy's trailing alignment of a broadcast reads.
inline mx::Shape without_leading_ones(const mx::Shape& s) {
  size_t i = 0;
  while (i < s.size() && s[i] == 1) ++i;
  return mx::Shape(s.begin() + i, s.end());
}

// Whether `a` is a pending view made by one of the reshapes reshape_view looks through.
inline bool is_pending_reshape(const mx::array& a) {
  if (!a.has_primitive()) return false;
  const std::string_view name = a.primitive().name();
  return name == "Reshape" || name == "Squeeze" || name == "ExpandDims" || name == "Flatten" ||
         name == "Unflatten";
}

// Whether `a` is a pending view that reads its input through strides (a transpose, a slice, a
// broadcast): a reshape merging the dims it strides is a copy.
inline bool is_strided_view(const mx::array& a) {
  if (!a.has_primitive()) return false;
  const std::string_view name = a.primitive().name();
  return name == "Transpose" || name == "Slice" || name == "AsStrided" || name == "Broadcast" ||
         name == "BroadcastAxes";
}

// Whether a reshape from `coarse` to `fine` only splits dims: each dim of `coarse` larger than 1
// is the product of consecutive dims of `fine` (size-1 dims come and go anywhere). Such a
// reshape of a strided view is a view too (MLX divides the dims' strides), never a copy.
inline bool only_splits(const mx::Shape& coarse, const mx::Shape& fine) {
  size_t j = 0;
  int64_t left = 1;  // what is left of coarse[j - 1] to split
  for (int f : fine) {
    if (f == 1) continue;
    if (left == 1) {
      while (j < coarse.size() && coarse[j] == 1) ++j;
      if (j == coarse.size()) return false;
      left = coarse[j++];
    }
    if (left % f != 0) return false;
    left /= f;
  }
  while (j < coarse.size() && coarse[j] == 1) ++j;
  return left == 1 && j == coarse.size();
}

// mx::reshape without the MLX ops it can do without: the same shape is `a` itself, and a reshape
// of a pending (unevaluated) reshape, squeeze, expand_dims, flatten or unflatten reshapes that
// view's input instead (reshapes compose: row-major order is all they keep), which is no op at
// all when the input has the shape already. jax's keepdims broadcast of a reduction is the
// common case: MLX's sum is Sum + Squeeze, and broadcast_in_dim reshapes it back. Not through
// to a strided view of another shape, unless both reshapes only split its dims: a pending
// reshape that merges dims of a strided view may be a copy that other ops read (attention's
// heads merged back, [B, S, H, Dh] -> [B, S, D], then [B * S, D] for a matmul): a reshape of
// that copy is a view, where a reshape of the strided view itself would be a second copy.
inline mx::array reshape_view(mx::array a, const mx::Shape& shape) {
  for (int hops = 0; a.shape() != shape && is_pending_reshape(a) && hops < 8; ++hops) {
    mx::array in = a.inputs()[0];
    if (in.shape() != shape && is_strided_view(in) &&
        !(only_splits(in.shape(), a.shape()) && only_splits(in.shape(), shape)))
      break;
    a = std::move(in);
  }
  return a.shape() == shape ? a : mx::reshape(a, shape);
}

// The sizes of `s` other than 1, in order: what a reshape that only adds or drops size-1 dims
// keeps.
inline mx::Shape non_unit(const mx::Shape& s) {
  mx::Shape out;
  for (int n : s)
    if (n != 1) out.push_back(n);
  return out;
}

// An array as a view of `source` through pending (unevaluated) transposes and reshapes that only
// add or drop size-1 dims: dim i of the array is dim dims[i] of `source`, or -1 where it has size
// 1. `chain` holds the arrays looked through, the array first and `source` last.
struct ViewOf {
  mx::array source;
  std::vector<int> dims;
  std::vector<mx::array> chain;
};
inline ViewOf view_of(const mx::array& a) {
  ViewOf v{a, {}, {a}};
  for (int i = 0; i < static_cast<int>(a.ndim()); ++i) v.dims.push_back(a.shape(i) == 1 ? -1 : i);
  // Only views of one input are looked through: a primitive of none (an arange, a full) ends
  // the walk as any other does.
  for (int hops = 0; hops < 8 && v.source.has_primitive() && v.source.inputs().size() == 1;
       ++hops) {
    const mx::array& s = v.source;
    const mx::array in = s.inputs()[0];
    std::vector<int> to_in(s.ndim(), -1);  // dim of s -> dim of in
    if (std::string_view(s.primitive().name()) == "Transpose") {
      const std::vector<int>& axes = static_cast<const mx::Transpose&>(s.primitive()).state();
      for (size_t i = 0; i < s.ndim(); ++i) to_in[i] = axes[i];
    } else if (is_pending_reshape(s) && non_unit(in.shape()) == non_unit(s.shape())) {
      std::vector<int> in_dims;  // in's dims larger than 1, in order
      for (int i = 0; i < static_cast<int>(in.ndim()); ++i)
        if (in.shape(i) != 1) in_dims.push_back(i);
      for (int i = 0, k = 0; i < static_cast<int>(s.ndim()); ++i)
        if (s.shape(i) != 1) to_in[i] = in_dims[k++];
    } else {
      break;
    }
    for (int& d : v.dims)
      if (d >= 0) d = to_in[d];
    v.source = in;
    v.chain.push_back(in);
  }
  return v;
}

// reshape(permute(a, perm), shape) in as few MLX views as there can be. Where the reshape only
// adds or drops size-1 dims, the pending transposes and such reshapes that made `a` are looked
// through: the result is `a`'s source itself, or one transpose of it, where it has as many dims
// as the result. jax writes chains of them around batched products: jnp.matmul drops a batch dim
// of size 1 ([1, H, T, D] -> [H, T, D]) after jax's transposes of the heads, and the attention
// and dot rules permute and reshape back; MLX keeps a node for each step, each a few
// microseconds of dispatch per run on a GPU.
inline mx::array permuted_view(const mx::array& a, const std::vector<int>& perm,
                               const mx::Shape& shape) {
  mx::array direct = reshape_view(permute(a, perm), shape);
  if (non_unit(permuted_shape(a, perm)) != non_unit(shape)) return direct;  // dims merge or split
  const ViewOf v = view_of(a);
  for (const mx::array& x : v.chain)
    if (x.id() == direct.id()) return direct;  // a view made already: no new node
  std::vector<int> want;  // the source dims the result's dims larger than 1 are, in order
  for (int p : perm)
    if (v.dims[p] >= 0) want.push_back(v.dims[p]);
  // The source's dims in the result's order: a reshape of it (none where the shapes agree).
  if (std::is_sorted(want.begin(), want.end())) return reshape_view(v.source, shape);
  if (v.source.ndim() != shape.size()) return direct;
  // One transpose of the source, its size-1 dims where the result has its own.
  std::vector<int> unit;
  for (int i = 0; i < static_cast<int>(v.source.ndim()); ++i)
    if (v.source.shape(i) == 1) unit.push_back(i);
  std::vector<int> order;
  for (size_t i = 0, w = 0, u = 0; i < shape.size(); ++i)
    order.push_back(shape[i] != 1 ? want[w++] : unit[u++]);
  return permute(v.source, order);
}

// The i-th result / operand type of an op.
inline const ir::Type& result_type(const ir::Op& op, size_t i = 0) { return *op.results[i].type; }
inline const ir::Type& operand_type(const ir::Op& op, size_t i) { return *op.operands[i].type; }

// True when every dim of `t` is static (rules below need static shapes).
inline bool is_static(const ir::Type& t) { return t.ranked && !t.has_dynamic_dims(); }

}  // namespace jaxmlx::lower::shape_util
