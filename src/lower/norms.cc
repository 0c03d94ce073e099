// Lowering rules: jaxmlx.layer_norm and jaxmlx.rms_norm, jax's norm chains over the last dim (f32;
// RMS norms of bf16/f16 computed in f32 too) as recognized by passes/norms.h, and their input
// gradients jaxmlx.layer_norm_dx / jaxmlx.rms_norm_dx (passes/norm_grads.h, with the scale's and
// bias's gradients passes/norm_scales.h; see these for the semantics kept): MLX's fused
// normalization kernels and their VJPs, which centre x themselves (two-pass) on Metal and CUDA
// (on the CPU MLX composes them from primitives).
#include <cstring>
#include <optional>

#include "lower/shape_util.h"
#include "mlx/fast.h"
#include "mlx/transforms.h"
#include "passes/norm_grads.h"
#include "passes/norms.h"

namespace jaxmlx::lower {
namespace {

using namespace shape_util;

// The operands' shared checks; the epsilon, or an error.
StatusOr<float> norm_epsilon(LowerContext& ctx, const ir::Op& op, const Values& in,
                             size_t operands) {
  const auto* eps = op.attr<ir::FloatAttr>("epsilon");
  if (in.size() != operands || op.results.size() != 1 || eps == nullptr ||
      eps->type != ir::ElementType::kF32)
    return ctx.malformed(op, "norm operands");
  const ir::Type& t = operand_type(op, 0);
  const bool low = t.dtype == ir::ElementType::kBF16 || t.dtype == ir::ElementType::kF16;
  if (!is_static(t) || t.rank() < 1 || (t.dtype != ir::ElementType::kF32 && !low) ||
      (low && op.get_string("call_target_name") != passes::kRmsNormTarget))
    return ctx.malformed(op, "norm of a static f32 tensor (or bf16/f16 for an RMS norm)");
  for (size_t i = 1; i < operands; ++i) {
    const ir::Type& p = operand_type(op, i);
    if (p.rank() != 1 || p.dims[0] != t.dims.back() || p.dtype != t.dtype)
      return ctx.malformed(op, "norm scale/bias of the input's type and last dim's size");
  }
  const auto bits = static_cast<uint32_t>(eps->bits);
  float f = 0;
  std::memcpy(&f, &bits, 4);
  return f;
}

StatusOr<Values> lower_layer_norm(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const bool has_scale = op.get_bool("has_scale"), has_bias = op.get_bool("has_bias");
  ASSIGN_OR_RETURN(float eps, norm_epsilon(ctx, op, in, 1 + has_scale + has_bias));
  std::optional<mx::array> scale, bias;
  if (has_scale) scale = in[1];
  if (has_bias) bias = in[has_scale ? 2 : 1];
  return Values{mx::fast::layer_norm(in[0], scale, bias, eps)};
}

StatusOr<Values> lower_rms_norm(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const bool has_scale = op.get_bool("has_scale");
  ASSIGN_OR_RETURN(float eps, norm_epsilon(ctx, op, in, 1 + has_scale));
  std::optional<mx::array> scale;
  if (has_scale) scale = in[1];
  return Values{mx::fast::rms_norm(in[0], scale, eps)};
}

// A norm's gradients: of an unscaled norm of in[0] for the cotangent in[1], the input's; with
// `has_scale` (passes/norm_scales.h), of the norm of in[0] scaled by in[2] (and, with
// `has_bias`, shifted by in[3]), the input's, the scale's (and the bias's). MLX's VJP of its
// kernel (LayerNormVJP / RMSNormVJP on a GPU).
StatusOr<Values> lower_norm_dx(LowerContext& ctx, const ir::Op& op, const Values& in,
                               bool layer) {
  const auto* eps = op.attr<ir::FloatAttr>("epsilon");
  const bool scaled = op.get_bool("has_scale");
  const bool biased = scaled && layer && op.get_bool("has_bias");
  const size_t params = size_t{scaled} + size_t{biased};
  if (in.size() != 2 + params || op.results.size() != 1 + params || eps == nullptr ||
      eps->type != ir::ElementType::kF32)
    return ctx.malformed(op, "norm gradient operands");
  const ir::Type& t = operand_type(op, 0);
  if (!is_static(t) || t.rank() < 1 || t.dtype != ir::ElementType::kF32 ||
      operand_type(op, 1) != t || result_type(op) != t)
    return ctx.malformed(op, "norm gradient of a static f32 tensor and a cotangent of its type");
  for (size_t i = 0; i < params; ++i) {
    const ir::Type& p = operand_type(op, 2 + i);
    if (p.rank() != 1 || p.dims[0] != t.dims.back() || p.dtype != t.dtype ||
        result_type(op, 1 + i) != p)
      return ctx.malformed(op, "norm gradient's scale and bias: 1-D, the input's last dim and type");
  }
  const auto bits = static_cast<uint32_t>(eps->bits);
  float e = 0;
  std::memcpy(&e, &bits, 4);
  auto norm = [layer, scaled, biased, e](const std::vector<mx::array>& x) {
    std::optional<mx::array> w, b;
    if (scaled) w = x[1];
    if (biased) b = x[2];
    return std::vector<mx::array>{layer ? mx::fast::layer_norm(x[0], w, b, e)
                                        : mx::fast::rms_norm(x[0], w, e)};
  };
  Values primals{in[0]};
  for (size_t i = 0; i < params; ++i) primals.push_back(in[2 + i]);
  return mx::vjp(norm, primals, {in[1]}).second;
}

StatusOr<Values> lower_layer_norm_dx(LowerContext& ctx, const ir::Op& op, const Values& in) {
  return lower_norm_dx(ctx, op, in, /*layer=*/true);
}

StatusOr<Values> lower_rms_norm_dx(LowerContext& ctx, const ir::Op& op, const Values& in) {
  return lower_norm_dx(ctx, op, in, /*layer=*/false);
}

}  // namespace

void register_norms(Registry& r) {
  r.add_custom_call(passes::kLayerNormTarget, lower_layer_norm);
  r.add_custom_call(passes::kRmsNormTarget, lower_rms_norm);
  r.add_custom_call(passes::kLayerNormGradTarget, lower_layer_norm_dx);
  r.add_custom_call(passes::kRmsNormGradTarget, lower_rms_norm_dx);
}

}  // namespace jaxmlx::lower
