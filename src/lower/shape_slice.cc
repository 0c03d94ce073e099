// Lowering rules: shape family, part 2 (see lowering.h for the rule contract): slice,
// dynamic_slice, dynamic_update_slice, pad, real_dynamic_slice.
//
// Dynamic starts stay on the device: they are clamped with MLX ops and fed to MLX's
// array-start slice/slice_update, never read back (PITFALLS 2.11).
#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "lower/shape_util.h"
#include "lower/window_util.h"

namespace jaxmlx::lower {

using namespace shape_util;

namespace {

StatusOr<Values> lower_slice(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const ir::Type& t = operand_type(op, 0);
  mx::Shape start = to_shape(op.get_i64s("start_indices"));
  mx::Shape stop = to_shape(op.get_i64s("limit_indices"));
  mx::Shape strides = to_shape(op.get_i64s("strides"));
  const size_t r = static_cast<size_t>(t.rank());
  if (strides.empty()) strides = mx::Shape(r, 1);
  if (start.size() != r || stop.size() != r || strides.size() != r)
    return ctx.malformed(op, "slice attributes do not match the operand rank");
  for (size_t d = 0; d < r; ++d)
    if (strides[d] <= 0 || start[d] < 0 || stop[d] < start[d] || stop[d] > t.dims[d])
      return ctx.malformed(op, "slice bounds out of range");
  extend_trailing(t, &start, &stop, &strides);
  return Values{mx::slice(in[0], start, stop, strides)};
}

// spec: dynamic_slice/dynamic_update_slice — each start is clamped into [0, dim - size].
// Constant starts (hoisted constants are evaluated scalars) are clamped here, on the host; only
// the others become MLX ops. `fixed` holds every dim's start (0 where it is dynamic), `axes` the
// dims MLX must read from `dynamic` (int32, one per axis). jax's KV-cache writes have one
// dynamic start among zeros: one clamp instead of four (each a few MLX primitives per token).
struct Starts {
  std::vector<int32_t> fixed;
  std::vector<int> axes;
  std::optional<mx::array> dynamic;
};

mx::array clamp_start_on_device(const mx::array& start, int64_t limit) {
  mx::array s = mx::reshape(start, {});
  if (s.dtype() == mx::uint64 || s.dtype() == mx::uint32 || s.dtype() == mx::int64) {
    // uint64 starts above INT64_MAX must clamp high, so cap them before going signed.
    if (s.dtype() == mx::uint64) s = mx::minimum(s, int_scalar(limit, mx::uint64));
    s = mx::astype(s, mx::int64);
    s = mx::clip(s, int_scalar(0, mx::int64), int_scalar(limit, mx::int64));
    return mx::astype(s, mx::int32);
  }
  // Narrower integers fit int32 exactly, and so does limit (a dimension size).
  s = mx::astype(s, mx::int32);
  return mx::clip(s, int_scalar(0, mx::int32), int_scalar(limit, mx::int32));
}

Starts clamped_starts(const Values& in, size_t first, const ir::Type& t,
                      const std::vector<int64_t>& sizes) {
  Starts st;
  std::vector<bool> known(sizes.size(), false);
  std::vector<int64_t> limits(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    limits[d] = std::max<int64_t>(t.dims[d] - sizes[d], 0);
    const mx::array& s = in[first + d];
    // A slice as long as its dim can only start at 0, whatever the start says.
    std::optional<int64_t> c = limits[d] == 0 ? std::optional<int64_t>(0)
                               : s.size() == 1 ? splat_int_constant(s)
                                               : std::nullopt;
    if (c && is_unsigned_dtype(s.dtype()) && *c < 0) c = limits[d];  // above INT64_MAX: high
    known[d] = c.has_value();
    st.fixed.push_back(c ? static_cast<int32_t>(std::clamp<int64_t>(*c, 0, limits[d])) : 0);
  }
  // Only constant starts: a static slice (no dynamic axis); else MLX's dynamic slice.
  if (std::all_of(known.begin(), known.end(), [](bool k) { return k; })) return st;
  std::vector<mx::array> dyn;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (known[d] && st.fixed[d] == 0) continue;  // MLX starts the axes it is not given at 0
    dyn.push_back(known[d] ? mx::array(st.fixed[d], mx::int32)
                           : clamp_start_on_device(in[first + d], limits[d]));
    st.axes.push_back(static_cast<int>(d));
  }
  st.dynamic = dyn.size() == 1 ? mx::reshape(dyn[0], {1}) : mx::stack(dyn);
  return st;
}

// The static start/stop of a slice of `extent` at `fixed` (trailing storage dims from 0).
std::pair<mx::Shape, mx::Shape> static_bounds(const std::vector<int32_t>& fixed,
                                              const mx::Shape& extent) {
  mx::Shape start(extent.size(), 0), stop = extent;
  for (size_t d = 0; d < fixed.size(); ++d) {
    start[d] = fixed[d];
    stop[d] = fixed[d] + extent[d];
  }
  return {start, stop};
}

StatusOr<Values> lower_dynamic_slice(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const ir::Type& t = operand_type(op, 0);
  std::vector<int64_t> sizes = op.get_i64s("slice_sizes");
  if (!is_static(t)) return ctx.unsupported(op, "dynamic operand shape");
  if (static_cast<int64_t>(sizes.size()) != t.rank() || in.size() != sizes.size() + 1)
    return ctx.malformed(op, "slice_sizes / start indices do not match the operand rank");
  if (t.rank() == 0) return Values{in[0]};
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] < 0 || sizes[d] > t.dims[d]) return ctx.malformed(op, "slice size too large");
  mx::Shape size = to_shape(sizes);
  extend_trailing(t, nullptr, &size, nullptr);
  if (t.num_elements() == 0 || result_type(op).num_elements() == 0)
    return Values{mx::zeros(size, in[0].dtype())};
  Starts st = clamped_starts(in, 1, t, sizes);
  if (!st.dynamic) {
    auto [start, stop] = static_bounds(st.fixed, size);
    return Values{mx::slice(in[0], start, stop)};
  }
  return Values{mx::slice(in[0], *st.dynamic, st.axes, size)};
}

StatusOr<Values> lower_dynamic_update_slice(LowerContext& ctx, const ir::Op& op,
                                            const Values& in) {
  const ir::Type& t = operand_type(op, 0);
  const ir::Type& u = operand_type(op, 1);
  if (!is_static(t) || !is_static(u)) return ctx.unsupported(op, "dynamic shapes");
  if (u.rank() != t.rank() || in.size() != static_cast<size_t>(t.rank()) + 2)
    return ctx.malformed(op, "update rank / start indices do not match the operand rank");
  for (int64_t d = 0; d < t.rank(); ++d)
    if (u.dims[d] > t.dims[d]) return ctx.malformed(op, "update larger than operand");
  if (u.num_elements() == 0 || t.rank() == 0)
    return Values{t.rank() == 0 ? in[1] : in[0]};
  Starts st = clamped_starts(in, 2, t, u.dims);
  if (!st.dynamic) {
    auto [start, stop] = static_bounds(st.fixed, in[1].shape());
    return Values{mx::slice_update(in[0], in[1], start, stop)};
  }
  return Values{mx::slice_update(in[0], in[1], *st.dynamic, st.axes)};
}

// spec: pad — interior padding dilates the operand first, then edge padding (which may be
// negative, cropping) applies to the dilated array (PITFALLS 2.12: MLX's own pad cannot crop).
StatusOr<Values> lower_pad(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const ir::Type& t = operand_type(op, 0);
  const ir::Type& rt = result_type(op);
  std::vector<int64_t> lo = op.get_i64s("edge_padding_low");
  std::vector<int64_t> hi = op.get_i64s("edge_padding_high");
  std::vector<int64_t> interior = op.get_i64s("interior_padding");
  const size_t r = static_cast<size_t>(t.rank());
  if (!is_static(t) || !is_static(rt)) return ctx.unsupported(op, "dynamic shapes");
  if (interior.empty()) interior.assign(r, 0);
  if (lo.size() != r || hi.size() != r || interior.size() != r || rt.rank() != t.rank())
    return ctx.malformed(op, "padding attributes do not match the operand rank");
  for (size_t d = 0; d < r; ++d) {
    // lo + dilated + hi in 64 bits: each must fit, and the sum is the result's dim.
    int64_t dilated = 0, out = 0;
    if (interior[d] < 0 ||
        __builtin_mul_overflow(t.dims[d] > 0 ? t.dims[d] - 1 : 0, interior[d], &dilated) ||
        __builtin_add_overflow(dilated, t.dims[d], &dilated) ||
        __builtin_add_overflow(dilated, lo[d], &out) || __builtin_add_overflow(out, hi[d], &out) ||
        out != rt.dims[d])
      return ctx.malformed(op, "the padding of dim " + std::to_string(d) +
                                   " does not give the result's size");
  }
  if (rt.num_elements() == 0) return Values{mx::zeros(storage_shape(rt), in[0].dtype())};
  // The window ops' padding: one MLX Pad for a scalar pad value's edges.
  return Values{window_util::pad_dilate(in[0], in[1], lo, hi, interior)};
}

// spec: real_dynamic_slice — start/limit/strides are 1-d tensors; the result shape is static,
// so gather start + i*stride along each dim (no clamping in the spec; we clamp for safety).
StatusOr<Values> lower_real_dynamic_slice(LowerContext& ctx, const ir::Op& op,
                                          const Values& in) {
  const ir::Type& t = operand_type(op, 0);
  const ir::Type& rt = result_type(op);
  if (!is_static(t) || !is_static(rt)) return ctx.unsupported(op, "dynamic shapes");
  if (rt.num_elements() == 0) return Values{mx::zeros(storage_shape(rt), in[0].dtype())};
  mx::array x = in[0];
  mx::array start = mx::astype(in[1], mx::int32);
  mx::array stride = mx::astype(in[3], mx::int32);
  for (int d = 0; d < t.rank(); ++d) {
    mx::array s = mx::take(start, d), k = mx::take(stride, d);
    mx::array idx = mx::add(s, mx::multiply(mx::arange(0, static_cast<int>(rt.dims[d]), 1), k));
    idx = mx::clip(idx, int_scalar(0, mx::int32), int_scalar(t.dims[d] - 1, mx::int32));
    x = mx::take(x, idx, d);
  }
  return Values{x};
}

}  // namespace

void register_shape_slice(Registry& r) {
  using K = ir::OpKind;
  r.add(K::kSlice, lower_slice);
  r.add(K::kDynamicSlice, lower_dynamic_slice);
  r.add(K::kDynamicUpdateSlice, lower_dynamic_update_slice);
  r.add(K::kPad, lower_pad);
  r.add(K::kRealDynamicSlice, lower_real_dynamic_slice);
}

}  // namespace jaxmlx::lower
