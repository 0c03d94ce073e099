// The jaxlib whose XLA:CPU results the plugin reproduces, where those changed between versions.
//
// The Python package sets JAXMLX_XLA_CPU_VERSION to the installed jaxlib's version before the
// client starts; a user may set it to pick another reference. It is read at each compile. Unset
// or unparsable means the oldest supported behaviour (jaxlib 0.10).
//
// Differences known (each measured against jax's CPU backend of that version):
//   >= 0.11: f16 multiply-adds are contracted into one FMA rounded once (passes/contract_fma.h);
//            reduce_precision of a bf16 NaN gives the canonical quiet NaN of its sign even for a
//            format that keeps every bf16 bit (lower/float_bits.cc);
//            modules arrive with private funcs inlined, op names as call sites (vhlo/convert.cc).
#pragma once

#include <string_view>

namespace jaxmlx::passes {

// True for a version "major.minor[...]" at or above major.minor; false when unparsable.
bool version_at_least(std::string_view version, int major, int minor);

// version_at_least(JAXMLX_XLA_CPU_VERSION, major, minor).
bool reference_jaxlib_at_least(int major, int minor);

}  // namespace jaxmlx::passes
