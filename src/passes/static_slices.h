// static_slices: what an unrolled scan leaves behind, folded away.
//
// A scan saves each iteration's values for the backward pass by writing them into stacked
// buffers (`dynamic_update_slice(buf, x, i, 0, ...)`), and the backward scan reads them back
// (`dynamic_slice(buf, N - 1 - i, 0, ...)`). Once unrolled (unroll.h) every index is a constant
// expression, and a read of exactly the rows an earlier update wrote is that update's value:
//
//   1. Scalar integer ops of constants (add, subtract, multiply, min, max, negate, clamp,
//      compare, select, integer converts) become constants, with the wrap-around and the
//      signed/unsigned order of their type.
//   2. A dynamic_slice with constant starts, or a static slice with unit strides, reading a chain
//      of dynamic_update_slices with constant starts: an update whose box (starts clamped as
//      StableHLO clamps them, sizes the update's) is the slice's box is the slice's value; an
//      update disjoint from it is skipped (the slice reads the buffer before it); any other
//      overlap ends the walk, and the slice then reads the buffer where the walk stopped.
//   3. reshape(broadcast_in_dim(x)) and reshape(reshape(x)) of x's own type are x (a scan stacks
//      a row as [1, ...] and reads it back as a row).
//
// Stacks no longer read are dropped by dce afterwards: the unrolled GRU's gradient keeps the
// values themselves, as native MLX's traced Python loop does, instead of nine stacked copies
// written and read back per step. Every rewrite gives the same values (exact).
#pragma once

#include "base/status.h"
#include "ir/module.h"

namespace jaxmlx::passes {

Status forward_static_slices(ir::Module& m);

}  // namespace jaxmlx::passes
