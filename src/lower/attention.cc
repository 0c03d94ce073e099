// Lowering rule: jaxmlx.attention, jax's scaled dot-product attention chain as recognized by
// passes/attention.h (see there for the semantics kept): MLX's fused attention kernel over
// [B, N, T, D] operands; on the CPU (or a configuration MLX's GPU kernels lack) MLX composes it.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <utility>

#include "lower/shape_util.h"
#include "lower/util.h"
#include "mlx/fast.h"
#include "passes/attention.h"

namespace jaxmlx::lower {
namespace {

using namespace shape_util;

// What a masked score gets added: -2^100 (attention.h: why not jax's fill or -inf).
constexpr float kMaskedOut = -1.2676506e30f;

// The dims [0, rank) in MLX's four groups [B, N, rows, cols]: the first `batch` dims make B and
// N (the last one N), the next `rows` dims one dim, the rest the last.
std::array<std::pair<size_t, size_t>, 4> groups_4d(size_t batch, size_t rows, size_t rank) {
  const size_t n = batch == 0 ? 0 : batch - 1;
  return {{{0, n}, {n, batch}, {batch, batch + rows}, {batch + rows, rank}}};
}

// `shape` as its four groups' sizes.
mx::Shape shape_4d(const mx::Shape& shape, size_t batch, size_t rows) {
  mx::Shape out;
  for (auto [lo, hi] : groups_4d(batch, rows, shape.size())) {
    int n = 1;
    for (size_t i = lo; i < hi; ++i) n *= shape[i];
    out.push_back(n);
  }
  return out;
}

// `x` with its dims in `order`, then as [B, N, rows, cols] (groups_4d).
mx::array as_4d(const mx::array& x, const std::vector<int64_t>& order, size_t batch,
                size_t rows) {
  const std::vector<int> perm = to_ints(order);
  return permuted_view(x, perm, shape_4d(permuted_shape(x, perm), batch, rows));
}

// Whether MLX runs a fused kernel for these [B, N, T, D] f32 operands. On MLX's CUDA backend f32
// attention has only its vector kernel: no mask, head sizes 64, 96 and 128 for both q and v,
// under 4 queries (cuDNN's takes f16/bf16); otherwise MLX composes the chain with an added
// kernel for the additive mask, and jax's own chain is cheaper. Metal's kernels take f32 with
// masks; the CPU has none (MLX composes them, the path Metal takes for shapes it lacks).
// JAXMLX_ATTENTION=cuda (read at each compile; for tests and counts): decide as on MLX's CUDA
// backend whatever the device, so that the CPU runs (and tests) the chain CUDA composes.
bool mlx_fuses(const mx::array& q, const mx::array& v, bool masked) {
  const char* mode = std::getenv("JAXMLX_ATTENTION");
  if (!on_cuda_gpu() && !(mode != nullptr && std::string_view(mode) == "cuda")) return true;
  const int d = q.shape(3);
  return !masked && d == v.shape(3) && (d == 64 || d == 96 || d == 128) && q.shape(2) < 4;
}

StatusOr<Values> lower_attention(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const bool has_mask = op.get_bool("has_mask"), has_bias = op.get_bool("has_bias");
  const auto* scale_attr = op.attr<ir::FloatAttr>("scale");
  if (in.size() != 3u + has_mask + has_bias || op.results.size() != 1 || scale_attr == nullptr)
    return ctx.malformed(op, "attention operands");
  const ir::Type &qt = operand_type(op, 0), &kt = operand_type(op, 1), &vt = operand_type(op, 2);
  const ir::Type& ot = *op.results[0].type;
  const std::vector<int64_t> qd = op.get_i64s("q_dims"), kd = op.get_i64s("k_dims"),
                             vd = op.get_i64s("v_dims");
  const int64_t batch = op.get_i64("batch"), q_free = op.get_i64("q_free");
  if (!is_static(qt) || !is_static(kt) || !is_static(vt) || !is_static(ot) ||
      !is_permutation(qd, qt.rank()) || !is_permutation(kd, kt.rank()) ||
      !is_permutation(vd, vt.rank()) || batch < 0 || q_free < 0 ||
      kt.rank() != batch + 2 || qt.rank() != batch + q_free + 1 || vt.rank() < batch + 1)
    return ctx.malformed(op, "attention operand dims");
  if (qt.dtype != ir::ElementType::kF32 || kt.dtype != ir::ElementType::kF32 ||
      vt.dtype != ir::ElementType::kF32 || ot.dtype != ir::ElementType::kF32)
    return ctx.malformed(op, "attention of f32 operands");
  // The pass leaves empty operands alone (an empty matmul is an MLX hazard); a call written by
  // hand gets jax's value for them: nothing to sum is 0.
  if (qt.num_elements() == 0 || kt.num_elements() == 0 || vt.num_elements() == 0)
    return Values{mx::zeros(storage_shape(ot), mx::float32)};
  const auto nb = static_cast<size_t>(batch), nq = static_cast<size_t>(q_free);
  mx::array q = as_4d(in[0], qd, nb, nq);
  mx::array k = as_4d(in[1], kd, nb, 1);
  mx::array v = as_4d(in[2], vd, nb, 1);
  if (q.shape(0) != k.shape(0) || q.shape(1) != k.shape(1) || k.shape(0) != v.shape(0) ||
      k.shape(1) != v.shape(1) || k.shape(2) != v.shape(2) || q.shape(3) != k.shape(3))
    return ctx.malformed(op, "attention operands of mismatched sizes");

  // The mask and bias over the scores as jax's frame has them (`scores`: it may add or drop
  // size-1 dims), as [B, N, T, S] arrays broadcastable to the products' scores.
  const std::vector<int64_t> scores = op.get_i64s("scores");
  mx::Shape s_shape;  // the products' frame: [batch..., q free..., S]
  for (size_t i = 0; i < nb + nq; ++i)
    s_shape.push_back(static_cast<int>(qt.dims[static_cast<size_t>(qd[i])]));
  s_shape.push_back(k.shape(2));
  const mx::Shape scores4{q.shape(0), q.shape(1), q.shape(2), k.shape(2)};
  auto to_4d = [&](mx::array x) -> std::optional<mx::array> {
    // jax's frame to the products': the dims other than 1 are the same ones, in order.
    std::vector<size_t> from, to;
    for (size_t i = 0; i < scores.size(); ++i)
      if (scores[i] != 1) from.push_back(i);
    for (size_t i = 0; i < s_shape.size(); ++i)
      if (s_shape[i] != 1) to.push_back(i);
    if (from.size() != to.size() || static_cast<size_t>(x.ndim()) != scores.size())
      return std::nullopt;
    mx::Shape framed(s_shape.size(), 1);
    for (size_t i = 0; i < from.size(); ++i) framed[to[i]] = x.shape(static_cast<int>(from[i]));
    x = reshape_view(x, framed);
    // Then [B, N, T, S]: a group of dims all broadcast (size 1) or all whole stays a view;
    // otherwise the array is materialized at the scores' size.
    const mx::Shape have = shape_4d(x.shape(), nb, nq);
    for (size_t g = 0; g < 4; ++g)
      if (have[g] != 1 && have[g] != scores4[g])
        return mx::reshape(mx::broadcast_to(x, s_shape), scores4);
    return reshape_view(x, have);
  };
  std::optional<mx::array> pred, bias;
  if (has_mask) {
    mx::array p = in[3];
    if (const auto* md = op.attr<ir::I64ArrayAttr>("mask_dims")) {
      // pred before jax's broadcast_in_dim: size-1 dims where it broadcasts.
      mx::Shape expanded(scores.size(), 1);
      if (md->values.size() != static_cast<size_t>(p.ndim()))
        return ctx.malformed(op, "attention mask dims");
      for (size_t i = 0; i < md->values.size(); ++i) {
        const int64_t d = md->values[i];
        const int n = p.shape(static_cast<int>(i));
        if (d < 0 || d >= static_cast<int64_t>(scores.size()) ||
            (n != scores[static_cast<size_t>(d)] && n != 1))
          return ctx.malformed(op, "attention mask dims");
        expanded[static_cast<size_t>(d)] = n;
      }
      p = reshape_view(p, expanded);
    }
    pred = to_4d(p);
    if (!pred) return ctx.malformed(op, "attention scores frame");
  }
  if (has_bias) {
    bias = to_4d(in[has_mask ? 4 : 3]);
    if (!bias) return ctx.malformed(op, "attention scores frame");
  }
  const float scale = static_cast<float>(scale_attr->value);
  const bool keeps = op.get_bool("mask_keeps", true);
  mx::array out = mx::array(0.0f);
  if (mlx_fuses(q, v, pred || bias)) {
    // One additive mask: the bias (or 0) where kept, -2^100 where dropped.
    std::optional<mx::array> mask = bias;
    if (pred) {
      const mx::array kept = bias ? *bias : mx::zeros({}, mx::float32);
      const mx::array dropped = mx::array(kMaskedOut);
      mask = mx::where(*pred, keeps ? kept : dropped, keeps ? dropped : kept);
    }
    out = mask ? mx::fast::scaled_dot_product_attention(q, k, v, scale, "", *mask)
               : mx::fast::scaled_dot_product_attention(q, k, v, scale);
  } else {
    // No fused kernel for these operands: jax's own chain, in its order.
    mx::array s = mx::matmul(q, mx::swapaxes(k, -1, -2));
    if (scale != 1.0f) s = mx::multiply(s, mx::array(scale));
    if (bias) s = mx::add(s, *bias);
    if (pred) {
      const auto* fill = op.attr<ir::FloatAttr>("fill");
      if (fill == nullptr) return ctx.malformed(op, "attention fill");
      const mx::array f(static_cast<float>(fill->value));
      s = keeps ? mx::where(*pred, s, f) : mx::where(*pred, f, s);
    }
    out = mx::matmul(mx::softmax(s, -1, /*precise=*/true), v);
  }
  // [B, N, T, Hv] -> the product's [batch..., q free..., v free...].
  if (ot.num_elements() != static_cast<int64_t>(out.size()))
    return ctx.malformed(op, "attention result shape");
  return Values{reshape_view(out, storage_shape(ot))};
}

}  // namespace

void register_attention(Registry& r) {
  r.add_custom_call(passes::kAttentionTarget, lower_attention);
}

}  // namespace jaxmlx::lower
