// ChainMatcher: see chain_match.h.
#include "passes/chain_match.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <utility>

namespace jaxmlx::passes {

using ir::OpKind;

bool recognizers_enabled() {
  const char* v = std::getenv("JAXMLX_RECOGNIZE");
  return v == nullptr || std::string_view(v) != "0";
}

bool fast_kernels_enabled(bool on_gpu) {
  const char* v = std::getenv("JAXMLX_FAST_KERNELS");
  if (v == nullptr || *v == '\0') return on_gpu;
  return std::string_view(v) != "0";
}

ChainMatcher::ChainMatcher(const ir::Func& f) : uses_(count_uses(f.body)) {
  ir::walk(f.body, [&](const ir::Op& op) {
    for (const ir::Value& r : op.results) def_[r.id] = &op;
    if (op.kind == OpKind::kReduce && op.operands.size() == 2 && op.results.size() == 1)
      first_reduce_.emplace(op.operands[0].id, &op);
  });
}

const ir::Op* ChainMatcher::first_reduce(const ir::Value& v) const {
  auto it = first_reduce_.find(v.id);
  return it == first_reduce_.end() ? nullptr : it->second;
}

std::optional<ir::Value> ChainMatcher::without_initial_max(const ir::Value& v) const {
  const ir::Op* op = single(v, OpKind::kMaximum, 2);
  if (op == nullptr) return v;
  for (int i = 0; i < 2; ++i)
    if (f32_splat(op->operands[i], kMinusInfF32)) return op->operands[1 - i];
  return std::nullopt;
}

ir::Op ChainMatcher::dims_call(const char* target, std::vector<ir::Value> operands,
                               const ir::Value& result, const std::vector<int64_t>& dims,
                               const ir::Location* loc) {
  ir::Op c;
  c.kind = OpKind::kCustomCall;
  c.operands = std::move(operands);
  c.results = {result};
  c.loc = loc;
  c.set_attr("call_target_name", ir::StringAttr{target});
  c.set_attr("dimensions", ir::I64ArrayAttr{dims});
  return c;
}

bool ChainMatcher::is_f32_tensor(const ir::Value& v) {
  return v.type != nullptr && v.type->is_tensor && v.type->ranked &&
         v.type->dtype == ir::ElementType::kF32;
}

int ChainMatcher::uses(const ir::Value& v) const {
  auto it = uses_.find(v.id);
  return it == uses_.end() ? 0 : it->second;
}

const ir::Op* ChainMatcher::def(const ir::Value& v) const {
  auto it = def_.find(v.id);
  return it == def_.end() ? nullptr : it->second;
}

const ir::Op* ChainMatcher::single(const ir::Value& v, OpKind kind, size_t operands) const {
  const ir::Op* op = def(v);
  if (op == nullptr || op->kind != kind || op->operands.size() != operands ||
      op->results.size() != 1 || !op->regions.empty())
    return nullptr;
  return op;
}

std::optional<uint32_t> ChainMatcher::f32_splat_bits(const ir::Value& v) const {
  const ir::Op* b = single(v, OpKind::kBroadcastInDim, 1);
  ir::Value c = b != nullptr ? b->operands[0] : v;
  // jax converts a weakly typed constant to f32 (from f64 under jax_enable_x64): the f32 the
  // convert makes of it (round to nearest even, as the cast here; a NaN is not taken).
  const ir::Op* cv = single(c, OpKind::kConvert, 1);
  if (cv != nullptr && is_f32_tensor(c)) c = cv->operands[0];
  const ir::Op* op = single(c, OpKind::kConstant, 0);
  if (op == nullptr) return std::nullopt;
  const auto* d = op->attr<ir::DenseElementsAttr>("value");
  if (d == nullptr || d->type == nullptr || (!d->splat && d->num_elements() != 1))
    return std::nullopt;
  uint32_t got = 0;
  if (d->type->dtype == ir::ElementType::kF32 && d->data.size() >= 4) {
    std::memcpy(&got, d->data.data(), 4);
    return got;
  }
  if (cv == nullptr || d->type->dtype != ir::ElementType::kF64 || d->data.size() < 8)
    return std::nullopt;
  double wide = 0;
  std::memcpy(&wide, d->data.data(), 8);
  const float narrow = static_cast<float>(wide);
  if (std::isnan(wide)) return std::nullopt;
  std::memcpy(&got, &narrow, 4);
  return got;
}

std::optional<std::vector<int64_t>> ChainMatcher::reduce_of(const ir::Value& v,
                                                            const ir::Value& x, OpKind body,
                                                            uint32_t init) const {
  const ir::Op* op = def(v);
  if (op == nullptr || op->kind != OpKind::kReduce || op->operands.size() != 2 ||
      op->results.size() != 1 || op->regions.size() != 1 || !(op->operands[0] == x) ||
      !is_f32_tensor(v) || x.type == nullptr)
    return std::nullopt;
  // The init is the constant itself (a reduce's init is a scalar), never a broadcast.
  const ir::Op* c = single(op->operands[1], OpKind::kConstant, 0);
  if (c == nullptr || f32_splat_bits(op->operands[1]) != init) return std::nullopt;
  const ir::Region& reg = op->regions[0];
  if (reg.blocks.size() != 1) return std::nullopt;
  const ir::Block& b = reg.entry();
  if (b.args.size() != 2 || b.ops.size() != 2) return std::nullopt;
  const ir::Op &f = b.ops[0], &ret = b.ops[1];
  if (f.kind != body || f.operands.size() != 2 || ret.kind != OpKind::kReturn ||
      ret.operands.size() != 1 || !(ret.operands[0] == f.results[0]))
    return std::nullopt;
  const bool args = (f.operands[0] == b.args[0] && f.operands[1] == b.args[1]) ||
                    (f.operands[0] == b.args[1] && f.operands[1] == b.args[0]);
  if (!args) return std::nullopt;
  std::vector<int64_t> dims = op->get_i64s("dimensions");
  std::sort(dims.begin(), dims.end());
  if (dims.empty() || std::adjacent_find(dims.begin(), dims.end()) != dims.end() ||
      dims.front() < 0 || dims.back() >= x.type->rank())
    return std::nullopt;
  return dims;
}

std::optional<ir::Value> ChainMatcher::back_source(const ir::Value& v, const ir::Value& x) const {
  if (v.type == nullptr || x.type == nullptr || *v.type != *x.type) return std::nullopt;
  ir::Value cur = v;
  for (int steps = 0; steps < 8; ++steps) {
    const ir::Op* op = def(cur);
    if (op == nullptr || op->operands.size() != 1 ||
        (op->kind != OpKind::kBroadcastInDim && op->kind != OpKind::kReshape))
      return steps == 0 ? std::nullopt : std::optional<ir::Value>(cur);
    if (uses(cur) != 1) return std::nullopt;
    cur = op->operands[0];
  }
  return std::nullopt;
}

std::optional<ir::Value> ChainMatcher::spread_source(const ir::Value& v) const {
  ir::Value cur = v;
  for (int steps = 0; steps < 8; ++steps) {
    const ir::Op* op = def(cur);
    if (op == nullptr || op->operands.size() != 1 ||
        (op->kind != OpKind::kBroadcastInDim && op->kind != OpKind::kReshape))
      break;
    cur = op->operands[0];
  }
  if (cur == v) return std::nullopt;
  return cur;
}

bool ChainMatcher::back_is_exact(const ir::Value& v, const ir::Value& source,
                                 const std::vector<int64_t>& reduced, const ir::Value& x) const {
  std::vector<const ir::Op*> chain;
  for (ir::Value cur = v; !(cur == source);) {
    const ir::Op* op = def(cur);
    if (op == nullptr || op->operands.size() != 1 || chain.size() > 8) return false;
    chain.push_back(op);
    cur = op->operands[0];
  }
  // Which of the source's dims each dim of the current value carries, counting the source's dims
  // of size > 1 only (-1: none, or size 1): size-1 dims do not change the elements' order.
  const ir::Type& src = *source.type;
  std::vector<int64_t> carried(src.dims.size());
  int64_t ordinal = 0;
  for (size_t i = 0; i < carried.size(); ++i) carried[i] = src.dims[i] == 1 ? -1 : ordinal++;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const ir::Op& op = **it;
    const ir::Type& in = *op.operands[0].type;
    const ir::Type& out = *op.results[0].type;
    if (in.has_dynamic_dims() || out.has_dynamic_dims()) return false;
    std::vector<int64_t> next(out.dims.size(), -1);
    if (op.kind == OpKind::kBroadcastInDim) {
      const std::vector<int64_t> bd = op.get_i64s("broadcast_dimensions");
      if (bd.size() != in.dims.size()) return false;
      for (size_t i = 0; i < bd.size(); ++i) {
        if (bd[i] < 0 || bd[i] >= out.rank()) return false;
        if (in.dims[i] == out.dims[bd[i]]) next[bd[i]] = carried[i];
        else if (in.dims[i] != 1) return false;
      }
    } else if (op.kind == OpKind::kReshape) {  // only size-1 dims added or dropped
      size_t j = 0;
      for (size_t i = 0; i < in.dims.size(); ++i) {
        if (in.dims[i] == 1) continue;
        while (j < out.dims.size() && out.dims[j] == 1) ++j;
        if (j == out.dims.size() || out.dims[j] != in.dims[i]) return false;
        next[j++] = carried[i];
      }
      while (j < out.dims.size() && out.dims[j] == 1) ++j;
      if (j != out.dims.size()) return false;
    } else {
      return false;
    }
    for (size_t i = 0; i < next.size(); ++i)
      if (out.dims[i] == 1) next[i] = -1;
    carried = std::move(next);
  }
  // The source's k-th dim of size > 1 is x's k-th kept dim of size > 1.
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < x.type->rank(); ++d)
    if (!std::binary_search(reduced.begin(), reduced.end(), d) && x.type->dims[d] != 1)
      kept.push_back(d);
  if (carried.size() != x.type->dims.size()) return false;
  for (size_t d = 0; d < carried.size(); ++d) {
    if (x.type->dims[d] == 1) continue;
    const bool is_reduced = std::binary_search(reduced.begin(), reduced.end(), int64_t(d));
    if (is_reduced ? carried[d] != -1
                   : carried[d] < 0 || carried[d] >= int64_t(kept.size()) ||
                         kept[static_cast<size_t>(carried[d])] != int64_t(d))
      return false;
  }
  return true;
}

}  // namespace jaxmlx::passes
