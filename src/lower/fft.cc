// Lowering rules: fft family (see lowering.h for the rule contract): stablehlo.fft of every
// fft_type over the 1-3 trailing dims named by fft_length, with MLX's fft ops.
//
// spec: fft. FFT/IFFT map complex64 -> complex64 of the same shape; RFFT maps f32 [..., n] to
// complex64 [..., n/2+1]; IRFFT maps complex64 [..., n/2+1] to f32 [..., n]. Normalization is
// XLA's: forward unscaled, inverse divided by the product of fft_length — MLX's "backward"
// norm, the same convention. jnp's norm= modes are scalings jax emits around the op.
#include <vector>

#include "lower/shape_util.h"
#include "mlx/fft.h"

namespace jaxmlx::lower {

using namespace shape_util;

namespace {

constexpr int kMaxFftRank = 3;

StatusOr<Values> lower_fft(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != 1) return ctx.malformed(op, "fft takes 1 operand");
  RETURN_IF_ERROR(require_native(ctx, op));
  const ir::Type& it = operand_type(op, 0);
  const ir::Type& ot = result_type(op);
  if (!is_static(it) || !is_static(ot)) return ctx.unsupported(op, "dynamic shapes");
  const std::vector<int64_t> len = op.get_i64s("fft_length");
  const int rank = static_cast<int>(len.size());
  if (rank < 1 || rank > kMaxFftRank || rank > it.rank())
    return ctx.malformed(op, "fft_length must name 1-3 trailing dims");
  const auto type = static_cast<ir::FftType>(op.get_enum("fft_type"));
  const mx::Shape out_shape = storage_shape(ot);
  const mx::Dtype out_dt = *storage_dtype(ot.dtype);
  // Nothing to transform (an empty batch or transform dim): MLX's fft kernels reject size 0.
  if (ot.num_elements() == 0 || it.num_elements() == 0) return Values{mx::zeros(out_shape, out_dt)};
  std::vector<int> axes;
  for (int i = 0; i < rank; ++i) axes.push_back(static_cast<int>(it.rank()) - rank + i);
  const mx::Shape n = to_shape(len);
  const mx::array& x = in[0];
  switch (type) {
    case ir::FftType::kFFT: return Values{mx::fft::fftn(x, n, axes)};
    case ir::FftType::kIFFT: return Values{mx::fft::ifftn(x, n, axes)};
    case ir::FftType::kRFFT: return Values{mx::fft::rfftn(x, n, axes)};
    case ir::FftType::kIRFFT: {
      // MLX reads the first n/2+1 entries of the last axis (padding with zeros if shorter), as
      // XLA does; the imaginary parts of the DC and Nyquist terms are ignored by both.
      return Values{mx::fft::irfftn(x, n, axes)};
    }
  }
  return ctx.malformed(op, "unknown fft_type");
}

}  // namespace

void register_fft(Registry& r) { r.add(ir::OpKind::kFft, lower_fft); }

}  // namespace jaxmlx::lower
