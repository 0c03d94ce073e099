#include "passes/threefry.h"

#include <array>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace jaxmlx::passes {
namespace {

using ir::OpKind;

bool is_u32(const ir::Type* t) {
  return t != nullptr && t->ranked && t->dtype == ir::ElementType::kU32 && !t->has_dynamic_dims();
}

// A value's type as the body may use it: a u32 scalar, or u32 of the result's rank whose every dim
// is the result's or 1 (vmap's batched keys, u32[4,1,1] beside counters u32[1,7,3]).
bool scalar_or_counter(const ir::Type* t, const ir::Type& result) {
  if (!is_u32(t)) return false;
  if (t->rank() == 0) return true;
  if (t->rank() != result.rank()) return false;
  for (size_t d = 0; d < t->dims.size(); ++d)
    if (t->dims[d] != result.dims[d] && t->dims[d] != 1) return false;
  return true;
}

// The body evaluated for one element of the result: every value is one u32 (a scalar, or the
// element at that position of an array broadcast to the result). Empty when an op is outside
// the elementwise subset.
std::optional<std::array<uint32_t, 2>> evaluate(const ir::Func& f, const ir::Type& result,
                                                const std::array<uint32_t, 4>& args) {
  std::vector<int64_t> identity(result.dims.size());
  for (size_t i = 0; i < identity.size(); ++i) identity[i] = static_cast<int64_t>(i);
  std::vector<uint32_t> v(f.num_values, 0);
  for (size_t i = 0; i < 4; ++i) v[f.args()[i].id] = args[i];
  for (const ir::Op& op : f.entry().ops) {
    if (!op.regions.empty()) return std::nullopt;
    for (const ir::Value& x : op.operands)
      if (x.id >= f.num_values || !scalar_or_counter(x.type, result)) return std::nullopt;
    if (op.kind == OpKind::kFuncReturn) {
      if (op.operands.size() != 2) return std::nullopt;
      return std::array<uint32_t, 2>{v[op.operands[0].id], v[op.operands[1].id]};
    }
    if (op.results.size() != 1 || op.results[0].id >= f.num_values ||
        !scalar_or_counter(op.results[0].type, result))
      return std::nullopt;
    uint32_t& out = v[op.results[0].id];
    auto arg = [&](size_t i) { return v[op.operands[i].id]; };
    const size_t n = op.operands.size();
    switch (op.kind) {
      case OpKind::kConstant: {
        const auto* d = op.attr<ir::DenseElementsAttr>("value");
        if (n != 0 || d == nullptr || !is_u32(d->type) || (!d->splat && d->num_elements() != 1))
          return std::nullopt;
        out = static_cast<uint32_t>(d->int_at(0));
        break;
      }
      case OpKind::kBroadcastInDim:
        // From a scalar, or dims in order (size-1 dims spread): the element stays the same.
        if (n != 1 || (op.operands[0].type->rank() != 0 &&
                       op.get_i64s("broadcast_dimensions") != identity))
          return std::nullopt;
        out = arg(0);
        break;
      case OpKind::kAdd: if (n != 2) return std::nullopt; out = arg(0) + arg(1); break;
      case OpKind::kXor: if (n != 2) return std::nullopt; out = arg(0) ^ arg(1); break;
      case OpKind::kOr: if (n != 2) return std::nullopt; out = arg(0) | arg(1); break;
      case OpKind::kAnd: if (n != 2) return std::nullopt; out = arg(0) & arg(1); break;
      // XLA's shifts: an amount of 32 or more shifts every bit out.
      case OpKind::kShiftLeft:
        if (n != 2) return std::nullopt;
        out = arg(1) >= 32 ? 0 : arg(0) << arg(1);
        break;
      case OpKind::kShiftRightLogical:
        if (n != 2) return std::nullopt;
        out = arg(1) >= 32 ? 0 : arg(0) >> arg(1);
        break;
      default: return std::nullopt;
    }
    // Elementwise ops keep their operands' shape (StableHLO's rule; checked, so that no op
    // reads other positions than its own).
    if (op.kind != OpKind::kBroadcastInDim)
      for (const ir::Value& x : op.operands)
        if (!(*x.type == *op.results[0].type)) return std::nullopt;
  }
  return std::nullopt;  // no func.return
}

// splitmix64: fixed, well-spread test inputs.
uint64_t next(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

using Defs = std::unordered_map<uint32_t, const ir::Op*>;

void collect_defs(const ir::Region& r, Defs& defs) {
  ir::walk(r, [&](const ir::Op& op) {
    for (const ir::Value& v : op.results) defs[v.id] = &op;
  });
}

// The u32[2] key that the key words `k0` and `k1` are unpacked from, as jax unpacks them:
// reshape(slice(key, [i:i+1])) for i = 0 and 1.
std::optional<ir::Value> key_pair(const Defs& defs, const ir::Value& k0, const ir::Value& k1) {
  auto def = [&](const ir::Value& v) {
    auto it = defs.find(v.id);
    return it == defs.end() ? nullptr : it->second;
  };
  auto word = [&](const ir::Value& v, int64_t i) -> std::optional<ir::Value> {
    const ir::Op* reshape = def(v);
    if (reshape == nullptr || reshape->kind != OpKind::kReshape || reshape->operands.size() != 1)
      return std::nullopt;
    const ir::Op* slice = def(reshape->operands[0]);
    if (slice == nullptr || slice->kind != OpKind::kSlice || slice->operands.size() != 1)
      return std::nullopt;
    const ir::Value& key = slice->operands[0];
    const std::vector<int64_t> strides = slice->get_i64s("strides");
    if (!is_u32(key.type) || key.type->dims != std::vector<int64_t>{2} ||
        slice->get_i64s("start_indices") != std::vector<int64_t>{i} ||
        slice->get_i64s("limit_indices") != std::vector<int64_t>{i + 1} ||
        !(strides.empty() || strides == std::vector<int64_t>{1}))
      return std::nullopt;
    return key;
  };
  std::optional<ir::Value> a = word(k0, 0), b = word(k1, 1);
  if (!a || !b || !(*a == *b)) return std::nullopt;
  return a;
}

void rewrite_calls(ir::Region& r, const std::unordered_set<std::string_view>& threefry,
                   const Defs& defs) {
  for (ir::Block& b : r.blocks)
    for (ir::Op& op : b.ops) {
      for (ir::Region& nested : op.regions) rewrite_calls(nested, threefry, defs);
      if (op.kind != OpKind::kFuncCall || !threefry.count(op.get_string("callee"))) continue;
      ir::Op call;
      call.kind = OpKind::kCustomCall;
      call.operands = op.operands;
      // Both key words from one u32[2] key: the call reads the key itself (the unpacking ops,
      // two slices and two reshapes per draw, then die unless read elsewhere).
      if (std::optional<ir::Value> key = key_pair(defs, op.operands[0], op.operands[1]))
        call.operands = {*key, op.operands[2], op.operands[3]};
      call.results = op.results;
      call.loc = op.loc;
      call.set_attr("call_target_name", ir::StringAttr{kThreefryTarget});
      op = std::move(call);
    }
}

}  // namespace

bool is_threefry_func(const ir::Func& f) {
  if (std::string_view(f.name).substr(0, 12) != "threefry2x32") return false;
  if (f.body.blocks.size() != 1 || f.args().size() != 4 || f.arg_types.size() != 4 ||
      f.result_types.size() != 2)
    return false;
  // Every operand broadcasts to the result (the counters' shape, unless vmap batched the keys).
  const ir::Type* result = f.result_types[0];
  if (!is_u32(result) || !(*f.result_types[1] == *result)) return false;
  for (int i = 0; i < 4; ++i)
    if (!scalar_or_counter(f.arg_types[i], *result)) return false;
  std::vector<std::array<uint32_t, 4>> cases = {{0, 0, 0, 0},
                                                {~0u, ~0u, ~0u, ~0u}};
  uint64_t seed = 0x7468726565667279ull;
  for (int i = 0; i < 30; ++i) {
    uint64_t a = next(seed), b = next(seed);
    cases.push_back({uint32_t(a), uint32_t(a >> 32), uint32_t(b), uint32_t(b >> 32)});
  }
  for (const auto& c : cases) {
    std::optional<std::array<uint32_t, 2>> got = evaluate(f, *result, c);
    uint32_t x0 = c[2], x1 = c[3];
    threefry2x32_reference(c[0], c[1], x0, x1);
    if (!got || (*got)[0] != x0 || (*got)[1] != x1) return false;
  }
  return true;
}

Status recognize_threefry(ir::Module& m) {
  std::unordered_set<std::string_view> threefry;
  for (const ir::Func& f : m.funcs)
    if (f.visibility == ir::Visibility::kPrivate && is_threefry_func(f)) threefry.insert(f.name);
  if (threefry.empty()) return Status();
  for (ir::Func& f : m.funcs) {
    Defs defs;
    collect_defs(f.body, defs);
    rewrite_calls(f.body, threefry, defs);
  }
  return Status();
}

}  // namespace jaxmlx::passes
