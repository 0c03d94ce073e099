// norms: see norms.h for the patterns and why.
#include "passes/norms.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "passes/norm_chain.h"

namespace jaxmlx::passes {
namespace {

using ir::OpKind;
using Ops = NormChain::Ops;

struct Norm {
  bool layer = false;  // layer norm, else RMS norm
  ir::Value x;
  std::optional<ir::Value> scale, bias;
  uint32_t eps_bits = 0;
};

class Matcher : public NormChain {
 public:
  using NormChain::NormChain;

  // The norm whose last op is `op`; `ops` gets the other ops the call replaces.
  std::optional<Norm> match(const ir::Op& op, Ops& ops) const {
    if (op.results.size() != 1 || !op.regions.empty()) return std::nullopt;
    const ir::Value& y = op.results[0];
    if (y.type == nullptr || !y.type->is_tensor || !y.type->ranked ||
        y.type->has_dynamic_dims() || y.type->rank() < 1 || y.type->num_elements() <= 0)
      return std::nullopt;
    std::optional<Norm> n;
    if (y.type->dtype == ir::ElementType::kBF16 || y.type->dtype == ir::ElementType::kF16) {
      n = low_precision_rms(op, ops);
    } else if (!is_f32_tensor(y)) {
      return std::nullopt;
    } else if (op.operands.size() != 2) {
      return std::nullopt;
    } else if (op.kind == OpKind::kAdd) {  // the bias
      for (int i = 0; i < 2 && !n; ++i) {
        const size_t mark = ops.size();
        std::optional<ir::Value> bias = param(op.operands[1 - i], y, ops);
        const ir::Op* inner = bias ? def(op.operands[i]) : nullptr;
        if (inner != nullptr && inner->kind == OpKind::kMultiply) {
          add(inner, ops);
          n = scaled(*inner, ops);
        }
        if (n && n->layer) n->bias = bias;
        else n.reset(), ops.resize(mark);
      }
    } else if (op.kind == OpKind::kMultiply) {
      n = scaled(op, ops);
    }
    if (n && !self_contained(op, ops)) return std::nullopt;
    return n;
  }

 private:
  // `w` is BACK(rsqrt(add(MEAN(%sq), eps))), or that times PARAM(%scale) (either order).
  std::optional<Reciprocal> reciprocal(const ir::Value& w, const ir::Value& x, Ops& ops) const {
    const size_t mark = ops.size();
    std::optional<Reciprocal> rec;
    if (std::optional<ir::Value> r = back(w, x, ops)) rec = rsqrt_of(*r, x, ops);
    if (rec) return rec;
    ops.resize(mark);
    const ir::Op* mul = single(w, OpKind::kMultiply, 2);
    if (mul == nullptr) return std::nullopt;
    for (int i = 0; i < 2; ++i) {
      std::optional<ir::Value> scale = param(mul->operands[1 - i], x, ops);
      std::optional<ir::Value> r = scale ? back(mul->operands[i], x, ops) : std::nullopt;
      if (r) rec = rsqrt_of(*r, x, ops);
      if (rec) {
        add(mul, ops);
        rec->scale = scale;
        return rec;
      }
      ops.resize(mark);
    }
    return std::nullopt;
  }

  // A bf16/f16 RMS norm computed in f32 (Llama's): multiply(convert(%z), PARAM(%scale)) or
  // convert(%z), %z an unscaled f32 RMS norm of convert(%x), %x and %scale of the result's type.
  // MLX's kernel computes the same: the f32 product rounded to the type, times the scale.
  std::optional<Norm> low_precision_rms(const ir::Op& op, Ops& ops) const {
    const ir::Value& y = op.results[0];
    std::optional<ir::Value> scale;
    const ir::Op* down = nullptr;
    if (op.kind == OpKind::kConvert && op.operands.size() == 1) {
      down = &op;
    } else if (op.kind == OpKind::kMultiply && op.operands.size() == 2) {
      for (int i = 0; i < 2 && down == nullptr; ++i) {
        const size_t mark = ops.size();
        scale = param(op.operands[1 - i], y, ops);
        down = scale ? single(op.operands[i], OpKind::kConvert, 1) : nullptr;
        if (down != nullptr) add(down, ops);
        else scale.reset(), ops.resize(mark);
      }
    }
    const ir::Op* z = down ? single(down->operands[0], OpKind::kMultiply, 2) : nullptr;
    if (z == nullptr || !is_f32_tensor(z->results[0])) return std::nullopt;
    add(z, ops);
    std::optional<Norm> n = core(*z, ops);
    if (!n || n->layer || n->scale) return std::nullopt;
    const ir::Op* up = single(n->x, OpKind::kConvert, 1);
    if (up == nullptr || up->operands[0].type == nullptr || *up->operands[0].type != *y.type)
      return std::nullopt;
    add(up, ops);
    n->x = up->operands[0];
    n->scale = scale;
    return n;
  }

  // multiply(%y, PARAM(%scale)) of a norm without a scale, or the norm itself.
  std::optional<Norm> scaled(const ir::Op& mul, Ops& ops) const {
    const ir::Value& y = mul.results[0];
    for (int i = 0; i < 2; ++i) {
      const size_t mark = ops.size();
      std::optional<ir::Value> scale = param(mul.operands[1 - i], y, ops);
      const ir::Op* inner = scale ? single(mul.operands[i], OpKind::kMultiply, 2) : nullptr;
      std::optional<Norm> n;
      if (inner != nullptr) {
        add(inner, ops);
        n = core(*inner, ops);
      }
      if (n && !n->scale) {
        n->scale = scale;
        return n;
      }
      ops.resize(mark);
    }
    return core(mul, ops);
  }

  // multiply(%c, W) (layer norm) or multiply(%x, W) (RMS norm), W a Reciprocal.
  std::optional<Norm> core(const ir::Op& mul, Ops& ops) const {
    const ir::Value& y = mul.results[0];
    for (int i = 0; i < 2; ++i) {
      const size_t mark = ops.size();
      const ir::Value& c = mul.operands[i];
      if (c.type == nullptr || *c.type != *y.type) continue;
      std::optional<Reciprocal> rec = reciprocal(mul.operands[1 - i], y, ops);
      if (!rec) continue;
      const ir::Op* sq = single(rec->squares, OpKind::kMultiply, 2);
      if (sq != nullptr && sq->operands[0] == sq->operands[1]) {
        add(sq, ops);
        Norm n;
        n.eps_bits = rec->eps_bits;
        n.scale = rec->scale;
        const ir::Value& s = sq->operands[0];
        // Layer norm: both centred values are x - BACK(the same mean).
        const size_t squared = ops.size();
        std::optional<ir::Value> x1 = centred(c, ops);
        std::optional<ir::Value> x2 = x1 ? centred(s, ops) : std::nullopt;
        if (x1 && x2 && *x1 == *x2 && same_mean(c, s)) {
          n.layer = true;
          n.x = *x1;
          return n;
        }
        ops.resize(squared);
        if (s == c) {  // RMS norm: x * BACK(rsqrt(mean(x * x) + eps))
          n.x = c;
          return n;
        }
      }
      ops.resize(mark);
    }
    return std::nullopt;
  }

  // Whether the subtracts defining `a` and `b` (centred) subtract BACK chains of one mean.
  bool same_mean(const ir::Value& a, const ir::Value& b) const {
    std::optional<ir::Value> ma = mean_subtracted(a), mb = mean_subtracted(b);
    return ma && mb && *ma == *mb;
  }
};

ir::Op make_call(const ir::Op& root, const Norm& n) {
  ir::Op call;
  call.kind = OpKind::kCustomCall;
  call.operands = {n.x};
  if (n.scale) call.operands.push_back(*n.scale);
  if (n.bias) call.operands.push_back(*n.bias);
  call.results = root.results;
  call.loc = root.loc;
  call.set_attr("call_target_name",
                ir::StringAttr{n.layer ? kLayerNormTarget : kRmsNormTarget});
  float eps = 0;
  std::memcpy(&eps, &n.eps_bits, 4);
  call.set_attr("epsilon", ir::FloatAttr{n.eps_bits, ir::ElementType::kF32, eps});
  call.set_attr("has_scale", n.scale.has_value());
  if (n.layer) call.set_attr("has_bias", n.bias.has_value());
  return call;
}

// Walks each block backwards, so that a chain's last op is matched before the ops inside it
// (a layer norm's unscaled product is itself a norm); those are then skipped.
void rewrite_region(ir::Region& r, const Matcher& m, std::unordered_set<const ir::Op*>& used) {
  for (ir::Block& b : r.blocks)
    for (size_t i = b.ops.size(); i-- > 0;) {
      ir::Op& op = b.ops[i];
      for (ir::Region& nested : op.regions) rewrite_region(nested, m, used);
      if (used.count(&op)) continue;
      Ops ops;
      std::optional<Norm> n = m.match(op, ops);
      if (!n) continue;
      used.insert(ops.begin(), ops.end());
      op = make_call(op, *n);
    }
}

}  // namespace

Status recognize_norms(ir::Module& m) {
  for (ir::Func& f : m.funcs) {
    // The replaced ops stay in place (dead, dropped by passes/dce.h); a call keeps the root's
    // result ids, so the definitions map stays valid; use counts go stale only for values the
    // replaced ops read, which later matches see as read elsewhere (no match, never a wrong one).
    Matcher matcher(f);
    std::unordered_set<const ir::Op*> used;
    rewrite_region(f.body, matcher, used);
  }
  return Status();
}

}  // namespace jaxmlx::passes
