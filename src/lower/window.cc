// Lowering rules: window family (see lowering.h for the rule contract): reduce_window and
// select_and_scatter.
//
// Operands are padded and base-dilated (spec: pad with the init value); windows are strided
// slices, one per window offset. As XLA's CPU backend does, padding and dilation holes take no
// part in a window (they matter when the init value is not the body's identity), so a validity
// mask travels with the values whenever there is padding or dilation.
// Bodies run elementwise on whole arrays (window_util::apply_body_elementwise), reading values
// they capture from outside and emulating the types MLX lacks op by op, as the top level does.
// reduce_window: windows of up to kDirectFoldOffsets elements fold the body over the offsets in
// row-major order starting from the init value, the order XLA uses (float results match
// closely). Larger windows (cumsum emits one as long as the axis) reduce one dim at a time by
// doubling (log2(window) body calls per dim) and fold the init in last; XLA assumes the body is
// associative and commutative, so this differs only by float rounding.
// select_and_scatter: the selected offset of each window is found by folding the select body
// over the window in row-major order (a later element replaces the selection when
// select(selected, candidate) is false: GE keeps the first maximum, as XLA does); the source
// values are then scattered offset by offset in the order XLA applies them.
#include <algorithm>
#include <optional>
#include <string>

#include "lower/float_bits.h"
#include "lower/shape_util.h"
#include "lower/window_util.h"

namespace jaxmlx::lower {

using namespace shape_util;
using namespace window_util;

namespace {

constexpr int64_t kDirectFoldOffsets = 64;  // larger windows reduce dim by dim
constexpr int64_t kDirectAxisWindow = 8;    // longer windows along one dim use doubling

// Window attributes, each one entry per operand dim (defaults filled in).
struct WindowSpec {
  std::vector<int64_t> dims, strides, base_dil, win_dil, lo, hi;
};

StatusOr<WindowSpec> read_window(LowerContext& ctx, const ir::Op& op, size_t rank) {
  auto or_ones = [&](std::vector<int64_t> v) {
    return v.empty() ? std::vector<int64_t>(rank, 1) : v;
  };
  WindowSpec w;
  w.dims = op.get_i64s("window_dimensions");
  w.strides = or_ones(op.get_i64s("window_strides"));
  w.base_dil = or_ones(op.get_i64s("base_dilations"));
  w.win_dil = or_ones(op.get_i64s("window_dilations"));
  std::vector<int64_t> pad = op.get_i64s("padding");
  if (pad.empty()) pad.assign(2 * rank, 0);
  if (w.dims.size() != rank || w.strides.size() != rank || w.base_dil.size() != rank ||
      w.win_dil.size() != rank || pad.size() != 2 * rank)
    return ctx.malformed(op, "window attributes do not match the operand rank");
  for (size_t d = 0; d < rank; ++d) {
    w.lo.push_back(pad[2 * d]);
    w.hi.push_back(pad[2 * d + 1]);
    if (w.dims[d] < 0 || w.strides[d] < 1 || w.base_dil[d] < 1 || w.win_dil[d] < 1)
      return ctx.malformed(op, "bad window dimensions, strides or dilations");
    for (int64_t v : {w.dims[d], w.strides[d], w.base_dil[d], w.win_dil[d], w.lo[d], w.hi[d]})
      if (!window_attr_fits(v))
        return ctx.malformed(op, "a window size, stride, dilation or padding beyond 2^31");
  }
  return w;
}

// Where offset `k` of the first window lies in the padded operand (later windows: + strides).
std::vector<int64_t> offset_start(const WindowSpec& w, const std::vector<int64_t>& k) {
  std::vector<int64_t> s;
  for (size_t d = 0; d < k.size(); ++d) s.push_back(k[d] * w.win_dil[d]);
  return s;
}

// The number of windows per dim over the padded, dilated operand of shape `shape`.
std::vector<int64_t> window_counts(const WindowSpec& w, const std::vector<int64_t>& shape) {
  std::vector<int64_t> out;
  for (size_t d = 0; d < shape.size(); ++d)
    out.push_back(window_count(shape[d], w.base_dil[d], w.lo[d], w.hi[d], w.dims[d], w.win_dil[d],
                               w.strides[d]));
  return out;
}

// Where the padded operand holds real elements; nullopt when it all does.
std::optional<mx::array> valid_mask(const WindowSpec& w, const mx::Shape& shape) {
  bool needed = false;
  std::vector<int64_t> interior;
  for (size_t d = 0; d < shape.size(); ++d) {
    needed |= w.lo[d] > 0 || w.hi[d] > 0 || (w.base_dil[d] > 1 && shape[d] > 1);
    interior.push_back(w.base_dil[d] - 1);
  }
  if (!needed) return std::nullopt;
  return pad_dilate(mx::ones(shape, mx::bool_), mx::array(false), w.lo, w.hi, interior);
}

// Values with an optional validity mask (invalid elements are skipped when combining).
struct Masked {
  Values v;
  std::optional<mx::array> m;
};

// body(a, b) elementwise, where an element invalid on one side takes the other side's value.
StatusOr<Masked> combine(LowerContext& ctx, const ir::Region& body, const Masked& a,
                         const Masked& b, const std::vector<mx::Dtype>& dts) {
  Values args = a.v;
  args.insert(args.end(), b.v.begin(), b.v.end());
  ASSIGN_OR_RETURN(Values r, apply_body_elementwise(ctx, body, args));
  if (r.size() != dts.size()) return invalid_argument("reduce_window body result count");
  const mx::Shape shape = a.v[0].shape();
  Masked out;
  for (size_t i = 0; i < r.size(); ++i) {
    mx::array ri = mx::broadcast_to(mx::astype(r[i], dts[i]), shape);
    if (a.m && b.m)
      ri = mx::where(mx::logical_and(*a.m, *b.m), ri, mx::where(*a.m, a.v[i], b.v[i]));
    else if (a.m)
      ri = mx::where(*a.m, ri, b.v[i]);
    else if (b.m)
      ri = mx::where(*b.m, ri, a.v[i]);
    out.v.push_back(ri);
  }
  if (a.m && b.m) out.m = mx::logical_or(*a.m, *b.m);
  return out;
}

// Elements start + i*stride (i < count) along `axis` of every value and the mask.
Masked take_axis(const Masked& x, int axis, int64_t start, int64_t stride, int64_t count) {
  const int r = x.v[0].ndim();
  std::vector<int64_t> s(r, 0), st(r, 1), n(x.v[0].shape().begin(), x.v[0].shape().end());
  s[axis] = start, st[axis] = stride, n[axis] = count;
  Masked out;
  for (const mx::array& a : x.v) out.v.push_back(strided_window(a, s, st, n));
  if (x.m) out.m = strided_window(*x.m, s, st, n);
  return out;
}

// Reduces windows of `w` elements spaced `wd` apart along `axis`, keeping every `stride`-th of
// the `count` windows; by direct fold for short windows, else by doubling.
StatusOr<Masked> reduce_axis(LowerContext& ctx, const ir::Region& body, const Masked& x, int axis,
                             int64_t w, int64_t wd, int64_t stride, int64_t count,
                             const std::vector<mx::Dtype>& dts) {
  if (w <= kDirectAxisWindow) {
    Masked acc = take_axis(x, axis, 0, stride, count);
    for (int64_t k = 1; k < w; ++k) {
      ASSIGN_OR_RETURN(acc,
                       combine(ctx, body, acc, take_axis(x, axis, k * wd, stride, count), dts));
    }
    return acc;
  }
  // levels[b] holds the windows of 2^b elements starting at every position.
  const int64_t len = x.v[0].shape(axis);
  std::vector<Masked> levels{x};
  for (int64_t p = 1; 2 * p <= w; p *= 2) {
    const Masked& prev = levels.back();
    const int64_t n = prev.v[0].shape(axis) - p * wd;
    ASSIGN_OR_RETURN(Masked next, combine(ctx, body, take_axis(prev, axis, 0, 1, n),
                                          take_axis(prev, axis, p * wd, 1, n), dts));
    levels.push_back(std::move(next));
  }
  const int64_t all = len - (w - 1) * wd;  // windows at every start position
  std::optional<Masked> acc;
  int64_t offset = 0;
  for (int b = static_cast<int>(levels.size()) - 1; b >= 0; --b) {
    if (!(w & (int64_t{1} << b))) continue;
    Masked piece = take_axis(levels[b], axis, offset * wd, 1, all);
    if (acc) {
      ASSIGN_OR_RETURN(acc, combine(ctx, body, *acc, piece, dts));
    } else {
      acc = std::move(piece);
    }
    offset += int64_t{1} << b;
  }
  return take_axis(*acc, axis, 0, stride, count);
}

// XLA's order: the init value, then every window element in row-major window order.
StatusOr<Values> fold_offsets(LowerContext& ctx, const ir::Region& body, const Masked& x,
                              const Values& inits, const WindowSpec& w,
                              const std::vector<int64_t>& counts,
                              const std::vector<mx::Dtype>& dts) {
  Masked acc;
  for (const mx::array& init : inits) acc.v.push_back(mx::broadcast_to(init, to_shape(counts)));
  for (const std::vector<int64_t>& k : box_offsets(w.dims)) {
    const std::vector<int64_t> start = offset_start(w, k);
    Masked xk;
    for (const mx::array& a : x.v) xk.v.push_back(strided_window(a, start, w.strides, counts));
    if (x.m) xk.m = strided_window(*x.m, start, w.strides, counts);
    ASSIGN_OR_RETURN(acc, combine(ctx, body, acc, xk, dts));
  }
  return acc.v;
}

StatusOr<Values> lower_reduce_window(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const size_t n = op.results.size();
  if (n == 0 || in.size() != 2 * n || op.regions.size() != 1 || op.regions[0].empty())
    return ctx.malformed(op, "reduce_window needs N inputs, N init values and a body");
  const ir::Type& t = operand_type(op, 0);
  if (!is_static(t) || !is_static(result_type(op))) return ctx.unsupported(op, "dynamic shapes");
  // Windows only move storage; the body's ops compute, emulating sub-byte ints (exact: they
  // wrap) or refusing what they cannot compute (f64). XLA's CPU reduces narrow floats in f16
  // and rounds once, which a body emulated op by op would not; c128 has a trailing storage dim.
  for (const ir::Value& v : op.operands) {
    const ir::ElementType e = v.type->dtype;
    if (fbits::is_narrow_float(e))
      return ctx.unsupported(op, std::string(ir::element_type_name(e)) +
                                     " (XLA reduces windows of it in f16, rounding once)");
    if (trailing_rank(*v.type) != 0) return ctx.unsupported(op, non_native_reason(e));
  }
  const size_t rank = static_cast<size_t>(t.rank());
  ASSIGN_OR_RETURN(WindowSpec w, read_window(ctx, op, rank));
  const ir::Region& body = op.regions[0];
  std::vector<int64_t> counts = window_counts(w, t.dims);
  mx::Shape out_shape = storage_shape(result_type(op));
  if (out_shape != to_shape(counts)) return ctx.malformed(op, "result shape mismatch");
  Values inits;
  std::vector<mx::Dtype> dts;
  Masked x;
  std::vector<int64_t> interior;
  for (size_t d = 0; d < rank; ++d) interior.push_back(w.base_dil[d] - 1);
  for (size_t i = 0; i < n; ++i) {
    dts.push_back(*storage_dtype(result_type(op, i).dtype));
    inits.push_back(mx::astype(in[n + i], dts[i]));
    x.v.push_back(pad_dilate(mx::astype(in[i], dts[i]), inits[i], w.lo, w.hi, interior));
  }
  int64_t offsets = 1;
  for (int64_t d : w.dims) offsets *= d;
  if (result_type(op).num_elements() == 0 || offsets == 0) {
    Values res;
    for (size_t i = 0; i < n; ++i) res.push_back(mx::broadcast_to(inits[i], out_shape));
    return res;
  }
  x.m = valid_mask(w, in[0].shape());
  if (offsets <= kDirectFoldOffsets) return fold_offsets(ctx, body, x, inits, w, counts, dts);
  Masked acc = x;
  for (size_t d = 0; d < rank; ++d) {
    const int axis = static_cast<int>(d);
    if (w.dims[d] == 1) {
      acc = take_axis(acc, axis, 0, w.strides[d], counts[d]);
      continue;
    }
    ASSIGN_OR_RETURN(acc, reduce_axis(ctx, body, acc, axis, w.dims[d], w.win_dil[d], w.strides[d],
                                      counts[d], dts));
  }
  Masked init;
  for (size_t i = 0; i < n; ++i) init.v.push_back(mx::broadcast_to(inits[i], out_shape));
  ASSIGN_OR_RETURN(Masked res, combine(ctx, body, init, acc, dts));
  return res.v;
}

// The selected window offset of every window (best_k) and whether the window had any element
// (has; nullopt without padding): the first valid element, replaced by a later one whenever
// select(selected, candidate) is false.
struct Selection {
  mx::array best_k;
  std::optional<mx::array> has;
};

StatusOr<Selection> select_in_windows(LowerContext& ctx, const ir::Region& select,
                                      const mx::array& x, const std::optional<mx::array>& mask,
                                      const WindowSpec& w, const std::vector<int64_t>& counts) {
  const std::vector<std::vector<int64_t>> ks = box_offsets(w.dims);
  std::optional<mx::array> best, best_k, has;
  for (size_t j = 0; j < ks.size(); ++j) {
    const std::vector<int64_t> start = offset_start(w, ks[j]);
    mx::array xk = strided_window(x, start, w.strides, counts);
    std::optional<mx::array> mk;
    if (mask) mk = strided_window(*mask, start, w.strides, counts);
    const mx::array kval = mx::array(static_cast<int32_t>(j));
    if (!best) {
      best = xk;
      best_k = mx::broadcast_to(kval, xk.shape());
      has = mk;
      continue;
    }
    ASSIGN_OR_RETURN(Values sel, apply_body_elementwise(ctx, select, {*best, xk}));
    if (sel.size() != 1) return invalid_argument("select body must return one value");
    mx::array take = mx::logical_not(mx::astype(sel[0], mx::bool_));
    if (mk) {
      take = mx::logical_and(*mk, mx::logical_or(mx::logical_not(*has), take));
      has = mx::logical_or(*has, *mk);
    }
    best = mx::where(take, xk, *best);
    best_k = mx::where(take, kval, *best_k);
  }
  return Selection{*best_k, has};
}

StatusOr<Values> lower_select_and_scatter(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != 3 || op.regions.size() != 2 || op.regions[0].empty() || op.regions[1].empty())
    return ctx.malformed(op, "select_and_scatter needs operand, source, init and two bodies");
  const ir::Type& t = operand_type(op, 0);
  if (!is_static(t) || !is_static(operand_type(op, 1)))
    return ctx.unsupported(op, "dynamic shapes");
  RETURN_IF_ERROR(require_native(ctx, op));
  const size_t rank = static_cast<size_t>(t.rank());
  ASSIGN_OR_RETURN(WindowSpec w, read_window(ctx, op, rank));
  for (size_t d = 0; d < rank; ++d)
    if (w.lo[d] < 0 || w.hi[d] < 0) return ctx.unsupported(op, "negative padding");
  const mx::Dtype out_dt = *storage_dtype(result_type(op).dtype);
  const mx::array init = mx::astype(in[2], out_dt);
  std::vector<int64_t> counts = window_counts(w, t.dims);
  if (to_shape(counts) != in[1].shape()) return ctx.malformed(op, "source shape mismatch");
  const std::vector<std::vector<int64_t>> ks = box_offsets(w.dims);
  if (in[0].size() == 0 || in[1].size() == 0 || ks.empty())
    return Values{mx::broadcast_to(init, storage_shape(result_type(op)))};
  mx::array x = pad_dilate(in[0], mx::zeros({}, in[0].dtype()), w.lo, w.hi, {});
  ASSIGN_OR_RETURN(Selection sel, select_in_windows(ctx, op.regions[0], x,
                                                    valid_mask(w, in[0].shape()), w, counts));
  // Scatter: XLA applies the sources of one element in source row-major order, which is
  // reverse row-major window-offset order.
  mx::array src = mx::astype(in[1], out_dt);
  mx::array acc = mx::broadcast_to(init, x.shape());
  for (size_t j = ks.size(); j-- > 0;) {
    const std::vector<int64_t> start = offset_start(w, ks[j]);
    mx::array cur = strided_window(acc, start, w.strides, counts);
    mx::array chosen = mx::equal(sel.best_k, mx::array(static_cast<int32_t>(j)));
    if (sel.has) chosen = mx::logical_and(chosen, *sel.has);
    ASSIGN_OR_RETURN(Values upd, apply_body_elementwise(ctx, op.regions[1], {cur, src}));
    if (upd.size() != 1) return ctx.malformed(op, "scatter body must return one value");
    mx::array next = mx::where(chosen, mx::astype(upd[0], out_dt), cur);
    mx::Shape s(rank), e(rank), strides(rank);
    for (size_t d = 0; d < rank; ++d) {
      s[d] = static_cast<int>(start[d]);
      strides[d] = static_cast<int>(w.strides[d]);
      e[d] = static_cast<int>(start[d] + (counts[d] - 1) * w.strides[d] + 1);
    }
    acc = mx::slice_update(acc, next, s, e, strides);
  }
  // Drop the padding (never selected).
  std::vector<int64_t> neg_lo, neg_hi;
  for (size_t d = 0; d < rank; ++d) neg_lo.push_back(-w.lo[d]), neg_hi.push_back(-w.hi[d]);
  return Values{pad_dilate(acc, init, neg_lo, neg_hi, {})};
}

}  // namespace

void register_window(Registry& r) {
  r.add(ir::OpKind::kReduceWindow, lower_reduce_window);
  r.add(ir::OpKind::kSelectAndScatter, lower_select_and_scatter);
}

}  // namespace jaxmlx::lower
