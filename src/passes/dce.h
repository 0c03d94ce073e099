// dce: ops whose results nobody reads are dropped, when dropping them cannot be observed.
//
// jax hands us programs without dead code, but our own rewrites leave some behind (the iota of a
// recognized argmax, the reduce/exp chain a softmax call replaced). The interpreter builds an MLX
// node for every op it runs, read or not, and on the CPU each node costs microseconds per call,
// so they go. Kept whatever their uses: ops without results, custom calls (host callbacks, side
// effects; not the value-only calls our own passes make), returns, control flow, the token,
// communication and barrier ops, and any op whose regions hold one of those. Uses in nested regions count (regions read outer values).
#pragma once

#include "base/status.h"
#include "ir/module.h"

namespace jaxmlx::passes {

Status drop_dead_ops(ir::Module& m);

}  // namespace jaxmlx::passes
