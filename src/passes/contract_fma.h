// contract_fma: f32 multiply-add chains become one fused multiply-add, as XLA:CPU computes them.
//
//   %m = multiply %a, %b   (f32, %m used once, same block)
//   %r = add %m, %c        ==>   %r = custom_call @jaxmlx.fma(%a, %b, %c)      a*b+c, one rounding
//   %r = add %c, %m        ==>   %r = custom_call @jaxmlx.fma(%a, %b, %c)
//   %r = subtract %m, %c   ==>   %r = custom_call @jaxmlx.fms(%a, %b, %c)      a*b-c
//   %r = subtract %c, %m   ==>   %r = custom_call @jaxmlx.fnma(%a, %b, %c)     c-a*b
//   %r = add (negate %m), %c  ==>  @jaxmlx.fnma(%a, %b, %c)
//
// Why: XLA:CPU compiles elementwise fusions with LLVM's fp-contract=fast, and LLVM's DAG combiner
// turns every fmul whose only use is an fadd/fsub into an FMA (when both operands of the add are
// single-use products, the left one). MLX rounds the product and the sum separately, so without
// this pass jax.random's scaled samplers and every polynomial differ from jax's CPU backend in
// the last bits. Only f32 is contracted: XLA computes f16/bf16 arithmetic in f32 with a
// conversion after each op, which keeps the two roundings (measured: tests/test_fma.py).
// The custom calls are lowered by lower/fma.cc (an exactly rounded FMA without f64).
#pragma once

#include "base/status.h"
#include "ir/module.h"

namespace jaxmlx::passes {

inline constexpr char kFmaTarget[] = "jaxmlx.fma";    // a*b + c
inline constexpr char kFmsTarget[] = "jaxmlx.fms";    // a*b - c
inline constexpr char kFnmaTarget[] = "jaxmlx.fnma";  // c - a*b

// False when the environment sets JAX_MLX_CONTRACT_FMA=0 (separately rounded multiply and add,
// faster, not bit-exact with XLA:CPU).
bool contract_fma_enabled();

Status contract_fma(ir::Module& m);

}  // namespace jaxmlx::passes
