// logsumexp: see logsumexp.h for the patterns and why.
#include "passes/logsumexp.h"

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "passes/chain_match.h"

namespace jaxmlx::passes {
namespace {

using ir::OpKind;

constexpr uint32_t kZeroF32 = 0x00000000u;

// A logsumexp's forward parts.
struct Lse {
  ir::Value x, e, s;
  std::vector<int64_t> dims;
};

class Matcher : public ChainMatcher {
 public:
  using ChainMatcher::ChainMatcher;

  // add(log(abs(%s)), %m) defining the result of `op`.
  std::optional<Lse> forward(const ir::Op& op) const {
    if (op.kind != OpKind::kAdd || op.operands.size() != 2 || op.results.size() != 1 ||
        !is_f32_tensor(op.results[0]))
      return std::nullopt;
    for (int i = 0; i < 2; ++i) {
      const ir::Op* log = single(op.operands[i], OpKind::kLog, 1);
      const ir::Op* abs = log ? single(log->operands[0], OpKind::kAbs, 1) : nullptr;
      std::optional<Lse> l = abs ? sum_of_exp(abs->operands[0]) : std::nullopt;
      if (l && row_max(op.operands[1 - i], *l)) return l;
    }
    return std::nullopt;
  }

  // multiply(BACK(%t), %e) defining the result of `op`: the logsumexp and %ct.
  std::optional<std::pair<Lse, ir::Value>> backward(const ir::Op& op) const {
    if (op.kind != OpKind::kMultiply || op.operands.size() != 2 || op.results.size() != 1 ||
        !is_f32_tensor(op.results[0]))
      return std::nullopt;
    for (int i = 0; i < 2; ++i) {
      const ir::Op* exp = single(op.operands[i], OpKind::kExponential, 1);
      std::optional<Lse> l = exp ? exp_sum(op.operands[i]) : std::nullopt;
      if (!l) continue;
      const ir::Value& b = op.operands[1 - i];
      std::optional<ir::Value> t = spread_source(b);
      if (!t || !back_is_exact(b, *t, l->dims, l->x)) continue;
      if (std::optional<ir::Value> ct = abs_transpose(*t, *l)) return std::make_pair(*l, *ct);
    }
    return std::nullopt;
  }

 private:
  // %s = the sum over D of %e = exp(%x - BACK(%m)), %m checked by row_max.
  std::optional<Lse> sum_of_exp(const ir::Value& s) const {
    const ir::Op* red = def(s);
    if (red == nullptr || red->kind != OpKind::kReduce || red->operands.size() != 2)
      return std::nullopt;
    std::optional<Lse> l = exp_sum(red->operands[0]);
    if (!l || !(l->s == s)) return std::nullopt;
    return l;
  }

  // %e = exp(%x - BACK(%m)) with %m a row_max of %x, and %s its sum (the first reduce of %e).
  std::optional<Lse> exp_sum(const ir::Value& e) const {
    const ir::Op* exp = single(e, OpKind::kExponential, 1);
    const ir::Op* sub = exp ? single(exp->operands[0], OpKind::kSubtract, 2) : nullptr;
    if (sub == nullptr || !is_f32_tensor(e)) return std::nullopt;
    const ir::Value& x = sub->operands[0];
    if (x.type == nullptr || *x.type != *e.type || x.type->has_dynamic_dims() ||
        x.type->num_elements() <= 0)
      return std::nullopt;
    std::optional<ir::Value> m = spread_source(sub->operands[1]);
    const ir::Op* sel = m ? single(*m, OpKind::kSelect, 3) : nullptr;
    std::optional<std::vector<int64_t>> dims = sel ? max_dims(*sel, x) : std::nullopt;
    if (!dims || !back_is_exact(sub->operands[1], *m, *dims, x)) return std::nullopt;
    const ir::Op* sum = first_reduce(e);
    if (sum == nullptr || reduce_of(sum->results[0], e, OpKind::kAdd, kZeroF32) != dims)
      return std::nullopt;
    return Lse{x, e, sum->results[0], *dims};
  }

  // select(is_finite(%r), %r, 0), %r jnp.max(%x, initial=-inf) over some dims: those dims.
  std::optional<std::vector<int64_t>> max_dims(const ir::Op& sel, const ir::Value& x) const {
    const ir::Op* fin = single(sel.operands[0], OpKind::kIsFinite, 1);
    if (fin == nullptr || !(fin->operands[0] == sel.operands[1]) ||
        !f32_splat(sel.operands[2], kZeroF32))
      return std::nullopt;
    std::optional<ir::Value> r = without_initial_max(sel.operands[1]);
    if (!r) return std::nullopt;
    return reduce_of(*r, x, OpKind::kMaximum, kMinusInfF32);
  }

  // `v` is the %m of `l` (the value BACK(%m) starts from).
  bool row_max(const ir::Value& v, const Lse& l) const {
    const ir::Op* exp = def(l.e);
    const ir::Op* sub = def(exp->operands[0]);
    return spread_source(sub->operands[1]) == v;
  }

  // add(select(%c, %q, 0), negate(select(%c, 0, %q))), %c = compare GE(%s, 0),
  // %q = divide(%ct, abs(%s)): %ct.
  std::optional<ir::Value> abs_transpose(const ir::Value& t, const Lse& l) const {
    const ir::Op* add = single(t, OpKind::kAdd, 2);
    for (int i = 0; add != nullptr && i < 2; ++i) {
      const ir::Op* pos = single(add->operands[i], OpKind::kSelect, 3);
      const ir::Op* neg = single(add->operands[1 - i], OpKind::kNegate, 1);
      const ir::Op* negsel = neg ? single(neg->operands[0], OpKind::kSelect, 3) : nullptr;
      if (pos == nullptr || negsel == nullptr || !(pos->operands[0] == negsel->operands[0]) ||
          !(pos->operands[1] == negsel->operands[2]) || !f32_splat(pos->operands[2], kZeroF32) ||
          !f32_splat(negsel->operands[1], kZeroF32) || !non_negative(pos->operands[0], l.s))
        continue;
      const ir::Op* div = single(pos->operands[1], OpKind::kDivide, 2);
      const ir::Op* abs = div ? single(div->operands[1], OpKind::kAbs, 1) : nullptr;
      if (abs == nullptr || !(abs->operands[0] == l.s)) continue;
      const ir::Value& ct = div->operands[0];
      if (ct.type != nullptr && *ct.type == *l.s.type) return ct;
    }
    return std::nullopt;
  }

  // compare GE (%s, 0) (a float compare) defining `c`.
  bool non_negative(const ir::Value& c, const ir::Value& s) const {
    const ir::Op* cmp = single(c, OpKind::kCompare, 2);
    if (cmp == nullptr ||
        cmp->get_enum("comparison_direction", -1) !=
            static_cast<int>(ir::ComparisonDirection::kGE))
      return false;
    const int type = cmp->get_enum("compare_type", 0);
    return (type == static_cast<int>(ir::ComparisonType::kFloat) ||
            type == static_cast<int>(ir::ComparisonType::kNoType)) &&
           cmp->operands[0] == s && f32_splat(cmp->operands[1], kZeroF32);
  }
};

void plan_region(ir::Region& r, const Matcher& m, std::unordered_map<uint32_t, ir::Op>& plan) {
  for (ir::Block& b : r.blocks)
    for (ir::Op& op : b.ops) {
      for (ir::Region& nested : op.regions) plan_region(nested, m, plan);
      if (std::optional<Lse> l = m.forward(op))
        plan.emplace(op.results[0].id, Matcher::dims_call(kLogSumExpTarget, {l->x}, op.results[0],
                                                          l->dims, op.loc));
      else if (auto g = m.backward(op))
        plan.emplace(op.results[0].id,
                     Matcher::dims_call(kLogSumExpGradTarget, {g->first.x, g->second},
                                        op.results[0], g->first.dims, op.loc));
    }
}

void apply(ir::Region& r, std::unordered_map<uint32_t, ir::Op>& plan) {
  for (ir::Block& b : r.blocks)
    for (ir::Op& op : b.ops) {
      for (ir::Region& nested : op.regions) apply(nested, plan);
      auto it = op.results.size() == 1 ? plan.find(op.results[0].id) : plan.end();
      if (it != plan.end()) op = std::move(it->second);
    }
}

}  // namespace

Status recognize_logsumexp(ir::Module& m) {
  for (ir::Func& f : m.funcs) {
    // Matched first, replaced after: a call keeps its root's result id, and the chains it leaves
    // unread are dropped by passes/dce.h.
    std::unordered_map<uint32_t, ir::Op> plan;
    {
      Matcher matcher(f);
      plan_region(f.body, matcher, plan);
    }
    if (!plan.empty()) apply(f.body, plan);
  }
  return Status();
}

}  // namespace jaxmlx::passes
