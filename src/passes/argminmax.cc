// argminmax: see argminmax.h for the pattern and why.
#include "passes/argminmax.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "passes/chain_match.h"

namespace jaxmlx::passes {
namespace {

using ir::ElementType;
using Dir = ir::ComparisonDirection;

// Element types the lowering handles with MLX's argmax / argmin (lower/reduce.cc).
bool supported(ElementType t) {
  switch (t) {
    case ElementType::kPred:
    case ElementType::kS8: case ElementType::kS16: case ElementType::kS32: case ElementType::kS64:
    case ElementType::kU8: case ElementType::kU16: case ElementType::kU32: case ElementType::kU64:
    case ElementType::kF16: case ElementType::kBF16: case ElementType::kF32:
      return true;
    default:
      return false;
  }
}

// The one element of a stablehlo.constant defining `v`, as its raw little-endian bits.
std::optional<uint64_t> scalar_constant_bits(const ChainMatcher& m, const ir::Value& v) {
  const ir::Op* c = m.def(v);
  if (c == nullptr || c->kind != ir::OpKind::kConstant) return std::nullopt;
  const auto* d = c->attr<ir::DenseElementsAttr>("value");
  if (d == nullptr || d->type == nullptr || d->num_elements() != 1) return std::nullopt;
  const size_t n = static_cast<size_t>(ir::element_storage_bytes(d->type->dtype));
  if (n == 0 || d->data.size() < n) return std::nullopt;
  uint64_t bits = 0;
  std::memcpy(&bits, d->data.data(), n);  // little-endian hosts (as everywhere we build)
  return bits;
}

// The identity of max (is_max) or min in type `t`, as raw bits.
std::optional<uint64_t> identity_bits(ElementType t, bool is_max) {
  switch (t) {
    case ElementType::kPred: return is_max ? 0 : 1;
    case ElementType::kF32: return is_max ? 0xFF800000u : 0x7F800000u;
    case ElementType::kF16: return is_max ? 0xFC00u : 0x7C00u;
    case ElementType::kBF16: return is_max ? 0xFF80u : 0x7F80u;
    default: break;
  }
  const int bits = ir::element_bit_width(t);
  if (bits == 0) return std::nullopt;
  const uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
  if (ir::is_unsigned_int(t)) return is_max ? 0 : mask;
  const uint64_t sign = 1ull << (bits - 1);
  return is_max ? sign : (sign - 1);
}

// Matches the body's ops, looked up by the values they define.
class BodyMatcher {
 public:
  explicit BodyMatcher(const ir::Block& b) {
    for (const ir::Op& op : b.ops)
      for (const ir::Value& r : op.results) def_[r.id] = &op;
  }

  const ir::Op* def(const ir::Value& v, ir::OpKind kind, size_t operands) const {
    auto it = def_.find(v.id);
    if (it == def_.end() || it->second->kind != kind || it->second->operands.size() != operands ||
        it->second->results.size() != 1)
      return nullptr;
    return it->second;
  }

  // compare `dir` of (a, b); for EQ and NE (b, a) is accepted too.
  bool compare(const ir::Value& v, Dir dir, const ir::Value& a, const ir::Value& b,
               bool is_float) const {
    const ir::Op* op = def(v, ir::OpKind::kCompare, 2);
    if (op == nullptr || op->get_enum("comparison_direction", -1) != static_cast<int>(dir))
      return false;
    // Floats compare as IEEE (NaN unordered); a total-order compare is another body.
    const int type = op->get_enum("compare_type", 0);
    if (is_float && type != static_cast<int>(ir::ComparisonType::kFloat) &&
        type != static_cast<int>(ir::ComparisonType::kNoType))
      return false;
    if (!is_float && type == static_cast<int>(ir::ComparisonType::kTotalOrder))
      return false;
    const bool direct = op->operands[0] == a && op->operands[1] == b;
    const bool swapped = op->operands[0] == b && op->operands[1] == a;
    return direct || ((dir == Dir::kEQ || dir == Dir::kNE) && swapped);
  }

  // A binary `kind` (or / and) of two values matching `x` and `y`, in either order.
  template <typename X, typename Y>
  bool commutative(const ir::Value& v, ir::OpKind kind, X x, Y y) const {
    const ir::Op* op = def(v, kind, 2);
    if (op == nullptr) return false;
    return (x(op->operands[0]) && y(op->operands[1])) || (x(op->operands[1]) && y(op->operands[0]));
  }

 private:
  std::unordered_map<uint32_t, const ir::Op*> def_;
};

// Whether `body` is jax's argmax (is_max) / argmin comparator for element type `t`.
bool is_argminmax_body(const ir::Region& body, ElementType t, bool is_max) {
  if (body.blocks.size() != 1) return false;
  const ir::Block& b = body.entry();
  if (b.args.size() != 4 || b.ops.empty()) return false;
  const ir::Op& ret = b.ops.back();
  if (ret.kind != ir::OpKind::kReturn || ret.operands.size() != 2) return false;
  const ir::Value &a = b.args[0], &ia = b.args[1], &bb = b.args[2], &ib = b.args[3];
  const bool is_float = ir::is_float(t);
  BodyMatcher m(b);
  const Dir dir = is_max ? Dir::kGT : Dir::kLT;

  const ir::Op* sel_v = m.def(ret.operands[0], ir::OpKind::kSelect, 3);
  const ir::Op* sel_i = m.def(ret.operands[1], ir::OpKind::kSelect, 3);
  if (sel_v == nullptr || sel_i == nullptr) return false;
  if (!(sel_v->operands[1] == a && sel_v->operands[2] == bb)) return false;
  if (!(sel_i->operands[1] == ia && sel_i->operands[2] == ib)) return false;
  const ir::Value& p = sel_v->operands[0];
  const ir::Value& q = sel_i->operands[0];

  // p = (a dir b) or (a != a); integers may leave the NaN test out.
  auto extreme = [&](const ir::Value& v) { return m.compare(v, dir, a, bb, is_float); };
  auto nan = [&](const ir::Value& v) { return m.compare(v, Dir::kNE, a, a, is_float); };
  const bool p_ok = m.commutative(p, ir::OpKind::kOr, extreme, nan) || (!is_float && extreme(p));
  if (!p_ok) return false;
  // q = p or ((a == b) and (ia < ib)).
  auto same_p = [&](const ir::Value& v) { return v == p; };
  auto tie = [&](const ir::Value& v) {
    return m.commutative(
        v, ir::OpKind::kAnd, [&](const ir::Value& e) { return m.compare(e, Dir::kEQ, a, bb, is_float); },
        [&](const ir::Value& l) { return m.compare(l, Dir::kLT, ia, ib, false); });
  };
  return m.commutative(q, ir::OpKind::kOr, same_p, tie);
}

// The custom call replacing `op` when it is jax's argmax / argmin; nullopt otherwise.
std::optional<ir::Op> match(const ir::Op& op, const ChainMatcher& m) {
  if (op.kind != ir::OpKind::kReduce || op.operands.size() != 4 || op.results.size() != 2 ||
      op.regions.size() != 1)
    return std::nullopt;
  const std::vector<int64_t> dims = op.get_i64s("dimensions");
  if (dims.size() != 1) return std::nullopt;
  const int64_t d = dims[0];
  const ir::Value &x = op.operands[0], &index = op.operands[1];
  if (x.type == nullptr || index.type == nullptr || !x.type->ranked || x.type->has_dynamic_dims())
    return std::nullopt;
  const ElementType t = x.type->dtype;
  const ElementType it = index.type->dtype;
  if (!supported(t) || d < 0 || d >= x.type->rank() || x.type->num_elements() <= 0) return std::nullopt;
  if (!(ir::is_signed_int(it) || ir::is_unsigned_int(it)) || ir::element_bit_width(it) < 8) return std::nullopt;
  // Every index must be representable: the body's tie-break compares them as integers.
  const int64_t n = x.type->dims[static_cast<size_t>(d)];
  const int value_bits = ir::is_signed_int(it) ? ir::element_bit_width(it) - 1 : ir::element_bit_width(it);
  if (value_bits < 63 && n - 1 > (int64_t{1} << value_bits) - 1) return std::nullopt;
  // The indices: an iota along d of the operand's shape.
  const ir::Op* iota = m.def(index);
  if (iota == nullptr || iota->kind != ir::OpKind::kIota ||
      iota->get_i64("iota_dimension", -1) != d || index.type->dims != x.type->dims)
    return std::nullopt;
  // The inits: the extreme's identity and index 0.
  auto init_v = scalar_constant_bits(m, op.operands[2]);
  auto init_i = scalar_constant_bits(m, op.operands[3]);
  if (!init_v || !init_i || *init_i != 0) return std::nullopt;
  for (bool is_max : {true, false}) {
    if (*init_v != identity_bits(t, is_max) || !is_argminmax_body(op.regions[0], t, is_max))
      continue;
    ir::Op call;
    call.kind = ir::OpKind::kCustomCall;
    call.operands = {x};
    call.results = op.results;
    // jnp.argmax reads only the indices: without the value result, no node computes it.
    if (m.uses(op.results[0]) == 0) call.results.erase(call.results.begin());
    call.loc = op.loc;
    call.set_attr("call_target_name", ir::StringAttr{is_max ? kArgmaxTarget : kArgminTarget});
    call.set_attr("dimension", ir::IntAttr{d, ElementType::kS64});
    return call;
  }
  return std::nullopt;
}

void rewrite_region(ir::Region& r, const ChainMatcher& m) {
  for (ir::Block& b : r.blocks)
    for (ir::Op& op : b.ops) {
      for (ir::Region& nested : op.regions) rewrite_region(nested, m);
      if (std::optional<ir::Op> call = match(op, m)) op = std::move(*call);
    }
}

}  // namespace

Status recognize_argminmax(ir::Module& m) {
  for (ir::Func& f : m.funcs) {
    // Value ids are unique per func, so one map covers its nested regions. Matching reads only
    // ops other than the one replaced (its operands' definitions and its own body), and a
    // replaced reduce defines the same values: the maps stay valid.
    const ChainMatcher matcher(f);
    rewrite_region(f.body, matcher);
  }
  return Status();
}

}  // namespace jaxmlx::passes
