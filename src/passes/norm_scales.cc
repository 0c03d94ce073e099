// norm_scales: see norm_scales.h for the pattern and why.
#include "passes/norm_scales.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "passes/chain_match.h"
#include "passes/norm_grads.h"
#include "passes/norms.h"

namespace jaxmlx::passes {
namespace {

using ir::OpKind;

// Where an op lies: its block and index there.
struct Place {
  ir::Block* block = nullptr;
  size_t index = 0;
};

// One norm's rewrite.
struct Fold {
  const ir::Op* root = nullptr;  // the forward's last op: the scale product or the bias add, or
                                 // null where the forward's values are not used
  const ir::Op* dx = nullptr;    // the gradient call
  const ir::Op* dg = nullptr;    // the scale gradient's reduce
  const ir::Op* db = nullptr;    // the bias gradient's reduce (of dy), with a bias
  ir::Value x, dy, scale;
  std::optional<ir::Value> bias;
  bool layer = false;
  const ir::Attribute* eps = nullptr;
};

class Matcher : public ChainMatcher {
 public:
  explicit Matcher(ir::Func& f) : ChainMatcher(f) { index(f.body); }

  // Every norm's fold, in program order; an op is in one fold at most.
  std::vector<Fold> folds() const {
    std::vector<Fold> out;
    std::unordered_set<const ir::Op*> taken;
    for (const ir::Op* op : order_) {
      std::optional<Fold> fold = match(*op);
      if (!fold) continue;
      const std::vector<const ir::Op*> ops{fold->root, fold->dx, fold->dg, fold->db};
      if (std::any_of(ops.begin(), ops.end(),
                      [&](const ir::Op* o) { return o != nullptr && taken.count(o); }))
        continue;
      taken.insert(ops.begin(), ops.end());
      out.push_back(*fold);
    }
    return out;
  }

  const Place& place(const ir::Op* op) const { return places_.at(op); }

 private:
  void index(ir::Region& r) {
    for (ir::Block& b : r.blocks)
      for (size_t i = 0; i < b.ops.size(); ++i) {
        ir::Op& op = b.ops[i];
        places_[&op] = Place{&b, i};
        order_.push_back(&op);
        for (const ir::Value& v : op.operands) readers_[v.id].push_back(&op);
        for (ir::Region& nested : op.regions) index(nested);
      }
  }

  // The ops reading `v`, one entry per operand slot (so its size is uses(v)).
  const std::vector<const ir::Op*>& readers(const ir::Value& v) const {
    static const std::vector<const ir::Op*> none;
    auto it = readers_.find(v.id);
    return it == readers_.end() ? none : it->second;
  }

  // The one op reading `v` (read once, by that op alone).
  const ir::Op* only_reader(const ir::Value& v) const {
    const std::vector<const ir::Op*>& r = readers(v);
    return r.size() == 1 ? r[0] : nullptr;
  }

  static bool is_call(const ir::Op& op, const char* target) {
    return op.kind == OpKind::kCustomCall && op.get_string("call_target_name") == target;
  }

  bool same_block(const ir::Op* a, const ir::Op* b) const {
    return places_.at(a).block == places_.at(b).block;
  }

  // Whether `v` is defined before op `index` of `block`: by an earlier op there, or outside it
  // (an argument, or a value of an enclosing block).
  bool defined_before(const ir::Value& v, const ir::Block* block, size_t index) const {
    const ir::Op* op = def(v);
    if (op == nullptr) return true;
    auto it = places_.find(op);
    return it == places_.end() || it->second.block != block || it->second.index < index;
  }

  // The 1-D value of x's element type and last dim's size that `v` (x's type) broadcasts along
  // the last dim, through broadcasts and reshapes however often read.
  std::optional<ir::Value> scale_of(const ir::Value& v, const ir::Value& x) const {
    if (v.type == nullptr || *v.type != *x.type) return std::nullopt;
    std::vector<int64_t> others(static_cast<size_t>(x.type->rank() - 1));
    for (size_t i = 0; i < others.size(); ++i) others[i] = static_cast<int64_t>(i);
    ir::Value cur = v;
    for (int steps = 0; steps < 8; ++steps) {
      const ir::Op* op = def(cur);
      if (op == nullptr || op->operands.size() != 1 ||
          (op->kind != OpKind::kBroadcastInDim && op->kind != OpKind::kReshape))
        return std::nullopt;
      cur = op->operands[0];
      const ir::Type* t = cur.type;
      if (t != nullptr && t->is_tensor && t->ranked && t->rank() == 1 && t->dtype == x.type->dtype &&
          t->dims[0] == x.type->dims.back())
        return back_is_exact(v, cur, others, x) ? std::optional<ir::Value>(cur) : std::nullopt;
    }
    return std::nullopt;
  }

  // The operand of the two-operand `op` of `kind` other than `known`.
  static std::optional<ir::Value> other_operand(const ir::Op& op, OpKind kind,
                                                const ir::Value& known) {
    if (op.kind != kind || op.operands.size() != 2 || op.results.size() != 1) return std::nullopt;
    if (op.operands[0] == known) return op.operands[1];
    if (op.operands[1] == known) return op.operands[0];
    return std::nullopt;
  }

  // The fold of `norm`'s call: its normalized values are read by the scale gradient's product
  // and, when the forward pass uses them, by the scale product.
  std::optional<Fold> match(const ir::Op& norm) const {
    const bool layer = is_call(norm, kLayerNormTarget);
    if ((!layer && !is_call(norm, kRmsNormTarget)) || norm.operands.size() != 1 ||
        norm.results.size() != 1 || norm.get_bool("has_scale") || norm.get_bool("has_bias"))
      return std::nullopt;
    const ir::Value& x = norm.operands[0];
    const ir::Value& n = norm.results[0];
    const std::vector<const ir::Op*>& read = readers(n);
    if (!is_f32_tensor(x) || !is_f32_tensor(n) || *x.type != *n.type || x.type->rank() < 2 ||
        x.type->has_dynamic_dims() || read.empty() || read.size() > 2)
      return std::nullopt;
    std::vector<int64_t> rows(static_cast<size_t>(x.type->rank() - 1));
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
    for (size_t k = 0; k < read.size(); ++k) {  // which reader is the scale gradient's product
      const ir::Op* prod = read[k];
      const ir::Op* fwd = read.size() == 2 ? read[1 - k] : nullptr;
      Fold fold;
      fold.layer = layer;
      fold.x = x;
      fold.eps = norm.find_attr("epsilon");
      std::optional<ir::Value> dy = other_operand(*prod, OpKind::kMultiply, n);
      fold.dg = dy ? only_reader(prod->results[0]) : nullptr;
      if (fold.dg == nullptr || *dy->type != *x.type || fold.dg->results.size() != 1 ||
          reduce_of(fold.dg->results[0], prod->results[0], OpKind::kAdd, 0u) != rows)
        continue;
      fold.dy = *dy;
      fold.dx = gradient_call(fold);  // sets the scale
      if (fold.dx == nullptr || *fold.dg->results[0].type != *fold.scale.type) continue;
      if (fwd != nullptr) {
        std::optional<ir::Value> s = other_operand(*fwd, OpKind::kMultiply, n);
        if (!s || scale_of(*s, x) != fold.scale) continue;
        fold.root = fwd;
        const ir::Op* add = layer ? only_reader(fwd->results[0]) : nullptr;
        std::optional<ir::Value> b =
            add ? other_operand(*add, OpKind::kAdd, fwd->results[0]) : std::nullopt;
        if (b) b = scale_of(*b, x);
        if (b) {
          fold.root = add;
          fold.bias = b;
          fold.db = row_sum(fold.dy, rows, norm);
        }
      }
      for (const ir::Op* op : {fold.root, fold.dg, fold.dx, fold.db})
        if (op != nullptr && !same_block(&norm, op)) return std::nullopt;
      // The gradient call goes where the first of its results was defined: its operands must
      // be defined before that (jax's scale and bias are, in the forward pass or as arguments).
      size_t first = std::min(places_.at(fold.dx).index, places_.at(fold.dg).index);
      if (fold.db != nullptr) first = std::min(first, places_.at(fold.db).index);
      for (const ir::Value& v : {fold.x, fold.dy, fold.scale, fold.bias.value_or(fold.x)})
        if (!defined_before(v, places_.at(fold.dx).block, first)) return std::nullopt;
      return fold;
    }
    return std::nullopt;
  }

  // A reduce summing `v` over `rows` to its last dim (the bias's gradient), in `near`'s block.
  const ir::Op* row_sum(const ir::Value& v, const std::vector<int64_t>& rows,
                        const ir::Op& near) const {
    for (const ir::Op* op : readers(v))
      if (op->kind == OpKind::kReduce && op->results.size() == 1 && same_block(op, &near) &&
          reduce_of(op->results[0], v, OpKind::kAdd, 0u) == rows)
        return op;
    return nullptr;
  }

  // The norm's gradient call whose cotangent is multiply(dy, PARAM(%g)), read by it alone;
  // `fold.scale` gets %g.
  const ir::Op* gradient_call(Fold& fold) const {
    const char* target = fold.layer ? kLayerNormGradTarget : kRmsNormGradTarget;
    for (const ir::Op* mul : readers(fold.dy)) {
      std::optional<ir::Value> s = other_operand(*mul, OpKind::kMultiply, fold.dy);
      std::optional<ir::Value> g = s ? scale_of(*s, fold.x) : std::nullopt;
      const ir::Op* call = g ? only_reader(mul->results[0]) : nullptr;
      if (call == nullptr || !is_call(*call, target) || call->operands.size() != 2 ||
          call->results.size() != 1 || !(call->operands[0] == fold.x) ||
          !(call->operands[1] == mul->results[0]) || call->get_bool("has_scale"))
        continue;
      const ir::Attribute* eps = call->find_attr("epsilon");
      if (eps == nullptr || fold.eps == nullptr || !(*eps == *fold.eps)) continue;
      fold.scale = *g;
      return call;
    }
    return nullptr;
  }

  std::unordered_map<const ir::Op*, Place> places_;
  std::vector<const ir::Op*> order_;
  std::unordered_map<uint32_t, std::vector<const ir::Op*>> readers_;
};

ir::Op norm_call(const Fold& f) {
  ir::Op call;
  call.kind = OpKind::kCustomCall;
  call.operands = {f.x, f.scale};
  if (f.bias) call.operands.push_back(*f.bias);
  call.results = f.root->results;
  call.loc = f.root->loc;
  call.set_attr("call_target_name", ir::StringAttr{f.layer ? kLayerNormTarget : kRmsNormTarget});
  call.set_attr("epsilon", *f.eps);
  call.set_attr("has_scale", true);
  if (f.layer) call.set_attr("has_bias", f.bias.has_value());
  return call;
}

ir::Op gradient_call(const Fold& f) {
  ir::Op call;
  call.kind = OpKind::kCustomCall;
  call.operands = {f.x, f.dy, f.scale};
  call.results = {f.dx->results[0], f.dg->results[0]};
  if (f.db != nullptr) {
    call.operands.push_back(*f.bias);
    call.results.push_back(f.db->results[0]);
  }
  call.loc = f.dx->loc;
  call.set_attr("call_target_name",
                ir::StringAttr{f.layer ? kLayerNormGradTarget : kRmsNormGradTarget});
  call.set_attr("epsilon", *f.eps);
  call.set_attr("has_scale", true);
  if (f.layer) call.set_attr("has_bias", f.db != nullptr);
  return call;
}

}  // namespace

Status fold_norm_scales(ir::Module& m) {
  for (ir::Func& f : m.funcs) {
    // Replacements by place, made after matching (the matcher points into the blocks).
    std::unordered_map<ir::Block*, std::vector<std::pair<size_t, std::optional<ir::Op>>>> edits;
    {
      Matcher matcher(f);
      for (const Fold& fold : matcher.folds()) {
        auto& e = edits[matcher.place(fold.dx).block];
        if (fold.root != nullptr) e.emplace_back(matcher.place(fold.root).index, norm_call(fold));
        // The gradient call where the first of its results was defined; the other ops go.
        std::vector<size_t> at{matcher.place(fold.dx).index, matcher.place(fold.dg).index};
        if (fold.db != nullptr) at.push_back(matcher.place(fold.db).index);
        std::sort(at.begin(), at.end());
        e.emplace_back(at[0], gradient_call(fold));
        for (size_t k = 1; k < at.size(); ++k) e.emplace_back(at[k], std::nullopt);
      }
    }
    for (auto& [block, e] : edits) {
      std::vector<bool> drop(block->ops.size(), false);
      for (auto& [i, op] : e) {
        if (op) block->ops[i] = std::move(*op);
        else drop[i] = true;
      }
      erase_ops(*block, drop);
    }
  }
  return Status();
}

}  // namespace jaxmlx::passes
