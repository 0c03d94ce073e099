// Lowering rules: convolution family (see lowering.h for the rule contract).
//
// stablehlo.convolution in any dimension layout: operands are transposed to MLX's layout
// (input [N, spatial..., C], kernel [O, spatial..., I]), the result is transposed back.
// batch_group_count folds into feature groups (the batch groups move next to the features).
// Floats (f16/bf16/f32, or integer operands with a float result) compute in f32 through
// mx::conv_general (on the CPU mostly patch matmuls, on a GPU jax's weight gradients; a dilated
// input as one convolution per output phase, phase_conv, on the CPU and for large inputs on CUDA;
// a kernel reversed over every spatial dim as MLX's `flip`) and round once; complex64 is four
// real convolutions. Integers are exact and
// wrap like XLA: one integer multiply-and-sum over the features per kernel offset, in the
// result type (MLX convolutions are float-only). precision_config is ignored.
// A 0-D convolution (no spatial dims: a grouped matmul) convolves over one unit spatial dim,
// since MLX needs 1-3. Bool convolutions are XLA's or-of-and: an exact integer count of the
// true products, then != 0.
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <optional>
#include <string_view>

#include "lower/conv_cache_keys.h"
#include "lower/shape_util.h"
#include "lower/util.h"
#include "lower/window_util.h"

namespace jaxmlx::lower {

using namespace shape_util;
using namespace window_util;

namespace {

constexpr int64_t kMaxProductElements = int64_t{1} << 24;  // bound for one integer product

// Everything a convolution needs besides its operands, in spatial-dim order.
struct ConvSpec : ir::ConvWindow {  // the window: strides, dilations, padding, reversal
  int nsp = 0;
  int64_t feature_groups = 1, batch_groups = 1;
  // The result's layout: the canonical dims [N, OS..., O] in the order the result holds them
  // (empty: canonical). A patch matmul makes its rows in that order, so that the transposes to
  // MLX's layout and back cancel (jax's weight gradients are [KH, KW, I, O]: OS, OS, N, O).
  std::vector<int> result_order;
};

StatusOr<ConvSpec> read_spec(LowerContext& ctx, const ir::Op& op, const ir::ConvDims& dn) {
  ConvSpec s;
  s.nsp = static_cast<int>(dn.input_spatial_dimensions.size());
  if (std::string bad = ir::read_conv_window(op, static_cast<size_t>(s.nsp), s); !bad.empty())
    return ctx.malformed(op, bad);
  for (int d = 0; d < s.nsp; ++d)
    for (int64_t v : {s.strides[d], s.lhs_dilation[d], s.rhs_dilation[d], s.pad_lo[d], s.pad_hi[d]})
      if (!window_attr_fits(v))
        return ctx.malformed(op, "a window stride, dilation or padding beyond 2^31");
  s.feature_groups = op.get_i64("feature_group_count", 1);
  s.batch_groups = op.get_i64("batch_group_count", 1);
  if (s.feature_groups < 1 || s.batch_groups < 1 || (s.feature_groups > 1 && s.batch_groups > 1) ||
      !window_attr_fits(s.feature_groups) || !window_attr_fits(s.batch_groups))
    return ctx.malformed(op, "bad feature_group_count / batch_group_count");
  return s;
}

// Gives a spec without spatial dims one unit dim (stride, dilations 1, no padding).
void add_unit_spatial_dim(ConvSpec& s) {
  s.nsp = 1;
  s.strides = s.lhs_dilation = s.rhs_dilation = {1};
  s.pad_lo = s.pad_hi = {0};
  s.reversal = {false};
}

std::vector<int> concat_dims(int64_t first, const std::vector<int64_t>& mid, int64_t last) {
  std::vector<int> p{static_cast<int>(first)};
  for (int64_t d : mid) p.push_back(static_cast<int>(d));
  p.push_back(static_cast<int>(last));
  return p;
}

// Input [bg*N, S..., C] -> [N, S..., bg*C]: batch group g becomes feature group g.
mx::array fold_batch_groups(const mx::array& x, int64_t bg) {
  mx::Shape s = x.shape();
  const int r = x.ndim();
  mx::Shape split{static_cast<int>(bg), s[0] / static_cast<int>(bg)};
  split.insert(split.end(), s.begin() + 1, s.end());
  std::vector<int> perm{1};
  for (int d = 2; d < r; ++d) perm.push_back(d);
  perm.push_back(0);
  perm.push_back(r);
  mx::array t = mx::transpose(mx::reshape(x, split), perm);
  mx::Shape folded{split[1]};
  folded.insert(folded.end(), s.begin() + 1, s.end() - 1);
  folded.push_back(static_cast<int>(bg) * s.back());
  return mx::reshape(t, folded);
}

// The canonical input [N, S..., C] dilated by lhs_dilation and padded (zeros; negative crops).
// `axes`: x is the canonical input transposed, its dim axes[i] the canonical dim i (padded in
// its own layout).
mx::array pad_input(const mx::array& x, const ConvSpec& s, const std::vector<int>& axes = {}) {
  const size_t r = static_cast<size_t>(s.nsp) + 2;
  std::vector<int64_t> lo(r, 0), hi(r, 0), interior(r, 0);
  for (int d = 0; d < s.nsp; ++d) {
    const size_t i = axes.empty() ? d + 1 : static_cast<size_t>(axes[d + 1]);
    lo[i] = s.pad_lo[d];
    hi[i] = s.pad_hi[d];
    interior[i] = s.lhs_dilation[d] - 1;
  }
  return pad_dilate(x, mx::zeros({}, x.dtype()), lo, hi, interior);
}

// Whether `a` is pad_dilate's padding, which MLX writes into a new row-contiguous array: a Pad,
// or a slice update of a broadcast fill (its copy of a one-element input allocates; every
// backend).
bool is_filled_copy(const mx::array& a) {
  if (!a.has_primitive()) return false;
  const std::string_view name = a.primitive().name();
  if (name == "Pad") return true;
  if (name != "SliceUpdate") return false;
  const mx::array& base = a.inputs()[0];
  return base.has_primitive() && std::string_view(base.primitive().name()) == "Broadcast";
}

constexpr int64_t kMaxPatchElements = int64_t{1} << 26;  // bound for explicit patches
// Patches over an input dilated by d (jax's input gradients of strided convolutions, transposed
// convolutions) multiply d^nsp - 1 zeros for each input element: at most 4x the work, where they
// still beat MLX's naive loop (a stride-2 2-D conv_transpose 16 -> 14 ms; stride 3 and 4: 29 ->
// 53 and 46 -> 147 ms; 4x16x16x32 inputs, 32 features).
constexpr int64_t kMaxPatchInputDilation = 4;
// On a GPU, the patch elements up to which the weight gradient of a stride-1 convolution (its
// "kernel", the cotangent, undilated and with more taps than the result has positions) is a patch
// matmul; larger ones are MLX's convolution (cuDNN's weight-gradient kernels). Measured on an H200
// only on both sides of it: resnet_train's default-size gradients (at most 1.2M elements) took 79
// µs each in cuDNN's wgrad2d_grouped_direct_kernel against 6-12 µs as matmuls; at the full size
// (2.4M-19M elements) the step was 1.06x native MLX's time with cuDNN's (BENCHMARKS-H200-full.md
// of e4f7f35) and 1.56x with patches (1983646's library, whose other convolution changes may
// share the blame: not yet separated; bench/README.md, "Weight gradients' patches", thirtieth
// stop). Gradients of strided convolutions (a dilated "kernel") are patches at every size, as
// they were in both.
constexpr int64_t kMaxUndilatedGpuPatchElements = int64_t{1} << 21;
// Kernel offsets up to which a depthwise convolution is a sum of shifted inputs (two primitives
// per offset; a 7x7 kernel is 49). Larger windows (a depthwise weight gradient, whose "kernel"
// is the cotangent) take the grouped patches.
constexpr int64_t kMaxDepthwiseTaps = 64;

// A depthwise convolution (one input feature per group; Og = O / C outputs each) of the padded
// input `xp` [N, S..., C]: the sum over kernel offsets k of the input shifted by k (a strided
// view `view_shape`/`view_strides`, offset by k's `tap_strides`) times that tap of the kernel
// [O, K..., 1], in the order of the offsets. MLX's CPU convolution runs feature groups through
// a naive loop: a 7x7 depthwise conv of 8x28x28x96 from jax took 82 ms that way, 14-17 ms as
// this sum (which the CPU's fusion leaves unfused: cpu_fusion.cc, mostly_windows; bench/README,
// "Feature groups on the CPU").
mx::array depthwise_conv(const mx::array& xp, const mx::array& w, const mx::Shape& view_shape,
                         const mx::Strides& view_strides, const mx::Strides& tap_strides,
                         const mx::Shape& out) {
  const int nsp = static_cast<int>(tap_strides.size());
  const int c = xp.shape(-1), og = w.shape(0) / c;
  mx::Shape vs = view_shape;
  vs.push_back(c);
  mx::Strides st = view_strides;
  st.push_back(1);
  std::vector<int64_t> ksp(w.shape().begin() + 1, w.shape().end() - 1);
  std::optional<mx::array> sum;
  for (const std::vector<int64_t>& k : box_offsets(ksp)) {
    int64_t offset = 0;
    mx::Shape ws{0}, we{w.shape(0)};
    for (int d = 0; d < nsp; ++d) {
      offset += k[d] * tap_strides[d];
      ws.push_back(static_cast<int>(k[d]));
      we.push_back(static_cast<int>(k[d] + 1));
    }
    ws.push_back(0), we.push_back(1);
    mx::array shifted = mx::as_strided(xp, vs, st, offset);  // [N, OS..., C]
    mx::array tap = mx::reshape(mx::slice(w, ws, we), {c, og});
    // Og outputs per input feature: [N, OS..., C, 1] * [C, Og].
    mx::array term = og == 1 ? mx::multiply(shifted, mx::reshape(tap, {c}))
                             : mx::multiply(mx::expand_dims(shifted, -1), tap);
    sum = sum ? mx::add(*sum, term) : term;
  }
  return mx::reshape(*sum, out);
}

// A convolution as matmuls over explicit patches: a strided view of the padded (and dilated)
// input [N, OS..., K..., C] (kernel offset k of output position q reads q * stride + k *
// rhs_dilation) times the kernel as [K... * C, O], one matmul per feature group. MLX's CPU
// convolution does the same without groups (explicit_gemm_conv_ND_cpu), but multiplies by the
// kernel transposed, which its Linux reference BLAS does 2x slower (util.h: row_major_rhs_pays),
// and it runs feature groups and dilated inputs or kernels through a naive loop (slow_conv_2D:
// ~2.8x native MLX's time in our ResNet step when jax's weight gradients of strided
// convolutions went there; 2.3x a 3x3 conv of 4 groups). Depthwise convolutions (one input
// feature per group) are a sum of shifted inputs times the kernel's taps instead, with no patches
// (`depthwise_conv`). So on the CPU every float convolution whose input is dilated at most 4x
// over all takes this path (most dilated inputs reach it undilated, one output phase at a time:
// phase_conv). Elsewhere only jax's weight gradients (an undilated input and no groups, its
// "kernel" the cotangent: dilated for a strided convolution, or with more taps than the result
// has positions; the latter up to kMaxUndilatedGpuPatchElements), as MLX computes its own
// (primitives.cpp, conv_weight_backward_patches): on an H200 cuDNN took 79 µs for each of five
// such default-size resnet_train convolutions (wgrad2d_grouped_direct_kernel), where native
// MLX's matmuls took 6-12. MLX's GPU convolutions handle the rest better. nullopt: none of
// those, or the patches would be too large (MLX's own convolution).
std::string_view conv_patches_mode() {
  const char* mode = std::getenv("JAXMLX_CONV_PATCHES");
  return mode == nullptr ? "" : mode;
}

std::optional<mx::array> patch_matmul_conv(const mx::array& x, const mx::array& w,
                                           const ConvSpec& s, int64_t groups) {
  // JAXMLX_CONV_PATCHES (read at each compile): `0` none, so that MLX's own convolution runs
  // everything; `gpu` only what a GPU takes here (the weight gradients), the rest is MLX's own
  // convolution as on a GPU. Tests check those paths (a reversed kernel as `flip`) on the CPU.
  const std::string_view patch_mode = conv_patches_mode();
  if (patch_mode == "0") return std::nullopt;
  const auto one = [](int64_t v) { return v == 1; };
  const int64_t input_dilation = std::accumulate(
      s.lhs_dilation.begin(), s.lhs_dilation.end(), int64_t{1}, std::multiplies<int64_t>());
  const bool dilated_kernel = !std::all_of(s.rhs_dilation.begin(), s.rhs_dilation.end(), one);
  const int nsp = s.nsp;
  std::vector<int64_t> os(nsp);  // result positions per spatial dim
  int64_t positions = 1, taps = 1;
  for (int d = 0; d < nsp; ++d) {
    os[d] = window_count(x.shape(d + 1), s.lhs_dilation[d], s.pad_lo[d], s.pad_hi[d],
                         w.shape(d + 1), s.rhs_dilation[d], s.strides[d]);
    positions *= os[d], taps *= w.shape(d + 1);
  }
  if (positions == 0) return std::nullopt;
  const int64_t patch_elements = x.shape(0) * positions * taps * x.shape(-1);
  const bool weight_gradient =
      dilated_kernel || (taps > positions && patch_elements <= kMaxUndilatedGpuPatchElements);
  const bool cpu = mx::default_device().type == mx::Device::cpu && patch_mode != "gpu";
  if (!(cpu && input_dilation <= kMaxPatchInputDilation) &&
      !(groups == 1 && weight_gradient && input_dilation == 1))
    return std::nullopt;
  // as_strided reads row-major memory: an unpadded input may be a view (a broadcast of jnp.ones,
  // a crop, a transposed layout). Without groups a transposed input is padded as it lies and read
  // through its strides: jax's weight gradients read x [N, S..., C] as [C, S..., N]. Nothing is
  // evaluated yet: a refused graph is dropped.
  const Untransposed u = groups == 1 ? untransposed(x) : Untransposed{x, {}};
  mx::array xp = pad_input(u.source, s, u.axes);
  if (!is_filled_copy(xp)) xp = mx::contiguous(xp);
  if (static_cast<int64_t>(xp.size()) > kMaxPatchElements) return std::nullopt;
  // The padded input's canonical dims: sizes and strides in xp's row-major memory.
  const int rank = xp.ndim();
  mx::Strides row(rank, 1);
  for (int i = rank - 2; i >= 0; --i) row[i] = row[i + 1] * xp.shape(i + 1);
  mx::Shape xs(rank);
  mx::Strides cs(rank);
  for (int i = 0; i < rank; ++i) {
    const int a = u.axes.empty() ? i : u.axes[i];
    xs[i] = xp.shape(a), cs[i] = row[a];
  }
  // Row dim rd of the patches: 0 the batch, d + 1 the result positions along spatial dim d.
  const auto row_size = [&](int rd) { return rd == 0 ? xs[0] : static_cast<int>(os[rd - 1]); };
  const auto row_stride = [&](int rd) { return rd == 0 ? cs[0] : cs[rd] * s.strides[rd - 1]; };
  mx::Shape shape, kshape;
  mx::Strides strides, kstrides;
  for (int rd = 0; rd <= nsp; ++rd)
    shape.push_back(row_size(rd)), strides.push_back(row_stride(rd));
  for (int d = 0; d < nsp; ++d) {
    kshape.push_back(w.shape(d + 1));
    kstrides.push_back(cs[d + 1] * s.rhs_dilation[d]);
  }
  const int64_t c = xs.back(), n = xs[0];
  const int g = static_cast<int>(groups), cg = static_cast<int>(c / groups);
  const int o = w.shape(0), og = o / g;
  mx::Shape out(shape.begin(), shape.end());
  out.push_back(o);
  if (groups > 1 && cg == 1 && taps <= kMaxDepthwiseTaps)
    return depthwise_conv(xp, w, shape, strides, kstrides, out);
  if (patch_elements > kMaxPatchElements) return std::nullopt;
  const int rows = static_cast<int>(n * positions), depth = static_cast<int>(taps * cg);
  // The rows in the result's order where it has O last (no groups), else [N, OS...].
  std::vector<int> row_dims(nsp + 1);
  std::iota(row_dims.begin(), row_dims.end(), 0);
  const bool result_rows = g == 1 && s.result_order.size() == static_cast<size_t>(nsp) + 2 &&
                           s.result_order.back() == nsp + 1;
  if (result_rows) row_dims.assign(s.result_order.begin(), s.result_order.end() - 1);
  // The kernel [O, K..., Cg] as the matrix [K..., Cg, O], or [Cg, K..., O] where that is how it
  // lies: jax's weight gradients convolve by the cotangent [N, S..., O] read as [O, S..., N]
  // (jax's forward kernels, HWIO, are the first). The patches' depth follows.
  std::vector<int> taps_first, features_first{nsp + 1};
  for (int d = 1; d <= nsp; ++d) taps_first.push_back(d), features_first.push_back(d);
  taps_first.push_back(nsp + 1);
  taps_first.push_back(0), features_first.push_back(0);
  bool by_features = false;
  if (g == 1) {
    const Untransposed wu = untransposed(w);
    auto lies_as = [&](const std::vector<int>& p) {
      std::vector<int> composed;
      for (int d : p) composed.push_back(wu.axes[d]);
      return is_identity(composed);
    };
    by_features = !lies_as(taps_first) && lies_as(features_first);
  }
  // Where the input's innermost dim in memory is the rows' innermost (jax's weight gradients: x's
  // features, the canonical batch, last in HWIO's rows), the patches are copied depth-major,
  // [depth..., rows...], so that the copy reads along that dim (native MLX's own weight-gradient
  // patches, [N, OS..., K..., C], are read this way), and the matmul takes them transposed (in
  // place). Else [G, rows..., depth...].
  const int inner = static_cast<int>(
      std::find(u.axes.begin(), u.axes.end(), rank - 1) - u.axes.begin());
  const bool depth_major =
      g == 1 && !u.axes.empty() && inner == 0 && cs[0] == 1 && row_dims.back() == 0;
  mx::Shape rshape, dshape;
  mx::Strides rstrides, dstrides;
  for (int rd : row_dims) rshape.push_back(row_size(rd)), rstrides.push_back(row_stride(rd));
  if (by_features) dshape.push_back(cg), dstrides.push_back(cs.back());
  dshape.insert(dshape.end(), kshape.begin(), kshape.end());
  dstrides.insert(dstrides.end(), kstrides.begin(), kstrides.end());
  if (!by_features) dshape.push_back(cg), dstrides.push_back(cs.back());
  mx::Shape pshape{g};
  mx::Strides pstrides{cg * cs.back()};
  const auto append = [&](const mx::Shape& sh, const mx::Strides& st) {
    pshape.insert(pshape.end(), sh.begin(), sh.end());
    pstrides.insert(pstrides.end(), st.begin(), st.end());
  };
  if (depth_major)
    append(dshape, dstrides), append(rshape, rstrides);
  else
    append(rshape, rstrides), append(dshape, dstrides);
  mx::array patches = mx::as_strided(xp, pshape, pstrides, 0);
  patches = depth_major ? mx::swapaxes(mx::reshape(patches, {g, depth, rows}), 1, 2)
                        : mx::reshape(patches, {g, rows, depth});
  mx::array kernel = [&] {
    if (g == 1)
      return mx::reshape(permute(w, by_features ? features_first : taps_first), {1, depth, og});
    // [G * Og, K..., Cg] -> [G, K..., Cg, Og].
    mx::Shape split{g, og};
    split.insert(split.end(), w.shape().begin() + 1, w.shape().end());
    std::vector<int> to_last{0};
    for (int d = 2; d < nsp + 3; ++d) to_last.push_back(d);
    to_last.push_back(1);
    return mx::reshape(mx::transpose(mx::reshape(w, split), to_last), {g, depth, og});
  }();
  if (row_major_rhs_pays(rows)) kernel = mx::contiguous(kernel);
  mx::array y = mx::matmul(patches, kernel);  // [G, rows, Og]
  if (g > 1) y = mx::transpose(y, {1, 0, 2});
  if (!result_rows) return mx::reshape(y, out);
  // [rows in the result's order..., O], returned as the canonical view of it (the caller's
  // permutation to the result's layout cancels it).
  mx::Shape held;
  std::vector<int> canonical(nsp + 2);
  for (size_t j = 0; j < s.result_order.size(); ++j) {
    held.push_back(out[s.result_order[j]]);
    canonical[s.result_order[j]] = static_cast<int>(j);
  }
  return permute(mx::reshape(y, held), canonical);
}

// Whether MLX's convolutions run where MLX caches a cuDNN graph per key without the input
// dilation (conv_cache_keys.h): on CUDA, and with JAXMLX_CONV_PATCHES=gpu on the CPU, for tests.
// There every convolution handed to MLX claims its key with its input dilation. Before the
// record (MLX 0.32.4 on an H200) jax's conv_transpose with VALID or explicit padding and strides
// (2, 2) and (3, 2) gave wrong values, which cases changed between runs; so every input was
// dilated here.
bool keyed_conv_cache() { return on_cuda_gpu() || conv_patches_mode() == "gpu"; }

ConvCacheKey cache_key(const mx::array& x, const mx::array& w, const ConvSpec& s,
                       const std::vector<int64_t>& lo, const std::vector<int64_t>& hi, int groups,
                       bool flip) {
  return {x.dtype(), x.shape(), w.shape(), to_ints(s.strides), to_ints(lo),
          to_ints(hi), to_ints(s.rhs_dilation), groups, flip};
}

// Whether MLX may dilate the input of this convolution itself, where its cache is keyed without
// the dilation: the first claim of its key, for a convolution of jax's input-gradient form, which
// native MLX's own gradients hand cuDNN as its data gradient with a stride (an explicit dilation
// is a fill and a strided copy, two more kernels, and the dilated input's memory). MLX builds that
// data gradient for a forward convolution padded by K - 1 - lo on both sides (K the dilated
// kernel's extent), which is this convolution only where 0 <= hi - lo < D (jax's gradients of
// symmetrically padded convolutions; SAME's asymmetric padding is not) and lo < K; besides:
// flipped, window stride 1, no groups and some padding. An undilated convolution of a key claimed
// so gets its padding explicit (float_conv): no dilated convolution claims a key without padding.
bool mlx_may_dilate(const mx::array& x, const mx::array& w, const ConvSpec& s, int64_t groups,
                    bool flip) {
  if (!flip || groups != 1) return false;
  bool padded = false;
  for (int d = 0; d < s.nsp; ++d) {
    const int64_t lo = s.pad_lo[d], hi = s.pad_hi[d], dil = s.lhs_dilation[d];
    const int64_t extent = dilated_size(w.shape(d + 1), s.rhs_dilation[d]);
    if (s.strides[d] != 1 || lo < 0 || lo >= extent || hi - lo < 0 || hi - lo >= dil)
      return false;
    padded = padded || lo != 0 || hi != 0;
  }
  return padded && claim_conv_key(cache_key(x, w, s, s.pad_lo, s.pad_hi, 1, flip),
                                  to_ints(s.lhs_dilation));
}

// Whether an input-dilated float convolution of `x` (the undilated input) is computed as one
// undilated convolution per output phase (`phase_conv`): JAXMLX_CONV_PHASES=1/0, read at each
// compile. Default on the CPU only. Not on Metal, whose 2-D convolution of a dilated input splits
// the output into the same phases inside one kernel (MLX's implicit_gemm_conv_2D_general_gpu).
// Not on CUDA: each phase is a cuDNN call of its own, with its input cropped (a copy: see
// cudnn_operand) and its taps flipped by cuDNN's data-gradient convolution, and on an H200
// resnet_train's step took 11.1 ms at the full size with phases (its dilated inputs 3-16 MiB),
// 8.06 without, native MLX 8.04; 3.28 and 2.72 ms at the default size, native 2.52
// (bench/env_ab.py, bench/README "Phases off on CUDA"). The input is then dilated explicitly
// (keyed_conv_cache, mlx_may_dilate).
bool phases_wanted() {
  const char* v = std::getenv("JAXMLX_CONV_PHASES");
  if (v != nullptr && *v != '\0') return *v != '0';
  return mx::default_device().type == mx::Device::cpu;
}

constexpr int64_t kMaxPhases = 64;  // output phases of one convolution (a 3-D stride-4 transpose)

mx::array float_conv(mx::array x, const mx::array& w, const ConvSpec& s, int64_t groups,
                     bool flip);

// `w` reversed over every spatial dim ([O, K..., I]).
mx::array flip_spatial(const mx::array& w) {
  std::vector<int> dims(w.ndim() - 2);
  std::iota(dims.begin(), dims.end(), 1);
  return mx::flip(w, dims);
}

// A convolution of an input dilated by D (jax's input gradients of strided convolutions,
// transposed convolutions) without the dilated input: output position o = q * D + p reads input
// element (o + k - lo) / D only for the kernel offsets k = r + m * D, r = (lo - p) mod D, so each
// output phase p is a stride-1 convolution of the undilated input by the kernel's taps r::D,
// shifted by c = (p + r - lo) / D: y[q * D + p] = sum_m w[r + m * D] * x[q + m + c] (zero outside
// x). A phase without taps stays zero. The phases are written into the result with strided slice
// updates. Nothing of the dilated input's size exists (on CUDA, when every dilation there was
// explicit, resnet's step peaked 13 % above native MLX's), and the products
// by its zeros are skipped: the phases together multiply by the kernel's taps once. Dims with
// D > 1 need window stride 1 and an undilated kernel (jax's input gradients have both); nullopt
// otherwise or beyond kMaxPhases phases. `flip`: the kernel is w reversed over every spatial
// dim; each phase's taps are then sliced from w in w's order and reversed by its convolution.
std::optional<mx::array> phase_conv(const mx::array& x, const mx::array& w, const ConvSpec& s,
                                    int64_t groups, bool flip) {
  const int nsp = s.nsp;
  std::vector<int> dilated;
  int64_t phases = 1;
  mx::Shape out{x.shape(0)};
  for (int d = 0; d < nsp; ++d) {
    const int64_t dil = s.lhs_dilation[d], k = w.shape(d + 1);
    const int64_t padded = dilated_size(x.shape(d + 1), dil) + s.pad_lo[d] + s.pad_hi[d];
    const int64_t span = dilated_size(k, s.rhs_dilation[d]);
    if (padded < span) return std::nullopt;
    out.push_back(static_cast<int>((padded - span) / s.strides[d] + 1));
    if (dil == 1) continue;
    if (s.strides[d] != 1 || s.rhs_dilation[d] != 1) return std::nullopt;
    dilated.push_back(d);
    phases *= dil;
  }
  out.push_back(w.shape(0));
  if (dilated.empty() || phases > kMaxPhases) return std::nullopt;
  mx::array y = mx::zeros(out, mx::float32);
  std::vector<int64_t> dims;
  for (int d : dilated) dims.push_back(s.lhs_dilation[d]);
  for (const std::vector<int64_t>& p : box_offsets(dims)) {
    ConvSpec ps = s;
    ps.result_order.clear();  // the phases are written into a canonical result
    mx::Shape ks(w.ndim(), 0), ke = w.shape(), kstep(w.ndim(), 1);
    mx::Shape ys(out.size(), 0), ye = out, ystep(out.size(), 1);
    bool empty = false;
    for (size_t i = 0; i < dilated.size() && !empty; ++i) {
      const int d = dilated[i];
      const int64_t dil = s.lhs_dilation[d], k = w.shape(d + 1), len = x.shape(d + 1);
      const int64_t os = out[d + 1], lo = s.pad_lo[d];
      const int64_t r = ((lo - p[i]) % dil + dil) % dil;
      const int64_t taps = k > r ? (k - r + dil - 1) / dil : 0;
      const int64_t q = os > p[i] ? (os - p[i] + dil - 1) / dil : 0;
      const int64_t c = (p[i] + r - lo) / dil;  // exact: p + r - lo is a multiple of dil
      // Input elements read: [c, c + q + taps - 2]; none inside x leaves the phase zero.
      empty = taps == 0 || q == 0 || c > len - 1 || c + q + taps - 2 < 0;
      ps.lhs_dilation[d] = 1;
      ps.pad_lo[d] = -c;
      ps.pad_hi[d] = q + taps - 1 - len + c;
      // Taps r, r + D, ... of the reversed kernel are w's k - 1 - r, k - 1 - r - D, ...: sliced
      // ascending from the last of them.
      const int64_t first = flip ? k - 1 - r - (taps - 1) * dil : r;
      ks[d + 1] = static_cast<int>(std::max<int64_t>(first, 0));
      kstep[d + 1] = static_cast<int>(dil);
      ys[d + 1] = static_cast<int>(p[i]), ystep[d + 1] = static_cast<int>(dil);
    }
    if (empty) continue;
    mx::array phase = float_conv(x, mx::slice(w, ks, ke, kstep), ps, groups, flip);
    y = mx::slice_update(y, phase, ys, ye, ystep);
  }
  return y;
}

// An operand of MLX's convolution as cuDNN takes it. MLX hands a row-contiguous view to cuDNN as
// it lies, at its offset (it copies only other views), and on an H200 cuDNN rejected one: a
// phase's taps sliced from a transposed kernel (phase_conv; CUDNN_STATUS_BAD_PARAM_MISALIGNED_
// POINTER in test_conv_transpose_1d). Crops of one image [1, S..., C] along its first spatial dim
// are views of the same kind (they passed there). On CUDA an operand that may be one (a slice,
// through any reshapes and transposes) is gathered into a new array; a view that is not
// row-contiguous would have been copied by MLX anyway.
mx::array cudnn_operand(const mx::array& a) {
  if (!on_cuda_gpu()) return a;
  for (const mx::array* v = &a; v->has_primitive(); v = &v->inputs()[0]) {
    const std::string_view name = v->primitive().name();
    if (name == "Slice" || name == "AsStrided")
      return mx::take(a, mx::arange(0, a.shape(1), 1, mx::int32), 1);
    if (name != "Transpose" && !is_pending_reshape(*v)) break;
  }
  return a;
}

// The kernel [O, K..., I] of MLX's convolution without groups, as CUDA's reads it best. MLX copies
// a kernel that is not row-contiguous before cuDNN, in every call (mlx/backend/cuda/conv.cpp,
// prepare_args), and its flipped convolution (cuDNN's data gradient) reads the kernel with dims
// O and I swapped back to the forward order. jax keeps kernels as HWIO, a transposed view here,
// so a training step copied each kernel twice: for its forward convolution and for its input
// gradient (39 copies in a default-size resnet_train step). Here a transposed kernel is one
// explicit copy in the forward order, which the forward convolution reads as it lies, the
// flipped one as a swapped view that MLX swaps back, and which a replayed graph computes once
// (mx::compile's simplification merges equal transposes and copies of one source). Not on Metal,
// whose flipped convolution copies the kernel in the order it is given. JAXMLX_CONV_PATCHES=gpu
// does the same on the CPU, for tests.
mx::array cuda_kernel(const mx::array& w, bool flip) {
  const mx::array k = cudnn_operand(w);
  if (k.id() != w.id() || !(on_cuda_gpu() || conv_patches_mode() == "gpu")) return k;
  const Untransposed u = untransposed(w);
  std::vector<int> forward = u.axes, swap(w.ndim());
  std::iota(swap.begin(), swap.end(), 0);
  if (flip) std::swap(forward.front(), forward.back()), std::swap(swap.front(), swap.back());
  // A source already in the forward order (up to size-1 dims) is read where it lies.
  int last = -1;
  bool in_order = true;
  for (int d : forward)
    if (u.source.shape(d) > 1) in_order = in_order && d > last, last = d;
  if (in_order) return w;
  const mx::array copy = mx::contiguous(permute(u.source, forward));
  return flip ? permute(copy, swap) : copy;
}

// A float convolution of canonical operands (f32), output [N, OS..., O]. `flip`: the kernel is
// `w` reversed over every spatial dim, which MLX's convolution takes as its `flip` argument
// (passes/reversed_kernel.h); the patch matmuls take the reversed view.
mx::array float_conv(mx::array x, const mx::array& w, const ConvSpec& s, int64_t groups,
                     bool flip) {
  if (phases_wanted())
    if (std::optional<mx::array> y = phase_conv(x, w, s, groups, flip)) return *y;
  const bool negative =
      std::any_of(s.pad_lo.begin(), s.pad_lo.end(), [](int64_t p) { return p < 0; }) ||
      std::any_of(s.pad_hi.begin(), s.pad_hi.end(), [](int64_t p) { return p < 0; });
  std::vector<int64_t> lo = s.pad_lo, hi = s.pad_hi, ldil = s.lhs_dilation;
  const bool dilated = std::any_of(ldil.begin(), ldil.end(), [](int64_t d) { return d > 1; });
  const bool keyed = keyed_conv_cache();
  if (negative || (dilated && keyed && !mlx_may_dilate(x, w, s, groups, flip))) {
    // MLX cannot crop; pad (and dilate, which precedes cropping in StableHLO) explicitly.
    x = pad_input(x, s);
    std::fill(lo.begin(), lo.end(), 0);
    std::fill(hi.begin(), hi.end(), 0);
    std::fill(ldil.begin(), ldil.end(), 1);
  }
  ConvSpec padded = s;
  padded.pad_lo = lo, padded.pad_hi = hi, padded.lhs_dilation = ldil;
  if (std::optional<mx::array> y =
          patch_matmul_conv(x, flip ? flip_spatial(w) : w, padded, groups))
    return *y;
  auto conv = [&](mx::array a, const mx::array& b, int g) {
    std::vector<int64_t> plo = lo, phi = hi;
    if (keyed && !claim_conv_key(cache_key(a, b, s, plo, phi, g, flip), to_ints(ldil))) {
      // Undilated under the key of a convolution MLX dilates (mlx_may_dilate; a dilated one
      // here claimed its key there): padded here, the key is one without padding, which no
      // dilated convolution claims.
      a = pad_input(a, padded);
      std::fill(plo.begin(), plo.end(), 0);
      std::fill(phi.begin(), phi.end(), 0);
    }
    return mx::conv_general(cudnn_operand(a), g == 1 ? cuda_kernel(b, flip) : cudnn_operand(b),
                            to_ints(s.strides), to_ints(plo), to_ints(phi),
                            to_ints(s.rhs_dilation), to_ints(ldil), g, flip);
  };
  if (groups == 1 || s.nsp <= 2) return conv(x, w, static_cast<int>(groups));
  // MLX groups only 1- and 2-D convolutions: one convolution per group, concatenated.
  const int g = static_cast<int>(groups), cg = x.shape(-1) / g, og = w.shape(0) / g;
  std::vector<mx::array> parts;
  for (int i = 0; i < g; ++i) {
    mx::Shape xs(x.ndim(), 0), xe = x.shape(), ws(w.ndim(), 0), we = w.shape();
    xs.back() = i * cg, xe.back() = (i + 1) * cg;
    ws[0] = i * og, we[0] = (i + 1) * og;
    parts.push_back(conv(mx::slice(x, xs, xe), mx::slice(w, ws, we), 1));
  }
  return mx::concatenate(parts, -1);
}

// An exact integer convolution of canonical operands in `acc`: for every kernel offset, the
// strided input window times that offset's kernel slice, summed over the group's features.
mx::array int_conv(const mx::array& x_in, const mx::array& w, const ConvSpec& s, int64_t groups,
                   const mx::Shape& out_shape, mx::Dtype acc) {
  mx::array x = pad_input(mx::astype(x_in, acc), s);
  const int g = static_cast<int>(groups);
  const int n = out_shape[0], o = out_shape.back(), c = x.shape(-1), cg = c / g, og = o / g;
  int64_t rows = n;
  for (int d = 0; d < s.nsp; ++d) rows *= out_shape[d + 1];
  const int64_t per_c = std::max<int64_t>(rows * o, 1);
  const int cc = static_cast<int>(std::clamp<int64_t>(kMaxProductElements / per_c, 1, cg));
  std::vector<int64_t> ksp(w.shape().begin() + 1, w.shape().end() - 1);
  std::vector<int64_t> stride{1}, count{n};
  for (int d = 0; d < s.nsp; ++d) stride.push_back(s.strides[d]), count.push_back(out_shape[d + 1]);
  stride.push_back(1), count.push_back(c);
  mx::array wa = mx::astype(w, acc);
  std::optional<mx::array> sum;
  for (const std::vector<int64_t>& k : box_offsets(ksp)) {
    std::vector<int64_t> start{0};
    mx::Shape ws{0}, we{o};
    for (int d = 0; d < s.nsp; ++d) {
      start.push_back(k[d] * s.rhs_dilation[d]);
      ws.push_back(static_cast<int>(k[d]));
      we.push_back(static_cast<int>(k[d] + 1));
    }
    start.push_back(0), ws.push_back(0), we.push_back(c);
    // [rows, G, 1, Cg] * [G, Og, Cg] summed over Cg (in chunks that bound the product).
    mx::array xs =
        mx::reshape(strided_window(x, start, stride, count), {static_cast<int>(rows), g, 1, cg});
    mx::array wk = mx::reshape(mx::slice(wa, ws, we), {g, og, cg});
    for (int c0 = 0; c0 < cg; c0 += cc) {
      const int c1 = std::min(cg, c0 + cc);
      mx::array xc =
          cc == cg ? xs : mx::slice(xs, {0, 0, 0, c0}, {static_cast<int>(rows), g, 1, c1});
      mx::array wc = cc == cg ? wk : mx::slice(wk, {0, 0, c0}, {g, og, c1});
      // MLX widens small-int sums; the cast back wraps exactly (modular arithmetic).
      mx::array part = mx::astype(mx::sum(mx::multiply(xc, wc), 3), acc);
      sum = sum ? mx::add(*sum, part) : part;
    }
  }
  return mx::reshape(*sum, out_shape);
}

StatusOr<Values> lower_convolution(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != 2) return ctx.malformed(op, "convolution takes two operands");
  const auto* dn = op.attr<ir::ConvDims>("dimension_numbers");
  if (dn == nullptr) return ctx.malformed(op, "missing dimension_numbers");
  const ir::Type &lt = operand_type(op, 0), &kt = operand_type(op, 1), &rt = result_type(op);
  if (!is_static(lt) || !is_static(kt) || !is_static(rt))
    return ctx.unsupported(op, "dynamic shapes");
  RETURN_IF_ERROR(require_native(ctx, op));
  const bool pred_out = rt.dtype == ir::ElementType::kPred;
  if (pred_out && (lt.dtype != ir::ElementType::kPred || kt.dtype != ir::ElementType::kPred))
    return ctx.unsupported(op, "boolean result from non-boolean operands");
  // Each operand's and the result's dims, named once each: the layouts permute them.
  auto layout = [](int64_t first, const std::vector<int64_t>& mid, int64_t last) {
    std::vector<int64_t> dims{first};
    dims.insert(dims.end(), mid.begin(), mid.end());
    dims.push_back(last);
    return dims;
  };
  if (!is_permutation(layout(dn->input_batch_dimension, dn->input_spatial_dimensions,
                             dn->input_feature_dimension), lt.rank()) ||
      !is_permutation(layout(dn->kernel_output_feature_dimension, dn->kernel_spatial_dimensions,
                             dn->kernel_input_feature_dimension), kt.rank()) ||
      !is_permutation(layout(dn->output_batch_dimension, dn->output_spatial_dimensions,
                             dn->output_feature_dimension), rt.rank()))
    return ctx.malformed(op, "dimension_numbers do not name each dim of the operands once");
  ASSIGN_OR_RETURN(ConvSpec s, read_spec(ctx, op, *dn));
  // The window's positions per spatial dim, as StableHLO infers them, must be the result's: the
  // rest of this rule sizes patches and phases from the attributes (within int32 each).
  for (int d = 0; d < s.nsp; ++d)
    if (window_count(lt.dims[dn->input_spatial_dimensions[d]], s.lhs_dilation[d], s.pad_lo[d],
                     s.pad_hi[d], kt.dims[dn->kernel_spatial_dimensions[d]], s.rhs_dilation[d],
                     s.strides[d]) != rt.dims[dn->output_spatial_dimensions[d]])
      return ctx.malformed(op, "the result's spatial dims do not match the window");
  auto out_dt = storage_dtype(rt.dtype);
  if (!out_dt) return ctx.unsupported(op, "result type " + type_to_string(rt));
  // Canonical layouts: x [N, S..., C], w [O, K..., I], y [N, OS..., O].
  mx::array x =
      permute(in[0], concat_dims(dn->input_batch_dimension, dn->input_spatial_dimensions,
                                 dn->input_feature_dimension));
  mx::array w = permute(
      in[1], concat_dims(dn->kernel_output_feature_dimension, dn->kernel_spatial_dimensions,
                         dn->kernel_input_feature_dimension));
  std::vector<int> yperm = concat_dims(dn->output_batch_dimension, dn->output_spatial_dimensions,
                                       dn->output_feature_dimension);
  mx::Shape yshape;
  for (int d : yperm) yshape.push_back(static_cast<int>(rt.dims[d]));
  std::vector<int> back(yperm.size());
  for (size_t i = 0; i < yperm.size(); ++i) back[yperm[i]] = static_cast<int>(i);
  const mx::Shape ycanon = yshape;  // [N, OS..., O], before a unit spatial dim is added
  if (s.nsp > 0) s.result_order = back;
  if (s.nsp == 0) {
    x = mx::expand_dims(x, 1), w = mx::expand_dims(w, 1);
    yshape.insert(yshape.begin() + 1, 1);
    add_unit_spatial_dim(s);
  }
  int64_t groups = s.feature_groups;
  if (s.batch_groups > 1) {
    if (x.shape(0) % s.batch_groups != 0) return ctx.malformed(op, "batch not divisible");
    x = fold_batch_groups(x, s.batch_groups);
    groups = s.batch_groups;
  }
  // A window reversed along every spatial dim of a plain kernel is MLX's `flip` where MLX
  // convolves floats (float_conv); otherwise the reversed dims are a reversed view of the kernel.
  // Not with groups or a dilated kernel: on an H200, the input gradient of a grouped convolution
  // with a dilated kernel (tests/ops/test_convolution.py, test_cnn_grad, 2 and 4 groups) came out
  // wrong with `flip`, in some runs and not others.
  const bool undilated_kernel =
      std::all_of(s.rhs_dilation.begin(), s.rhs_dilation.end(), [](int64_t d) { return d == 1; });
  const bool flip_all = groups == 1 && undilated_kernel &&
                        std::all_of(s.reversal.begin(), s.reversal.end(), [](bool r) { return r; });
  std::vector<int> reversed_dims;
  for (int d = 0; d < s.nsp; ++d)
    if (s.reversal[d] && !flip_all) reversed_dims.push_back(d + 1);
  if (!reversed_dims.empty()) w = mx::flip(w, reversed_dims);
  auto reversed = [&](const mx::array& k) { return flip_all ? flip_spatial(k) : k; };
  // Empty result, or an empty contraction (no features, an empty kernel window): all zeros.
  if (rt.num_elements() == 0 || x.size() == 0 || w.size() == 0)
    return Values{mx::zeros(storage_shape(rt), *out_dt)};
  if (x.shape(-1) != w.shape(-1) * groups || w.shape(0) % groups != 0)
    return ctx.malformed(op, "feature counts do not match the group count");
  const bool int_out = mx::issubdtype(*out_dt, mx::integer);
  auto is_int = [](const mx::array& a) {
    return a.dtype() == mx::bool_ || mx::issubdtype(a.dtype(), mx::integer);
  };
  mx::array y = mx::zeros({}, *out_dt);
  if (pred_out) {
    // Counts of true products fit int32 (a window holds far fewer than 2^31 elements).
    y = mx::not_equal(int_conv(x, reversed(w), s, groups, yshape, mx::int32),
                      mx::zeros({}, mx::int32));
  } else if (int_out) {
    if (!is_int(x) || !is_int(w)) return ctx.unsupported(op, "integer result from float operands");
    y = int_conv(x, reversed(w), s, groups, yshape, *out_dt);
  } else if (*out_dt == mx::complex64) {
    mx::array xc = mx::astype(x, mx::complex64), wc = mx::astype(w, mx::complex64);
    auto conv = [&](const mx::array& a, const mx::array& b) {
      return float_conv(a, b, s, groups, flip_all);
    };
    mx::array xr = mx::real(xc), xi = mx::imag(xc), wr = mx::real(wc), wi = mx::imag(wc);
    mx::array re = mx::subtract(conv(xr, wr), conv(xi, wi));
    mx::array im = mx::add(conv(xr, wi), conv(xi, wr));
    // Interleave (re, im) pairs and reinterpret them as complex64: exact, unlike re + i*im.
    y = mx::squeeze(mx::view(mx::stack({re, im}, -1), mx::complex64), -1);
  } else {
    y = float_conv(mx::astype(x, mx::float32), mx::astype(w, mx::float32), s, groups, flip_all);
  }
  if (y.shape() != yshape) return ctx.malformed(op, "result shape does not match the window");
  return Values{mx::astype(permute(reshape_view(y, ycanon), back), *out_dt)};
}

}  // namespace

void register_convolution(Registry& r) { r.add(ir::OpKind::kConvolution, lower_convolution); }

}  // namespace jaxmlx::lower
