// Lowering rules: sort family (see lowering.h for the rule contract).
//
// stablehlo.sort with any comparator, and the ApproxTopK custom call (jax's lax.approx_max_k /
// approx_min_k; chlo.top_k reaches us as a composite whose decomposition is a sort + slice).
//
// Fast path: the comparator is analyzed as a lexicographic order on keys, the shape jax emits
// (`lt(k0) | (eq(k0) & (lt(k1) | ...))`, GT for descending, each key some elementwise function
// of one operand, e.g. jax's NaN / -0.0 canonicalization). Each key becomes an unsigned integer
// whose ascending order is the comparator's order (the sign-flip trick for floats), keys are
// packed into as few 64-bit words as fit, and stable argsorts from the least significant word
// give the permutation; every operand is then gathered with it. The result is the stable order
// whether or not is_stable is set (XLA's CPU gives the stable order for is_stable=true; for
// unstable sorts any order of ties is valid).
//
// Fallback, for comparators of any other form: a bitonic sorting network over the sort axis
// padded to a power of two, each stage one call of the comparator on whole arrays, ties broken
// by the original index so that the result is again the stable order.
//
// Semantics: a FLOAT (IEEE) compare makes -0 and +0 tie and leaves NaN unordered, which is no
// strict weak order (XLA's result then depends on its sort algorithm); here NaNs sort above
// +inf. Denormals order by value (XLA's CPU flushes f32/bf16 denormals to zero in compares).
#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "lower/emulated_types.h"
#include "lower/float_bits.h"
#include "lower/shape_util.h"

namespace jaxmlx::lower {

using namespace shape_util;

namespace {

using Dir = ir::ComparisonDirection;
using CmpType = ir::ComparisonType;

// ---- evaluating a scalar body on whole arrays -------------------------------------------------

bool is_terminator(const ir::Op& op) {
  return op.kind == ir::OpKind::kReturn || op.kind == ir::OpKind::kFuncReturn;
}

// The ops of a single-block comparator, indexed by the values they define.
// Values the body uses from outside it (jax hoists the comparator's constants out of the sort
// region) are read from `outer`, the func that holds the sort, when they are constants.
class Body {
 public:
  Body(const ir::Block& b, const ir::Func* outer) : block_(b) {
    for (size_t i = 0; i < b.args.size(); ++i) arg_index_[b.args[i].id] = static_cast<int>(i);
    for (const ir::Op& op : b.ops)
      for (size_t r = 0; r < op.results.size(); ++r) defs_[op.results[r].id] = {&op, r};
    if (outer != nullptr)
      ir::walk(outer->body, [&](const ir::Op& op) {
        if (op.kind == ir::OpKind::kConstant && op.results.size() == 1)
          outer_constants_[op.results[0].id] = &op;
      });
  }
  // The constant op defining `v`, inside the body or outside it; null if none.
  const ir::Op* constant(ir::Value v) const {
    const ir::Op* op = def(v).first;
    if (op == nullptr) {
      auto it = outer_constants_.find(v.id);
      op = it == outer_constants_.end() ? nullptr : it->second;
    }
    return op != nullptr && op->kind == ir::OpKind::kConstant ? op : nullptr;
  }
  const ir::Block& block() const { return block_; }
  // The op defining `v` inside the body (and which of its results `v` is), or null.
  std::pair<const ir::Op*, size_t> def(ir::Value v) const {
    auto it = defs_.find(v.id);
    return it == defs_.end() ? std::pair<const ir::Op*, size_t>{nullptr, 0} : it->second;
  }
  int arg_index(ir::Value v) const {
    auto it = arg_index_.find(v.id);
    return it == arg_index_.end() ? -1 : it->second;
  }
  const ir::Op* terminator() const {
    return block_.ops.empty() || !is_terminator(block_.ops.back()) ? nullptr : &block_.ops.back();
  }

  // The values `wanted`, with the block args bound to `args`: only the ops they depend on run,
  // each through its registry rule, so a scalar body applies elementwise to whole arrays.
  // (ctx.call_region checks results against the body's scalar types, which arrays never match.)
  StatusOr<Values> eval(LowerContext& ctx, const Values& args,
                        const std::vector<ir::Value>& wanted) const {
    std::unordered_set<const ir::Op*> needed;
    std::vector<ir::Value> stack = wanted;
    while (!stack.empty()) {
      ir::Value v = stack.back();
      stack.pop_back();
      const ir::Op* op = def(v).first;
      if (op == nullptr) {
        if (arg_index(v) < 0 && constant(v) == nullptr)
          return unimplemented("sort comparator uses a non-constant value defined outside it");
        continue;
      }
      if (!needed.insert(op).second) continue;
      for (const ir::Value& o : op->operands) stack.push_back(o);
    }
    std::unordered_map<uint32_t, mx::array> env;
    for (size_t i = 0; i < args.size(); ++i) env.insert_or_assign(block_.args[i].id, args[i]);
    const LowerFn* constant_rule = Registry::global().find(ir::OpKind::kConstant);
    for (const ir::Op& op : block_.ops)
      for (const ir::Value& v : op.operands) {
        if (env.count(v.id) || def(v).first != nullptr || arg_index(v) >= 0) continue;
        const ir::Op* c = constant(v);
        if (c == nullptr || constant_rule == nullptr) continue;
        ASSIGN_OR_RETURN(Values cv, (*constant_rule)(ctx, *c, {}));
        env.insert_or_assign(v.id, cv.at(0));
      }
    for (const ir::Op& op : block_.ops) {
      if (!needed.count(&op)) continue;
      if (!op.regions.empty()) return ctx.unsupported(op, "op with regions inside a sort comparator");
      Values in;
      for (const ir::Value& v : op.operands) in.push_back(env.at(v.id));
      const LowerFn* fn = Registry::global().find(op.kind);
      if (fn == nullptr) return ctx.unsupported(op, "no MLX lowering (inside a sort comparator)");
      // Types MLX cannot compute in are emulated as at the top level (emulated_types.h).
      ASSIGN_OR_RETURN(Values out, apply_rule(ctx, op, in, *fn));
      if (out.size() != op.results.size()) return ctx.malformed(op, "wrong result count");
      for (size_t i = 0; i < out.size(); ++i) env.insert_or_assign(op.results[i].id, out[i]);
    }
    Values res;
    for (const ir::Value& v : wanted) res.push_back(env.at(v.id));
    return res;
  }

  // The comparator itself on whole arrays: lhs[i] vs rhs[i] for every operand i.
  StatusOr<mx::array> compare(LowerContext& ctx, const Values& lhs, const Values& rhs) const {
    const ir::Op* ret = terminator();
    if (ret == nullptr || ret->operands.size() != 1)
      return unimplemented("sort comparator must return one i1 value");
    Values args;
    for (size_t i = 0; i < lhs.size(); ++i) args.push_back(lhs[i]), args.push_back(rhs[i]);
    ASSIGN_OR_RETURN(Values r, eval(ctx, args, {ret->operands[0]}));
    return mx::astype(r[0], mx::bool_);
  }

 private:
  const ir::Block& block_;
  std::unordered_map<uint32_t, int> arg_index_;
  std::unordered_map<uint32_t, std::pair<const ir::Op*, size_t>> defs_;
  std::unordered_map<uint32_t, const ir::Op*> outer_constants_;
};

// ---- recognizing a lexicographic comparator ---------------------------------------------------

// One key of a lexicographic order: `expr` is computed from lhs-side block args (args 2i) only,
// and the comparator compares it with its rhs-side twin.
struct Key {
  ir::Value expr;
  bool descending = false;  // GT
  CmpType type = CmpType::kNoType;
};

class Matcher {
 public:
  explicit Matcher(const Body& body) : body_(body) {}

  // The keys, most significant first, when the comparator is a lexicographic order on keys.
  std::optional<std::vector<Key>> match() {
    const ir::Op* ret = body_.terminator();
    if (ret == nullptr || ret->operands.size() != 1) return std::nullopt;
    auto keys = match_order(ret->operands[0]);
    if (!keys) return keys;
    // jax canonicalizes floats before a TOTALORDER compare (NaN -> one NaN, -0 -> +0): that
    // is the IEEE order with NaN above +inf, computed on the raw bits (so f64 works too).
    for (Key& k : *keys)
      if (k.type == CmpType::kTotalOrder)
        if (auto x = canonicalized(k.expr)) k = Key{*x, k.descending, CmpType::kFloat};
    return keys;
  }

 private:
  struct Cmp {
    Dir dir;
    CmpType type;
    ir::Value lhs;  // the lhs-side expression (operands swapped when the op had rhs first)
  };

  // `cmp(x, y)` where x and y are the same computation on the lhs and the rhs side.
  std::optional<Cmp> match_compare(ir::Value v) {
    auto [op, r] = body_.def(v);
    if (op == nullptr || op->kind != ir::OpKind::kCompare || op->operands.size() != 2)
      return std::nullopt;
    int d = op->get_enum("comparison_direction", -1);
    if (d < 0 || d > static_cast<int>(Dir::kLT)) return std::nullopt;
    Dir dir = static_cast<Dir>(d);
    CmpType type = resolve(static_cast<CmpType>(op->get_enum("compare_type", 0)),
                           op->operands[0].type->dtype);
    ir::Value a = op->operands[0], b = op->operands[1];
    if (twin(a, b)) return Cmp{dir, type, a};
    if (twin(b, a)) return Cmp{flip(dir), type, b};
    return std::nullopt;
  }

  std::optional<std::vector<Key>> match_order(ir::Value v) {
    if (auto c = match_compare(v)) {
      if (c->dir != Dir::kLT && c->dir != Dir::kGT) return std::nullopt;
      return std::vector<Key>{Key{c->lhs, c->dir == Dir::kGT, c->type}};
    }
    // or(strict(k), and(eq(k), rest)), operands of or/and in either order.
    auto [op, r] = body_.def(v);
    if (op == nullptr || op->kind != ir::OpKind::kOr || op->operands.size() != 2)
      return std::nullopt;
    for (int s = 0; s < 2; ++s) {
      auto strict = match_compare(op->operands[s]);
      if (!strict || (strict->dir != Dir::kLT && strict->dir != Dir::kGT)) continue;
      auto [andop, r2] = body_.def(op->operands[1 - s]);
      if (andop == nullptr || andop->kind != ir::OpKind::kAnd || andop->operands.size() != 2)
        continue;
      for (int t = 0; t < 2; ++t) {
        auto eq = match_compare(andop->operands[t]);
        if (!eq || eq->dir != Dir::kEQ || !(eq->lhs == strict->lhs) ||
            !same_equality(eq->type, strict->type))
          continue;
        auto rest = match_order(andop->operands[1 - t]);
        if (!rest) continue;
        rest->insert(rest->begin(), Key{strict->lhs, strict->dir == Dir::kGT, strict->type});
        return rest;
      }
    }
    return std::nullopt;
  }

  // EQ agrees with the strict compare's ties: same float semantics; integers any signedness.
  static bool same_equality(CmpType eq, CmpType strict) {
    auto is_int = [](CmpType t) { return t == CmpType::kSigned || t == CmpType::kUnsigned; };
    return eq == strict || (is_int(eq) && is_int(strict));
  }

  static Dir flip(Dir d) {
    switch (d) {
      case Dir::kLT: return Dir::kGT;
      case Dir::kGT: return Dir::kLT;
      case Dir::kLE: return Dir::kGE;
      case Dir::kGE: return Dir::kLE;
      default: return d;
    }
  }

  // NOTYPE means the element type's natural comparison.
  static CmpType resolve(CmpType t, ir::ElementType e) {
    if (t != CmpType::kNoType) return t;
    if (ir::is_float(e)) return CmpType::kFloat;
    return ir::is_signed_int(e) ? CmpType::kSigned : CmpType::kUnsigned;
  }

  // True when `a` is computed from lhs-side args (2i) exactly as `b` is from rhs-side ones
  // (2i+1); values that depend on no arg (constants) may be shared.
  bool twin(ir::Value a, ir::Value b) {
    if (a == b) return side_free(a);
    int ia = body_.arg_index(a), ib = body_.arg_index(b);
    if (ia >= 0 || ib >= 0) return ia >= 0 && ia % 2 == 0 && ib == ia + 1;
    auto [oa, ra] = body_.def(a);
    auto [ob, rb] = body_.def(b);
    if (oa == nullptr || ob == nullptr || oa->kind != ob->kind || ra != rb ||
        !oa->regions.empty() || !ob->regions.empty() || !(oa->attrs == ob->attrs) ||
        oa->operands.size() != ob->operands.size() || oa->generic_name != ob->generic_name)
      return false;
    for (size_t i = 0; i < oa->operands.size(); ++i)
      if (!twin(oa->operands[i], ob->operands[i])) return false;
    return true;
  }

  // x when v is jax's `select(x != x, +NaN, select(x == 0, 0, x))` (compare type FLOAT).
  std::optional<ir::Value> canonicalized(ir::Value v) {
    auto is_op = [&](ir::Value w, ir::OpKind k) {
      const ir::Op* op = body_.def(w).first;
      return op != nullptr && op->kind == k ? op : nullptr;
    };
    auto float_compare = [&](const ir::Op* op, Dir dir) {
      return op != nullptr && op->get_enum("comparison_direction", -1) == static_cast<int>(dir) &&
             resolve(static_cast<CmpType>(op->get_enum("compare_type", 0)),
                     op->operands[0].type->dtype) == CmpType::kFloat;
    };
    const ir::Op* outer = is_op(v, ir::OpKind::kSelect);
    if (outer == nullptr || outer->operands.size() != 3) return std::nullopt;
    const ir::Op* ne = is_op(outer->operands[0], ir::OpKind::kCompare);
    const ir::Op* inner = is_op(outer->operands[2], ir::OpKind::kSelect);
    if (!float_compare(ne, Dir::kNE) || inner == nullptr || inner->operands.size() != 3)
      return std::nullopt;
    ir::Value x = ne->operands[0];
    const ir::Op* eq = is_op(inner->operands[0], ir::OpKind::kCompare);
    if (!(ne->operands[1] == x) || !float_compare(eq, Dir::kEQ) || !(eq->operands[0] == x) ||
        !(inner->operands[2] == x))
      return std::nullopt;
    auto splat_bits = [&](ir::Value w) -> std::optional<uint64_t> {
      const ir::Op* c = body_.constant(w);
      const auto* d = c ? c->attr<ir::DenseElementsAttr>("value") : nullptr;
      if (d == nullptr || d->type == nullptr || d->data.empty()) return std::nullopt;
      const size_t bytes = std::min<size_t>(d->data.size(), 8);
      uint64_t bits = 0;
      for (size_t i = 0; i < bytes; ++i) bits |= static_cast<uint64_t>(d->data[i]) << (8 * i);
      return bits;
    };
    const ir::ElementType et = x.type->dtype;
    if (et != ir::ElementType::kF16 && et != ir::ElementType::kBF16 &&
        et != ir::ElementType::kF32 && et != ir::ElementType::kF64)
      return std::nullopt;
    const int w = ir::element_bit_width(et);
    auto zero1 = splat_bits(eq->operands[1]), zero2 = splat_bits(inner->operands[1]);
    auto nan = splat_bits(outer->operands[1]);
    const uint64_t mag = w >= 64 ? ~0ull >> 1 : (1ull << (w - 1)) - 1;
    const uint64_t mask = w >= 64 ? ~0ull : (1ull << w) - 1;
    if (!zero1 || !zero2 || !nan || (*zero1 & mask) != 0 || (*zero2 & mask) != 0) return std::nullopt;
    // A positive NaN: every exponent bit and some mantissa bit set, sign clear.
    const int mant = x.type->dtype == ir::ElementType::kF16 ? 10
                     : x.type->dtype == ir::ElementType::kBF16 ? 7
                     : x.type->dtype == ir::ElementType::kF32 ? 23 : 52;
    const uint64_t inf = mag >> mant << mant;
    if ((*nan & mask) <= inf || (*nan & mask) > mag) return std::nullopt;
    return x;
  }

  bool side_free(ir::Value v) {
    if (body_.arg_index(v) >= 0) return false;
    auto [op, r] = body_.def(v);
    if (op == nullptr) return true;  // defined outside the comparator
    for (const ir::Value& o : op->operands)
      if (!side_free(o)) return false;
    return true;
  }

  const Body& body_;
};

// ---- integer keys -------------------------------------------------------------------------------

mx::array all_ones(mx::Dtype d) { return int_scalar(-1, d); }

// An unsigned integer array whose ascending order is the order `type` gives `x` (element type
// `et`, in its storage form), reversed when `descending`. nullopt for types without one.
std::optional<mx::array> order_key(const mx::array& x, ir::ElementType et, CmpType type,
                                   bool descending) {
  mx::array k = x;
  // Narrow floats: a FLOAT order is their f32 values' (exact); a total order is XLA's on the
  // w-bit pattern b as a signed int: b >= 0 as is, b < 0 as MIN - b, and MIN (-0, fnuz's NaN)
  // below everything (e8m0, which has no sign, orders as its values). Sub-byte ints order as
  // their 8-bit twins.
  if (fbits::is_narrow_float(et)) {
    if (type != CmpType::kTotalOrder || et == ir::ElementType::kF8E8M0FNU)  // e8m0: unsigned
      return order_key(fbits::narrow_to_f32(x, et), ir::ElementType::kF32, type, descending);
    const int w = ir::element_bit_width(et);
    const mx::array mask = int_scalar((1 << w) - 1, mx::uint8);
    const mx::array min = int_scalar(1 << (w - 1), mx::uint8);
    mx::array b = mx::bitwise_and(mx::view(x, mx::uint8), mask);
    mx::array neg = mx::greater(b, min);  // negative, not MIN
    // Offset by -MIN into [0, 2^w): b >= 0 -> b + MIN; b < 0 -> -b (= 2^w - b); MIN -> 0.
    k = mx::where(neg, mx::bitwise_and(mx::subtract(int_scalar(0, mx::uint8), b), mask),
                  mx::where(mx::equal(b, min), int_scalar(0, mx::uint8), mx::add(b, min)));
    return descending ? mx::bitwise_xor(k, mask) : k;
  }
  if (ir::is_integer(et) && ir::element_bit_width(et) < 8)
    return order_key(fbits::wrap_subbyte(x, et),
                     ir::is_unsigned_int(et) ? ir::ElementType::kU8 : ir::ElementType::kS8, type,
                     descending);
  if (et == ir::ElementType::kPred) {
    k = mx::astype(x, mx::uint8);
    if (type == CmpType::kSigned) k = mx::subtract(int_scalar(1, mx::uint8), k);  // true is -1
  } else if (ir::is_integer(et)) {
    mx::Dtype u = unsigned_of(x.dtype());
    k = mx::view(x, u);
    if (type == CmpType::kSigned) k = mx::bitwise_xor(k, int_scalar(1ll << (dtype_bits(u) - 1), u));
  } else if (ir::is_float(et)) {
    const int w = ir::element_bit_width(et);
    const bool known = et == ir::ElementType::kF16 || et == ir::ElementType::kBF16 ||
                       et == ir::ElementType::kF32 || et == ir::ElementType::kF64;
    if (!known || (type != CmpType::kFloat && type != CmpType::kTotalOrder)) return std::nullopt;
    mx::Dtype u = unsigned_of(x.dtype());  // f64's storage is already uint64
    k = mx::view(x, u);
    mx::array sign = int_scalar(1ll << (w - 1), u);
    if (type == CmpType::kFloat) {
      // IEEE compare: -0 == +0; NaN is unordered, placed above +inf (all NaNs tie).
      const int mant = et == ir::ElementType::kF16 ? 10 : et == ir::ElementType::kBF16 ? 7
                       : et == ir::ElementType::kF32 ? 23 : 52;
      const uint64_t inf_bits = ((1ull << (w - 1)) - 1) >> mant << mant;
      mx::array mag = mx::bitwise_and(k, int_scalar(static_cast<int64_t>((1ull << (w - 1)) - 1), u));
      k = mx::where(mx::equal(mag, int_scalar(0, u)), int_scalar(0, u), k);
      mx::array nan = int_scalar(static_cast<int64_t>(inf_bits | (1ull << (mant - 1))), u);
      k = mx::where(mx::greater(mag, int_scalar(static_cast<int64_t>(inf_bits), u)), nan, k);
    }
    // Negative floats: flip every bit (larger magnitude sorts lower); others: set the sign bit.
    mx::array neg = mx::not_equal(mx::bitwise_and(k, sign), int_scalar(0, u));
    k = mx::where(neg, mx::bitwise_xor(k, all_ones(u)), mx::bitwise_or(k, sign));
  } else {
    return std::nullopt;
  }
  if (descending) k = mx::bitwise_xor(k, all_ones(k.dtype()));
  return k;
}

// Stable permutation (int32 indices along `axis`) ordering `keys` lexicographically, most
// significant first. Keys are packed into 64-bit words where they fit.
mx::array lexicographic_argsort(const std::vector<mx::array>& keys, int axis) {
  std::vector<mx::array> words;  // least significant first
  int i = static_cast<int>(keys.size()) - 1;
  while (i >= 0) {
    int bits = 0, j = i;
    while (j >= 0 && bits + dtype_bits(keys[j].dtype()) <= 64) bits += dtype_bits(keys[j--].dtype());
    const mx::Dtype wd = bits <= 32 ? (bits <= 16 ? (bits <= 8 ? mx::uint8 : mx::uint16) : mx::uint32)
                                    : mx::uint64;
    mx::array w = mx::astype(keys[j + 1], wd);
    for (int m = j + 2; m <= i; ++m) {
      w = mx::left_shift(w, int_scalar(dtype_bits(keys[m].dtype()), wd));
      w = mx::bitwise_or(w, mx::astype(keys[m], wd));
    }
    words.push_back(w);
    i = j;
  }
  // MLX's argsort is stable on every backend (documented since MLX #3400); a non-contiguous
  // input is read wrongly (PITFALLS 5), hence contiguous().
  mx::array perm = mx::astype(mx::argsort(mx::contiguous(words[0]), axis), mx::int32);
  for (size_t w = 1; w < words.size(); ++w) {
    mx::array k = mx::contiguous(mx::take_along_axis(words[w], perm, axis));
    mx::array p = mx::astype(mx::argsort(k, axis), mx::int32);
    perm = mx::take_along_axis(perm, p, axis);
  }
  return perm;
}

// `x` (storage form of type `t`) permuted along `axis` by `perm` (logical shape).
mx::array permute(const mx::array& x, const ir::Type& t, const mx::array& perm, int axis) {
  if (trailing_rank(t) == 0) return mx::take_along_axis(x, perm, axis);
  mx::array p = mx::broadcast_to(mx::expand_dims(perm, -1), x.shape());
  return mx::take_along_axis(x, p, axis);
}

// ---- the fallback: a bitonic network driven by the comparator ----------------------------------

// Sorts `xs` (native types, sort axis last, length n) with the comparator, stably.
StatusOr<Values> bitonic_sort(LowerContext& ctx, const Body& body, Values xs) {
  const int ax = static_cast<int>(xs[0].ndim()) - 1;
  const int n = xs[0].shape(ax);
  int p = 1;
  while (p < n) p <<= 1;
  mx::Shape lead(xs[0].shape().begin(), xs[0].shape().end() - 1);
  for (mx::array& x : xs) {
    std::vector<std::pair<int, int>> pad(x.ndim(), {0, 0});
    pad.back().second = p - n;
    x = mx::pad(x, pad);
  }
  // The original position travels with each element: it breaks ties and marks padding (>= n).
  mx::Shape full = lead;
  full.push_back(p);
  xs.push_back(mx::broadcast_to(mx::arange(p, mx::int32), full));
  const size_t idx = xs.size() - 1;
  const mx::array valid_n = int_scalar(n, mx::int32);
  // a before b: padding last, then the comparator, then the original position.
  auto before = [&](const Values& a, const Values& b) -> StatusOr<mx::array> {
    Values av(a.begin(), a.end() - 1), bv(b.begin(), b.end() - 1);
    ASSIGN_OR_RETURN(mx::array ab, body.compare(ctx, av, bv));
    ASSIGN_OR_RETURN(mx::array ba, body.compare(ctx, bv, av));
    mx::array tie = mx::logical_and(mx::logical_not(ba), mx::less(a[idx], b[idx]));
    mx::array ordered = mx::logical_or(ab, tie);
    mx::array a_valid = mx::less(a[idx], valid_n), b_valid = mx::less(b[idx], valid_n);
    return mx::logical_and(a_valid, mx::logical_or(mx::logical_not(b_valid), ordered));
  };
  for (int k = 2; k <= p; k <<= 1) {
    for (int j = k / 2; j >= 1; j >>= 1) {
      // Pairs (i, i + j) for i with bit j clear: view the axis as [p / 2j, 2, j].
      mx::Shape split = lead;
      split.insert(split.end(), {p / (2 * j), 2, j});
      const int mid = static_cast<int>(lead.size()) + 1;
      Values lo, hi;
      mx::Shape zero(split.size(), 0), one(split.size(), 0), half = split;
      one[mid] = 1;
      half[mid] = 1;
      for (const mx::array& x : xs) {
        mx::array v = mx::reshape(x, split);
        lo.push_back(mx::squeeze(mx::slice(v, zero, half), mid));
        hi.push_back(mx::squeeze(mx::slice(v, one, split), mid));
      }
      // Ascending blocks where bit k of the position is clear (it depends on the block only).
      mx::array blocks = mx::multiply(mx::arange(p / (2 * j), mx::int32), int_scalar(2 * j, mx::int32));
      mx::array asc = mx::expand_dims(
          mx::equal(mx::bitwise_and(blocks, int_scalar(k, mx::int32)), int_scalar(0, mx::int32)), -1);
      ASSIGN_OR_RETURN(mx::array hi_first, before(hi, lo));
      ASSIGN_OR_RETURN(mx::array lo_first, before(lo, hi));
      mx::array swap = mx::where(asc, hi_first, lo_first);
      for (size_t i = 0; i < xs.size(); ++i) {
        mx::array a = mx::where(swap, hi[i], lo[i]), b = mx::where(swap, lo[i], hi[i]);
        xs[i] = mx::reshape(mx::stack({a, b}, mid), full);
      }
    }
  }
  xs.pop_back();
  mx::Shape start(full.size(), 0), stop = full;
  stop.back() = n;
  for (mx::array& x : xs) x = mx::slice(x, start, stop);
  return xs;
}

// ---- the rules ----------------------------------------------------------------------------------

// The key expressions on whole arrays. real/imag of a c128 operand (jax's complex keys) are
// read from its raw storage: sorting needs no f64 arithmetic.
StatusOr<Values> key_values(LowerContext& ctx, const Body& body, const Values& args,
                            const std::vector<ir::Value>& exprs) {
  Values out(exprs.size(), mx::array(0));
  std::vector<ir::Value> rest;
  std::vector<size_t> rest_pos;
  for (size_t i = 0; i < exprs.size(); ++i) {
    const ir::Op* op = body.def(exprs[i]).first;
    const int arg = op && op->operands.size() == 1 ? body.arg_index(op->operands[0]) : -1;
    const bool part = op && (op->kind == ir::OpKind::kReal || op->kind == ir::OpKind::kImag);
    if (part && arg >= 0 && op->operands[0].type->dtype == ir::ElementType::kC128) {
      const mx::array& x = args[arg];
      mx::Shape start(x.ndim(), 0), stop = x.shape();
      start.back() = op->kind == ir::OpKind::kReal ? 0 : 1;
      stop.back() = start.back() + 1;
      out[i] = mx::squeeze(mx::slice(x, start, stop), -1);
    } else {
      rest.push_back(exprs[i]);
      rest_pos.push_back(i);
    }
  }
  if (rest.empty()) return out;
  ASSIGN_OR_RETURN(Values vals, body.eval(ctx, args, rest));
  for (size_t i = 0; i < rest.size(); ++i) out[rest_pos[i]] = vals[i];
  return out;
}

// `in` (storage forms of `types`) sorted along `dim` by the comparator `block` (2N args).
StatusOr<Values> sort_by(LowerContext& ctx, const ir::Op& op, const ir::Block& block,
                         const ir::Func* outer, const Values& in,
                         const std::vector<const ir::Type*>& types, int dim) {
  if (block.args.size() != 2 * in.size())
    return ctx.malformed(op, "the comparator must take two scalars per operand");
  const int64_t n = types[0]->dims[dim];
  if (n <= 1) return in;
  Body body(block, outer);
  Values out;
  if (auto keys = Matcher(body).match()) {
    Values args;
    for (const mx::array& x : in) args.push_back(x), args.push_back(x);
    std::vector<ir::Value> exprs;
    for (const Key& k : *keys) exprs.push_back(k.expr);
    ASSIGN_OR_RETURN(Values vals, key_values(ctx, body, args, exprs));
    const mx::Shape shape = to_shape(types[0]->dims);
    std::vector<mx::array> ints;
    for (size_t i = 0; i < keys->size(); ++i) {
      const Key& k = (*keys)[i];
      auto key = order_key(vals[i], k.expr.type->dtype, k.type, k.descending);
      if (!key) break;
      ints.push_back(mx::broadcast_to(*key, shape));
    }
    if (ints.size() == keys->size()) {
      mx::array perm = lexicographic_argsort(ints, dim);
      for (size_t i = 0; i < in.size(); ++i) out.push_back(permute(in[i], *types[i], perm, dim));
      return out;
    }
  }
  // Any other comparator: the sorting network, with the sort axis moved last.
  for (const ir::Type* t : types)
    if (trailing_rank(*t) != 0 || !is_native(t->dtype))
      return ctx.unsupported(op, "comparator is not a lexicographic order on keys and an operand "
                                 "has type " + type_to_string(*t));
  std::vector<int> perm;
  const int rank = static_cast<int>(types[0]->dims.size());
  for (int d = 0; d < rank; ++d)
    if (d != dim) perm.push_back(d);
  perm.push_back(dim);
  std::vector<int> inverse(rank);
  for (int d = 0; d < rank; ++d) inverse[perm[d]] = d;
  Values xs;
  for (const mx::array& x : in) xs.push_back(shape_util::permute(x, perm));
  ASSIGN_OR_RETURN(Values sorted, bitonic_sort(ctx, body, std::move(xs)));
  for (const mx::array& x : sorted) out.push_back(shape_util::permute(x, inverse));
  return out;
}

StatusOr<Values> lower_sort(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.empty() || in.size() != op.results.size() || op.regions.size() != 1 ||
      op.regions[0].blocks.size() != 1)
    return ctx.malformed(op, "sort needs N operands, N results and a one-block comparator");
  std::vector<const ir::Type*> types;
  for (size_t i = 0; i < in.size(); ++i) {
    types.push_back(&operand_type(op, i));
    if (!is_static(*types.back())) return ctx.unsupported(op, "dynamic operand shape");
    // The sorting paths index every operand by operand 0's shape.
    if (types.back()->dims != types[0]->dims)
      return ctx.malformed(op, "sort operands " + type_to_string(*types[0]) + " and " +
                                   type_to_string(*types.back()) + " differ in shape");
  }
  const int rank = static_cast<int>(types[0]->dims.size());
  int64_t dim = op.get_i64("dimension", 0);
  if (dim < 0) dim += rank;
  if (dim < 0 || dim >= rank) return ctx.malformed(op, "sort dimension out of range");
  return sort_by(ctx, op, op.regions[0].entry(), ir::enclosing_func(ctx.module(), op), in, types,
                 static_cast<int>(dim));
}

int64_t dict_int(const ir::DictAttr* d, std::string_view name, int64_t fallback) {
  const ir::Attribute* a = d ? d->find(name) : nullptr;
  if (a == nullptr) return fallback;
  if (const auto* i = a->as<ir::IntAttr>()) return i->value;
  return fallback;
}

mx::array slice_prefix(const mx::array& x, int axis, int len) {
  mx::Shape start(x.ndim(), 0), stop = x.shape();
  stop[axis] = len;
  return mx::slice(x, start, stop);
}

// ApproxTopK (jax's approx_max_k / approx_min_k): operands (x..., init...), results the first
// `size` elements along reduction_dim in comparator order. Like XLA's fallback on CPU and GPU
// this is exact: a sort and a slice; for one result element XLA reduces instead, whose ties go
// to the last index, so that case sorts the reversed operands and folds the init values in.
StatusOr<Values> lower_approx_top_k(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const size_t n = op.results.size();
  if (n == 0 || in.size() != 2 * n) return ctx.malformed(op, "ApproxTopK takes N operands and N inits");
  const auto* calls = op.attr<ir::ArrayAttr>("called_computations");
  const ir::SymbolRefAttr* name =
      calls && calls->items.size() == 1 ? calls->items[0].as<ir::SymbolRefAttr>() : nullptr;
  const ir::Func* cmp = name ? ctx.module().find_func(name->name) : nullptr;
  if (cmp == nullptr || cmp->body.blocks.size() != 1)
    return ctx.malformed(op, "ApproxTopK needs one comparator function");
  std::vector<const ir::Type*> types;
  for (size_t i = 0; i < n; ++i) {
    types.push_back(&operand_type(op, i));
    if (!is_static(*types.back()) || !is_static(result_type(op, i)))
      return ctx.unsupported(op, "ApproxTopK with dynamic shapes");
  }
  const int rank = static_cast<int>(types[0]->dims.size());
  int64_t dim = dict_int(op.attr<ir::DictAttr>("mhlo.backend_config"), "reduction_dim", -1);
  if (dim < 0) dim += rank;
  if (dim < 0 || dim >= rank) return ctx.malformed(op, "ApproxTopK reduction_dim out of range");
  const int ax = static_cast<int>(dim);
  const int size = static_cast<int>(result_type(op, 0).dims[ax]);
  Values xs(in.begin(), in.begin() + n);
  const ir::Block& block = cmp->body.entry();
  if (size != 1) {
    ASSIGN_OR_RETURN(Values sorted, sort_by(ctx, op, block, cmp, xs, types, ax));
    for (mx::array& x : sorted) x = slice_prefix(x, ax, size);
    return sorted;
  }
  const int len = static_cast<int>(types[0]->dims[ax]);
  mx::array rev = mx::arange(len - 1, -1, -1, mx::int32);
  for (mx::array& x : xs) x = mx::take(x, rev, ax);
  ASSIGN_OR_RETURN(Values best, sort_by(ctx, op, block, cmp, xs, types, ax));
  Values inits;
  for (size_t i = 0; i < n; ++i) {
    best[i] = slice_prefix(best[i], ax, 1);
    inits.push_back(mx::broadcast_to(mx::astype(in[n + i], best[i].dtype()), best[i].shape()));
  }
  ASSIGN_OR_RETURN(mx::array keep_init, Body(block, cmp).compare(ctx, inits, best));
  for (size_t i = 0; i < n; ++i) best[i] = mx::where(keep_init, inits[i], best[i]);
  return best;
}

}  // namespace

void register_sort(Registry& r) {
  r.add(ir::OpKind::kSort, lower_sort);
  r.add_custom_call("ApproxTopK", lower_approx_top_k);
}

}  // namespace jaxmlx::lower
