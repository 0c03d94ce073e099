// threefry: jax's threefry2x32 function becomes one custom call.
//
//   %y:2 = func.call @threefry2x32(%k0, %k1, %x0, %x1)
//   ==>  %y:2 = stablehlo.custom_call @jaxmlx.threefry2x32(%k0, %k1, %x0, %x1)
//   or   %y:2 = stablehlo.custom_call @jaxmlx.threefry2x32(%key, %x0, %x1)
//        when %k0, %k1 are reshape(slice(%key, [0:1])), reshape(slice(%key, [1:2])) of one
//        u32[2] %key, as jax unpacks a key (the unpacking ops then die unless read elsewhere)
//
// jax lowers its threefry2x32 primitive (every jax.random draw, split and fold_in) for a
// platform without a custom kernel as a private func of ~180 u32 ops: 20 rounds of add, rotate
// (shift left, shift right, or) and xor, and 6 key injections. Interpreted, that is ~160 MLX ops
// per draw (one fused chain on the CPU, evaluated op by op: 80 % of a dropout mask's time); the
// custom call is lowered by lower/custom_call.cc to one Threefry2x32 primitive on MLX's CPU (a
// compiled loop) and to the same MLX ops elsewhere (lower/rng.h).
//
// A func is taken for threefry only when it is what its name says: named threefry2x32 (jax may
// add a suffix); u32 operands (k0, k1, x0, x1), each a scalar or broadcasting to its two results
// (vmap batches keys as u32[B,1,1] beside counters u32[1,...]); a body of elementwise u32 add /
// xor / or / and / shifts, constants and broadcasts only; and equal to threefry2x32_reference
// below on fixed test inputs (evaluated here one element at a time). Anything else keeps its
// calls, which inline_calls then inlines as before. Runs before inline_calls (run_passes).
#pragma once

#include <cstdint>

#include "base/status.h"
#include "ir/module.h"

namespace jaxmlx::passes {

inline constexpr char kThreefryTarget[] = "jaxmlx.threefry2x32";

// Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// 2011) on one counter pair (x0, x1) under key (k0, k1), in place: what jax's threefry2x32
// computes per element.
inline void threefry2x32_reference(uint32_t k0, uint32_t k1, uint32_t& x0, uint32_t& x1) {
  constexpr int kRot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const uint32_t ks[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1};
  x0 += ks[0];
  x1 += ks[1];
  for (uint32_t block = 0; block < 5; ++block) {
    for (int r : kRot[block % 2]) {
      x0 += x1;
      x1 = (x1 << r) | (x1 >> (32 - r));
      x1 ^= x0;
    }
    x0 += ks[(block + 1) % 3];
    x1 += ks[(block + 2) % 3] + block + 1;
  }
}

// Whether `f` computes jax's threefry2x32 (see above).
bool is_threefry_func(const ir::Func& f);

// Rewrites every func.call of a threefry func (nested regions included).
Status recognize_threefry(ir::Module& m);

}  // namespace jaxmlx::passes
