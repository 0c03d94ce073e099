// Op log for the coverage report: with JAXMLX_OP_LOG=<dir>, every compiled program appends one
// line, "ops <op>:<dtype> ...", listing its distinct ops (with the element type each computes
// in) to <dir>/ops-<pid>.log. tests/conftest.py writes the test id and outcome into the same
// file, and scripts/op_coverage.py turns the logs into the README's op-coverage table.
#pragma once

#include "ir/module.h"

namespace jaxmlx::pjrt {

// Appends `module`'s op line when JAXMLX_OP_LOG is set; does nothing (and costs nothing) else.
void log_ops_if_requested(const ir::Module& module);

}  // namespace jaxmlx::pjrt
