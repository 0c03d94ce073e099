// softmax: see softmax.h for the pattern and why.
#include "passes/softmax.h"

#include <cstdint>
#include <optional>
#include <vector>

#include "passes/chain_match.h"

namespace jaxmlx::passes {
namespace {

using ir::OpKind;

constexpr uint32_t kMinusInfF32 = 0xFF800000u;

class Matcher : public ChainMatcher {
 public:
  using ChainMatcher::ChainMatcher;

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
    if (!m || uses(*m) != 1) return std::nullopt;
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
  // jnp.max(..., initial=-inf): maximum(broadcast_in_dim(-inf), r), either order, r read once.
  std::optional<ir::Value> skip_initial_max(const ir::Value& v) const {
    const ir::Op* op = single(v, OpKind::kMaximum, 2);
    if (op == nullptr) return v;
    for (int i = 0; i < 2; ++i) {
      const ir::Value &c = op->operands[i], &r = op->operands[1 - i];
      if (f32_splat(c, kMinusInfF32) && uses(r) == 1) return r;
    }
    return std::nullopt;
  }
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
