// reversed_kernel: a convolution whose kernel is a `reverse` over some of the kernel's spatial
// dims reads the kernel before the reverse and reverses its window instead (the convolution's
// `window_reversal` attribute, toggled for those dims). jax writes the input gradient of a
// convolution as convolution(dy, reverse(w, spatial dims)); with the reversal an attribute, the
// lowering hands a kernel reversed over every spatial dim to MLX's convolution as its `flip`
// argument (as MLX's own gradients do: on CUDA cuDNN's data-gradient convolution, reading the
// weights where they lie) instead of a reversed view that is copied first. A reverse that also
// reverses a feature dim is left alone; the reverse itself stays for its other readers (a dead
// one is dropped later). The values are the same: reversing the window is the reverse's
// definition.
#pragma once

#include "base/status.h"
#include "ir/module.h"

namespace jaxmlx::passes {

Status fold_reversed_kernels(ir::Module& m);

}  // namespace jaxmlx::passes
