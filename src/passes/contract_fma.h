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
// the last bits. f32 is contracted; f16 only for jaxlib >= 0.11 or on an x86 host with AVX512-FP16
// (xla_cpu_contracts_f16): that XLA:CPU emits f16 arithmetic as LLVM half ops, which LLVM contracts too and computes as an f32
// FMA rounded once to f16, where jaxlib 0.10's computed f16 in f32 with a conversion after each
// op (measured on jax 0.11.2: uniform(key, s, float16, -2.5, 7.0) had 34 % of draws one f16 ULP
// apart from per-op rounding and none from the contracted form; (u - 0.5) * pi in cauchy, with
// no add, still rounds twice). bf16 is never contracted (measured on both).
// The custom calls are lowered by lower/fma.cc (an exactly rounded FMA without f64).
#pragma once

#include "base/status.h"
#include "ir/module.h"

namespace jaxmlx::passes {

inline constexpr char kFmaTarget[] = "jaxmlx.fma";    // a*b + c
inline constexpr char kFmsTarget[] = "jaxmlx.fms";    // a*b - c
inline constexpr char kFnmaTarget[] = "jaxmlx.fnma";  // c - a*b

// Where to contract. The exact FMA is one primitive on MLX's CPU and one kernel on CUDA
// (lower/cuda_kernels.h), but ~45 MLX ops on Metal (lower/fma.h), so by default only jax.random's samplers are contracted: that is where users
// need bit-exact results (random floats equal to jax's CPU backend's); elsewhere float results
// are within the documented tolerances either way.
enum class FmaContraction { kNone, kSamplers, kAll };

// JAX_MLX_CONTRACT_FMA, read at each compile: unset or "samplers" -> kSamplers, "all" or "1" ->
// kAll (every f32 multiply-add, as XLA:CPU does), "0" -> kNone.
FmaContraction fma_contraction_mode();

// Whether the reference jaxlib (passes/xla_cpu_version.h) contracts f16 multiply-adds: 0.11 on,
// and 0.10 on an x86 host with AVX512-FP16.
bool xla_cpu_contracts_f16();

// Contracts f32 multiply-adds, and f16 ones when `f16`.
Status contract_fma(ir::Module& m, FmaContraction mode, bool f16 = false);

// True when `op` was traced inside one of jax.random's jitted samplers (jax names each
// stablehlo op by its name stack: "jit(f)/jit(_normal)/jit(_normal_real)/erf_inv").
bool in_random_sampler(const ir::Op& op);

}  // namespace jaxmlx::passes
