// Lowering rules: jax's dce_sink custom call (lax.dce_sink, see lowering.h for the rule contract).
//
// A custom call marked side-effecting whose only purpose is to keep XLA's dead-code elimination
// from removing the computation of its operands; it has no results and no observable effect.
// Here nothing is removed from the program (our passes keep side-effecting ops), and MLX's lazy
// evaluation may skip the operands as it skips any unused value, which no output can observe.
// The rule returns the op's declared results: none (zeros, should a producer declare some).
#include "lower/dtypes.h"
#include "lower/shape_util.h"

namespace jaxmlx::lower {
namespace {

StatusOr<Values> lower_dce_sink(LowerContext& ctx, const ir::Op& op, const Values&) {
  Values out;
  for (size_t i = 0; i < op.results.size(); ++i) {
    const ir::Type& t = shape_util::result_type(op, i);
    std::optional<mx::Dtype> dt = storage_dtype(t.dtype);
    if (!dt || !shape_util::is_static(t))
      return ctx.unsupported(op, "dce_sink with a result of type " + ir::type_to_string(t));
    out.push_back(mx::zeros(shape_util::storage_shape(t), *dt));
  }
  return out;
}

}  // namespace

void register_dce_sink(Registry& r) { r.add_custom_call("dce_sink", lower_dce_sink); }

}  // namespace jaxmlx::lower
