// Lowering rules: jaxmlx.softmax, jax.nn.softmax's f32 chain as recognized by passes/softmax.h
// (see there for the semantics kept): MLX's softmax, one fused kernel over the last dim. Other
// dims go through a transpose (one reduced dim) or MLX's composed softmax (several). And
// jaxmlx.softmax_dx, its gradient from the softmax y and the cotangent dy: y * (dy - sum(dy * y)),
// MLX's own softmax VJP. jaxmlx.logsumexp and jaxmlx.logsumexp_dx (passes/logsumexp.h): MLX's
// logsumexp, and the softmax times the cotangent of each row.
#include <algorithm>
#include <numeric>
#include <string>

#include "lower/shape_util.h"
#include "passes/logsumexp.h"
#include "passes/softmax.h"

namespace jaxmlx::lower {
namespace {

using namespace shape_util;

// The `dimensions` of a call whose first operand is a static f32 tensor (every operand and result
// of its type when `same_type`), or an error naming `what`.
StatusOr<std::vector<int64_t>> row_dims(LowerContext& ctx, const ir::Op& op, const char* what,
                                        bool same_type) {
  const ir::Type& t = operand_type(op, 0);
  const int64_t rank = t.rank();
  std::vector<int64_t> dims = op.get_i64s("dimensions");
  bool ok = !dims.empty() && is_static(t) && t.dtype == ir::ElementType::kF32;
  for (size_t i = 1; ok && same_type && i < op.operands.size(); ++i) ok = operand_type(op, i) == t;
  if (!ok || (same_type && result_type(op) != t))
    return ctx.malformed(op, std::string(what) + " of static f32 tensors over some dims");
  for (int64_t d : dims)
    if (d < 0 || d >= rank) return ctx.malformed(op, std::string(what) + " dimension out of range");
  return dims;
}

// MLX's precise softmax of x over `dims`: its fused kernel over the last dim, through a transpose
// for one other dim, composed for several.
mx::array softmax_over(const mx::array& x, const std::vector<int64_t>& dims) {
  const int rank = x.ndim();
  if (dims.size() == 1 && dims[0] == rank - 1) return mx::softmax(x, -1, true);
  if (dims.size() == 1) {
    std::vector<int> perm(static_cast<size_t>(rank));
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[static_cast<size_t>(dims[0])], perm.back());  // a swap is its own inverse
    return mx::transpose(mx::softmax(mx::transpose(x, perm), -1, true), perm);
  }
  return mx::softmax(x, to_ints(dims), true);
}

StatusOr<Values> lower_softmax(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != 1 || op.results.size() != 1) return ctx.malformed(op, "softmax shape");
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, row_dims(ctx, op, "softmax", true));
  return Values{softmax_over(in[0], dims)};
}

StatusOr<Values> lower_softmax_dx(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != 2 || op.results.size() != 1) return ctx.malformed(op, "softmax_dx operands");
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, row_dims(ctx, op, "softmax_dx", true));
  const mx::array &y = in[0], &dy = in[1];
  mx::array dot = mx::sum(mx::multiply(dy, y), to_ints(dims), /*keepdims=*/true);
  return Values{mx::multiply(y, mx::subtract(dy, dot))};
}

// x's shape with the reduced `dims` made size 1.
mx::Shape keepdims_shape(const mx::array& x, const std::vector<int64_t>& dims) {
  mx::Shape s = x.shape();
  for (int64_t d : dims) s[static_cast<size_t>(d)] = 1;
  return s;
}

StatusOr<Values> lower_logsumexp(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != 1 || op.results.size() != 1) return ctx.malformed(op, "logsumexp operands");
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, row_dims(ctx, op, "logsumexp", false));
  return Values{mx::logsumexp(in[0], to_ints(dims), /*keepdims=*/false)};
}

// softmax(x) * ct, ct of x's shape less the reduced dims.
StatusOr<Values> lower_logsumexp_dx(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != 2 || op.results.size() != 1) return ctx.malformed(op, "logsumexp_dx operands");
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, row_dims(ctx, op, "logsumexp_dx", false));
  const ir::Type &t = operand_type(op, 0), &c = operand_type(op, 1);
  std::vector<int64_t> rows;
  for (int64_t d = 0; d < t.rank(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) rows.push_back(t.dims[d]);
  if (result_type(op) != t || c.dtype != t.dtype || c.dims != rows)
    return ctx.malformed(op, "logsumexp_dx of x and a cotangent of x's rows, of x's type");
  mx::array ct = mx::reshape(in[1], keepdims_shape(in[0], dims));
  return Values{mx::multiply(softmax_over(in[0], dims), ct)};
}

}  // namespace

void register_softmax(Registry& r) {
  r.add_custom_call(passes::kSoftmaxTarget, lower_softmax);
  r.add_custom_call(passes::kSoftmaxGradTarget, lower_softmax_dx);
  r.add_custom_call(passes::kLogSumExpTarget, lower_logsumexp);
  r.add_custom_call(passes::kLogSumExpGradTarget, lower_logsumexp_dx);
}

}  // namespace jaxmlx::lower
