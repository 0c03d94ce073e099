// Lowering rules: jaxmlx.softmax, jax.nn.softmax's f32 chain as recognized by passes/softmax.h
// (see there for the semantics kept): MLX's softmax, one fused kernel over the last dim. Other
// dims go through a transpose (one reduced dim) or MLX's composed softmax (several). And
// jaxmlx.softmax_dx, its gradient from the softmax y and the cotangent dy: y * (dy - sum(dy * y)),
// MLX's own softmax VJP.
#include <algorithm>
#include <numeric>

#include "lower/shape_util.h"
#include "passes/softmax.h"

namespace jaxmlx::lower {
namespace {

using namespace shape_util;

StatusOr<Values> lower_softmax(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != 1 || op.results.size() != 1) return ctx.malformed(op, "softmax shape");
  const ir::Type& t = operand_type(op, 0);
  const int rank = static_cast<int>(t.rank());
  std::vector<int64_t> dims = op.get_i64s("dimensions");
  if (dims.empty() || !is_static(t) || t.dtype != ir::ElementType::kF32)
    return ctx.malformed(op, "softmax of a static f32 tensor over some dims");
  for (int64_t d : dims)
    if (d < 0 || d >= rank) return ctx.malformed(op, "softmax dimension out of range");
  const mx::array& x = in[0];
  if (dims.size() == 1 && dims[0] == rank - 1) return Values{mx::softmax(x, -1, true)};
  if (dims.size() == 1) {
    std::vector<int> perm(static_cast<size_t>(rank));
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[static_cast<size_t>(dims[0])], perm.back());  // a swap is its own inverse
    return Values{mx::transpose(mx::softmax(mx::transpose(x, perm), -1, true), perm)};
  }
  return Values{mx::softmax(x, to_ints(dims), true)};
}

StatusOr<Values> lower_softmax_dx(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != 2 || op.results.size() != 1) return ctx.malformed(op, "softmax_dx operands");
  const ir::Type& t = operand_type(op, 0);
  const int rank = static_cast<int>(t.rank());
  std::vector<int64_t> dims = op.get_i64s("dimensions");
  if (dims.empty() || !is_static(t) || t.dtype != ir::ElementType::kF32 ||
      operand_type(op, 1) != t || result_type(op) != t)
    return ctx.malformed(op, "softmax_dx of static f32 tensors of one type over some dims");
  for (int64_t d : dims)
    if (d < 0 || d >= rank) return ctx.malformed(op, "softmax_dx dimension out of range");
  const mx::array &y = in[0], &dy = in[1];
  mx::array dot = mx::sum(mx::multiply(dy, y), to_ints(dims), /*keepdims=*/true);
  return Values{mx::multiply(y, mx::subtract(dy, dot))};
}

}  // namespace

void register_softmax(Registry& r) {
  r.add_custom_call(passes::kSoftmaxTarget, lower_softmax);
  r.add_custom_call(passes::kSoftmaxGradTarget, lower_softmax_dx);
}

}  // namespace jaxmlx::lower
