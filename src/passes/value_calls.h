// The custom calls our own passes emit (softmax, norms, attention, argmax/argmin, the exact FMAs,
// threefry):
// each computes its results from its operands and nothing else, with no host read and no effect.
// So dce may drop one whose results are unread, and a loop body holding one can still be traced
// once and replayed (runtime/executable.cc). A new recognizer's target is added here.
#pragma once

#include "ir/module.h"

namespace jaxmlx::passes {

// Whether `op` is a custom call to one of our value-only targets.
bool is_value_call(const ir::Op& op);

}  // namespace jaxmlx::passes
