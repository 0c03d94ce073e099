// fold_tuples: get_tuple_element of a stablehlo.tuple built in the same func becomes the tuple's
// operand, and tuples left without uses are dropped.
//
//   %t = stablehlo.tuple %a, %b
//   %x = stablehlo.get_tuple_element %t[1]      ==>   uses of %x read %b
//
// Why: older single-device artifacts pack values into tuples; our IR (and every lowering rule)
// carries arrays only, so tuples must be unpacked before lowering. A tuple that escapes (a func
// argument or result of tuple type) stays and is refused by lower/shape_dynamic.cc.
#pragma once

#include "base/status.h"
#include "ir/module.h"

namespace jaxmlx::passes {

Status fold_tuples(ir::Module& m);

}  // namespace jaxmlx::passes
