// Threefry-2x32 as one primitive on MLX's CPU (lower/rng.h): a compiled loop over the counters
// where the MLX ops would be ~160 primitives (or one fused chain interpreted op by op). On MLX's
// CUDA backend one kernel of ours (lower/cuda_kernels.h); on Metal the MLX ops.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <vector>

#include "lower/cuda_kernels.h"
#include "lower/rng.h"
#include "lower/row_major.h"
#include "mlx/backend/cpu/encoder.h"
#include "mlx/mlx.h"
#include "mlx/primitives.h"
#include "passes/threefry.h"

// Platform-specific: x86-64 Linux with GCC (ifunc resolution) builds the loop twice, with AVX2
// (eight lanes per rotate) and without; other platforms build it once.
// Not under ThreadSanitizer: GCC instruments the ifunc resolver too, which then runs during
// relocation, before TSan's runtime is up, and crashes every binary at start.
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__)
#define JAXMLX_THREEFRY_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define JAXMLX_THREEFRY_CLONES
#endif

namespace jaxmlx::lower {
namespace {

namespace mx = mlx::core;

// y = threefry(k, x) for n counter pairs; a key array of one element is one key for all. `y0`
// and `y1` may be `x0` and `x1` themselves (donated): each element is read before it is written.
template <bool kOneKey>
JAXMLX_THREEFRY_CLONES void threefry_loop(const uint32_t* k0, const uint32_t* k1,
                                          const uint32_t* x0, const uint32_t* x1, uint32_t* y0,
                                          uint32_t* y1, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t a = x0[i], b = x1[i];
    passes::threefry2x32_reference(kOneKey ? k0[0] : k0[i], kOneKey ? k1[0] : k1[i], a, b);
    y0[i] = a;
    y1[i] = b;
  }
}

// Inputs (k0, k1, x0, x1), all of the result's shape (any strides) or both keys of one element;
// or (key, x0, x1) with the key words in one u32[2] key.
class CpuThreefry final : public mx::Primitive {
 public:
  explicit CpuThreefry(mx::Stream stream) : mx::Primitive(stream) {}

  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override {
    const size_t n = outputs[0].size();
    const size_t counters = inputs.size() - 2;
    for (size_t w = 0; w < 2; ++w) {
      // A counter MLX would let go of lends its memory to its word of the result.
      const mx::array& x = inputs[counters + w];
      mx::array& y = outputs[w];
      if (n > 1 && x.flags().row_contiguous && x.data_size() == n && x.is_donatable())
        y.copy_shared_buffer(x);
      else
        y.set_data(mx::allocator::malloc(y.nbytes()));
    }
    if (n == 0) return;
    auto& encoder = mx::cpu::get_command_encoder(stream());
    std::vector<mx::array> ins, outs;
    for (const mx::array& in : inputs) {
      encoder.set_input_array(in);
      ins.push_back(mx::array::unsafe_weak_copy(in));
    }
    for (mx::array& out : outputs) {
      encoder.set_output_array(out);
      outs.push_back(mx::array::unsafe_weak_copy(out));
    }
    encoder.dispatch([ins = std::move(ins), outs = std::move(outs), n]() mutable {
      std::vector<uint32_t> tmp[4];
      const uint32_t* p[4];
      const bool pair = ins.size() == 3;
      const bool one_key = pair || (ins[0].size() == 1 && ins[1].size() == 1);
      if (pair) {
        p[0] = row_major(ins[0], tmp[0]);
        p[1] = p[0] + 1;
      }
      for (size_t i = pair ? 2 : 0; i < 4; ++i) {
        const mx::array& in = ins[pair ? i - 1 : i];
        p[i] = (i < 2 && one_key) ? in.data<uint32_t>() : row_major(in, tmp[i]);
      }
      uint32_t* y0 = outs[0].data<uint32_t>();
      uint32_t* y1 = outs[1].data<uint32_t>();
      if (one_key)
        threefry_loop<true>(p[0], p[1], p[2], p[3], y0, y1, n);
      else
        threefry_loop<false>(p[0], p[1], p[2], p[3], y0, y1, n);
    });
  }
  void eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) override {
    throw std::runtime_error("[Threefry2x32] runs on MLX's CPU only");
  }
  const char* name() const override { return "Threefry2x32"; }
  bool is_equivalent(const mx::Primitive&) const override { return true; }
};

// The primitive over `keys` (k0, k1, or one u32[2] key) and the counters, all u32 on the CPU.
std::array<mx::array, 2> cpu_threefry(std::vector<mx::array> keys, const mx::array& x0,
                                      const mx::array& x1) {
  mx::Shape shape = mx::broadcast_shapes(x0.shape(), x1.shape());
  const bool one_key = keys.size() == 1 || (keys[0].size() == 1 && keys[1].size() == 1);
  if (!one_key) shape = mx::broadcast_shapes(shape, mx::broadcast_shapes(keys[0].shape(),
                                                                          keys[1].shape()));
  // Keys of one element each (jax's) are read as one key; everything else at the result's shape
  // (broadcasts and other strides are read in place by the primitive).
  std::vector<mx::array> in = std::move(keys);
  in.push_back(x0);
  in.push_back(x1);
  for (size_t i = one_key ? in.size() - 2 : 0; i < in.size(); ++i)
    if (in[i].shape() != shape) in[i] = mx::broadcast_to(in[i], shape);
  auto prim = std::make_shared<CpuThreefry>(mx::default_stream(mx::Device::cpu));
  std::vector<mx::array> out =
      mx::array::make_arrays({shape, shape}, {mx::uint32, mx::uint32}, prim, in);
  return {out[0], out[1]};
}

// Whether the primitive serves: the default device is MLX's CPU and every operand is u32.
bool cpu_u32(std::initializer_list<const mx::array*> all) {
  for (const mx::array* a : all)
    if (a->dtype() != mx::uint32) return false;
  return mx::default_device().type == mx::Device::cpu;
}

}  // namespace

std::array<mx::array, 2> threefry2x32(mx::array x0, mx::array x1, const mx::array& k0,
                                      const mx::array& k1) {
  if (!cpu_u32({&x0, &x1, &k0, &k1})) {
    if (auto y = cuda_threefry(k0, k1, x0, x1)) return *y;
    return threefry2x32_ops(x0, x1, k0, k1);
  }
  return cpu_threefry({k0, k1}, x0, x1);
}

std::array<mx::array, 2> threefry2x32(mx::array x0, mx::array x1, const mx::array& key) {
  if (!cpu_u32({&x0, &x1, &key}) || key.shape() != mx::Shape{2}) {
    if (auto y = cuda_threefry(key, key, x0, x1, /*key_pair=*/true)) return *y;
    auto word = [&](int i) { return mx::reshape(mx::slice(key, {i}, {i + 1}), {}); };
    return threefry2x32_ops(x0, x1, word(0), word(1));
  }
  return cpu_threefry({key}, x0, x1);
}

}  // namespace jaxmlx::lower
