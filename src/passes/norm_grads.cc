// norm_grads: see norm_grads.h for the pattern and why.
#include "passes/norm_grads.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "passes/norm_chain.h"

namespace jaxmlx::passes {
namespace {

using ir::OpKind;
using Ops = NormChain::Ops;

constexpr uint32_t kTwoF32 = 0x40000000u;        // 2.0f
constexpr uint32_t kMinusHalfF32 = 0xBF000000u;  // -0.5f

uint32_t f32_bits(float f) {
  uint32_t b = 0;
  std::memcpy(&b, &f, 4);
  return b;
}

// One norm's input gradient: the call's operands.
struct Grad {
  bool layer = false;
  ir::Value x, dy;
  uint32_t eps_bits = 0;
};

// An add tree's rewrite: its norms' gradients, and the terms that stay.
struct Match {
  std::vector<Grad> grads;
  std::vector<ir::Value> others;
};

class Matcher : public NormChain {
 public:
  using NormChain::NormChain;

  // The rewrite of the add tree rooted at `root`; `ops` gets every op it replaces.
  std::optional<Match> match(const ir::Op& root, Ops& ops) const {
    if (root.kind != OpKind::kAdd || root.operands.size() != 2 || root.results.size() != 1 ||
        !root.regions.empty())
      return std::nullopt;
    const ir::Value& out = root.results[0];
    if (!is_f32_tensor(out) || out.type->has_dynamic_dims() || out.type->rank() < 1 ||
        out.type->num_elements() <= 0)
      return std::nullopt;
    std::vector<ir::Value> terms;
    for (const ir::Value& v : root.operands) flatten(v, /*any_uses=*/false, terms, ops);
    Match m;
    std::vector<bool> claimed(terms.size(), false);
    for (size_t i = 0; i < terms.size(); ++i) {  // layer norms: from their mean terms
      const size_t mark = ops.size();
      std::vector<size_t> used;
      std::optional<Grad> g = claimed[i] ? std::nullopt : layer_grad(terms, i, claimed, used, ops);
      if (!g) {
        ops.resize(mark);
        continue;
      }
      for (size_t k : used) claimed[k] = true;
      m.grads.push_back(*g);
    }
    for (size_t i = 0; i < terms.size(); ++i) {  // RMS norms: P and Q among the terms
      if (claimed[i]) continue;
      const size_t mark = ops.size();
      size_t q = 0;
      std::optional<Grad> g = core(terms, i, claimed, /*layer=*/false, q, ops);
      if (!g) {
        ops.resize(mark);
        continue;
      }
      claimed[i] = claimed[q] = true;
      m.grads.push_back(*g);
    }
    if (m.grads.empty() || !self_contained(root, ops)) return std::nullopt;
    for (size_t i = 0; i < terms.size(); ++i)
      if (!claimed[i]) m.others.push_back(terms[i]);
    return m;
  }

 private:
  // The terms of the add tree at `v` (same-typed adds; below the top, only adds whose result is
  // read once unless `any_uses`), left to right; `ops` gets the adds.
  void flatten(const ir::Value& v, bool any_uses, std::vector<ir::Value>& terms,
               Ops& ops) const {
    std::vector<ir::Value> stack{v};
    while (!stack.empty()) {
      const ir::Value cur = stack.back();
      stack.pop_back();
      const ir::Op* a = single(cur, OpKind::kAdd, 2);
      if (a != nullptr && (any_uses || uses(cur) == 1) && *a->operands[0].type == *cur.type &&
          *a->operands[1].type == *cur.type) {
        add(a, ops);
        stack.push_back(a->operands[1]);
        stack.push_back(a->operands[0]);
      } else {
        terms.push_back(cur);
      }
    }
  }

  // Whether `t` is `ref`'s keepdims type: the last dim 1, the others as they are.
  static bool keepdims_of(const ir::Type& t, const ir::Type& ref) {
    return t.rank() == ref.rank() && t.dtype == ref.dtype && t.dims.back() == 1 &&
           std::equal(ref.dims.begin(), ref.dims.end() - 1, t.dims.begin());
  }

  // BACK'(s) defining `v` (of ref's type): s, of ref's keepdims type; a sum over the size-1 last
  // dim may sit between the keepdims value and the broadcast.
  std::optional<ir::Value> row_source(const ir::Value& v, const ir::Value& ref, Ops& ops) const {
    std::optional<ir::Value> t = back_source(v, ref);
    if (!t || !back_is_exact(v, *t, last_dim(ref), ref)) return std::nullopt;
    if (keepdims_of(*t->type, *ref.type)) {
      add_chain(v, *t, ops);
      return t;
    }
    const ir::Op* red = def(*t);
    if (red == nullptr || red->kind != OpKind::kReduce || red->operands.size() != 2 ||
        uses(*t) != 1)
      return std::nullopt;
    const ir::Value& s = red->operands[0];
    if (s.type == nullptr || !keepdims_of(*s.type, *ref.type) ||
        reduce_of(*t, s, OpKind::kAdd, 0u) != last_dim(ref))
      return std::nullopt;
    add_chain(v, *t, ops);
    add(red, ops);
    return s;
  }

  // KEEP(sum_last(a)) defining `v` (ref's keepdims type): a, of ref's type.
  std::optional<ir::Value> row_sum(const ir::Value& v, const ir::Value& ref, Ops& ops) const {
    if (v.type == nullptr || !keepdims_of(*v.type, *ref.type)) return std::nullopt;
    std::optional<ir::Value> found = reduce_below(v, /*read_once=*/true);
    if (!found) return std::nullopt;
    const ir::Value red = *found;
    const ir::Value& a = def(red)->operands[0];
    if (a.type == nullptr || *a.type != *ref.type ||
        reduce_of(red, a, OpKind::kAdd, 0u) != last_dim(ref) ||
        !back_is_exact(v, red, last_dim(v), v))
      return std::nullopt;
    add_chain(v, red, ops);
    add(def(red), ops);
    return a;
  }

  // divide(a, N) defining `v`, N a splat of ref's last dim size: a.
  std::optional<ir::Value> over_n(const ir::Value& v, const ir::Value& ref, Ops& ops) const {
    const ir::Op* div = single(v, OpKind::kDivide, 2);
    if (div == nullptr ||
        f32_splat_bits(div->operands[1]) != f32_bits(static_cast<float>(ref.type->dims.back())))
      return std::nullopt;
    add(div, ops);
    return div->operands[0];
  }

  // The operand of the two-operand `op` that is a splat of `bits`, the other one returned.
  std::optional<ir::Value> times_splat(const ir::Op* op, uint32_t bits) const {
    if (op == nullptr) return std::nullopt;
    for (int i = 0; i < 2; ++i)
      if (f32_splat(op->operands[i], bits)) return op->operands[1 - i];
    return std::nullopt;
  }

  // A layer norm's gradient whose mean term is terms[i] (M); `used` gets the terms it takes.
  std::optional<Grad> layer_grad(const std::vector<ir::Value>& terms, size_t i,
                                 const std::vector<bool>& claimed, std::vector<size_t>& used,
                                 Ops& ops) const {
    const ir::Value& ref = terms[i];
    std::optional<ir::Value> s = row_source(ref, ref, ops);
    std::optional<ir::Value> sum = s ? over_n(*s, ref, ops) : std::nullopt;
    if (!sum) return std::nullopt;
    std::vector<ir::Value> sums, cts;
    flatten(*sum, /*any_uses=*/false, sums, ops);
    for (const ir::Value& v : sums) {
      std::optional<ir::Value> a = row_sum(v, ref, ops);
      const ir::Op* neg = a ? single(*a, OpKind::kNegate, 1) : nullptr;
      if (neg == nullptr) return std::nullopt;
      add(neg, ops);
      cts.push_back(neg->operands[0]);
    }
    // Each negated cotangent is a term of the tree too (jax adds it to x's, and negates it).
    used = {i};
    for (const ir::Value& ct : cts) {
      size_t k = 0;
      while (k < terms.size() && (claimed[k] || !(terms[k] == ct) ||
                                  std::find(used.begin(), used.end(), k) != used.end()))
        ++k;
      if (k == terms.size()) return std::nullopt;
      used.push_back(k);
    }
    std::vector<ir::Value> parts;
    for (const ir::Value& ct : cts) flatten(ct, /*any_uses=*/true, parts, ops);
    if (parts.size() != 2) return std::nullopt;
    const std::vector<bool> none(2, false);
    for (size_t p = 0; p < 2; ++p) {
      const size_t mark = ops.size();
      size_t q = 0;
      if (std::optional<Grad> g = core(parts, p, none, /*layer=*/true, q, ops)) return g;
      ops.resize(mark);
    }
    return std::nullopt;
  }

  // P = multiply(%dy, BACK(%r)) at vals[p], and its Q among the other unclaimed vals (index to
  // `q`): the norm's gradient.
  std::optional<Grad> core(const std::vector<ir::Value>& vals, size_t p,
                           const std::vector<bool>& claimed, bool layer, size_t& q,
                           Ops& ops) const {
    const ir::Value& ref = vals[p];
    const ir::Op* mul = single(ref, OpKind::kMultiply, 2);
    if (mul == nullptr || !is_f32_tensor(ref)) return std::nullopt;
    for (int side = 0; side < 2; ++side) {
      const size_t mark = ops.size();
      Ops fwd;  // the forward ops stay: not replaced
      std::optional<ir::Value> r = back(mul->operands[side], ref, ops);
      const ir::Value& dy = mul->operands[1 - side];
      std::optional<Reciprocal> rec = r ? rsqrt_of(*r, ref, fwd) : std::nullopt;
      const ir::Op* sq = rec ? single(rec->squares, OpKind::kMultiply, 2) : nullptr;
      if (sq == nullptr || !(sq->operands[0] == sq->operands[1])) {
        ops.resize(mark);
        continue;
      }
      const ir::Value& c = sq->operands[0];
      std::optional<ir::Value> x = layer ? centred(c, fwd) : std::optional<ir::Value>(c);
      std::optional<ir::Value> mean = layer ? mean_subtracted(c) : std::nullopt;
      if (!x || *x->type != *ref.type) {
        ops.resize(mark);
        continue;
      }
      // %c itself, or (a layer norm) another subtract of x and BACK(the same mean).
      auto is_c = [&](const ir::Value& v) {
        if (v == c) return true;
        Ops scratch;
        return layer && centred(v, scratch) == x && mean_subtracted(v) == mean;
      };
      add(mul, ops);
      const ir::Value& e = def(*r)->operands[0];
      for (size_t k = 0; k < vals.size(); ++k) {
        if (k == p || claimed[k]) continue;
        const size_t before = ops.size();
        if (square_term(vals[k], ref, *r, e, dy, is_c, ops)) {
          q = k;
          return Grad{layer, *x, dy, rec->eps_bits};
        }
        ops.resize(before);
      }
      ops.resize(mark);
    }
    return std::nullopt;
  }

  // Q = multiply(BACK'(divide(%ce, N)), multiply(2, %c)), %ce = multiply(K, multiply(-0.5,
  // divide(%r, %e))), K = KEEP(sum_last(multiply(%c, %dy))), each multiply in either order.
  template <typename IsC>
  bool square_term(const ir::Value& v, const ir::Value& ref, const ir::Value& r,
                   const ir::Value& e, const ir::Value& dy, const IsC& is_c, Ops& ops) const {
    const ir::Op* mul = single(v, OpKind::kMultiply, 2);
    if (mul == nullptr) return false;
    for (int side = 0; side < 2; ++side) {
      const size_t mark = ops.size();
      const ir::Op* twice = single(mul->operands[1 - side], OpKind::kMultiply, 2);
      std::optional<ir::Value> c2 = times_splat(twice, kTwoF32);
      std::optional<ir::Value> s = c2 && is_c(*c2) ? row_source(mul->operands[side], ref, ops)
                                                   : std::nullopt;
      std::optional<ir::Value> ce = s ? over_n(*s, ref, ops) : std::nullopt;
      const ir::Op* prod = ce ? single(*ce, OpKind::kMultiply, 2) : nullptr;
      for (int k = 0; prod != nullptr && k < 2; ++k) {
        const size_t inner = ops.size();
        const ir::Op* dm = single(prod->operands[1 - k], OpKind::kMultiply, 2);
        std::optional<ir::Value> ratio = times_splat(dm, kMinusHalfF32);
        const ir::Op* div = ratio ? single(*ratio, OpKind::kDivide, 2) : nullptr;
        std::optional<ir::Value> a = div != nullptr && div->operands[0] == r &&
                                             div->operands[1] == e
                                         ? row_sum(prod->operands[k], ref, ops)
                                         : std::nullopt;
        const ir::Op* km = a ? single(*a, OpKind::kMultiply, 2) : nullptr;
        if (km != nullptr && ((km->operands[0] == dy && is_c(km->operands[1])) ||
                              (km->operands[1] == dy && is_c(km->operands[0])))) {
          for (const ir::Op* o : {mul, twice, prod, dm, div, km}) add(o, ops);
          return true;
        }
        ops.resize(inner);
      }
      ops.resize(mark);
    }
    return false;
  }
};

ir::Op make_call(const Grad& g, const ir::Value& result, const ir::Location* loc) {
  ir::Op call;
  call.kind = OpKind::kCustomCall;
  call.operands = {g.x, g.dy};
  call.results = {result};
  call.loc = loc;
  call.set_attr("call_target_name",
                ir::StringAttr{g.layer ? kLayerNormGradTarget : kRmsNormGradTarget});
  float eps = 0;
  std::memcpy(&eps, &g.eps_bits, 4);
  call.set_attr("epsilon", ir::FloatAttr{g.eps_bits, ir::ElementType::kF32, eps});
  return call;
}

using Matches = std::unordered_map<uint32_t, Match>;  // by the root's result id

// Walks each block backwards, so that an add tree's root is matched before the adds inside it.
void find(const ir::Region& r, const Matcher& m, std::unordered_set<const ir::Op*>& used,
          Matches& out) {
  for (const ir::Block& b : r.blocks)
    for (size_t i = b.ops.size(); i-- > 0;) {
      const ir::Op& op = b.ops[i];
      for (const ir::Region& nested : op.regions) find(nested, m, used, out);
      if (used.count(&op)) continue;
      Ops ops;
      std::optional<Match> match = m.match(op, ops);
      if (!match) continue;
      used.insert(ops.begin(), ops.end());
      out.emplace(op.results[0].id, std::move(*match));
    }
}

// The root's place gets the calls, then the adds of the other terms and the calls' results (the
// last one defining the root's value).
void rewrite(ir::Region& r, ir::Func& f, const Matches& matches) {
  for (ir::Block& b : r.blocks) {
    std::vector<ir::Op> ops;
    ops.reserve(b.ops.size());
    for (ir::Op& op : b.ops) {
      for (ir::Region& nested : op.regions) rewrite(nested, f, matches);
      auto it = op.results.size() == 1 ? matches.find(op.results[0].id) : matches.end();
      if (it == matches.end()) {
        ops.push_back(std::move(op));
        continue;
      }
      const Match& m = it->second;
      const ir::Value root = op.results[0];
      std::vector<ir::Value> vals = m.others;
      for (const Grad& g : m.grads) {
        const bool last = vals.empty() && m.grads.size() == 1;
        ops.push_back(make_call(g, last ? root : ir::Value{f.num_values++, root.type}, op.loc));
        vals.push_back(ops.back().results[0]);
      }
      for (size_t k = 1; k < vals.size(); ++k) {
        ir::Op add;
        add.kind = OpKind::kAdd;
        add.operands = {k == 1 ? vals[0] : ops.back().results[0], vals[k]};
        add.results = {k + 1 == vals.size() ? root : ir::Value{f.num_values++, root.type}};
        add.loc = op.loc;
        ops.push_back(std::move(add));
      }
    }
    b.ops = std::move(ops);
  }
}

}  // namespace

Status recognize_norm_grads(ir::Module& m) {
  for (ir::Func& f : m.funcs) {
    Matches matches;
    {
      Matcher matcher(f);
      std::unordered_set<const ir::Op*> used;
      find(f.body, matcher, used, matches);
    }
    if (!matches.empty()) rewrite(f.body, f, matches);
  }
  return Status();
}

}  // namespace jaxmlx::passes
