// ChainMatcher: what the passes that recognize jax's op chains (argminmax.h, softmax.h,
// norms.h) ask of a func: which op defines a value, how many operand slots read it, a constant's
// bits, a simple reduction's dims, and the broadcast_in_dim / reshape chains that jax's keepdims
// emit.
//
// Built once per func before rewriting; a rewrite that keeps result ids (a custom call replacing
// the chain's last op) keeps the maps valid for the other chains of the func.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "ir/module.h"
#include "passes/passes.h"

namespace jaxmlx::passes {

inline constexpr uint32_t kMinusInfF32 = 0xFF800000u;

// The recognizers' off switch (argminmax.h, softmax.h, norms.h): JAXMLX_RECOGNIZE=0 runs jax's
// op chains as emitted (to tell whether a recognizer changes a result); read at each compile.
bool recognizers_enabled();

// Whether the chains MLX has fused GPU kernels for (norms.h) are rewritten into them:
// JAXMLX_FAST_KERNELS, read at each compile: "1" on, "0" off; unset: on a GPU only (on the CPU
// MLX composes those kernels from the same primitives jax's chain has).
bool fast_kernels_enabled(bool on_gpu);

class ChainMatcher {
 public:
  explicit ChainMatcher(const ir::Func& f);

  static bool is_f32_tensor(const ir::Value& v);

  int uses(const ir::Value& v) const;
  const ir::Op* def(const ir::Value& v) const;

  // The op defining `v` when it has `kind`, `operands` operands, one result and no region.
  const ir::Op* single(const ir::Value& v, ir::OpKind kind, size_t operands) const;

  // The bits of the one f32 that `v` holds everywhere: a stablehlo.constant splat (or of one
  // element), or a broadcast_in_dim of one, either possibly through an f32 -> f32 convert.
  std::optional<uint32_t> f32_splat_bits(const ir::Value& v) const;
  bool f32_splat(const ir::Value& v, uint32_t bits) const { return f32_splat_bits(v) == bits; }

  // The first reduce (one operand, one result) that reads `v`, walking the func in order; null
  // when none does.
  const ir::Op* first_reduce(const ir::Value& v) const;

  // jnp.max's `initial=-inf`: for maximum(splat(-inf), r) (either order) r, for any other value
  // `v` itself; nullopt for a maximum of two values that are not -inf.
  std::optional<ir::Value> without_initial_max(const ir::Value& v) const;

  // A custom call of our own `target` over some reduced `dimensions`, defining `result`.
  static ir::Op dims_call(const char* target, std::vector<ir::Value> operands,
                          const ir::Value& result, const std::vector<int64_t>& dims,
                          const ir::Location* loc);

  // The sorted dims of a reduce of `x` (f32, one operand) whose body is one `body` op of its two
  // arguments and whose init is the f32 constant `init`, defining `v`.
  std::optional<std::vector<int64_t>> reduce_of(const ir::Value& v, const ir::Value& x,
                                                ir::OpKind body, uint32_t init) const;

  // The value a BACK chain ends at, walking from `v` (of `x`'s type, defined by a
  // broadcast_in_dim or reshape) through broadcast_in_dim / reshape ops. Every value of the chain
  // before the returned one is read once (by the next op of the chain, `v` by its consumer); the
  // returned value's uses are the caller's to check.
  std::optional<ir::Value> back_source(const ir::Value& v, const ir::Value& x) const;

  // The value the broadcasts and reshapes defining `v` start from (however often each is read),
  // or nullopt when `v` is defined by neither.
  std::optional<ir::Value> spread_source(const ir::Value& v) const;

  // Whether the chain from `source` (a reduce's result, or a value of the same elements in the
  // same order: size-1 dims added or dropped anywhere) to `v` puts element (k0, k1, ...) of the
  // reduce (the kept dims of x, in order) at every x position with those kept coordinates.
  bool back_is_exact(const ir::Value& v, const ir::Value& source,
                     const std::vector<int64_t>& reduced, const ir::Value& x) const;

 private:
  std::unordered_map<uint32_t, const ir::Op*> def_;
  std::unordered_map<uint32_t, const ir::Op*> first_reduce_;  // value id -> its first reduce
  UseCounts uses_;
};

}  // namespace jaxmlx::passes
