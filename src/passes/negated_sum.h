// negated_sum: a sum of negated f32 values becomes the negation of the sum, as XLA's algebraic
// simplifier rewrites it:
//
//   %n = stablehlo.negate %x
//   %r = stablehlo.reduce(%n init: +0) applies stablehlo.add across dimensions = D
//   ==>
//   %s = stablehlo.reduce(%x init: +0) applies stablehlo.add across dimensions = D
//   %r = stablehlo.negate %s
//
// jax's gradients write it: the backward pass of a subtraction negates a cotangent, and a
// reduction sums it (a layer norm's gradient has two per norm). The negation of the whole tensor
// was a kernel of its own (nothing fuses into a reduction's input); now it runs on the reduced
// values, where a fused graph folds it into what reads them.
//
// Why it is also exact: jax's CPU backend computes the rewritten form, so a zero sum is -0 there
// (the sum of [1, -1] is +0, negated), where summing the negations gives +0. Round-to-nearest
// is symmetric, so every other value is the same either way. The rewrite applies whether or not
// %n is read elsewhere (XLA's does too); the negation then stays for those readers.
#pragma once

#include "base/status.h"
#include "ir/module.h"

namespace jaxmlx::passes {

Status sink_negations(ir::Module& m);

}  // namespace jaxmlx::passes
