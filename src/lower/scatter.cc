// Lowering rules: gather family, part 2 (see lowering.h for the rule contract): scatter, with
// any dimension numbers (batching dims included), any number of operands and any body.
//
// XLA's semantics: an update window whose start does not fit the operand (start < 0 or
// start + window > dim in any scattered dim) is dropped whole; indices_are_sorted and
// unique_indices are hints and change nothing here. MLX never bounds-checks (PITFALLS 2.6), so
// every operand gets a padding block along one scattered axis and a dropped window is sent
// there; the padding is sliced off afterwards.
//
// Bodies: `return update` is MLX scatter, one add / multiply / max / min (and / or on bools) is
// MLX scatter_add / _prod / _max / _min. Float max / min go through order-preserving integer
// keys, because MLX's scatter_max skips NaN and orders -0 == +0 while XLA's maximum propagates
// NaN and has +0 > -0. On a GPU, `return update` with several windows writing one element
// makes the last of them win on purpose (scatter_last_wins), as the CPU backend's in-order
// application does; MLX's GPU scatter would keep any of them. Any other body (variadic scatters too) is applied window by window in
// the order of the update scatter dims, as XLA's CPU backend does, so duplicate indices and
// non-associative bodies give XLA's results; that costs a few MLX ops per window, so it is
// limited to kMaxInOrderWindows windows.
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "lower/gather_util.h"
#include "lower/shape_util.h"
#include "lower/window_util.h"

namespace jaxmlx::lower {

using namespace shape_util;
using namespace gather_util;

namespace {

constexpr int64_t kMaxInOrderWindows = 4096;

enum class Combiner { kGeneral, kReplace, kKeep, kAdd, kMul, kMax, kMin };

// What a single-operand body does with (operand, update), when MLX has a scatter for it.
Combiner match_combiner(const ir::Region& body, ir::ElementType et) {
  if (body.blocks.size() != 1) return Combiner::kGeneral;
  const ir::Block& b = body.entry();
  if (b.args.size() != 2 || b.ops.empty() || b.args[0].type->dtype != et ||
      b.args[1].type->dtype != et)
    return Combiner::kGeneral;
  const ir::Op& ret = b.ops.back();
  if (ret.kind != ir::OpKind::kReturn || ret.operands.size() != 1) return Combiner::kGeneral;
  if (b.ops.size() == 1) {
    if (ret.operands[0] == b.args[1]) return Combiner::kReplace;
    if (ret.operands[0] == b.args[0]) return Combiner::kKeep;
    return Combiner::kGeneral;
  }
  const ir::Op& f = b.ops[0];
  if (b.ops.size() != 2 || f.operands.size() != 2 || f.results.size() != 1 ||
      !(ret.operands[0] == f.results[0]))
    return Combiner::kGeneral;
  const bool direct = f.operands[0] == b.args[0] && f.operands[1] == b.args[1];
  const bool swapped = f.operands[0] == b.args[1] && f.operands[1] == b.args[0];
  if (!direct && !swapped) return Combiner::kGeneral;
  const bool is_bool = et == ir::ElementType::kPred;
  const bool is_complex = ir::is_complex(et);
  switch (f.kind) {
    case ir::OpKind::kAdd: return is_bool ? Combiner::kGeneral : Combiner::kAdd;
    case ir::OpKind::kMultiply: return is_bool ? Combiner::kGeneral : Combiner::kMul;
    case ir::OpKind::kMaximum: return is_complex ? Combiner::kGeneral : Combiner::kMax;
    case ir::OpKind::kMinimum: return is_complex ? Combiner::kGeneral : Combiner::kMin;
    case ir::OpKind::kOr: return is_bool ? Combiner::kMax : Combiner::kGeneral;
    case ir::OpKind::kAnd: return is_bool ? Combiner::kMin : Combiner::kGeneral;
    default: return Combiner::kGeneral;
  }
}

// Where each update window goes, in MLX scatter's terms (one start array per axis, every start
// in range), and how operands are padded so dropped windows have somewhere harmless to go.
struct Plan {
  mx::Shape batch;             // the update scatter dims (= indices dims without the vector dim)
  std::vector<mx::array> idx;  // int32, batch shape, one per axis
  std::vector<int> axes;
  mx::Shape window;            // MLX slice sizes: every dim of the (prepared) operand
  bool leading_dim = false;    // a size-1 dim 0 was added (no scattered or batching dims)
  int pad_axis = -1;           // -1: no window can be dropped
  int pad_dim = 0;             // size of pad_axis before padding
  // Instead of a padding block (add bodies over int32 starts): which windows fit (batch shape);
  // a dropped one is sent to 0 and its update becomes the body's identity.
  std::optional<mx::array> fits;

  int64_t num_windows() const {  // update windows: the product of the batch dims
    int64_t n = 1;
    for (int b : batch) n *= b;
    return n;
  }
};

// The window size per operand dim: 1 for inserted and batching dims, else the update's dim.
StatusOr<std::vector<int64_t>> window_sizes(LowerContext& ctx, const ir::Op& op,
                                            const ir::ScatterDims& dn, size_t n,
                                            size_t batch_rank) {
  const ir::Type& t = operand_type(op, 0);
  const ir::Type& ut = operand_type(op, n + 1);
  std::vector<int64_t> wsize;
  size_t j = 0;
  for (int64_t d = 0; d < t.rank(); ++d) {
    if (contains(dn.inserted_window_dims, d) || contains(dn.input_batching_dims, d)) {
      wsize.push_back(1);
      continue;
    }
    if (j >= dn.update_window_dims.size()) return ctx.malformed(op, "too few window dims");
    wsize.push_back(ut.dims[dn.update_window_dims[j++]]);
    if (wsize.back() > t.dims[d]) return ctx.malformed(op, "update window larger than operand");
  }
  if (j != dn.update_window_dims.size() || ut.rank() != static_cast<int64_t>(batch_rank + j))
    return ctx.malformed(op, "update rank does not match the dimension numbers");
  return wsize;
}

bool is_float(mx::Dtype d) { return mx::issubdtype(d, mx::floating); }

// Whether an add scatter into `dt` may send a dropped update somewhere as add_identity(dt)
// instead of into a padding block: real numbers (not bool, not complex).
bool drops_as_identity(mx::Dtype dt) { return is_float(dt) || mx::issubdtype(dt, mx::integer); }

// The update that changes no element under an add: -0 for floats (x + -0 is x, -0 included),
// 0 for integers.
mx::array add_identity(mx::Dtype dt) {
  return is_float(dt) ? float_scalar(-0.0, dt) : int_scalar(0, dt);
}

// Whether each int32 start `s` has 0 <= s <= hi (hi < 2^31): negative starts read as uint32 are
// >= 2^31, beyond any such bound.
mx::array start_within(const mx::array& s, int64_t hi) {
  return mx::less_equal(mx::astype(s, mx::uint32), int_scalar(hi, mx::uint32));
}

// Starts for the scattered dims. spec/XLA: a window is dropped unless 0 <= start <= dim - size
// in every scattered dim; a dropped window goes to the padding block along the first one.
void add_scattered_starts(Plan& p, const ir::ScatterDims& dn, const mx::array& indices,
                          const std::vector<int64_t>& dims, const std::vector<int64_t>& wsize,
                          bool mask) {
  const auto& sd = dn.scatter_dims_to_operand_dims;
  if (sd.empty()) return;
  if (mask && indices.dtype() == mx::int32) {
    for (size_t k = 0; k < sd.size(); ++k) {
      mx::array s = index_component(indices, dn.index_vector_dim, static_cast<int>(k));
      mx::array ok = start_within(s, dims[sd[k]] - wsize[sd[k]]);
      p.fits = p.fits ? mx::logical_and(*p.fits, ok) : ok;
      p.idx.push_back(s);
      p.axes.push_back(static_cast<int>(sd[k]));
    }
    for (mx::array& s : p.idx) s = mx::where(*p.fits, s, int_scalar(0, mx::int32));
    return;
  }
  std::vector<mx::array> starts;
  std::optional<mx::array> valid;
  for (size_t k = 0; k < sd.size(); ++k) {
    // int64 is exact for every index dtype; uint64 starts >= 2^63 turn negative: dropped, as
    // they are out of bounds anyway.
    mx::array s = index_component(indices, dn.index_vector_dim, static_cast<int>(k));
    s = mx::astype(s, mx::int64);
    mx::array ok =
        mx::logical_and(mx::greater_equal(s, int_scalar(0, mx::int64)),
                        mx::less_equal(s, int_scalar(dims[sd[k]] - wsize[sd[k]], mx::int64)));
    valid = valid ? mx::logical_and(*valid, ok) : ok;
    starts.push_back(s);
  }
  for (size_t k = 0; k < sd.size(); ++k) {
    const int64_t dropped_at = k == 0 ? dims[sd[0]] : 0;
    mx::array s = mx::where(*valid, starts[k], int_scalar(dropped_at, mx::int64));
    p.idx.push_back(mx::astype(s, mx::int32));
    p.axes.push_back(static_cast<int>(sd[k]));
  }
  p.pad_axis = static_cast<int>(sd[0]);
  p.pad_dim = static_cast<int>(dims[sd[0]]);
}

StatusOr<Plan> make_plan(LowerContext& ctx, const ir::Op& op, const ir::ScatterDims& dn,
                         const mx::array& indices, size_t n, bool mask = false) {
  const ir::Type& t = operand_type(op, 0);
  const ir::Type& it = operand_type(op, n);
  const ir::Type& ut = operand_type(op, n + 1);
  const int64_t ivd = dn.index_vector_dim;
  const auto& bd = dn.input_batching_dims;
  if (ivd < 0 || ivd > it.rank() ||
      (ivd < it.rank() ? it.dims[ivd] : 1) !=
          static_cast<int64_t>(dn.scatter_dims_to_operand_dims.size()) ||
      bd.size() != dn.scatter_indices_batching_dims.size() ||
      !valid_dims(dn.scatter_dims_to_operand_dims, t.rank()) ||
      !valid_dims(dn.inserted_window_dims, t.rank()) || !valid_dims(bd, t.rank()) ||
      !valid_dims(dn.update_window_dims, ut.rank()) ||
      !std::is_sorted(dn.update_window_dims.begin(), dn.update_window_dims.end()))
    return ctx.malformed(op, "scatter dimension numbers do not match the operand shapes");
  Plan p;
  p.batch = batch_shape(indices.shape(), ivd);
  ASSIGN_OR_RETURN(std::vector<int64_t> wsize, window_sizes(ctx, op, dn, n, p.batch.size()));
  add_scattered_starts(p, dn, indices, t.dims, wsize,
                       mask && std::all_of(t.dims.begin(), t.dims.end(), [](int64_t d) {
                         return d <= std::numeric_limits<int32_t>::max();
                       }));
  for (size_t i = 0; i < bd.size(); ++i) {
    const int64_t id = dn.scatter_indices_batching_dims[i];
    if (id < 0 || id >= it.rank() || id == ivd) return ctx.malformed(op, "bad batching dim");
    p.idx.push_back(batch_iota(p.batch, batch_pos(id, ivd)));
    p.axes.push_back(static_cast<int>(bd[i]));
  }
  p.window = to_shape(wsize);
  extend_trailing(t, nullptr, &p.window, nullptr);
  if (p.axes.empty()) {
    // Every window starts at 0: scatter along a leading size-1 dim.
    p.leading_dim = true;
    p.window.insert(p.window.begin(), 1);
    p.idx.push_back(mx::zeros(p.batch, mx::int32));
    p.axes.push_back(0);
  }
  for (mx::array& s : p.idx) s = mx::broadcast_to(s, p.batch);
  return p;
}

mx::array prepare_operand(const Plan& p, mx::array x) {
  if (p.leading_dim) x = mx::expand_dims(x, 0);
  if (p.pad_axis >= 0) {
    mx::Shape pad = x.shape();
    pad[p.pad_axis] = p.window[p.pad_axis];
    x = mx::concatenate({x, mx::zeros(pad, x.dtype())}, p.pad_axis);
  }
  return x;
}

mx::array finish_operand(const Plan& p, mx::array x, const mx::Shape& out_shape) {
  if (p.pad_axis >= 0) {
    mx::Shape start(x.ndim(), 0), stop = x.shape();
    stop[p.pad_axis] = p.pad_dim;
    x = mx::slice(x, start, stop);
  }
  return mx::reshape(x, out_shape);
}

// Updates as batch + window (every operand dim, with 1 at inserted and batching dims).
// `trailing`: storage dims after the update's own (1 for c128).
mx::array prepare_updates(const Plan& p, const ir::ScatterDims& dn, const mx::array& u,
                          int trailing) {
  std::vector<int> perm;
  const int urank = static_cast<int>(u.ndim()) - trailing;
  for (int d = 0; d < urank; ++d)
    if (!contains(dn.update_window_dims, d)) perm.push_back(d);
  for (int64_t d : dn.update_window_dims) perm.push_back(static_cast<int>(d));
  for (int d = urank; d < static_cast<int>(u.ndim()); ++d) perm.push_back(d);  // c128 storage
  mx::Shape shape = p.batch;
  shape.insert(shape.end(), p.window.begin(), p.window.end());
  return mx::reshape(mx::transpose(u, perm), shape);
}


// IEEE floats as signed integers of the same width whose order is the total order
// -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN. NaNs become the extreme key that wins
// (max: the largest, min: the smallest), since XLA's maximum / minimum propagate NaN.
mx::array float_key(const mx::array& x, bool is_max) {
  const mx::Dtype sd = signed_of(x.dtype());
  const int bits = dtype_bits(x.dtype());
  mx::array hi = int_scalar((int64_t{1} << (bits - 1)) - 1, sd);
  mx::array lo = int_scalar(-(int64_t{1} << (bits - 1)), sd);
  mx::array s = mx::view(x, sd);
  mx::array k = mx::where(mx::less(s, int_scalar(0, sd)), mx::bitwise_xor(s, hi), s);
  return mx::where(mx::isnan(x), is_max ? hi : lo, k);
}

mx::array from_float_key(const mx::array& k, mx::Dtype dt) {
  const mx::Dtype sd = k.dtype();
  const int bits = dtype_bits(dt);
  mx::array hi = int_scalar((int64_t{1} << (bits - 1)) - 1, sd);
  mx::array lo = int_scalar(-(int64_t{1} << (bits - 1)), sd);
  mx::array s = mx::where(mx::less(k, int_scalar(0, sd)), mx::bitwise_xor(k, hi), k);
  // The min NaN key decodes to a negative NaN; results carry the positive one either way.
  s = mx::where(mx::equal(k, lo), hi, s);
  return mx::view(s, dt);
}

// Whether replacing scatters must make the last of several updates of one element win on
// purpose: on a GPU MLX's scatter writes duplicates in any order (PITFALLS 2.6), measured on an
// H200 as the wrong duplicate winning in `.at[i].set(v)`; MLX's CPU scatter writes in order.
// JAXMLX_ORDERED_SCATTER=1 forces it on anywhere (tests run it on the CPU), =0 off.
bool scatter_needs_order() {
  const char* v = std::getenv("JAXMLX_ORDERED_SCATTER");
  if (v != nullptr && *v != '\0') return *v != '0';
  return mx::default_device().type == mx::Device::gpu;
}

// The elements of the updates that win, as XLA's CPU backend applies windows in order: for each
// element of `x`, the last window (row-major over the batch) that writes it. Shape batch + window.
mx::array last_writers(const Plan& p, const mx::array& x) {
  const int64_t n = p.num_windows();
  mx::Shape order_shape = p.batch;
  order_shape.insert(order_shape.end(), p.window.size(), 1);
  mx::Shape full = p.batch;
  full.insert(full.end(), p.window.begin(), p.window.end());
  mx::array order = mx::broadcast_to(
      mx::reshape(mx::arange(static_cast<int>(n), mx::int32), order_shape), full);
  // Window numbers are int32 (a scatter_max every GPU has) and unique: the max is the last.
  mx::array winner = mx::scatter_max(mx::full(x.shape(), -1, mx::int32), p.idx, order, p.axes);
  return mx::equal(mx::gather(winner, p.idx, p.axes, p.window), order);
}

// The flat position in `x` of every update element (batch + window), as int32.
mx::array flat_targets(const Plan& p, const mx::array& x) {
  const int nb = static_cast<int>(p.batch.size());
  const int rank = static_cast<int>(x.ndim());
  std::optional<mx::array> flat;
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    mx::Shape along(nb + rank, 1);
    along[nb + d] = p.window[d];
    mx::array pos = mx::reshape(mx::arange(p.window[d], mx::int32), along);
    for (size_t k = 0; k < p.axes.size(); ++k) {
      if (p.axes[k] != d) continue;
      mx::Shape start_shape = p.batch;
      start_shape.insert(start_shape.end(), rank, 1);
      pos = mx::add(pos, mx::reshape(p.idx[k], start_shape));
    }
    mx::array term = mx::multiply(pos, int_scalar(stride, mx::int32));
    flat = flat ? mx::add(*flat, term) : term;
    stride *= x.shape(d);
  }
  return *flat;
}

// A replacing scatter in which, of several updates of one element, the last one wins (see
// scatter_needs_order): only winning elements are written, in one scatter over the flattened
// operand; every other element goes to one spare element past the end, which is cut off.
mx::array scatter_last_wins(const Plan& p, const mx::array& x, const mx::array& u,
                            mx::StreamOrDevice s) {
  const int64_t size = static_cast<int64_t>(x.size());
  mx::array target = mx::where(last_writers(p, x), flat_targets(p, x),
                               int_scalar(size, mx::int32));
  mx::array flat = mx::concatenate({mx::reshape(x, {-1}), mx::zeros({1}, x.dtype())}, 0);
  const int m = static_cast<int>(target.size());
  flat = mx::scatter(flat, {mx::reshape(target, {m})}, mx::reshape(u, {m, 1}), {0}, s);
  return mx::reshape(mx::slice(flat, {0}, {static_cast<int>(size)}), x.shape());
}

// Where a scatter of dtype `dt` can run: MLX's GPU scatters reject 64-bit integers, and complex
// anything but a sum (PITFALLS 1, patch 11); those run on the CPU stream instead.
mx::StreamOrDevice scatter_device(mx::Dtype dt, Combiner c) {
  const bool gpu_lacks = dt == mx::int64 || dt == mx::uint64 ||
                         (dt == mx::complex64 && c != Combiner::kAdd);
  if (gpu_lacks && mx::default_device().type == mx::Device::gpu) return mx::Device::cpu;
  return {};
}

mx::array scatter_with(Combiner c, const mx::array& a, const std::vector<mx::array>& idx,
                       const std::vector<int>& axes, const mx::array& u) {
  const mx::StreamOrDevice s = scatter_device(a.dtype(), c);
  switch (c) {
    case Combiner::kAdd: return mx::scatter_add(a, idx, u, axes, s);
    case Combiner::kMul: return mx::scatter_prod(a, idx, u, axes, s);
    case Combiner::kMax:
    case Combiner::kMin: {
      const bool is_max = c == Combiner::kMax;
      if (!is_float(a.dtype()))
        return is_max ? mx::scatter_max(a, idx, u, axes, s) : mx::scatter_min(a, idx, u, axes, s);
      mx::array ka = float_key(a, is_max), ku = float_key(u, is_max);
      mx::array k = is_max ? mx::scatter_max(ka, idx, ku, axes) : mx::scatter_min(ka, idx, ku, axes);
      return from_float_key(k, a.dtype());
    }
    default: return mx::scatter(a, idx, u, axes, s);
  }
}

// The scatter body, with the constants it uses from outside cloned into it: jax's canonicalizer
// hoists a body's constants into the func, and apply_body_elementwise only sees values defined
// in the body it runs.
StatusOr<ir::Region> body_with_constants(LowerContext& ctx, const ir::Op& op) {
  const ir::Region& body = op.regions[0];
  if (body.blocks.size() != 1) return body;
  std::unordered_set<uint32_t> inside;
  for (const ir::Value& a : body.entry().args) inside.insert(a.id);
  ir::walk(body, [&](const ir::Op& o) {
    for (const ir::Value& r : o.results) inside.insert(r.id);
  });
  std::vector<uint32_t> outside;
  for (const ir::Op& o : body.entry().ops)
    for (const ir::Value& v : o.operands)
      if (!inside.count(v.id)) outside.push_back(v.id);
  if (outside.empty()) return body;
  std::unordered_map<uint32_t, const ir::Op*> constants;
  if (const ir::Func* f = ir::enclosing_func(ctx.module(), op))
    ir::walk(f->body, [&](const ir::Op& o) {
      if (o.kind == ir::OpKind::kConstant && o.results.size() == 1) constants[o.results[0].id] = &o;
    });
  ir::Region copy = body;
  std::vector<ir::Op>& ops = copy.blocks[0].ops;
  for (uint32_t id : outside) {
    auto it = constants.find(id);
    if (it == constants.end())
      return ctx.unsupported(op, "a scatter body that uses a non-constant value from outside it");
    if (inside.insert(id).second) ops.insert(ops.begin(), *it->second);
  }
  return copy;
}

// Applies `body` one update window at a time, in row-major order of the update scatter dims.
StatusOr<Values> scatter_in_order(LowerContext& ctx, const ir::Op& op, const Plan& p,
                                  Values xs, const Values& us) {
  ASSIGN_OR_RETURN(const ir::Region body, body_with_constants(ctx, op));
  const int64_t n = p.num_windows();
  if (n > kMaxInOrderWindows)
    return ctx.unsupported(op, "a general scatter body over " + std::to_string(n) +
                                   " update windows (applied in order; limit " +
                                   std::to_string(kMaxInOrderWindows) + ")");
  std::vector<mx::array> idx;
  for (const mx::array& s : p.idx) idx.push_back(mx::reshape(s, {static_cast<int>(n)}));
  Values flat;
  for (const mx::array& u : us) {
    mx::Shape shape = p.window;
    shape.insert(shape.begin(), static_cast<int>(n));
    flat.push_back(mx::reshape(u, shape));
  }
  const int m = static_cast<int>(p.window.size()) + 1;
  for (int i = 0; i < static_cast<int>(n); ++i) {
    std::vector<mx::array> at;
    for (const mx::array& s : idx) at.push_back(mx::slice(s, {i}, {i + 1}));
    Values args;
    for (const mx::array& x : xs) args.push_back(mx::gather(x, at, p.axes, p.window));
    for (const mx::array& u : flat) {
      mx::Shape start(m, 0), stop = u.shape();
      start[0] = i;
      stop[0] = i + 1;
      args.push_back(mx::slice(u, start, stop));
    }
    ASSIGN_OR_RETURN(Values out, window_util::apply_body_elementwise(ctx, body, args));
    if (out.size() != xs.size()) return ctx.malformed(op, "scatter body result count");
    for (size_t j = 0; j < xs.size(); ++j) {
      mx::array v = mx::broadcast_to(mx::astype(out[j], xs[j].dtype()), args[j].shape());
      xs[j] = scatter_with(Combiner::kReplace, xs[j], at, p.axes, v);
    }
  }
  return xs;
}

// One update window at starts known when lowering (the transpose of jnp.take with a static
// index: one index vector of equal components, no batch): a static slice update, or `x`
// unchanged when the window does not fit (XLA drops it). Replace and add only; nullopt for any
// other form.
std::optional<mx::array> constant_window_scatter(const ir::Op& op, const ir::ScatterDims& dn,
                                                 Combiner c, const mx::array& x,
                                                 const mx::array& indices, const mx::array& u) {
  const ir::Type& t = operand_type(op, 0);
  if ((c != Combiner::kAdd && c != Combiner::kReplace) || trailing_rank(t) != 0 ||
      !dn.input_batching_dims.empty() || dn.scatter_dims_to_operand_dims.empty() ||
      indices.dtype() == mx::uint64 || !batch_shape(indices.shape(), dn.index_vector_dim).empty())
    return std::nullopt;
  const std::optional<int64_t> v = splat_int_constant(indices);
  if (!v) return std::nullopt;
  // No batch: the update's dims are the window's, in the operand's order.
  mx::Shape window;
  size_t j = 0;
  for (int64_t d = 0; d < t.rank(); ++d) {
    if (contains(dn.inserted_window_dims, d)) {
      window.push_back(1);
    } else {
      if (j >= u.ndim()) return std::nullopt;
      window.push_back(u.shape(static_cast<int>(j++)));
    }
  }
  if (j != u.ndim()) return std::nullopt;
  mx::Shape start(t.rank(), 0), stop = window;
  for (int64_t d : dn.scatter_dims_to_operand_dims) {
    if (*v < 0 || *v + window[d] > t.dims[d]) return x;
    start[d] = static_cast<int>(*v);
    stop[d] = start[d] + window[d];
  }
  mx::array w = mx::astype(mx::reshape(u, window), x.dtype());
  if (c == Combiner::kAdd) w = mx::add(mx::slice(x, start, stop), w);
  return mx::slice_update(x, w, start, stop);
}

// The transpose of jax's take_along_axis: every operand dim but `axis` a batching dim paired
// with the indices dim at the same place, one int32 index per update element along `axis`, an
// add body: MLX's scatter_add_axis, where the general scatter builds each batching dim's
// coordinates and a padding block. An out-of-range index (XLA drops its update) adds -0 (or 0)
// at index 0, which changes no element. With one index per row along `axis` (a cross-entropy's
// label pick), elementwise instead: x + u where the position along `axis` equals the row's index,
// x elsewhere (an out-of-range index equals no position: dropped). Each element is added to at
// most once, so the bits are the scatter's; a GPU fuses it with the gradient's other terms where
// the scatter was a zero fill, a scatter kernel and the index checks' kernels. nullopt for any
// other form.
std::optional<mx::array> add_along_axis(const ir::Op& op, const ir::ScatterDims& dn, Combiner c,
                                        const mx::array& x, const mx::array& indices,
                                        const mx::array& u) {
  const ir::Type& t = operand_type(op, 0);
  const int64_t rank = t.rank();
  if (c != Combiner::kAdd || trailing_rank(t) != 0 || dn.scatter_dims_to_operand_dims.size() != 1 ||
      !dn.update_window_dims.empty() || indices.dtype() != mx::int32 ||
      !drops_as_identity(x.dtype()) ||
      static_cast<int64_t>(dn.input_batching_dims.size()) != rank - 1)
    return std::nullopt;
  const int64_t axis = dn.scatter_dims_to_operand_dims[0];
  if (dn.inserted_window_dims != std::vector<int64_t>{axis}) return std::nullopt;
  const int64_t ivd = dn.index_vector_dim;
  const mx::Shape batch = batch_shape(indices.shape(), ivd);
  if (static_cast<int64_t>(batch.size()) != rank || u.shape() != batch) return std::nullopt;
  for (size_t i = 0; i < dn.input_batching_dims.size(); ++i) {
    const int64_t d = dn.input_batching_dims[i], id = dn.scatter_indices_batching_dims[i];
    if (d == axis || id == ivd || batch_pos(id, ivd) != d || batch[d] != t.dims[d])
      return std::nullopt;
  }
  if (t.dims[axis] > std::numeric_limits<int32_t>::max()) return std::nullopt;
  const mx::array idx = index_component(indices, ivd, 0);
  if (batch[axis] == 1) {
    // The positions along `axis` as a constant (data, not an Arange kernel to run each time).
    std::vector<int32_t> iota(static_cast<size_t>(t.dims[axis]));
    std::iota(iota.begin(), iota.end(), 0);
    mx::Shape along(rank, 1);
    along[axis] = static_cast<int>(t.dims[axis]);
    const mx::array hit = mx::equal(mx::array(iota.begin(), along, mx::int32), idx);
    return mx::where(hit, mx::add(x, mx::astype(u, x.dtype())), x);
  }
  const mx::array valid = start_within(idx, t.dims[axis] - 1);
  const mx::array w = mx::where(valid, mx::astype(u, x.dtype()), add_identity(x.dtype()));
  return mx::scatter_add_axis(x, mx::where(valid, idx, int_scalar(0, mx::int32)), w,
                              static_cast<int>(axis), scatter_device(x.dtype(), c));
}

// Whether a replacing scatter goes through scatter_last_wins: when order matters here and
// two windows could write one element (jax's unique_indices=True promises they cannot).
bool ordered_replace(const ir::Op& op, const Plan& p, const mx::array& x) {
  return p.num_windows() > 1 && !op.get_bool("unique_indices") && scatter_needs_order() &&
         x.size() < static_cast<size_t>(std::numeric_limits<int32_t>::max());
}

StatusOr<Values> lower_scatter(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const size_t n = op.results.size();
  const ir::ScatterDims* dn = op.attr<ir::ScatterDims>("scatter_dimension_numbers");
  if (n == 0 || in.size() != 2 * n + 1 || dn == nullptr || op.regions.size() != 1 ||
      op.regions[0].empty())
    return ctx.malformed(op, "scatter needs N operands, indices, N updates and a body");
  for (size_t i = 0; i < 2 * n + 1; ++i)
    if (!is_static(operand_type(op, i))) return ctx.unsupported(op, "dynamic shapes");
  const ir::Type& t = operand_type(op, 0);
  const ir::Type& ut = operand_type(op, n + 1);
  Values xs(in.begin(), in.begin() + n);
  // Nothing to scatter (or nowhere to): the operands unchanged.
  if (ut.num_elements() == 0 || t.num_elements() == 0) return xs;
  const Combiner c = n == 1 ? match_combiner(op.regions[0], t.dtype) : Combiner::kGeneral;
  if (c == Combiner::kKeep) return xs;
  // Replace moves bits (any storage dtype); the others compute in the element type.
  if (c != Combiner::kReplace) RETURN_IF_ERROR(require_native(ctx, op));
  // A sum needs no padding block: a dropped window adds -0 (0 for integers), which changes
  // nothing, at start 0.
  const mx::Dtype dt = xs[0].dtype();
  const bool mask = c == Combiner::kAdd && drops_as_identity(dt);
  // (make_plan also checks the dimension numbers the forms below rely on.)
  ASSIGN_OR_RETURN(Plan p, make_plan(ctx, op, *dn, in[n], n, mask));
  if (n == 1) {
    if (std::optional<mx::array> r = constant_window_scatter(op, *dn, c, xs[0], in[1], in[2]))
      return Values{mx::reshape(*r, storage_shape(result_type(op, 0)))};
    if (std::optional<mx::array> r = add_along_axis(op, *dn, c, xs[0], in[1], in[2]))
      return Values{*r};
  }
  Values us;
  for (size_t j = 0; j < n; ++j) {
    xs[j] = prepare_operand(p, xs[j]);
    us.push_back(prepare_updates(p, *dn, in[n + 1 + j], trailing_rank(t)));
  }
  if (p.fits) {
    mx::Shape at = p.batch;
    at.resize(at.size() + p.window.size(), 1);
    us[0] = mx::where(mx::reshape(*p.fits, at), mx::astype(us[0], dt), add_identity(dt));
  }
  Values out;
  if (c == Combiner::kGeneral) {
    ASSIGN_OR_RETURN(out, scatter_in_order(ctx, op, p, xs, us));
  } else if (c == Combiner::kReplace && ordered_replace(op, p, xs[0])) {
    const mx::array u = mx::astype(us[0], xs[0].dtype());
    out.push_back(scatter_last_wins(p, xs[0], u, scatter_device(xs[0].dtype(), c)));
  } else {
    out.push_back(scatter_with(c, xs[0], p.idx, p.axes, mx::astype(us[0], xs[0].dtype())));
  }
  for (size_t j = 0; j < n; ++j)
    out[j] = finish_operand(p, out[j], storage_shape(result_type(op, j)));
  return out;
}

}  // namespace

void register_scatter_ops(Registry& r) { r.add(ir::OpKind::kScatter, lower_scatter); }

}  // namespace jaxmlx::lower
