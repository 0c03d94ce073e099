#include "lower/window_util.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "lower/emulated_types.h"
#include "lower/interpreter.h"

namespace jaxmlx::lower::window_util {
namespace {

// `x` with `low[d]` / `high[d]` (non-negative) elements of `fill` before / after it along each of
// its first low.size() dims. A 0-d fill is one Pad primitive: MLX fills the new array and copies
// x into it, the kernels a slice update of a broadcast fill runs as two primitives (on a GPU each
// costs host time per call). A fill with trailing storage dims (complex128's (re, im) pair),
// which Pad cannot take, is that slice update.
mx::array pad_edges(const mx::array& x, const mx::array& fill, const mx::Shape& low,
                    const mx::Shape& high) {
  const int r = static_cast<int>(low.size());
  if (fill.ndim() == 0) {
    std::vector<int> axes(r);
    std::iota(axes.begin(), axes.end(), 0);
    return mx::pad(x, axes, low, high, mx::astype(fill, x.dtype()));
  }
  mx::Shape out = x.shape(), start(x.ndim(), 0), stop = x.shape();
  for (int d = 0; d < r; ++d) out[d] += low[d] + high[d], start[d] = low[d], stop[d] += low[d];
  return mx::slice_update(mx::broadcast_to(mx::astype(fill, x.dtype()), out), x, start, stop);
}

}  // namespace

mx::array pad_dilate(const mx::array& x_in, const mx::array& fill, const std::vector<int64_t>& lo,
                     const std::vector<int64_t>& hi, const std::vector<int64_t>& interior) {
  mx::array x = x_in;
  // The padded dims, then the fill's trailing storage dims, which are kept whole.
  const int r = static_cast<int>(lo.size()), rank = x.ndim();
  mx::Shape dil = x.shape(), start(rank, 0), strides(rank, 1);
  bool any_interior = false;
  for (int d = 0; d < r; ++d) {
    const int64_t n = x.shape(d), in = interior.empty() ? 0 : interior[d];
    dil[d] = static_cast<int>(dilated_size(n, in + 1));
    strides[d] = static_cast<int>(in + 1);
    any_interior |= in > 0 && n > 1;
  }
  if (any_interior)
    x = mx::slice_update(mx::broadcast_to(mx::astype(fill, x.dtype()), dil), x, start, dil,
                         strides);
  // Crop where the edge padding is negative, then place into a filled array where positive.
  mx::Shape cstart(rank, 0), cstop = dil, ones(rank, 1), out = dil, pstart(r), high(r);
  bool crop = false, grow = false;
  for (int d = 0; d < r; ++d) {
    cstart[d] = static_cast<int>(std::clamp<int64_t>(-lo[d], 0, dil[d]));
    cstop[d] =
        static_cast<int>(std::max<int64_t>(dil[d] - std::max<int64_t>(-hi[d], 0), cstart[d]));
    crop |= cstart[d] != 0 || cstop[d] != dil[d];
    out[d] = static_cast<int>(std::max<int64_t>(dil[d] + lo[d] + hi[d], 0));
    pstart[d] = static_cast<int>(std::max<int64_t>(lo[d], 0));
    high[d] = out[d] - pstart[d] - (cstop[d] - cstart[d]);
    grow |= lo[d] > 0 || hi[d] > 0;
  }
  if (crop) x = mx::slice(x, cstart, cstop, ones);
  if (!grow) return x;
  if (x.size() == 0) return mx::broadcast_to(mx::astype(fill, x.dtype()), out);
  return pad_edges(x, fill, pstart, high);
}

mx::array strided_window(const mx::array& x, const std::vector<int64_t>& start,
                         const std::vector<int64_t>& stride, const std::vector<int64_t>& count) {
  const int r = x.ndim();
  mx::Shape s(r), e(r), st(r);
  for (int d = 0; d < r; ++d) {
    s[d] = static_cast<int>(start[d]);
    st[d] = static_cast<int>(stride[d]);
    e[d] = count[d] == 0 ? s[d] : static_cast<int>(start[d] + (count[d] - 1) * stride[d] + 1);
  }
  return mx::slice(x, s, e, st);
}

int64_t window_count(int64_t size, int64_t base_dil, int64_t lo, int64_t hi, int64_t window,
                     int64_t win_dil, int64_t stride) {
  const int64_t padded = std::max<int64_t>(dilated_size(size, base_dil) + lo + hi, 0);
  const int64_t extent = dilated_size(window, win_dil);
  return padded < extent ? 0 : (padded - extent) / stride + 1;
}

std::vector<std::vector<int64_t>> box_offsets(const std::vector<int64_t>& dims) {
  int64_t total = 1;
  for (int64_t d : dims) total *= d;
  std::vector<std::vector<int64_t>> out;
  out.reserve(static_cast<size_t>(total));
  std::vector<int64_t> k(dims.size(), 0);
  for (int64_t i = 0; i < total; ++i) {
    out.push_back(k);
    for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
      if (++k[d] < dims[d]) break;
      k[d] = 0;
    }
  }
  return out;
}

StatusOr<Values> apply_body_elementwise(LowerContext& ctx, const ir::Region& region,
                                        const Values& args) {
  if (region.blocks.size() != 1 || region.entry().args.size() != args.size())
    return ctx.call_region(region, args);
  const ir::Block& b = region.entry();
  // Values the body captures from outside (constants jax or our passes hoisted, or any other
  // value of the enclosing func) are read from the interpreter's running frame.
  const auto* interp = dynamic_cast<const Interpreter*>(&ctx);
  std::unordered_map<uint32_t, mx::array> env;
  for (size_t i = 0; i < args.size(); ++i) env.insert_or_assign(b.args[i].id, args[i]);
  for (const ir::Op& op : b.ops) {
    Values in;
    for (const ir::Value& v : op.operands) {
      auto it = env.find(v.id);
      if (it != env.end()) {
        in.push_back(it->second);
        continue;
      }
      if (interp == nullptr) return ctx.unsupported(op, "a value captured from outside its body");
      ASSIGN_OR_RETURN(mx::array outer, interp->value(v.id));
      in.push_back(env.insert_or_assign(v.id, outer).first->second);
    }
    if (op.kind == ir::OpKind::kReturn) return in;
    const LowerFn* fn = Registry::global().find(op.kind);
    if (fn == nullptr) return ctx.unsupported(op, "no MLX lowering (inside a body region)");
    // Types MLX cannot compute in are emulated as at the top level (emulated_types.h).
    ASSIGN_OR_RETURN(Values out, apply_rule(ctx, op, in, *fn));
    if (out.size() != op.results.size()) return ctx.malformed(op, "wrong result count");
    for (size_t i = 0; i < out.size(); ++i) env.insert_or_assign(op.results[i].id, out[i]);
  }
  return invalid_argument("body region has no return");
}

}  // namespace jaxmlx::lower::window_util
