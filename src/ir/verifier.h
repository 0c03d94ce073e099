// Structural checks of a Module, run after reading and after each pass:
//   - operand/result/region counts match ops.def where fixed;
//   - every value has a type and an id below its Func's num_values, is defined once, and is
//     defined before its use in the same block or an enclosing one;
//   - non-empty regions end in a terminator (func.return in a func body, stablehlo.return in
//     op regions), and a func's return matches its result types.
// Errors name the op and its location. Semantic (shape) checks belong to later passes.
#pragma once

#include "base/status.h"
#include "ir/module.h"

namespace jaxmlx::ir {

Status verify(const Module& m);
Status verify_func(const Func& f);

}  // namespace jaxmlx::ir
