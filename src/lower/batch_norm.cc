// Lowering rules: batch_norm_training, batch_norm_inference, batch_norm_grad.
//
// XLA has no kernels for these: its BatchNormExpander rewrites each into elementwise ops and
// sums before codegen, and jax's CPU backend runs that expansion. We build the same expression,
// term for term and in the same order (variance as E[X^2] - E[X]^2, the mean as sum / N with N
// converted from s32, rsqrt of var + epsilon), so results differ only by summation order. In f32
// XLA:CPU contracts each product that feeds an add or subtract into an FMA (see
// passes/contract_fma.h); the same products are fused here with exact_fma.
#include <vector>

#include "lower/fma.h"
#include "lower/shape_util.h"

namespace jaxmlx::lower {

using namespace shape_util;

namespace {

struct Layout {
  int feature = 0;
  std::vector<int> reduce_axes;   // every dim but the feature dim
  mx::Shape feature_bcast;        // [1, .., C, .., 1]: a feature vector, broadcastable
  mx::array count = mx::array(0); // elements per feature, in the operand's dtype
  mx::array epsilon = mx::array(0);
};

StatusOr<Layout> layout_of(LowerContext& ctx, const ir::Op& op) {
  RETURN_IF_ERROR(require_native(ctx, op));
  const ir::Type& t = operand_type(op, 0);
  if (!is_static(t)) return ctx.unsupported(op, "dynamic shapes");
  const ir::FloatAttr* eps = op.attr<ir::FloatAttr>("epsilon");
  const int64_t f = op.get_i64("feature_index", -1);
  if (eps == nullptr || f < 0 || f >= t.rank()) return ctx.malformed(op, "bad feature_index/epsilon");
  Layout l;
  l.feature = static_cast<int>(f);
  l.feature_bcast = mx::Shape(t.rank(), 1);
  l.feature_bcast[l.feature] = static_cast<int>(t.dims[f]);
  int32_t n = 1;  // XLA multiplies the dims as s32, then converts to the element type
  for (int d = 0; d < t.rank(); ++d)
    if (d != l.feature) {
      l.reduce_axes.push_back(d);
      n *= static_cast<int32_t>(t.dims[d]);
    }
  const mx::Dtype dt = *storage_dtype(t.dtype);
  l.count = mx::astype(mx::array(n, mx::int32), dt);
  l.epsilon = float_scalar(eps->value, dt);
  return l;
}

bool is_f32(const mx::array& x) { return x.dtype() == mx::float32; }

// a*b + c, contracted in f32 as XLA:CPU does.
mx::array mul_add(const mx::array& a, const mx::array& b, const mx::array& c) {
  if (!is_f32(a)) return a * b + c;
  mx::Shape s = mx::broadcast_shapes(mx::broadcast_shapes(a.shape(), b.shape()), c.shape());
  return exact_fma(mx::broadcast_to(a, s), mx::broadcast_to(b, s), mx::broadcast_to(c, s));
}

// c - a*b, contracted in f32.
mx::array sub_mul(const mx::array& c, const mx::array& a, const mx::array& b) {
  if (!is_f32(a)) return c - a * b;
  return mul_add(mx::negative(a), b, c);
}

StatusOr<Values> lower_batch_norm_training(LowerContext& ctx, const ir::Op& op, const Values& in) {
  ASSIGN_OR_RETURN(Layout l, layout_of(ctx, op));
  const mx::array& x = in[0];
  mx::array scale = mx::reshape(in[1], l.feature_bcast);
  mx::array offset = mx::reshape(in[2], l.feature_bcast);
  mx::array mean = mx::sum(x, l.reduce_axes) / l.count;             // E[X]
  mx::array square_mean = mx::sum(x * x, l.reduce_axes) / l.count;  // E[X^2]
  mx::array var = sub_mul(square_mean, mean, mean);                 // E[X^2] - E[X]^2
  mx::array rsqrt_var = mx::rsqrt(mx::reshape(var, l.feature_bcast) + l.epsilon);
  mx::array normalized = (x - mx::reshape(mean, l.feature_bcast)) * rsqrt_var;
  return Values{mul_add(normalized, scale, offset), mean, var};
}

StatusOr<Values> lower_batch_norm_inference(LowerContext& ctx, const ir::Op& op,
                                            const Values& in) {
  ASSIGN_OR_RETURN(Layout l, layout_of(ctx, op));
  const mx::array &scale = in[1], &offset = in[2], &mean = in[3], &var = in[4];
  mx::array true_scale = scale * mx::rsqrt(var + l.epsilon);
  mx::array true_shift = sub_mul(offset, mean, true_scale);
  return Values{mul_add(in[0], mx::reshape(true_scale, l.feature_bcast),
                        mx::reshape(true_shift, l.feature_bcast))};
}

// XLA's formulas: grad_scale = sum(dy * (x - mean)) * rsqrt(var + eps); grad_offset = sum(dy);
// grad_x = (scale * rsqrt(var + eps) / N) * ((dy * N - sum(dy)) - (x - mean) * sum(dy * (x -
// mean)) / (var + eps)).
StatusOr<Values> lower_batch_norm_grad(LowerContext& ctx, const ir::Op& op, const Values& in) {
  ASSIGN_OR_RETURN(Layout l, layout_of(ctx, op));
  const mx::array& x = in[0];
  const mx::array& dy = in[4];
  mx::array scale_b = mx::reshape(in[1], l.feature_bcast);
  mx::array var_eps_b = mx::reshape(in[3], l.feature_bcast) + l.epsilon;
  mx::array x_centered = x - mx::reshape(in[2], l.feature_bcast);
  mx::array sum_dy_xc = mx::sum(dy * x_centered, l.reduce_axes);
  mx::array grad_offset = mx::sum(dy, l.reduce_axes);
  mx::array grad_scale = sum_dy_xc * mx::rsqrt(in[3] + l.epsilon);
  mx::array i5 = (mx::reshape(sum_dy_xc, l.feature_bcast) * x_centered) / var_eps_b;
  mx::array i1_minus_i2 = mul_add(dy, l.count, mx::negative(mx::reshape(grad_offset,
                                                                        l.feature_bcast)));
  mx::array factor = (scale_b * mx::rsqrt(var_eps_b)) / l.count;
  return Values{factor * (i1_minus_i2 - i5), grad_scale, grad_offset};
}

}  // namespace

void register_batch_norm(Registry& r) {
  r.add(ir::OpKind::kBatchNormTraining, lower_batch_norm_training);
  r.add(ir::OpKind::kBatchNormInference, lower_batch_norm_inference);
  r.add(ir::OpKind::kBatchNormGrad, lower_batch_norm_grad);
}

}  // namespace jaxmlx::lower
