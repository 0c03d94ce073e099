// Lowering rules: custom_call family (see lowering.h for the rule contract).
//
// jax emits few custom calls for a plugin platform: sharding markers (usually removed earlier by
// passes/drop_sharding; kept here as identities in case they survive), placement annotations,
// and threefry2x32 when a program was lowered for a GPU platform. Everything else — LAPACK-style
// linalg (Qr, Eigh, ...), ApproxTopK, host callbacks — is refused with the target named, never
// approximated. stablehlo.composite (jax's portable custom ops, e.g. chlo.erf) runs its
// decomposition function.
#include <string>
#include <string_view>

#include "lower/lowering.h"
#include "lower/rng.h"
#include "passes/threefry.h"
#include "mlx/ops.h"

namespace jaxmlx::lower {
namespace {

// Targets whose results are their operands (single device: no resharding, no memory spaces).
bool is_identity_target(std::string_view t) {
  return t == "Sharding" || t == "SPMDFullToShardShape" || t == "SPMDShardToFullShape" ||
         t == "annotate_device_placement" || t == "MoveToHost" || t == "MoveToDevice" ||
         t == "xla.sdy.FuncResultSharding";
}

bool is_threefry_target(std::string_view t) {
  return t == passes::kThreefryTarget || t == "threefry2x32" || t == "cu_threefry2x32" ||
         t == "cu_threefry2x32_ffi" || t == "hip_threefry2x32" || t == "hip_threefry2x32_ffi";
}

bool is_callback_target(std::string_view t) {
  return t.find("callback") != std::string_view::npos;
}

std::string target_of(const ir::Op& op) {
  return "custom call target '" + std::string(op.get_string("call_target_name")) + "'";
}

StatusOr<Values> lower_identity(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != op.results.size())
    return ctx.unsupported(op, target_of(op) + " with " + std::to_string(in.size()) +
                                   " operands and " + std::to_string(op.results.size()) +
                                   " results");
  for (size_t i = 0; i < in.size(); ++i) {
    const ir::Type& a = *op.operands[i].type;
    const ir::Type& r = *op.results[i].type;
    if (a.dtype != r.dtype || a.dims != r.dims)  // a real shard/unshard on a multi-device mesh
      return ctx.unsupported(op, target_of(op) + " from " + ir::type_to_string(a) + " to " +
                                     ir::type_to_string(r) + " (single-device programs only)");
  }
  return in;
}

// jax's GPU lowering of threefry2x32, and its threefry2x32 func (passes/threefry.h): operands
// (k0, k1, x0, x1), or (key, x0, x1) with the key words in one u32[2] key (our own call only);
// results (y0, y1); all u32.
StatusOr<Values> lower_threefry(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const bool pair = in.size() == 3 && op.get_string("call_target_name") == passes::kThreefryTarget;
  if ((in.size() != 4 && !pair) || op.results.size() != 2)
    return ctx.malformed(op, "threefry2x32 takes 4 operands (or a key pair and 2) and gives 2 "
                             "results");
  for (const mx::array& a : in)
    if (a.dtype() != mx::uint32) return ctx.malformed(op, "threefry2x32 operands must be u32");
  if (pair && in[0].shape() != mx::Shape{2})
    return ctx.malformed(op, "threefry2x32's key pair must be u32[2]");
  mx::Shape shape;
  for (int64_t d : op.results[0].type->dims) shape.push_back(static_cast<int>(d));
  const mx::array x0 = mx::broadcast_to(in[in.size() - 2], shape);
  const mx::array x1 = mx::broadcast_to(in[in.size() - 1], shape);
  auto y = pair ? threefry2x32(x0, x1, in[0]) : threefry2x32(x0, x1, in[0], in[1]);
  return Values{y[0], y[1]};
}

StatusOr<Values> lower_custom_call(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const std::string_view target = op.get_string("call_target_name");
  if (is_identity_target(target)) return lower_identity(ctx, op, in);
  if (is_threefry_target(target)) return lower_threefry(ctx, op, in);
  if (const LowerFn* fn = Registry::global().find_custom_call(target)) return (*fn)(ctx, op, in);
  if (is_callback_target(target))
    return ctx.unsupported(op, target_of(op) + " (host callbacks are not supported on mlx)");
  return ctx.unsupported(op, target_of(op));
}

// A composite's semantics are its decomposition func; its name only enables fast paths.
StatusOr<Values> lower_composite(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const std::string_view decomposition = op.get_string("decomposition");
  if (decomposition.empty()) return ctx.malformed(op, "composite without a decomposition");
  return ctx.call_func(decomposition, in);
}

}  // namespace

void register_custom_call(Registry& r) {
  r.add(ir::OpKind::kCustomCall, lower_custom_call);
  r.add(ir::OpKind::kComposite, lower_composite);
}

}  // namespace jaxmlx::lower
