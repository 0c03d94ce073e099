// Threefry-2x32 as one primitive on MLX's CPU (lower/rng.h): a compiled loop over the counters
// where the MLX ops would be ~160 primitives (or one fused chain interpreted op by op).
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

#include "lower/rng.h"
#include "lower/row_major.h"
#include "mlx/backend/cpu/encoder.h"
#include "mlx/mlx.h"
#include "mlx/primitives.h"
#include "passes/threefry.h"

// Platform-specific: x86-64 Linux with GCC (ifunc resolution) builds the loop twice, with AVX2
// (eight lanes per rotate) and without; other platforms build it once.
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__)
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

// Inputs (k0, k1, x0, x1), all of the result's shape (any strides), or both keys of one element.
class CpuThreefry final : public mx::Primitive {
 public:
  explicit CpuThreefry(mx::Stream stream) : mx::Primitive(stream) {}

  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override {
    const size_t n = outputs[0].size();
    for (int w = 0; w < 2; ++w) {
      // A counter MLX would let go of lends its memory to its word of the result.
      const mx::array& x = inputs[2 + w];
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
      const bool one_key = ins[0].size() == 1 && ins[1].size() == 1;
      std::vector<uint32_t> tmp[4];
      const uint32_t* p[4];
      for (int i = 0; i < 4; ++i)
        p[i] = (i < 2 && one_key) ? ins[i].data<uint32_t>() : row_major(ins[i], tmp[i]);
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

}  // namespace

std::array<mx::array, 2> threefry2x32(mx::array x0, mx::array x1, const mx::array& k0,
                                      const mx::array& k1) {
  const mx::Device device = mx::default_device();
  const bool u32 = x0.dtype() == mx::uint32 && x1.dtype() == mx::uint32 &&
                   k0.dtype() == mx::uint32 && k1.dtype() == mx::uint32;
  if (device.type != mx::Device::cpu || !u32) return threefry2x32_ops(x0, x1, k0, k1);
  const mx::Shape shape = mx::broadcast_shapes(
      mx::broadcast_shapes(x0.shape(), x1.shape()), mx::broadcast_shapes(k0.shape(), k1.shape()));
  // Keys of one element each (jax's) are read as one key; everything else at the result's shape
  // (broadcasts and other strides are read in place by the primitive).
  std::vector<mx::array> in = {k0, k1, x0, x1};
  const bool one_key = k0.size() == 1 && k1.size() == 1;
  for (size_t i = one_key ? 2 : 0; i < in.size(); ++i)
    if (in[i].shape() != shape) in[i] = mx::broadcast_to(in[i], shape);
  auto prim = std::make_shared<CpuThreefry>(mx::default_stream(device));
  std::vector<mx::array> out =
      mx::array::make_arrays({shape, shape}, {mx::uint32, mx::uint32}, prim, in);
  return {out[0], out[1]};
}

}  // namespace jaxmlx::lower
