// Helpers shared by the window-shaped families (convolution.cc, window.cc): StableHLO padding
// with interior dilation and cropping, windows as strided slices, and running a scalar body
// region on whole arrays (also used by reduce.cc and scatter.cc). Header for pure functions of their arguments (apply_body_elementwise
// calls back into the registry's rules, on the device worker thread like every rule).
#pragma once

#include <cstdint>
#include <vector>

#include "lower/lowering.h"
#include "mlx/ops.h"

namespace jaxmlx::lower::window_util {

// spec: pad — dilates `x` (holes filled with `fill`), then applies edge padding `lo`/`hi` per
// dim, where a negative amount crops. `interior` may be empty (no dilation). `fill` is 0-d, or
// holds x's trailing storage dims (complex128 as (re, im) pairs), which lo/hi do not name.
mx::array pad_dilate(const mx::array& x, const mx::array& fill, const std::vector<int64_t>& lo,
                     const std::vector<int64_t>& hi, const std::vector<int64_t>& interior);

// The elements start[d] + i*stride[d], i < count[d], of `x` along every dim (`count` may hold 0).
mx::array strided_window(const mx::array& x, const std::vector<int64_t>& start,
                         const std::vector<int64_t>& stride, const std::vector<int64_t>& count);

// Whether a window attribute (a size, stride, dilation or padding) lies within +-(2^31 - 1):
// MLX's dims are int32, and within that range the window arithmetic here fits 64 bits.
inline bool window_attr_fits(int64_t v) { return v <= INT32_MAX && v >= -int64_t{INT32_MAX}; }

// The extent of `n` elements dilated by `d` (d - 1 holes between neighbours; none: 0).
inline int64_t dilated_size(int64_t n, int64_t d) { return n == 0 ? 0 : (n - 1) * d + 1; }

// Number of windows of `window` elements dilated by `win_dil`, `stride` apart, that fit in `size`
// elements dilated by `base_dil` and padded by `lo` and `hi` (negative: cropped): StableHLO's
// result dim of reduce_window and of a convolution's spatial dims.
int64_t window_count(int64_t size, int64_t base_dil, int64_t lo, int64_t hi, int64_t window,
                     int64_t win_dil, int64_t stride);

// Row-major enumeration of the offsets of a box of extents `dims` (empty when one is 0).
std::vector<std::vector<int64_t>> box_offsets(const std::vector<int64_t>& dims);

// Runs a scalar body region (reduce, reduce_window, scatter, select_and_scatter) on whole arrays,
// op by op through the registry's rules with the narrow-type emulation (apply_rule), so each op
// applies elementwise (ctx.call_region checks every result against its scalar IR type). Values
// the body captures from outside it are read from the interpreter's frame. Falls back to
// call_region for a body of several blocks.
StatusOr<Values> apply_body_elementwise(LowerContext& ctx, const ir::Region& region,
                                        const Values& args);

}  // namespace jaxmlx::lower::window_util
