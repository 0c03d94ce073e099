// NormChain: see norm_chain.h.
#include "passes/norm_chain.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace jaxmlx::passes {

using ir::OpKind;

void NormChain::add(const ir::Op* op, Ops& ops) {
  if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
}

void NormChain::add_chain(const ir::Value& v, const ir::Value& source, Ops& ops) const {
  for (ir::Value cur = v; !(cur == source);) {
    const ir::Op* op = def(cur);
    add(op, ops);
    cur = op->operands[0];
  }
}

bool NormChain::self_contained(const ir::Op& root, const Ops& ops) const {
  std::unordered_map<uint32_t, int> reads;
  for (const ir::Value& v : root.operands) ++reads[v.id];
  for (const ir::Op* o : ops)
    for (const ir::Value& v : o->operands) ++reads[v.id];
  for (const ir::Op* o : ops)
    for (const ir::Value& r : o->results)
      if (uses(r) != reads[r.id]) return false;
  return true;
}

std::optional<ir::Value> NormChain::back(const ir::Value& v, const ir::Value& x, Ops& ops) const {
  std::optional<ir::Value> s = back_source(v, x);
  if (!s || !back_is_exact(v, *s, last_dim(x), x)) return std::nullopt;
  add_chain(v, *s, ops);
  return s;
}

std::optional<ir::Value> NormChain::param(const ir::Value& v, const ir::Value& x,
                                          Ops& ops) const {
  std::optional<ir::Value> p = back_source(v, x);
  if (!p || p->type == nullptr || !p->type->is_tensor || !p->type->ranked ||
      p->type->dtype != x.type->dtype || p->type->rank() != 1 ||
      p->type->dims[0] != x.type->dims.back())
    return std::nullopt;
  std::vector<int64_t> others(static_cast<size_t>(x.type->rank() - 1));
  for (size_t i = 0; i < others.size(); ++i) others[i] = static_cast<int64_t>(i);
  if (!back_is_exact(v, *p, others, x)) return std::nullopt;
  add_chain(v, *p, ops);
  return p;
}

std::optional<ir::Value> NormChain::mean_of(const ir::Value& m, const ir::Value& x,
                                            Ops& ops) const {
  const ir::Op* div = single(m, OpKind::kDivide, 2);
  if (div == nullptr || !is_f32_tensor(m)) return std::nullopt;
  const ir::Type& xt = *x.type;
  const ir::Type& mt = *m.type;
  if (mt.rank() != xt.rank() || mt.dims.back() != 1 ||
      !std::equal(xt.dims.begin(), xt.dims.end() - 1, mt.dims.begin()))
    return std::nullopt;
  const float n = static_cast<float>(xt.dims.back());
  uint32_t n_bits = 0;
  std::memcpy(&n_bits, &n, 4);
  if (f32_splat_bits(div->operands[1]) != n_bits) return std::nullopt;
  // K: from the reduce's result to the keepdims shape.
  std::optional<ir::Value> found = reduce_below(div->operands[0], /*read_once=*/false);
  if (!found) return std::nullopt;
  const ir::Value red = *found;
  const ir::Value& a = def(red)->operands[0];
  if (a.type == nullptr || *a.type != xt) return std::nullopt;
  if (reduce_of(red, a, OpKind::kAdd, 0u) != last_dim(x)) return std::nullopt;
  // The keepdims chain must keep the reduce's elements in order: check it against a value of
  // m's type (x with the last dim 1).
  if (!back_is_exact(div->operands[0], red, last_dim(m), m)) return std::nullopt;
  add(div, ops);
  add_chain(div->operands[0], red, ops);
  add(def(red), ops);
  return a;
}

std::optional<ir::Value> NormChain::reduce_below(const ir::Value& v, bool read_once) const {
  ir::Value red = v;
  for (int steps = 0;; ++steps) {
    const ir::Op* k = def(red);
    if (k == nullptr || steps > 4 || (read_once && steps > 0 && uses(red) != 1))
      return std::nullopt;
    if (k->kind == OpKind::kReduce && k->operands.size() == 2) return red;
    if ((k->kind != OpKind::kBroadcastInDim && k->kind != OpKind::kReshape) ||
        k->operands.size() != 1 || k->results.size() != 1)
      return std::nullopt;
    red = k->operands[0];
  }
}

std::optional<NormChain::Reciprocal> NormChain::rsqrt_of(const ir::Value& r, const ir::Value& x,
                                                         Ops& ops) const {
  const ir::Op* rs = single(r, OpKind::kRsqrt, 1);
  const ir::Op* sum = rs ? single(rs->operands[0], OpKind::kAdd, 2) : nullptr;
  if (sum == nullptr) return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    std::optional<uint32_t> eps = f32_splat_bits(sum->operands[1 - i]);
    if (!eps) continue;
    std::optional<ir::Value> sq = mean_of(sum->operands[i], x, ops);
    if (!sq) return std::nullopt;
    add(rs, ops);
    add(sum, ops);
    return Reciprocal{*sq, *eps, std::nullopt};
  }
  return std::nullopt;
}

std::optional<ir::Value> NormChain::centred(const ir::Value& c, Ops& ops) const {
  const ir::Op* sub = single(c, OpKind::kSubtract, 2);
  if (sub == nullptr) return std::nullopt;
  const ir::Value& x = sub->operands[0];
  if (x.type == nullptr || !is_f32_tensor(c) || *x.type != *c.type) return std::nullopt;
  std::optional<ir::Value> m = back(sub->operands[1], x, ops);
  if (!m || mean_of(*m, x, ops) != x) return std::nullopt;
  add(sub, ops);
  return x;
}

std::optional<ir::Value> NormChain::mean_subtracted(const ir::Value& c) const {
  const ir::Op* sub = def(c);
  if (sub == nullptr || sub->operands.size() != 2) return std::nullopt;
  return back_source(sub->operands[1], sub->operands[0]);
}

}  // namespace jaxmlx::passes
