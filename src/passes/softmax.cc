// softmax: see softmax.h for the pattern and why.
#include "passes/softmax.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <vector>

#include "passes/passes.h"

namespace jaxmlx::passes {
namespace {

using ir::OpKind;

constexpr uint32_t kMinusInfF32 = 0xFF800000u;

class Matcher {
 public:
  explicit Matcher(const ir::Func& f) : uses_(count_uses(f.body)) {
    ir::walk(f.body, [&](const ir::Op& op) {
      for (const ir::Value& r : op.results) def_[r.id] = &op;
    });
  }

  // The custom call replacing the divide `op`, or nullopt.
  std::optional<ir::Op> match(const ir::Op& op) const {
    if (op.kind != OpKind::kDivide || op.operands.size() != 2 || op.results.size() != 1)
      return std::nullopt;
    const ir::Value &e = op.operands[0], &y = op.results[0];
    if (!is_f32_tensor(y) || uses(e) != 2) return std::nullopt;
    // %e = exp(%x - BACK(%r)); %s = sum(%e); %y = %e / BACK(%s).
    const ir::Op* exp = single(e, OpKind::kExponential, 1);
    if (exp == nullptr || uses(exp->operands[0]) != 1) return std::nullopt;
    const ir::Op* sub = single(exp->operands[0], OpKind::kSubtract, 2);
    if (sub == nullptr) return std::nullopt;
    const ir::Value& x = sub->operands[0];
    if (x.type == nullptr || *x.type != *y.type || x.type->has_dynamic_dims() ||
        x.type->num_elements() <= 0)
      return std::nullopt;
    std::optional<ir::Value> s = back_source(op.operands[1], x);
    if (!s || uses(*s) != 1) return std::nullopt;
    std::optional<std::vector<int64_t>> dims = reduce_of(*s, e, OpKind::kAdd, 0u);
    if (!dims) return std::nullopt;
    std::optional<ir::Value> m = back_source(sub->operands[1], x);
    if (!m) return std::nullopt;
    std::optional<ir::Value> r = skip_initial_max(*m);
    if (!r || reduce_of(*r, x, OpKind::kMaximum, kMinusInfF32) != dims) return std::nullopt;
    // BACK must have taken each reduced element back over exactly the reduced dims.
    if (!back_is_exact(op.operands[1], *s, *dims, x) ||
        !back_is_exact(sub->operands[1], *m, *dims, x))
      return std::nullopt;
    ir::Op call;
    call.kind = OpKind::kCustomCall;
    call.operands = {x};
    call.results = op.results;
    call.loc = op.loc;
    call.set_attr("call_target_name", ir::StringAttr{kSoftmaxTarget});
    call.set_attr("dimensions", ir::I64ArrayAttr{*dims});
    return call;
  }

 private:
  static bool is_f32_tensor(const ir::Value& v) {
    return v.type != nullptr && v.type->is_tensor && v.type->ranked &&
           v.type->dtype == ir::ElementType::kF32;
  }

  int uses(const ir::Value& v) const {
    auto it = uses_.find(v.id);
    return it == uses_.end() ? 0 : it->second;
  }

  const ir::Op* def(const ir::Value& v) const {
    auto it = def_.find(v.id);
    return it == def_.end() ? nullptr : it->second;
  }

  // The op defining `v` when it has `kind`, `operands` operands and one result.
  const ir::Op* single(const ir::Value& v, OpKind kind, size_t operands) const {
    const ir::Op* op = def(v);
    if (op == nullptr || op->kind != kind || op->operands.size() != operands ||
        op->results.size() != 1 || !op->regions.empty())
      return nullptr;
    return op;
  }

  // Whether `v` is a stablehlo.constant holding one f32 (splat) whose bits are `bits`.
  bool f32_splat(const ir::Value& v, uint32_t bits) const {
    const ir::Op* op = single(v, OpKind::kConstant, 0);
    if (op == nullptr) return false;
    const auto* d = op->attr<ir::DenseElementsAttr>("value");
    if (d == nullptr || d->type == nullptr || d->type->dtype != ir::ElementType::kF32 ||
        d->data.size() < 4)
      return false;
    if (!d->splat && d->num_elements() != 1) return false;
    uint32_t got = 0;
    std::memcpy(&got, d->data.data(), 4);
    return got == bits;
  }

  // The dims of a single-op reduce of `x` with body `body` and init bits `init` defining `v`.
  std::optional<std::vector<int64_t>> reduce_of(const ir::Value& v, const ir::Value& x,
                                                OpKind body, uint32_t init) const {
    const ir::Op* op = def(v);
    if (op == nullptr || op->kind != OpKind::kReduce || op->operands.size() != 2 ||
        op->results.size() != 1 || op->regions.size() != 1 || !(op->operands[0] == x) ||
        !f32_splat(op->operands[1], init) || !is_f32_tensor(v))
      return std::nullopt;
    const ir::Region& reg = op->regions[0];
    if (reg.blocks.size() != 1) return std::nullopt;
    const ir::Block& b = reg.entry();
    if (b.args.size() != 2 || b.ops.size() != 2) return std::nullopt;
    const ir::Op &f = b.ops[0], &ret = b.ops[1];
    if (f.kind != body || f.operands.size() != 2 || ret.kind != OpKind::kReturn ||
        ret.operands.size() != 1 || !(ret.operands[0] == f.results[0]))
      return std::nullopt;
    const bool args = (f.operands[0] == b.args[0] && f.operands[1] == b.args[1]) ||
                      (f.operands[0] == b.args[1] && f.operands[1] == b.args[0]);
    if (!args) return std::nullopt;
    std::vector<int64_t> dims = op->get_i64s("dimensions");
    std::sort(dims.begin(), dims.end());
    if (dims.empty() || std::adjacent_find(dims.begin(), dims.end()) != dims.end() ||
        dims.front() < 0 || dims.back() >= x.type->rank())
      return std::nullopt;
    return dims;
  }

  // jnp.max(..., initial=-inf): maximum(broadcast_in_dim(-inf), r), either order, r read once.
  std::optional<ir::Value> skip_initial_max(const ir::Value& v) const {
    const ir::Op* op = single(v, OpKind::kMaximum, 2);
    if (op == nullptr) return v;
    for (int i = 0; i < 2; ++i) {
      const ir::Value &c = op->operands[i], &r = op->operands[1 - i];
      const ir::Op* b = single(c, OpKind::kBroadcastInDim, 1);
      const ir::Value& cst = b != nullptr ? b->operands[0] : c;
      if (f32_splat(cst, kMinusInfF32) && uses(r) == 1) return r;
    }
    return std::nullopt;
  }

  // The value a BACK chain starts from: follows broadcast_in_dim / reshape ops, each read once
  // (the first, `v` itself, only by its consumer in the pattern).
  std::optional<ir::Value> back_source(const ir::Value& v, const ir::Value& x) const {
    if (v.type == nullptr || *v.type != *x.type) return std::nullopt;
    ir::Value cur = v;
    for (int steps = 0; steps < 8; ++steps) {
      if (uses(cur) != 1) return std::nullopt;
      const ir::Op* op = def(cur);
      if (op == nullptr || op->operands.size() != 1 ||
          (op->kind != OpKind::kBroadcastInDim && op->kind != OpKind::kReshape))
        return steps == 0 ? std::nullopt : std::optional<ir::Value>(cur);
      cur = op->operands[0];
    }
    return std::nullopt;
  }

  // Whether the chain from `source` (a reduce's result, or max(-inf, it): the same shape) to `v`
  // puts element (k0, k1, ...) of the reduce (the kept dims of x, in order) at every x position
  // with those kept coordinates. Tracks, for each dim of the current value, which reduce dim it
  // carries (-1: none, or size 1).
  bool back_is_exact(const ir::Value& v, const ir::Value& source,
                     const std::vector<int64_t>& reduced, const ir::Value& x) const {
    std::vector<const ir::Op*> chain;
    for (ir::Value cur = v; !(cur == source);) {
      const ir::Op* op = def(cur);
      if (op == nullptr) return false;
      chain.push_back(op);
      cur = op->operands[0];
    }
    const ir::Value& cur = source;
    const ir::Type& src = *cur.type;
    std::vector<int64_t> carried(src.dims.size());
    for (size_t i = 0; i < carried.size(); ++i) carried[i] = src.dims[i] == 1 ? -1 : int64_t(i);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const ir::Op& op = **it;
      const ir::Type& in = *op.operands[0].type;
      const ir::Type& out = *op.results[0].type;
      if (in.has_dynamic_dims() || out.has_dynamic_dims()) return false;
      std::vector<int64_t> next(out.dims.size(), -1);
      if (op.kind == OpKind::kBroadcastInDim) {
        const std::vector<int64_t> bd = op.get_i64s("broadcast_dimensions");
        if (bd.size() != in.dims.size()) return false;
        for (size_t i = 0; i < bd.size(); ++i) {
          if (bd[i] < 0 || bd[i] >= out.rank()) return false;
          if (in.dims[i] == out.dims[bd[i]]) next[bd[i]] = carried[i];
          else if (in.dims[i] != 1) return false;
        }
      } else {  // reshape: only size-1 dims added or dropped; the others keep their order
        size_t j = 0;
        for (size_t i = 0; i < in.dims.size(); ++i) {
          if (in.dims[i] == 1) continue;
          while (j < out.dims.size() && out.dims[j] == 1) ++j;
          if (j == out.dims.size() || out.dims[j] != in.dims[i]) return false;
          next[j++] = carried[i];
        }
        while (j < out.dims.size() && out.dims[j] == 1) ++j;
        if (j != out.dims.size()) return false;
      }
      for (size_t i = 0; i < next.size(); ++i)
        if (out.dims[i] == 1) next[i] = -1;
      carried = std::move(next);
    }
    // Reduce dim k is x's k-th kept dim.
    std::vector<int64_t> kept;
    for (int64_t d = 0; d < x.type->rank(); ++d)
      if (!std::binary_search(reduced.begin(), reduced.end(), d)) kept.push_back(d);
    if (carried.size() != x.type->dims.size()) return false;
    for (size_t d = 0; d < carried.size(); ++d) {
      if (x.type->dims[d] == 1) continue;
      const bool is_reduced = std::binary_search(reduced.begin(), reduced.end(), int64_t(d));
      if (is_reduced ? carried[d] != -1
                     : carried[d] < 0 || kept[static_cast<size_t>(carried[d])] != int64_t(d))
        return false;
    }
    return true;
  }

  std::unordered_map<uint32_t, const ir::Op*> def_;
  UseCounts uses_;
};

void rewrite_region(ir::Region& r, const Matcher& m) {
  for (ir::Block& b : r.blocks)
    for (ir::Op& op : b.ops) {
      for (ir::Region& nested : op.regions) rewrite_region(nested, m);
      if (std::optional<ir::Op> call = m.match(op)) op = std::move(*call);
    }
}

}  // namespace

Status recognize_softmax(ir::Module& m) {
  for (ir::Func& f : m.funcs) {
    // Matching reads only the replaced divide's operands' definitions; the call reads %x, which
    // the dead chain no longer needs, and defines the same value: the maps stay valid (use counts
    // of the chain go stale, but each chain ends in exactly one divide).
    Matcher matcher(f);
    rewrite_region(f.body, matcher);
  }
  return Status();
}

}  // namespace jaxmlx::passes
