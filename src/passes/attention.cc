// attention: see attention.h for the pattern and why.
#include "passes/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "passes/chain_match.h"
#include "passes/dce.h"
#include "passes/softmax.h"

namespace jaxmlx::passes {
namespace {

using ir::OpKind;

struct Attention {
  ir::Value q, k, v;
  std::optional<ir::Value> pred, bias;
  std::vector<int64_t> mask_dims;  // pred's broadcast_dimensions when it is the pre-broadcast value
  bool mask_keeps = true;
  float fill = 0.0f;  // jax's select fill
  float scale = 1.0f;
  std::vector<int64_t> q_dims, k_dims, v_dims;
  int64_t batch = 0, q_free = 0;
  std::vector<int64_t> scores;  // the scores' dims where the mask and bias apply
};

bool has_type(const ir::Value& v, ir::ElementType t) {
  return v.type != nullptr && v.type->is_tensor && v.type->ranked &&
         !v.type->has_dynamic_dims() && v.type->dtype == t;
}

// The dims of a rank-`rank` operand not in `a` or `b`, in order.
std::vector<int64_t> free_dims(int64_t rank, const std::vector<int64_t>& a,
                               const std::vector<int64_t>& b) {
  std::vector<int64_t> out;
  for (int64_t d = 0; d < rank; ++d)
    if (std::find(a.begin(), a.end(), d) == a.end() && std::find(b.begin(), b.end(), d) == b.end())
      out.push_back(d);
  return out;
}

std::vector<int64_t> concat(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class Matcher : public ChainMatcher {
 public:
  using ChainMatcher::ChainMatcher;

  // The attention whose last op (the second dot_general) is `op`.
  std::optional<Attention> match(const ir::Op& op) const {
    const auto* d2 = op.kind == OpKind::kDotGeneral && op.operands.size() == 2 &&
                             op.results.size() == 1 && op.regions.empty()
                         ? op.attr<ir::DotDims>("dot_dimension_numbers")
                         : nullptr;
    if (d2 == nullptr) return std::nullopt;
    Attention a;
    a.v = op.operands[1];
    // %p, the softmax call's result (jnp.matmul drops size-1 batch dims first).
    ir::Value p = op.operands[0];
    if (uses(p) != 1) return std::nullopt;
    if (const ir::Op* view = unit_view(p)) p = view->operands[0];
    if (uses(p) != 1) return std::nullopt;
    const ir::Op* sm = def(p);
    if (sm == nullptr || sm->kind != OpKind::kCustomCall || sm->operands.size() != 1 ||
        sm->get_string("call_target_name") != kSoftmaxTarget || !has_type(p, ir::ElementType::kF32))
      return std::nullopt;
    ir::Value s = sm->operands[0];
    const int64_t rank = s.type->rank();
    if (sm->get_i64s("dimensions") != std::vector<int64_t>{rank - 1} || uses(s) != 1)
      return std::nullopt;
    a.scores = s.type->dims;
    // The mask, the bias and the scale, each optional, in jax's order (scale, bias, mask).
    if (const ir::Op* sel = single(s, OpKind::kSelect, 3)) {
      for (int keep = 0; keep < 2 && !a.pred; ++keep) {
        const ir::Value &kept = sel->operands[keep == 0 ? 1 : 2],
                        &fill = sel->operands[keep == 0 ? 2 : 1];
        std::optional<float> f = splat_value(fill);
        if (!f || !(*f <= -1e9f) || std::isinf(*f) || uses(kept) != 1 || !(*kept.type == *s.type))
          continue;
        a.pred = sel->operands[0], a.mask_keeps = keep == 0, a.fill = *f, s = kept;
      }
      if (!a.pred || !has_type(*a.pred, ir::ElementType::kPred) ||
          !(a.pred->type->dims == s.type->dims))
        return std::nullopt;
      mask_source(a);
    }
    if (const ir::Op* add = single(s, OpKind::kAdd, 2)) {
      for (int i = 0; i < 2 && !a.bias; ++i) {
        const ir::Value &x = add->operands[i], &b = add->operands[1 - i];
        if (uses(x) != 1 || !(*x.type == *s.type) || !(*b.type == *s.type)) continue;
        const ir::Op* inner = def(x);
        if (inner == nullptr || (inner->kind != OpKind::kDotGeneral && !scale_of(*inner) &&
                                 unit_view(x) == nullptr))
          continue;
        a.bias = b, s = x;
      }
      if (!a.bias) return std::nullopt;
    }
    if (const ir::Op* m = def(s); m != nullptr && scale_of(*m)) {
      a.scale = *scale_of(*m);
      s = m->operands[0];
      for (int i = 0; i < 2; ++i)
        if (!splat_value(m->operands[i])) s = m->operands[i];
      if (uses(s) != 1) return std::nullopt;
    }
    if (const ir::Op* view = unit_view(s)) s = view->operands[0];
    // The products' frame: dot_general's own dims (the mask's and bias's are a.scores).
    if (uses(s) != 1 || !(*s.type == *op.operands[0].type)) return std::nullopt;
    const ir::Op* dot = single(s, OpKind::kDotGeneral, 2);
    const auto* d1 = dot != nullptr ? dot->attr<ir::DotDims>("dot_dimension_numbers") : nullptr;
    if (d1 == nullptr || !has_type(s, ir::ElementType::kF32)) return std::nullopt;
    a.q = dot->operands[0], a.k = dot->operands[1];
    if (!dims(a, *d1, *d2, op)) return std::nullopt;
    for (const ir::Value& x : {a.q, a.k, a.v, op.results[0], s})  // f32, none empty
      if (!has_type(x, ir::ElementType::kF32) || x.type->num_elements() <= 0) return std::nullopt;
    return a;
  }

 private:
  // The one f32 `v` holds everywhere: an f32 splat, or (jax with x64 on) a broadcast of an f64
  // scalar constant converted to f32.
  std::optional<float> splat_value(const ir::Value& v) const {
    float f = 0;
    if (std::optional<uint32_t> bits = f32_splat_bits(v)) {
      std::memcpy(&f, &*bits, 4);
      return f;
    }
    const ir::Op* b = single(v, OpKind::kBroadcastInDim, 1);
    const ir::Op* c = b != nullptr ? single(b->operands[0], OpKind::kConvert, 1) : nullptr;
    const ir::Op* k = c != nullptr ? single(c->operands[0], OpKind::kConstant, 0) : nullptr;
    const auto* d = k != nullptr ? k->attr<ir::DenseElementsAttr>("value") : nullptr;
    if (d == nullptr || d->type == nullptr || d->type->dtype != ir::ElementType::kF64 ||
        d->data.size() != 8 || !is_f32_tensor(v))
      return std::nullopt;
    double x = 0;
    std::memcpy(&x, d->data.data(), 8);
    return static_cast<float>(x);
  }

  // A reshape or broadcast_in_dim defining `v` that only adds or drops size-1 dims (read once).
  const ir::Op* unit_view(const ir::Value& v) const {
    const ir::Op* op = def(v);
    if (op == nullptr || op->operands.size() != 1 || op->results.size() != 1 ||
        (op->kind != OpKind::kReshape && op->kind != OpKind::kBroadcastInDim) ||
        uses(op->operands[0]) != 1)
      return nullptr;
    const ir::Type *in = op->operands[0].type, *out = v.type;
    if (in == nullptr || out == nullptr || in->has_dynamic_dims() || out->has_dynamic_dims() ||
        in->dtype != out->dtype)
      return nullptr;
    auto non_unit = [](const ir::Type& t) {
      std::vector<int64_t> d;
      for (int64_t n : t.dims)
        if (n != 1) d.push_back(n);
      return d;
    };
    if (non_unit(*in) != non_unit(*out)) return nullptr;
    if (op->kind == OpKind::kBroadcastInDim) {  // dims in order, no dim stretched
      std::vector<int64_t> bd = op->get_i64s("broadcast_dimensions");
      if (bd.size() != in->dims.size()) return nullptr;
      for (size_t i = 0; i < bd.size(); ++i)
        if ((i > 0 && bd[i] <= bd[i - 1]) || bd[i] < 0 || bd[i] >= out->rank() ||
            out->dims[static_cast<size_t>(bd[i])] != in->dims[i])
          return nullptr;
    }
    return op;
  }

  // The scale a multiply or divide by an f32 splat applies (either multiply operand).
  std::optional<float> scale_of(const ir::Op& m) const {
    if (m.operands.size() != 2 || m.results.size() != 1) return std::nullopt;
    auto value = [&](const ir::Value& c) -> std::optional<float> {
      std::optional<float> f = splat_value(c);
      if (!f || !(*f > 0) || !(*f < 3.4e38f)) return std::nullopt;  // positive and finite
      return f;
    };
    if (m.kind == OpKind::kMultiply) {
      if (std::optional<float> c = value(m.operands[1])) return c;
      return value(m.operands[0]);
    }
    if (m.kind == OpKind::kDivide)
      if (std::optional<float> c = value(m.operands[1])) return 1.0f / *c;
    return std::nullopt;
  }

  // A mask that is a broadcast_in_dim (dims in order) of a smaller value is taken before it:
  // the lowering then builds the additive mask at that size.
  void mask_source(Attention& a) const {
    const ir::Op* b = single(*a.pred, OpKind::kBroadcastInDim, 1);
    if (b == nullptr || uses(*a.pred) != 1 || b->operands[0].type == nullptr ||
        b->operands[0].type->has_dynamic_dims())
      return;
    std::vector<int64_t> bd = b->get_i64s("broadcast_dimensions");
    if (!std::is_sorted(bd.begin(), bd.end()) ||
        std::adjacent_find(bd.begin(), bd.end()) != bd.end())
      return;
    a.pred = b->operands[0];
    a.mask_dims = std::move(bd);
  }

  // The operand dims in MLX's order, checked against the two products.
  static bool dims(Attention& a, const ir::DotDims& d1, const ir::DotDims& d2, const ir::Op& op) {
    const int64_t qr = a.q.type->rank(), kr = a.k.type->rank(), vr = a.v.type->rank();
    const size_t nb = d1.lhs_batching_dimensions.size();
    if (d1.rhs_batching_dimensions.size() != nb || d1.lhs_contracting_dimensions.size() != 1 ||
        d1.rhs_contracting_dimensions.size() != 1 || d2.rhs_batching_dimensions.size() != nb ||
        d2.rhs_contracting_dimensions.size() != 1 || d2.lhs_contracting_dimensions.size() != 1)
      return false;
    std::vector<int64_t> qf = free_dims(qr, d1.lhs_batching_dimensions,
                                        d1.lhs_contracting_dimensions);
    std::vector<int64_t> kf = free_dims(kr, d1.rhs_batching_dimensions,
                                        d1.rhs_contracting_dimensions);
    std::vector<int64_t> vf = free_dims(vr, d2.rhs_batching_dimensions,
                                        d2.rhs_contracting_dimensions);
    if (kf.size() != 1) return false;
    // %p's batch dims are its leading ones (a dot_general's result order); its last is S.
    const int64_t sr = static_cast<int64_t>(nb + qf.size() + 1);
    if (op.operands[0].type->rank() != sr || d2.lhs_contracting_dimensions[0] != sr - 1)
      return false;
    for (size_t i = 0; i < nb; ++i)
      if (d2.lhs_batching_dimensions[i] != static_cast<int64_t>(i)) return false;
    a.batch = static_cast<int64_t>(nb);
    a.q_free = static_cast<int64_t>(qf.size());
    a.q_dims = concat(concat(d1.lhs_batching_dimensions, qf), d1.lhs_contracting_dimensions);
    a.k_dims = concat(concat(d1.rhs_batching_dimensions, kf), d1.rhs_contracting_dimensions);
    a.v_dims = concat(concat(d2.rhs_batching_dimensions, d2.rhs_contracting_dimensions), vf);
    return true;
  }
};

ir::Op make_call(const ir::Op& root, const Attention& a) {
  ir::Op call;
  call.kind = OpKind::kCustomCall;
  call.operands = {a.q, a.k, a.v};
  if (a.pred) call.operands.push_back(*a.pred);
  if (a.bias) call.operands.push_back(*a.bias);
  call.results = root.results;
  call.loc = root.loc;
  call.set_attr("call_target_name", ir::StringAttr{kAttentionTarget});
  uint32_t bits = 0;
  std::memcpy(&bits, &a.scale, 4);
  call.set_attr("scale", ir::FloatAttr{bits, ir::ElementType::kF32, a.scale});
  call.set_attr("has_mask", a.pred.has_value());
  call.set_attr("mask_keeps", a.mask_keeps);
  std::memcpy(&bits, &a.fill, 4);
  call.set_attr("fill", ir::FloatAttr{bits, ir::ElementType::kF32, a.fill});
  if (!a.mask_dims.empty() || (a.pred && a.pred->type->rank() == 0))
    call.set_attr("mask_dims", ir::I64ArrayAttr{a.mask_dims});
  call.set_attr("has_bias", a.bias.has_value());
  call.set_attr("q_dims", ir::I64ArrayAttr{a.q_dims});
  call.set_attr("k_dims", ir::I64ArrayAttr{a.k_dims});
  call.set_attr("v_dims", ir::I64ArrayAttr{a.v_dims});
  call.set_attr("scores", ir::I64ArrayAttr{a.scores});
  call.set_attr("batch", ir::IntAttr{a.batch});
  call.set_attr("q_free", ir::IntAttr{a.q_free});
  return call;
}

void rewrite_region(ir::Region& r, const Matcher& m) {
  for (ir::Block& b : r.blocks)
    for (ir::Op& op : b.ops) {
      for (ir::Region& nested : op.regions) rewrite_region(nested, m);
      if (std::optional<Attention> a = m.match(op)) op = make_call(op, *a);
    }
}

}  // namespace

Status recognize_attention(ir::Module& m) {
  // The softmax pass leaves its dead chain reading the scores: without it they are read once.
  RETURN_IF_ERROR(drop_dead_ops(m));
  for (ir::Func& f : m.funcs) {
    // Each chain ends in one dot_general, whose result id the call keeps; chains share no op.
    Matcher matcher(f);
    rewrite_region(f.body, matcher);
  }
  return Status();
}

}  // namespace jaxmlx::passes
