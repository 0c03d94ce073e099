#include "ir/cost.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace jaxmlx::ir {
namespace {

// A loop nest or call chain deeper than this is not followed (a malformed module could recurse).
constexpr int kMaxDepth = 64;

double elements(const Value& v) {
  if (v.type == nullptr) return 0;
  const int64_t n = v.type->num_elements();
  return n < 0 ? 0 : static_cast<double>(n);
}

double bytes(const Value& v) {
  if (v.type == nullptr || v.type->is_token() || v.type->is_tuple()) return 0;
  return elements(v) * element_storage_bytes(v.type->dtype);
}

bool is_transcendental(OpKind k) {
  switch (k) {
    case OpKind::kExponential: case OpKind::kExponentialMinusOne: case OpKind::kLog:
    case OpKind::kLogPlusOne: case OpKind::kLogistic: case OpKind::kTanh: case OpKind::kSine:
    case OpKind::kCosine: case OpKind::kTan: case OpKind::kSqrt: case OpKind::kRsqrt:
    case OpKind::kCbrt: case OpKind::kPower: case OpKind::kAtan2:
      return true;
    default:
      return false;
  }
}

// Ops that move no data of their own: views, names, constants and control.
bool moves_no_bytes(const Op& op) {
  switch (op.kind) {
    case OpKind::kReshape: case OpKind::kConstant: case OpKind::kTuple:
    case OpKind::kGetTupleElement: case OpKind::kFuncCall: case OpKind::kFuncReturn:
    case OpKind::kReturn: case OpKind::kWhile: case OpKind::kIf: case OpKind::kCase:
    case OpKind::kOptimizationBarrier: case OpKind::kAfterAll: case OpKind::kCreateToken:
    case OpKind::kGeneric: case OpKind::kGetDimensionSize:
      return true;
    default:
      return false;
  }
}

// A dim as a count: a dynamic ('?', negative) or malformed one counts nothing.
double extent(int64_t d) { return d > 0 ? static_cast<double>(d) : 0; }

// NaN (infinity times zero, from a malformed program's dims) counts nothing.
double count(double x) { return x >= 0 ? x : 0; }

double window_elements(const Op& op) {
  double n = 1;
  for (int64_t d : op.get_i64s("window_dimensions")) n *= extent(d);
  return n;
}

double log2_ceil(double n) { return n <= 1 ? 0 : std::ceil(std::log2(n)); }

// (output position, kernel tap) pairs of one spatial dim that read a real input element: not
// padding, not a hole between dilated inputs. Walks the pairs while `budget` (shared by the
// whole program, which may be malformed) lasts; past it, every pair counts.
double valid_taps(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t lhs_dil,
                  int64_t rhs_dil, int64_t pad_lo, double& budget) {
  if (in <= 0 || out <= 0 || k <= 0) return 0;
  const double pairs = static_cast<double>(out) * static_cast<double>(k);
  if (pairs > budget) return pairs;
  budget -= pairs;
  // 128-bit: a malformed program's strides and dilations may be anything up to 2^63.
  using i128 = __int128;
  const i128 last = static_cast<i128>(in - 1) * lhs_dil;
  double n = 0;
  for (int64_t o = 0; o < out; ++o)
    for (int64_t t = 0; t < k; ++t) {
      const i128 p = static_cast<i128>(o) * stride + static_cast<i128>(t) * rhs_dil - pad_lo;
      if (p >= 0 && p <= last && p % lhs_dil == 0) ++n;
    }
  return n;
}

double convolution_flops(const Op& op, double& budget) {
  const auto* dn = op.attr<ConvDims>("dimension_numbers");
  if (dn == nullptr || op.operands.size() < 2 || op.results.empty()) return 0;
  const Type* lt = op.operands[0].type;
  const Type* kt = op.operands[1].type;
  const Type* ot = op.results[0].type;
  if (lt == nullptr || kt == nullptr || ot == nullptr) return 0;
  const size_t n = dn->input_spatial_dimensions.size();
  auto dim = [](const Type* t, int64_t d) -> int64_t {
    return d >= 0 && d < t->rank() ? std::max<int64_t>(t->dims[static_cast<size_t>(d)], 0) : 0;
  };
  ConvWindow w;
  if (!read_conv_window(op, n, w).empty()) return 0;
  if (dn->kernel_spatial_dimensions.size() != n || dn->output_spatial_dimensions.size() != n)
    return 0;
  double taps = 1;
  for (size_t d = 0; d < n; ++d) {
    taps *= valid_taps(dim(lt, dn->input_spatial_dimensions[d]),
                       dim(ot, dn->output_spatial_dimensions[d]),
                       dim(kt, dn->kernel_spatial_dimensions[d]), w.strides[d], w.lhs_dilation[d],
                       w.rhs_dilation[d], w.pad_lo[d], budget);
  }
  return 2 * taps * static_cast<double>(dim(ot, dn->output_batch_dimension)) *
         static_cast<double>(dim(ot, dn->output_feature_dimension)) *
         static_cast<double>(dim(kt, dn->kernel_input_feature_dimension));
}

double dot_flops(const Op& op) {
  if (op.operands.size() < 2 || op.results.empty() || op.operands[0].type == nullptr) return 0;
  const Type* lt = op.operands[0].type;
  double k = 1;
  if (op.kind == OpKind::kDot) {
    if (lt->rank() > 0) k = extent(lt->dims.back());
  } else if (const auto* dd = op.attr<DotDims>("dot_dimension_numbers")) {
    for (int64_t d : dd->lhs_contracting_dimensions)
      if (d >= 0 && d < lt->rank()) k *= extent(lt->dims[static_cast<size_t>(d)]);
  }
  return 2 * elements(op.results[0]) * k;
}

class Counter {
 public:
  explicit Counter(const Module& m) : m_(m) {}

  Cost region(const Region& r, int depth) {
    // (Each op is visited once; each func once, however often it is called: see func().)
    Cost c;
    if (depth > kMaxDepth) return c;
    for (const Block& b : r.blocks)
      for (const Op& op : b.ops) c += this->op(op, depth);
    return c;
  }

 private:
  // The flops of one application of a reduction-like body (its scalar ops).
  double body_flops(const Op& op, size_t i, int depth) {
    return i < op.regions.size() ? region(op.regions[i], depth + 1).flops : 0;
  }

  Cost op(const Op& op, int depth) {
    Cost c;
    if (!moves_no_bytes(op)) {
      for (const Value& v : op.operands) c.bytes_accessed += bytes(v);
      for (const Value& v : op.results) c.bytes_accessed += bytes(v);
    }
    const double out = op.results.empty() ? 0 : elements(op.results[0]);
    if (op_kind_is_elementwise(op.kind)) {  // a flop or a transcendental per element
      if (is_transcendental(op.kind)) c.transcendentals += out;
      else c.flops += out;
      if (op.kind == OpKind::kLogistic) c.flops += 3 * out;  // 1 / (1 + exp(-x))
      return c;
    }
    switch (op.kind) {
      case OpKind::kDot:
      case OpKind::kDotGeneral:
        c.flops += dot_flops(op);
        break;
      case OpKind::kConvolution:
        c.flops += convolution_flops(op, tap_budget_);
        break;
      case OpKind::kReduce: {
        // Operands are the inputs then as many inits; results one per input.
        const double in = op.operands.empty() ? 0 : elements(op.operands[0]);
        c.flops += std::max(in - out, 0.0) * body_flops(op, 0, depth);
        break;
      }
      case OpKind::kReduceWindow: {
        const double window = window_elements(op);
        c.flops += out * std::max(window - 1, 0.0) * body_flops(op, 0, depth);
        break;
      }
      case OpKind::kSelectAndScatter: {
        const double window = window_elements(op);
        const double source = op.operands.size() > 1 ? elements(op.operands[1]) : 0;
        c.flops += source * window * body_flops(op, 0, depth) + source * body_flops(op, 1, depth);
        break;
      }
      case OpKind::kScatter: {
        // Operands: inputs, indices, then as many updates as inputs.
        const size_t inputs = (op.operands.size() - 1) / 2;
        const double updates = op.operands.size() >= 3 ? elements(op.operands[inputs + 1]) : 0;
        c.flops += updates * body_flops(op, 0, depth);
        break;
      }
      case OpKind::kSort: {
        const double n = op.operands.empty() ? 0 : elements(op.operands[0]);
        c.flops += n * log2_ceil(n);
        break;
      }
      case OpKind::kWhile:
        for (const Region& r : op.regions) c += region(r, depth + 1);
        break;
      case OpKind::kIf:
      case OpKind::kCase: {
        Cost most;
        for (const Region& r : op.regions) {
          const Cost b = region(r, depth + 1);
          most.flops = std::max(most.flops, b.flops);
          most.transcendentals = std::max(most.transcendentals, b.transcendentals);
          most.bytes_accessed = std::max(most.bytes_accessed, b.bytes_accessed);
        }
        c += most;
        break;
      }
      case OpKind::kFuncCall:
        c += func(op.get_string("callee"), depth);
        break;
      case OpKind::kComposite:  // its decomposition is a func of the module
        c += func(op.get_string("decomposition"), depth);
        break;
      default:
        break;
    }
    c.flops = count(c.flops);
    c.transcendentals = count(c.transcendentals);
    c.bytes_accessed = count(c.bytes_accessed);
    return c;
  }

  // A func's cost, counted once and remembered: calls may fan out (f calls g twice, g calls h
  // twice...) and a malformed module may recurse (a func in progress counts nothing).
  Cost func(std::string_view name, int depth) {
    const Func* f = m_.find_func(name);
    if (f == nullptr) return Cost{};
    auto [it, fresh] = funcs_.try_emplace(f, Cost{});
    if (!fresh) return it->second;
    const Cost c = region(f->body, depth + 1);
    funcs_[f] = c;
    return c;
  }

  const Module& m_;
  std::unordered_map<const Func*, Cost> funcs_;
  double tap_budget_ = 5e7;  // convolution pairs walked, the whole program together
};

}  // namespace

Cost program_cost(const Module& m) {
  const Func* main = m.find_func("main");
  if (main == nullptr) return Cost{};
  return Counter(m).region(main->body, 0);
}

}  // namespace jaxmlx::ir
