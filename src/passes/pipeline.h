// pipeline: every module-level rewrite a program gets between reading and lowering, in order
// (the executable's compile and `jaxmlx-dump --passes` run the same list):
//
//   run_passes (sharding, threefry, inlining), fold_tuples, unroll_counted_loops (JAXMLX_UNROLL),
//   forward_static_slices, contract_fma, then the recognizers unless JAXMLX_RECOGNIZE=0 (argmin/argmax, softmax,
//   logsumexp; where fast_kernels_enabled: the norms' gradients, dead ops dropped, the norms,
//   dead ops dropped, the norms' scales in training, attention), fold_transposed_dots, sink_negations, drop_dead_ops.
//
// The order matters: each recognizer sees jax's chains before the generic rewrites change them;
// the norm gradients go before the norms, whose intermediates they read.
#pragma once

#include "base/status.h"
#include "ir/module.h"

namespace jaxmlx::passes {

// `on_gpu`: the device the program is compiled for is a GPU (fast kernels' default).
Status prepare_for_lowering(ir::Module& m, bool on_gpu);

}  // namespace jaxmlx::passes
