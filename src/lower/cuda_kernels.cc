// Platform-specific (MLX's CUDA backend): see cuda_kernels.h.
#include "lower/cuda_kernels.h"

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "lower/util.h"
#include "mlx/fast.h"
#include "mlx/ops.h"
#include "mlx/primitives.h"

namespace jaxmlx::lower {
namespace {

constexpr int kThreads = 256;

bool enabled() {
  const char* v = std::getenv("JAXMLX_CUDA_KERNELS");
  if (v != nullptr && *v == '0') return false;
  return on_cuda_gpu();
}

// Device helpers shared by the sources: an operand's element count from its shape (1: read
// element 0 for every output), and the larger of two counts.
constexpr const char* kHeader = R"(
__device__ inline size_t jaxmlx_count(const mlx::core::cu::Shape& s, int ndim) {
  size_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= static_cast<size_t>(s[d]);
  return n;
}
__device__ inline size_t jaxmlx_max(size_t x, size_t y) { return x > y ? x : y; }
__device__ inline float jaxmlx_float(float x) { return x; }
__device__ inline float jaxmlx_float(__half x) { return __half2float(x); }
__device__ inline void jaxmlx_store(float* p, float v) { *p = v; }
__device__ inline void jaxmlx_store(__half* p, float v) { *p = __float2half_rn(v); }
)";

// Operands as the kernels read them: a single element as shape {1} (a 0-d array gets no shape
// argument in MLX's generated signature), anything else broadcast to `shape`. A broadcast of one
// element (jax's broadcast_in_dim of a coefficient; a constant whose elements are all equal, as
// hoisted constants are) is read as that element: MLX would copy the broadcast view first.
mx::array operand(const mx::array& x, const mx::Shape& shape) {
  if (x.size() == 1) return mx::reshape(x, {1});
  if (x.has_primitive() && std::string_view(x.primitive().name()) == "Broadcast" &&
      x.inputs()[0].size() == 1)
    return mx::reshape(x.inputs()[0], {1});
  if (mx::issubdtype(x.dtype(), mx::floating)) {
    if (std::optional<double> v = splat_float_constant(x))
      return mx::reshape(float_scalar(*v, x.dtype()), {1});
  } else if (std::optional<int64_t> v = splat_int_constant(x)) {
    return mx::reshape(int_scalar(*v, x.dtype()), {1});
  }
  if (x.shape() == shape) return x;
  return mx::broadcast_to(x, shape);
}

bool fits_grid(const mx::Shape& shape) {
  size_t n = 1;
  for (int d : shape) n *= static_cast<size_t>(d);
  return n > 0 && n <= static_cast<size_t>(std::numeric_limits<int>::max());
}

int count(const mx::Shape& shape) {
  size_t n = 1;
  for (int d : shape) n *= static_cast<size_t>(d);
  return static_cast<int>(n);
}

const mx::fast::CustomKernelFunction& fma_kernel() {
  // NEG_P / NEG_C negate the product / the addend (exact). f16 is widened exactly, and the f32
  // FMA rounded to f16 once more (round to nearest even).
  static const mx::fast::CustomKernelFunction k = mx::fast::cuda_kernel(
      "jaxmlx_fma", {"a", "b", "c"}, {"out"},
      R"(
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  const size_t na = jaxmlx_count(a_shape, a_ndim), nb = jaxmlx_count(b_shape, b_ndim),
               nc = jaxmlx_count(c_shape, c_ndim);
  const size_t n = jaxmlx_max(na, jaxmlx_max(nb, nc));
  if (i >= n) return;
  float x = jaxmlx_float(a[na == 1 ? 0 : i]);
  const float y = jaxmlx_float(b[nb == 1 ? 0 : i]);
  float z = jaxmlx_float(c[nc == 1 ? 0 : i]);
  if (NEG_P) x = -x;
  if (NEG_C) z = -z;
  jaxmlx_store(out + i, fmaf(x, y, z));
)",
      kHeader, /*ensure_row_contiguous=*/true);
  return k;
}

const mx::fast::CustomKernelFunction& threefry_kernel() {
  // Threefry-2x32 with 20 rounds (Salmon et al. 2011): rotations R0 for even blocks of four
  // rounds, R1 for odd ones; the key schedule (k0, k1, k0 ^ k1 ^ 0x1BD11BDA) is injected after
  // every block with the block number added to the second word. KEY_PAIR: k0 holds both words.
  static const mx::fast::CustomKernelFunction k = mx::fast::cuda_kernel(
      "jaxmlx_threefry2x32", {"k0", "k1", "x0", "x1"}, {"y0", "y1"},
      R"(
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  const size_t n0 = jaxmlx_count(k0_shape, k0_ndim), n1 = jaxmlx_count(k1_shape, k1_ndim),
               m0 = jaxmlx_count(x0_shape, x0_ndim), m1 = jaxmlx_count(x1_shape, x1_ndim);
  const size_t n = KEY_PAIR ? jaxmlx_max(m0, m1) : jaxmlx_max(jaxmlx_max(n0, n1), jaxmlx_max(m0, m1));
  if (i >= n) return;
  uint32_t ks[3];
  ks[0] = KEY_PAIR ? k0[0] : k0[n0 == 1 ? 0 : i];
  ks[1] = KEY_PAIR ? k0[1] : k1[n1 == 1 ? 0 : i];
  ks[2] = ks[0] ^ ks[1] ^ 0x1BD11BDAu;
  uint32_t a = x0[m0 == 1 ? 0 : i] + ks[0];
  uint32_t b = x1[m1 == 1 ? 0 : i] + ks[1];
  const int rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
#pragma unroll
  for (int block = 0; block < 5; ++block) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int s = rot[block % 2][r];
      a += b;
      b = ((b << s) | (b >> (32 - s))) ^ a;
    }
    a += ks[(block + 1) % 3];
    b += ks[(block + 2) % 3] + static_cast<uint32_t>(block + 1);
  }
  y0[i] = a;
  y1[i] = b;
)",
      kHeader, /*ensure_row_contiguous=*/true);
  return k;
}

}  // namespace

std::optional<mx::array> cuda_fma(const mx::array& a, const mx::array& b, const mx::array& c,
                                  bool neg_product, bool neg_addend) {
  const mx::Dtype t = a.dtype();
  if (!enabled() || (t != mx::float32 && t != mx::float16) || b.dtype() != t || c.dtype() != t)
    return std::nullopt;
  const mx::Shape shape = mx::broadcast_shapes(a.shape(), mx::broadcast_shapes(b.shape(),
                                                                               c.shape()));
  if (!fits_grid(shape)) return std::nullopt;
  std::vector<mx::array> out = fma_kernel()(
      {operand(a, shape), operand(b, shape), operand(c, shape)}, {shape}, {t},
      {count(shape), 1, 1}, {kThreads, 1, 1},
      {{"NEG_P", neg_product}, {"NEG_C", neg_addend}}, std::nullopt, false, {});
  return out[0];
}

std::optional<std::array<mx::array, 2>> cuda_threefry(const mx::array& k0, const mx::array& k1,
                                                      const mx::array& x0, const mx::array& x1,
                                                      bool key_pair) {
  for (const mx::array* x : {&k0, &k1, &x0, &x1})
    if (x->dtype() != mx::uint32) return std::nullopt;
  if (!enabled() || (key_pair && k0.shape() != mx::Shape{2})) return std::nullopt;
  mx::Shape shape = mx::broadcast_shapes(x0.shape(), x1.shape());
  if (!key_pair) shape = mx::broadcast_shapes(shape, mx::broadcast_shapes(k0.shape(), k1.shape()));
  if (!fits_grid(shape)) return std::nullopt;
  const mx::array key0 = key_pair ? k0 : operand(k0, shape);
  const mx::array key1 = key_pair ? mx::reshape(k0, {2}) : operand(k1, shape);
  std::vector<mx::array> out = threefry_kernel()(
      {key0, key1, operand(x0, shape), operand(x1, shape)}, {shape, shape},
      {mx::uint32, mx::uint32}, {count(shape), 1, 1}, {kThreads, 1, 1},
      {{"KEY_PAIR", key_pair}}, std::nullopt, false, {});
  return std::array<mx::array, 2>{out[0], out[1]};
}

}  // namespace jaxmlx::lower
