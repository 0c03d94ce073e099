// transposed_dot: a transpose of a dot_general's result that puts the rhs's free dims before the
// lhs's becomes the product with its operands swapped, which lands in that order itself:
// transpose(dot_general(a, b)) = dot_general(b, a) (batch dims first in both). jax writes the
// gradient of `x @ w` with respect to w as dot_general(g, x) then transpose [1, 0], the weight's
// own layout; XLA folds that transpose into the product. Without the fold the gradient is a
// transposed view, which every elementwise kernel reading it (the optimizer update) reads
// through strides, a column at a time: on a GPU the strided kernel variant with scattered loads.
// Only a product read by nothing but that transpose is swapped, and only without a dot
// algorithm (whose lhs/rhs fields would need swapping too); precision_config is swapped with its
// operands. The product's sums are the same; a matmul routine may order them differently.
#pragma once

#include "base/status.h"
#include "ir/module.h"

namespace jaxmlx::passes {

Status fold_transposed_dots(ir::Module& m);

}  // namespace jaxmlx::passes
