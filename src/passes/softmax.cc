// softmax: see softmax.h for the patterns and why.
#include "passes/softmax.h"

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "passes/chain_match.h"

namespace jaxmlx::passes {
namespace {

using ir::OpKind;

constexpr uint32_t kOneF32 = 0x3F800000u;

// A softmax's forward parts: its input, the sum of its exp, the reduced dims.
struct Softmax {
  ir::Value x, sum;
  std::vector<int64_t> dims;
};

class Matcher : public ChainMatcher {
 public:
  using ChainMatcher::ChainMatcher;

  // The custom call replacing the divide `op` (its exp and sum read by the chain only).
  std::optional<ir::Op> match(const ir::Op& op) const {
    if (op.kind != OpKind::kDivide || op.operands.size() != 2 || op.results.size() != 1 ||
        uses(op.operands[0]) != 2)
      return std::nullopt;
    std::optional<Softmax> p = forward(op);
    if (!p || uses(p->sum) != 1) return std::nullopt;
    return dims_call(kSoftmaxTarget, {p->x}, op.results[0], p->dims, op.loc);
  }

  // The softmax that the divide `op` computes (%y = %e / BACK(%s)), whoever else reads %e, %s.
  std::optional<Softmax> forward(const ir::Op& op) const {
    if (op.kind != OpKind::kDivide || op.operands.size() != 2 || op.results.size() != 1 ||
        !is_f32_tensor(op.results[0]))
      return std::nullopt;
    std::optional<Softmax> p = exp_parts(op.operands[0]);
    if (!p || !back_of_sum(op.operands[1], *p)) return std::nullopt;
    return p;
  }

  // jax 0.10's softmax backward pass (the divide differentiated) rooted at `op`:
  //   dx = multiply(add(divide(%dy, BACK(%s)), BACK'(negate(KEEP(sum(W))))), %e)
  // (see softmax.h): the softmax, its exp %e and %dy.
  struct Backward {
    Softmax p;
    ir::Value e, dy;
  };
  std::optional<Backward> backward(const ir::Op& op) const {
    if (op.kind != OpKind::kMultiply || op.operands.size() != 2 || op.results.size() != 1 ||
        !is_f32_tensor(op.results[0]))
      return std::nullopt;
    for (int side = 0; side < 2; ++side) {
      const ir::Value& e = op.operands[side];
      std::optional<Softmax> p = exp_parts(e);
      const ir::Op* add = p ? single(op.operands[1 - side], OpKind::kAdd, 2) : nullptr;
      for (int k = 0; add != nullptr && k < 2; ++k) {
        const ir::Op* div = single(add->operands[k], OpKind::kDivide, 2);
        if (div == nullptr || !back_of_sum(div->operands[1], *p)) continue;
        const ir::Value& dy = div->operands[0];
        if (dy.type != nullptr && *dy.type == *e.type &&
            correction(add->operands[1 - k], *p, e, dy))
          return Backward{*p, e, dy};
      }
    }
    return std::nullopt;
  }


 private:
  // %e = exp(%x - BACK(%r)), %r jnp.max(%x) over some dims; %s the sum of %e over them.
  std::optional<Softmax> exp_parts(const ir::Value& e) const {
    const ir::Op* exp = single(e, OpKind::kExponential, 1);
    const ir::Op* sub = exp ? single(exp->operands[0], OpKind::kSubtract, 2) : nullptr;
    if (sub == nullptr || !is_f32_tensor(e) || uses(exp->operands[0]) != 1) return std::nullopt;
    const ir::Value& x = sub->operands[0];
    if (x.type == nullptr || *x.type != *e.type || x.type->has_dynamic_dims() ||
        x.type->num_elements() <= 0)
      return std::nullopt;
    std::optional<ir::Value> m = back_source(sub->operands[1], x);
    if (!m || uses(*m) != 1) return std::nullopt;
    std::optional<ir::Value> r = skip_initial_max(*m);
    std::optional<std::vector<int64_t>> dims =
        r ? reduce_of(*r, x, OpKind::kMaximum, kMinusInfF32) : std::nullopt;
    if (!dims || !back_is_exact(sub->operands[1], *m, *dims, x)) return std::nullopt;
    const ir::Op* sum = first_reduce(e);
    if (sum == nullptr || reduce_of(sum->results[0], e, OpKind::kAdd, 0u) != dims)
      return std::nullopt;
    return Softmax{x, sum->results[0], *dims};
  }

  // The number of rows of the softmax (elements of its sum).
  static int64_t rows(const Softmax& p) { return p.sum.type->num_elements(); }

  // Whether `op` keeps the linear order of `rows` values (one per row): a reshape, a broadcast
  // or a sum over size-1 dims that keeps the element count (broadcast dims in order).
  bool keeps_rows(const ir::Op& op, int64_t n) const {
    if (op.results.size() != 1 || op.operands.empty() || op.operands[0].type == nullptr ||
        op.results[0].type == nullptr || op.results[0].type->has_dynamic_dims() ||
        op.results[0].type->num_elements() != n || op.operands[0].type->num_elements() != n)
      return false;
    if (op.kind == OpKind::kReshape) return op.operands.size() == 1;
    if (op.kind == OpKind::kBroadcastInDim) {
      const std::vector<int64_t> bd = op.get_i64s("broadcast_dimensions");
      for (size_t i = 1; i < bd.size(); ++i)
        if (bd[i] <= bd[i - 1]) return false;
      return op.operands.size() == 1;
    }
    return op.kind == OpKind::kReduce && op.operands.size() == 2 &&
           reduce_of(op.results[0], op.operands[0], OpKind::kAdd, 0u).has_value();
  }

  // The value `v` comes from through ops that keep the rows' order.
  ir::Value row_source(const ir::Value& v, int64_t n) const {
    ir::Value cur = v;
    for (int steps = 0; steps < 8; ++steps) {
      const ir::Op* op = def(cur);
      if (op == nullptr || !keeps_rows(*op, n)) break;
      cur = op->operands[0];
    }
    return cur;
  }

  // BACK(%s): `v` (of x's type) takes the rows of p's sum (through shared broadcasts and
  // reshapes too) to the reduced dims.
  bool back_of_sum(const ir::Value& v, const Softmax& p) const {
    if (v.type == nullptr || *v.type != *p.x.type) return false;
    std::optional<ir::Value> t = spread_source(v);
    return t && row_source(*t, rows(p)) == p.sum && back_is_exact(v, *t, p.dims, p.x);
  }

  // BACK'(negate(KEEP(sum(W)))) defining `v`, W = %dy * %e * BACK(1 / (S * S)) in any order and
  // nesting, S reaching %s through row-order-keeping ops.
  bool correction(const ir::Value& v, const Softmax& p, const ir::Value& e,
                  const ir::Value& dy) const {
    std::optional<ir::Value> t = spread_source(v);
    if (!t || !back_is_exact(v, *t, p.dims, p.x)) return false;
    const ir::Op* neg = single(row_source(*t, rows(p)), OpKind::kNegate, 1);
    const ir::Value red = neg ? row_source(neg->operands[0], rows(p)) : *t;
    const ir::Op* sum = neg ? def(red) : nullptr;
    if (sum == nullptr || sum->kind != OpKind::kReduce || sum->operands.size() != 2) return false;
    const ir::Value& w = sum->operands[0];
    if (reduce_of(red, w, OpKind::kAdd, 0u) != p.dims) return false;
    // W's three factors.
    std::vector<ir::Value> factors;
    std::vector<ir::Value> stack{w};
    while (!stack.empty() && factors.size() <= 3) {
      const ir::Value cur = stack.back();
      stack.pop_back();
      const ir::Op* mul = single(cur, OpKind::kMultiply, 2);
      if (mul != nullptr && (cur == w || uses(cur) == 1) && !(cur == e) && !(cur == dy)) {
        stack.push_back(mul->operands[1]);
        stack.push_back(mul->operands[0]);
      } else {
        factors.push_back(cur);
      }
    }
    if (factors.size() != 3) return false;
    int seen_e = 0, seen_dy = 0, seen_scale = 0;
    for (const ir::Value& f : factors) {
      if (f == e) ++seen_e;
      else if (f == dy) ++seen_dy;
      else if (inverse_square(f, p)) ++seen_scale;
    }
    return seen_e == 1 && seen_dy == 1 && seen_scale == 1;
  }

  // BACK(divide(1, multiply(S, S))), S reaching %s through row-order-keeping ops.
  bool inverse_square(const ir::Value& v, const Softmax& p) const {
    std::optional<ir::Value> q = spread_source(v);
    if (!q || !back_is_exact(v, *q, p.dims, p.x)) return false;
    const ir::Op* div = single(*q, OpKind::kDivide, 2);
    const ir::Op* sq = div && f32_splat(div->operands[0], kOneF32)
                           ? single(div->operands[1], OpKind::kMultiply, 2)
                           : nullptr;
    return sq != nullptr && sq->operands[0] == sq->operands[1] &&
           row_source(sq->operands[0], rows(p)) == p.sum;
  }

  // jnp.max(..., initial=-inf): maximum(broadcast_in_dim(-inf), r), either order, r read once.
  std::optional<ir::Value> skip_initial_max(const ir::Value& v) const {
    std::optional<ir::Value> r = without_initial_max(v);
    if (r && !(*r == v) && uses(*r) != 1) return std::nullopt;
    return r;
  }
};

// What a func's rewrite does, by result id: ops replaced by a call (keeping the id), and
// gradient calls that need the softmax computed first (no forward divide to take it from).
struct Plan {
  std::unordered_map<uint32_t, ir::Op> replace;
  std::unordered_map<uint32_t, ir::Op> before;  // by the gradient's id: a new softmax call
};

void plan_region(const ir::Region& r, ir::Func& f, const Matcher& m, Plan& plan) {
  for (const ir::Block& b : r.blocks) {
    // The forward divides of this block so far, by their exp's id: the softmax a gradient reads.
    std::unordered_map<uint32_t, const ir::Op*> divides;
    for (const ir::Op& op : b.ops) {
      for (const ir::Region& nested : op.regions) plan_region(nested, f, m, plan);
      if (std::optional<ir::Op> c = m.match(op)) {
        plan.replace.emplace(op.results[0].id, std::move(*c));
        continue;
      }
      if (m.forward(op)) {
        divides.emplace(op.operands[0].id, &op);
        continue;
      }
      std::optional<Matcher::Backward> g = m.backward(op);
      if (!g) continue;
      ir::Value y;
      auto it = divides.find(g->e.id);
      if (it != divides.end()) {
        y = it->second->results[0];
        plan.replace.emplace(y.id, Matcher::dims_call(kSoftmaxTarget, {g->p.x}, y, g->p.dims,
                                                 it->second->loc));
      } else {
        y = ir::Value{f.num_values++, g->p.x.type};
        plan.before.emplace(op.results[0].id,
                            Matcher::dims_call(kSoftmaxTarget, {g->p.x}, y, g->p.dims, op.loc));
      }
      plan.replace.emplace(op.results[0].id, Matcher::dims_call(kSoftmaxGradTarget, {y, g->dy},
                                                           op.results[0], g->p.dims, op.loc));
    }
  }
}

void rewrite_region(ir::Region& r, const Plan& plan) {
  for (ir::Block& b : r.blocks) {
    std::vector<ir::Op> ops;
    ops.reserve(b.ops.size());
    for (ir::Op& op : b.ops) {
      for (ir::Region& nested : op.regions) rewrite_region(nested, plan);
      const uint32_t id = op.results.size() == 1 ? op.results[0].id : UINT32_MAX;
      if (auto it = plan.before.find(id); it != plan.before.end()) ops.push_back(it->second);
      auto it = plan.replace.find(id);
      ops.push_back(it == plan.replace.end() ? std::move(op) : it->second);
    }
    b.ops = std::move(ops);
  }
}

}  // namespace

Status recognize_softmax(ir::Module& m) {
  for (ir::Func& f : m.funcs) {
    // Matching reads the definitions of the ops it replaces; the calls keep the replaced ops'
    // result ids (the chain they leave unread is dropped by passes/dce.h), so planning the whole
    // func first and rewriting after keeps every map valid.
    Plan plan;
    {
      Matcher matcher(f);
      plan_region(f.body, f, matcher, plan);
    }
    if (!plan.replace.empty()) rewrite_region(f.body, plan);
  }
  return Status();
}

}  // namespace jaxmlx::passes
