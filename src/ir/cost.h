// What a program costs, counted as XLA's HloCostAnalysis counts an HLO module, for
// PJRT_Executable_GetCostAnalysis (jax's `compiled.cost_analysis()`: "flops", "transcendentals",
// "bytes accessed"). Counted on the program as read and verified (runtime::Executable::compile),
// before our passes, so it does not depend on how we lower it.
//
// - flops: one per element of each elementwise op that is not transcendental (arithmetic,
//   comparisons, selects, conversions, bit ops); 2 per multiply-add of dot_general and
//   convolution (a convolution's taps that fall on padding or between dilated inputs are not
//   counted); a reduction's body once per element folded in (input elements - result
//   elements), a reduce_window's once per window element beyond the first of each result, a
//   scatter's per update element, a sort's per comparison (n log2 n per sorted row).
// - transcendentals: one per element of exp, expm1, log, log1p, logistic, tanh, sin, cos, tan,
//   sqrt, rsqrt, cbrt, pow and atan2 (a logistic also counts 3 flops: XLA expands it).
// - bytes accessed: the bytes each op reads and writes (its operands and results), ops that
//   only view or name values (reshape, constants, tuples, calls) excepted. XLA counts after its
//   fusion, where a fused chain's intermediates never reach memory: ours is larger for chains.
//
// A loop's body and condition are counted once (the trip count is a run-time value), a
// conditional as its costliest branch, a called function once per call. Linear algebra, FFT,
// custom calls and collectives count their bytes only.
#pragma once

#include "ir/module.h"

namespace jaxmlx::ir {

struct Cost {
  double flops = 0;
  double transcendentals = 0;
  double bytes_accessed = 0;

  Cost& operator+=(const Cost& o) {
    flops += o.flops;
    transcendentals += o.transcendentals;
    bytes_accessed += o.bytes_accessed;
    return *this;
  }
};

// The cost of `main` (with the funcs it calls); zero if the module has no main.
Cost program_cost(const Module& m);

}  // namespace jaxmlx::ir
