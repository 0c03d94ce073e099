// unroll: counted loops with constant bounds become straight-line code, so that the program
// around them is one graph.
//
//   %r:n = stablehlo.while(%i = constant init, %c = ...)       (counted_loop.h: i < N, i += step)
//   do { body(%i, %c) }
//   ==>
//   body's loop-invariant ops, once
//   body(constant init, %c), body(constant init + step, %c'), ...   (trip count copies)
//   and %r replaced by the last copy's carry (the counter: constant init + trips * step)
//
// Why: a program holding a while loop is run by our interpreter on every call (the loop body is
// replayed per iteration, with a host round trip every JAXMLX_LOOP_CHUNK iterations); unrolled,
// it is traced once and replayed as one MLX graph, as native MLX runs a Python loop under
// mx.compile (a GRU over 64 steps, lax.scan in jax). The counter of each copy is a constant, so
// the index arithmetic of a scan (xs[i], ys.at[i].set, reverse scans' N - 1 - i) is computed
// once when the executable is built (lower/interpreter.cc hoists ops of constants) and its
// dynamic slices become static ones. Values are the same: the copies compute exactly what the
// iterations did, in the same order.
//
// Which loops: counted (counted_loop.h) with constant init and bound, a body free of anything
// that needs the host or has an effect (nested loops that stay loops, case/if, calls, custom
// calls other than our value calls, infeed/outfeed/send/recv, stablehlo.rng), and at most
// `max_ops` ops after unrolling (trip count times the body's ops, nested regions counted), all
// loops of the program together at most 4 * max_ops.
// Inner loops are unrolled first. An op of the body that reads no changing carry value
// (constants, their broadcasts, the weights jax passes through the carry unchanged, products of
// such) is emitted once, before the copies.
//
// A loop too long for that (an ODE solver's fori_loop over 10000 steps, a scan over a long
// sequence) is unrolled in part: its first trips % k iterations become copies in front, and the
// loop that stays runs k copies of the body per iteration (k * body ops <= max_ops / 16, k >= 2),
// its counter returned as counter + k * step so that it is still a counted loop. The executor
// then replays one graph per k steps (lower/control_flow.cc) instead of one per step.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "ir/module.h"

namespace jaxmlx::passes {

// JAXMLX_UNROLL: the most ops one loop may unroll into (0: no loop is unrolled). Default 16384:
// the full-size GRU benchmark's backward scan (128 steps of ~70 ops) fits.
int64_t unroll_limit();

Status unroll_counted_loops(ir::Module& m, int64_t max_ops);

}  // namespace jaxmlx::passes
