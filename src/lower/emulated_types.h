// Compute ops on element types MLX cannot compute in, run by the op's own rule in a native
// "compute type", with conversions at the op boundary:
//
//   narrow floats (f8 family, f6, f4; uint8 raw bits) -> f16 (e8m0: f32), results rounded back
//       exactly as XLA's CPU backend does (it upcasts these ops the same way);
//   sub-byte ints (s2/s4/u2/u4; int8/uint8 storage) -> s8/u8, results wrapped to their width;
//   f64 / c128 (uint64 raw bits) -> f32 / c64, only when JAX_MLX_F64=downcast is set: lossy,
//       opt-in (DESIGN.md decision 5); results go back to f64 storage so dtypes stay f64.
//
// Only the compute ops listed in emulated_types.cc are rewritten; data movement (reshape,
// slice, select, gather, ...) works on the storage as is, and region ops (reduce, sort, while,
// ...) run their bodies op by op, each of which comes through here.
//
// Called by the interpreter for every op, on the device worker thread.
#pragma once

#include <optional>

#include "lower/lowering.h"

namespace jaxmlx::lower {

// The emulated lowering of `op` by `rule`, or nullopt when `op` needs none (then the rule runs
// on `op` as is and refuses types it cannot compute in, with a message naming the op).
std::optional<StatusOr<Values>> lower_emulated(LowerContext& ctx, const ir::Op& op,
                                               const Values& in, const LowerFn& rule);

// Runs `rule` on `op`, emulated when lower_emulated says so: what every caller of a rule (the
// interpreter, and rules that apply region bodies op by op) uses.
StatusOr<Values> apply_rule(LowerContext& ctx, const ir::Op& op, const Values& in,
                            const LowerFn& rule);

// True when the environment variable JAX_MLX_F64 is "downcast". Read once per process, the
// first time a program is lowered, so every executable of a process agrees.
bool f64_downcast_enabled();

}  // namespace jaxmlx::lower
