// Lowering rules: gather family, part 1 (see lowering.h for the rule contract): gather and
// dynamic_gather, with any dimension numbers (batching dims included).
//
// One MLX gather does the work: each operand dim named by start_index_map gets its start from
// the index vectors, clamped so the whole slice fits (XLA's semantics; MLX itself never
// bounds-checks and wraps negatives, PITFALLS 2.6); each operand batching dim gets the batch
// coordinate of its paired indices dim; every other dim starts at 0. MLX returns
// batch shape + slice_sizes; the collapsed and batching dims (size 1) are dropped and the
// window dims moved to offset_dims. Pure data movement, so every storage dtype works (f64 and
// c128 included: their bits are moved, never computed on).
#include <algorithm>
#include <optional>

#include "lower/gather_util.h"
#include "lower/shape_util.h"

namespace jaxmlx::lower {

using namespace shape_util;
using namespace gather_util;

namespace {

// jax's take_along_axis (and the gathers vmap makes of per-row indexing): every operand dim but
// `axis` is a batching dim paired with the indices dim at the same place, one start per element
// along `axis`, windows of one element: MLX's take_along_axis over the clamped starts, one
// kernel where the general gather also builds each batching dim's coordinates. nullopt when the
// gather has another form.
std::optional<mx::array> take_along_axis_form(const ir::GatherDims& dn, const ir::Type& t,
                                              const mx::array& x, const mx::array& indices,
                                              const std::vector<int64_t>& slice_sizes,
                                              const mx::Shape& out_shape) {
  const int64_t rank = t.rank();
  if (dn.start_index_map.size() != 1 || trailing_rank(t) != 0 || !dn.offset_dims.empty() ||
      static_cast<int64_t>(dn.operand_batching_dims.size()) != rank - 1)
    return std::nullopt;
  const int64_t axis = dn.start_index_map[0];
  if (dn.collapsed_slice_dims != std::vector<int64_t>{axis}) return std::nullopt;
  for (int64_t size : slice_sizes)
    if (size != 1) return std::nullopt;
  const int64_t ivd = dn.index_vector_dim;
  const mx::Shape batch = batch_shape(indices.shape(), ivd);
  if (static_cast<int64_t>(batch.size()) != rank || batch != out_shape) return std::nullopt;
  for (size_t i = 0; i < dn.operand_batching_dims.size(); ++i) {
    const int64_t d = dn.operand_batching_dims[i], id = dn.start_indices_batching_dims[i];
    if (d == axis || id == ivd || batch_pos(id, ivd) != d || batch[d] != t.dims[d])
      return std::nullopt;
  }
  const mx::array starts = clamp_start(index_component(indices, ivd, 0), t.dims[axis] - 1);
  return mx::take_along_axis(x, starts, static_cast<int>(axis));
}

// Starts known when lowering (jnp.take with a static index: one index vector of equal
// components): the one window is a static slice. nullopt otherwise.
std::optional<mx::array> constant_window(const ir::GatherDims& dn, const ir::Type& t,
                                         const mx::array& x, const mx::array& indices,
                                         const mx::Shape& batch,
                                         const std::vector<int64_t>& slice_sizes) {
  if (!batch.empty() || !dn.operand_batching_dims.empty() || dn.start_index_map.empty() ||
      trailing_rank(t) != 0 || indices.dtype() == mx::uint64)
    return std::nullopt;
  const std::optional<int64_t> v = splat_int_constant(indices);
  if (!v) return std::nullopt;
  mx::Shape start(t.rank(), 0), stop = to_shape(slice_sizes);
  for (int64_t d : dn.start_index_map) {
    start[d] = static_cast<int>(std::clamp<int64_t>(*v, 0, t.dims[d] - slice_sizes[d]));
    stop[d] = start[d] + static_cast<int>(slice_sizes[d]);
  }
  return mx::slice(x, start, stop);
}

StatusOr<Values> gather_with_sizes(LowerContext& ctx, const ir::Op& op, const Values& in,
                                   const std::vector<int64_t>& slice_sizes) {
  const ir::GatherDims* dn = op.attr<ir::GatherDims>("dimension_numbers");
  if (dn == nullptr) return ctx.malformed(op, "no dimension_numbers");
  const ir::Type& t = operand_type(op, 0);
  const ir::Type& it = operand_type(op, 1);
  const ir::Type& rt = result_type(op);
  if (!is_static(t) || !is_static(it) || !is_static(rt))
    return ctx.unsupported(op, "dynamic shapes");
  const int64_t rank = t.rank();
  const int64_t ivd = dn->index_vector_dim;
  if (ivd < 0 || ivd > it.rank())
    return ctx.malformed(op, "index_vector_dim is not a dim of the indices (or one past them)");
  const int64_t n_vec = ivd < it.rank() ? it.dims[ivd] : 1;
  const auto& bdims = dn->operand_batching_dims;
  if (static_cast<int64_t>(slice_sizes.size()) != rank ||
      n_vec != static_cast<int64_t>(dn->start_index_map.size()) ||
      bdims.size() != dn->start_indices_batching_dims.size() ||
      !valid_dims(dn->start_index_map, rank) || !valid_dims(dn->collapsed_slice_dims, rank) ||
      !valid_dims(bdims, rank) || !valid_dims(dn->offset_dims, rt.rank()) ||
      !std::is_sorted(dn->offset_dims.begin(), dn->offset_dims.end()))
    return ctx.malformed(op, "gather dimension numbers do not match the operand shapes");
  for (int64_t d = 0; d < rank; ++d)
    if (slice_sizes[d] < 0 || slice_sizes[d] > t.dims[d])
      return ctx.malformed(op, "slice size larger than the operand");
  const mx::Shape out_shape = storage_shape(rt);
  if (rt.num_elements() == 0) return Values{mx::zeros(out_shape, in[0].dtype())};

  if (std::optional<mx::array> g =
          take_along_axis_form(*dn, t, in[0], in[1], slice_sizes, out_shape))
    return Values{*g};
  const mx::Shape batch = batch_shape(in[1].shape(), ivd);
  // batch + sizes: a static slice when the starts are constants, else MLX's gather.
  mx::array g = in[0];
  if (std::optional<mx::array> window = constant_window(*dn, t, in[0], in[1], batch, slice_sizes)) {
    g = *window;
  } else {
    std::vector<mx::array> starts;
    std::vector<int> axes;
    for (size_t k = 0; k < dn->start_index_map.size(); ++k) {
      const int64_t d = dn->start_index_map[k];
      mx::array s = index_component(in[1], ivd, static_cast<int>(k));
      starts.push_back(clamp_start(s, t.dims[d] - slice_sizes[d]));
      axes.push_back(static_cast<int>(d));
    }
    for (size_t i = 0; i < bdims.size(); ++i) {
      const int64_t id = dn->start_indices_batching_dims[i];
      if (id < 0 || id >= it.rank() || id == ivd) return ctx.malformed(op, "bad batching dim");
      starts.push_back(batch_iota(batch, batch_pos(id, ivd)));
      axes.push_back(static_cast<int>(bdims[i]));
    }
    mx::Shape sizes = to_shape(slice_sizes);
    extend_trailing(t, nullptr, &sizes, nullptr);
    if (axes.empty()) {
      // Every slice starts at 0: gather from a leading size-1 dim so MLX still broadcasts.
      g = mx::expand_dims(g, 0);
      sizes.insert(sizes.begin(), 1);
      starts.push_back(mx::zeros(batch, mx::int32));
      axes.push_back(0);
    }
    for (mx::array& s : starts) s = mx::broadcast_to(s, batch);
    g = mx::gather(g, starts, axes, sizes);
  }

  // Drop the collapsed and batching dims (size 1): batch + window dims (+ c128's trailing dim).
  mx::Shape kept = batch;
  for (int64_t d = 0; d < rank; ++d)
    if (!contains(dn->collapsed_slice_dims, d) && !contains(bdims, d))
      kept.push_back(static_cast<int>(slice_sizes[d]));
  if (int extra = storage_trailing_dim(t.dtype)) kept.push_back(extra);
  if (kept.size() - batch.size() - trailing_rank(t) != dn->offset_dims.size())
    return ctx.malformed(op, "offset_dims do not match the window dims");
  g = mx::reshape(g, kept);
  std::vector<int> perm = place_window_dims(dn->offset_dims, static_cast<int>(rt.rank()),
                                            static_cast<int>(batch.size()), trailing_rank(t));
  if (!std::is_sorted(perm.begin(), perm.end())) g = mx::transpose(g, perm);
  return Values{mx::reshape(g, out_shape)};
}

StatusOr<Values> lower_gather(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != 2) return ctx.malformed(op, "gather takes an operand and start indices");
  return gather_with_sizes(ctx, op, in, op.get_i64s("slice_sizes"));
}

// dynamic_gather: slice_sizes is an operand. The result type is static here, and it fixes the
// sizes: window dims have the sizes at offset_dims, collapsed and batching dims size 1.
StatusOr<Values> lower_dynamic_gather(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != 3) return ctx.malformed(op, "dynamic_gather takes 3 operands");
  const ir::GatherDims* dn = op.attr<ir::GatherDims>("dimension_numbers");
  const ir::Type& rt = result_type(op);
  if (dn == nullptr || !is_static(rt)) return ctx.unsupported(op, "dynamic result shape");
  std::vector<int64_t> sizes;
  size_t j = 0;
  for (int64_t d = 0; d < operand_type(op, 0).rank(); ++d) {
    if (contains(dn->collapsed_slice_dims, d) || contains(dn->operand_batching_dims, d)) {
      sizes.push_back(1);
    } else {
      if (j >= dn->offset_dims.size() || dn->offset_dims[j] < 0 ||
          dn->offset_dims[j] >= rt.rank())
        return ctx.malformed(op, "offset_dims do not match the operand rank");
      sizes.push_back(rt.dims[dn->offset_dims[j++]]);
    }
  }
  return gather_with_sizes(ctx, op, {in[0], in[1]}, sizes);
}

}  // namespace

void register_gather(Registry& r) {
  r.add(ir::OpKind::kGather, lower_gather);
  r.add(ir::OpKind::kDynamicGather, lower_dynamic_gather);
  register_scatter_ops(r);
}

}  // namespace jaxmlx::lower
