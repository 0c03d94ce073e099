// Which input dilation each convolution we hand MLX's CUDA backend has, by the key under which
// MLX caches its cuDNN graph. That cache (conv_cache in mlx/backend/cuda/conv.cpp) keys a
// convolution by its dtype, input and kernel shapes, strides, paddings, kernel dilation, groups
// and flip (and its pointers' alignments), not by its input dilation: two convolutions that
// differ only there share one graph, and the second gets the first one's result shape (on an
// H200: a flipped convolution of input dilation (3, 2) run after one of (2, 2) got wrong values,
// max error 45; right alone). The cache is per thread and bounded; this record is per process and
// keeps every key, so it holds at least what any one thread's cache can, of our convolutions:
// those a program in the same process hands MLX itself (MLX's Python API) are not in it.
#pragma once

#include <vector>

#include "mlx/mlx.h"

namespace jaxmlx::lower {

namespace mx = mlx::core;

// A convolution as MLX's CUDA backend keys its cuDNN graph (the Convolution primitive's inputs
// and parameters, alignments left out: equal MLX keys are equal keys here).
struct ConvCacheKey {
  mx::Dtype dtype = mx::float32;
  mx::Shape input, kernel;
  std::vector<int> strides, padding_lo, padding_hi, kernel_dilation;
  int groups = 1;
  bool flip = false;
};

// Records that a convolution of `key` goes to MLX with `input_dilation` and returns true, unless
// a convolution of that key went with another input dilation before (then false: this one must
// reach MLX under another key). Thread-safe; records are never dropped.
bool claim_conv_key(const ConvCacheKey& key, const std::vector<int>& input_dilation);

}  // namespace jaxmlx::lower
