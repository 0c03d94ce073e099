// Fused multiply-add: the custom calls passes/contract_fma.cc emits, and exact_fma (fma.h).
#include "lower/fma.h"

#include <cmath>
#include <optional>
#include <utility>

#include "lower/cuda_kernels.h"
#include "lower/lowering.h"
#include "lower/row_major.h"
#include "lower/util.h"
#include "mlx/allocator.h"
#include "mlx/backend/cpu/encoder.h"
#include "mlx/ops.h"
#include "mlx/primitives.h"
#include "passes/contract_fma.h"

// Platform-specific: x86-64 Linux with GCC (ifunc resolution); other platforms (arm64 macOS,
// where FMA is always there) build the loop once.
// Not under ThreadSanitizer: GCC instruments the ifunc resolver too, which then runs during
// relocation, before TSan's runtime is up, and crashes every binary at start.
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__)
#define JAXMLX_FMA_CLONES __attribute__((target_clones("fma", "default")))
#else
#define JAXMLX_FMA_CLONES
#endif

namespace jaxmlx::lower {

// `out` is a fresh buffer, a scratch slot no operand uses, or exactly one operand's memory
// (donated): each element is read before it is written either way.
JAXMLX_FMA_CLONES
void fma_loop(const float* a, const float* b, const float* c, float* out, size_t n) {
  for (size_t k = 0; k < n; ++k) out[k] = std::fmaf(a[k], b[k], c[k]);
}

namespace {

// round(a*b + c) on MLX's CPU: std::fmaf per element, over operands of the result's shape read
// through their strides (a polynomial's coefficients are broadcast scalars). Named "Fma": the
// CPU's elementwise fusion evaluates it inside chains by that name (runtime/elementwise_chains.cc).
class CpuFma final : public mx::UnaryPrimitive {
 public:
  explicit CpuFma(mx::Stream stream) : mx::UnaryPrimitive(stream) {}

  void eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) override {
    // An operand MLX would let go of lends its memory to the result, as MLX's own elementwise
    // kernels do (each element is read before it is written).
    bool donated = false;
    for (const mx::array& in : inputs)
      if (!donated && in.flags().row_contiguous && in.data_size() == out.size() &&
          in.is_donatable()) {
        out.copy_shared_buffer(in);
        donated = true;
      }
    if (!donated) out.set_data(mx::allocator::malloc(out.nbytes()));
    if (out.size() == 0) return;
    auto& encoder = mx::cpu::get_command_encoder(stream());
    std::vector<mx::array> ins;
    for (const mx::array& in : inputs) {
      encoder.set_input_array(in);
      ins.push_back(mx::array::unsafe_weak_copy(in));
    }
    encoder.set_output_array(out);
    encoder.dispatch([ins = std::move(ins), out = mx::array::unsafe_weak_copy(out)]() mutable {
      compute(ins, out);
    });
  }
  void eval_gpu(const std::vector<mx::array>&, mx::array&) override {
    throw std::runtime_error("[Fma] runs on MLX's CPU only");
  }
  const char* name() const override { return "Fma"; }
  bool is_equivalent(const mx::Primitive&) const override { return true; }

 private:
  static void compute(const std::vector<mx::array>& in, mx::array& out) {
    std::vector<float> tmp[3];
    const float* x[3];
    for (int i = 0; i < 3; ++i) x[i] = row_major(in[i], tmp[i]);
    fma_loop(x[0], x[1], x[2], out.data<float>(), out.size());
  }
};

using Pair = std::pair<mx::array, mx::array>;

// Knuth's TwoSum: x + y = s + e exactly, with s = RN(x + y) (any magnitudes, no overflow).
Pair two_sum(const mx::array& x, const mx::array& y) {
  mx::array s = x + y;
  mx::array bb = s - x;
  mx::array e = (x - (s - bb)) + (y - bb);
  return {s, e};
}

// x = hi + lo with hi the top 12 significant bits (mask the low 12 encoding bits) and lo the
// rest: both have at most 12 significant bits, so their pairwise products are exact.
Pair split(const mx::array& x) {
  mx::array hi = mx::view(mx::view(x, mx::uint32) & int_scalar(0xFFFFF000, mx::uint32), mx::float32);
  return {hi, x - hi};
}

// Dekker: a*b = p + e exactly, p = RN(a*b), when no partial product underflows.
Pair two_product(const mx::array& a, const mx::array& b) {
  mx::array p = a * b;
  auto [ah, al] = split(a);
  auto [bh, bl] = split(b);
  mx::array e = (((ah * bh - p) + ah * bl) + al * bh) + al * bl;
  return {p, e};
}

// x + y rounded to odd: the exact sum if representable, else whichever neighbour of it has an
// odd encoding. RN(x + y) is one neighbour; if it is even, step one ulp toward the exact sum.
mx::array add_round_to_odd(const mx::array& x, const mx::array& y) {
  auto [s, err] = two_sum(x, y);
  mx::array bits = mx::view(s, mx::int32);
  mx::array even = mx::equal(bits & int_scalar(1, mx::int32), int_scalar(0, mx::int32));
  mx::array inexact = mx::not_equal(err, mx::zeros_like(err));
  // Same signs: the exact sum is farther from zero, so the encoding grows.
  mx::array away = mx::equal(mx::less(bits, int_scalar(0, mx::int32)),
                             mx::less(err, mx::zeros_like(err)));
  mx::array step = mx::where(away, int_scalar(1, mx::int32), int_scalar(-1, mx::int32));
  mx::array nudged = mx::view(bits + step, mx::float32);
  return mx::where(mx::logical_and(inexact, even), nudged, s);
}

StatusOr<Values> lower_fma_call(LowerContext& ctx, const ir::Op& op, const Values& in,
                                bool neg_product, bool neg_addend) {
  if (in.size() != 3 || op.results.size() != 1) return ctx.malformed(op, "fma takes a, b, c");
  const mx::Dtype t = in[0].dtype();
  for (const mx::array& x : in)
    if ((t != mx::float32 && t != mx::float16) || x.dtype() != t || x.shape() != in[0].shape())
      return ctx.unsupported(op, "fma of operands other than f32 or f16 of one shape");
  if (std::optional<mx::array> r = cuda_fma(in[0], in[1], in[2], neg_product, neg_addend))
    return Values{*r};
  mx::array a = neg_product ? mx::negative(in[0]) : in[0];
  mx::array c = neg_addend ? mx::negative(in[2]) : in[2];
  if (t == mx::float16) {
    // As LLVM computes a half FMA without native f16: an f32 FMA rounded to f16. The f16
    // product is exact in f32, so the f32 multiply and add round once, like the FMA.
    mx::array p = mx::astype(a, mx::float32) * mx::astype(in[1], mx::float32);
    return Values{mx::astype(p + mx::astype(c, mx::float32), mx::float16)};
  }
  return Values{exact_fma(a, in[1], c)};
}

}  // namespace

mx::array exact_fma(const mx::array& a, const mx::array& b, const mx::array& c) {
  const mx::Device device = mx::default_device();
  // The primitive reads f32 operands of the result's shape; anything else (never built by our
  // rules) takes the emulation, which MLX's ops broadcast.
  const bool plain = a.dtype() == mx::float32 && b.dtype() == mx::float32 &&
                     c.dtype() == mx::float32 && b.shape() == a.shape() && c.shape() == a.shape();
  if (device.type != mx::Device::cpu || !plain) {
    if (std::optional<mx::array> r = cuda_fma(a, b, c)) return *r;
    return emulated_fma(a, b, c);
  }
  return mx::array(a.shape(), mx::float32, std::make_shared<CpuFma>(mx::default_stream(device)),
                   {a, b, c});
}

mx::array emulated_fma(const mx::array& a, const mx::array& b, const mx::array& c) {
  auto [p, e] = two_product(a, b);
  auto [t, t_err] = two_sum(c, p);
  mx::array v = add_round_to_odd(t_err, e);
  // v == 0: the result is t itself (t + 0 would turn t = -0 into +0). Within an ulp of the
  // largest float TwoSum's own intermediates overflow (NaN): t = RN(c + p) is the answer there.
  mx::array z = mx::where(mx::equal(v, mx::zeros_like(v)), t, t + v);
  z = mx::where(mx::isnan(z), t, z);
  // Infinite or NaN operands, or an overflowing sum: the plain sum has IEEE's answer, except
  // that a finite a*b must not overflow on its own when c is infinite or NaN.
  mx::array finite = mx::logical_and(mx::logical_and(mx::isfinite(p), mx::isfinite(c)),
                                     mx::isfinite(t));
  mx::array c_decides = mx::logical_and(mx::logical_and(mx::isfinite(a), mx::isfinite(b)),
                                        mx::logical_not(mx::isfinite(c)));
  return mx::where(finite, z, mx::where(c_decides, c, p + c));
}

void register_fma(Registry& r) {
  r.add_custom_call(passes::kFmaTarget, [](LowerContext& ctx, const ir::Op& op, const Values& in) {
    return lower_fma_call(ctx, op, in, false, false);
  });
  r.add_custom_call(passes::kFmsTarget, [](LowerContext& ctx, const ir::Op& op, const Values& in) {
    return lower_fma_call(ctx, op, in, false, true);
  });
  r.add_custom_call(passes::kFnmaTarget, [](LowerContext& ctx, const ir::Op& op, const Values& in) {
    return lower_fma_call(ctx, op, in, true, false);
  });
}

}  // namespace jaxmlx::lower
