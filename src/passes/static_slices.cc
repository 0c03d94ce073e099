// static_slices: see static_slices.h.
#include "passes/static_slices.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "ir/attributes.h"
#include "ir/types.h"
#include "passes/passes.h"

namespace jaxmlx::passes {
namespace {

using OpKind = ir::OpKind;

bool scalar_int(const ir::Type* t) {
  return t != nullptr && t->ranked && t->is_tensor && t->rank() == 0 &&
         (ir::is_integer(t->dtype) || t->dtype == ir::ElementType::kPred);
}

int width(ir::ElementType t) { return t == ir::ElementType::kPred ? 1 : ir::element_bit_width(t); }

// `bits` as a value of type t: wrapped to its width, sign- or zero-extended to 64 bits.
uint64_t normalize(uint64_t bits, ir::ElementType t) {
  const int w = width(t);
  if (w >= 64) return bits;
  const uint64_t mask = (uint64_t{1} << w) - 1;
  bits &= mask;
  if (ir::is_signed_int(t) && ((bits >> (w - 1)) & 1)) bits |= ~mask;
  return bits;
}

bool less(uint64_t a, uint64_t b, bool is_signed) {
  return is_signed ? static_cast<int64_t>(a) < static_cast<int64_t>(b) : a < b;
}

class Folder {
 public:
  explicit Folder(ir::Module& m) : m_(m) {}

  void run(ir::Func& f) {
    values_.clear();
    defs_.clear();
    subst_.clear();
    fold_region(f.body);  // 1, and the defs for 2
    forward_region(f.body);
    replace_uses(f, subst_);
    subst_.clear();
    defs_.clear();
    collect_defs(f.body);
    for_each_op(f.body, [&](ir::Op& op) { reshape_back(op); });  // 3
    replace_uses(f, subst_);
  }

 private:
  template <typename Fn>
  void for_each_op(ir::Region& r, Fn&& fn) {
    for (ir::Block& b : r.blocks)
      for (ir::Op& op : b.ops) {
        fn(op);
        for (ir::Region& inner : op.regions) for_each_op(inner, fn);
      }
  }

  void collect_defs(ir::Region& r) {
    for_each_op(r, [&](ir::Op& op) {
      for (const ir::Value& v : op.results) defs_[v.id] = &op;
    });
  }

  const ir::Op* def(ir::Value v) const {
    auto it = defs_.find(v.id);
    return it == defs_.end() ? nullptr : it->second;
  }

  std::optional<uint64_t> value(ir::Value v) const {
    auto it = values_.find(v.id);
    if (it == values_.end()) return std::nullopt;
    return it->second;
  }

  // --- 1: scalar integer constants -----------------------------------------------------------

  void fold_region(ir::Region& r) {
    for_each_op(r, [&](ir::Op& op) {
      for (const ir::Value& v : op.results) defs_[v.id] = &op;
      if (op.results.size() != 1 || !scalar_int(op.results[0].type)) return;
      if (op.kind == OpKind::kConstant) {
        const auto* d = op.attr<ir::DenseElementsAttr>("value");
        if (d != nullptr && d->num_elements() == 1)
          values_[op.results[0].id] = normalize(static_cast<uint64_t>(d->int_at(0)),
                                                op.results[0].type->dtype);
        return;
      }
      if (std::optional<uint64_t> v = fold(op)) {
        values_[op.results[0].id] = *v;
        make_constant(op, *v);
      }
    });
  }

  std::optional<uint64_t> fold(const ir::Op& op) const {
    std::vector<uint64_t> in;
    for (const ir::Value& v : op.operands) {
      if (!scalar_int(v.type)) return std::nullopt;
      std::optional<uint64_t> x = value(v);
      if (!x) return std::nullopt;
      in.push_back(*x);
    }
    const ir::ElementType t = op.results[0].type->dtype;
    const bool sgn = ir::is_signed_int(t);
    auto two = [&]() { return in.size() == 2; };
    switch (op.kind) {
      case OpKind::kAdd: if (two()) return normalize(in[0] + in[1], t); break;
      case OpKind::kSubtract: if (two()) return normalize(in[0] - in[1], t); break;
      case OpKind::kMultiply: if (two()) return normalize(in[0] * in[1], t); break;
      case OpKind::kAnd: if (two()) return normalize(in[0] & in[1], t); break;
      case OpKind::kOr: if (two()) return normalize(in[0] | in[1], t); break;
      case OpKind::kXor: if (two()) return normalize(in[0] ^ in[1], t); break;
      case OpKind::kMinimum: if (two()) return less(in[1], in[0], sgn) ? in[1] : in[0]; break;
      case OpKind::kMaximum: if (two()) return less(in[0], in[1], sgn) ? in[1] : in[0]; break;
      case OpKind::kNegate: if (in.size() == 1) return normalize(uint64_t{0} - in[0], t); break;
      case OpKind::kNot: if (in.size() == 1) return normalize(~in[0], t); break;
      case OpKind::kClamp:  // clamp(min, x, max)
        if (in.size() == 3) {
          uint64_t x = less(in[1], in[0], sgn) ? in[0] : in[1];
          return less(in[2], x, sgn) ? in[2] : x;
        }
        break;
      case OpKind::kSelect: if (in.size() == 3) return in[0] ? in[1] : in[2]; break;
      case OpKind::kConvert:
        if (in.size() == 1)
          return t == ir::ElementType::kPred ? uint64_t{in[0] != 0} : normalize(in[0], t);
        break;
      case OpKind::kCompare: {
        if (!two() || t != ir::ElementType::kPred) break;
        const ir::ElementType it = op.operands[0].type->dtype;
        const bool s = ir::is_signed_int(it);
        const uint64_t a = in[0], b = in[1];
        switch (static_cast<ir::ComparisonDirection>(op.get_enum("comparison_direction", -1))) {
          case ir::ComparisonDirection::kEQ: return a == b;
          case ir::ComparisonDirection::kNE: return a != b;
          case ir::ComparisonDirection::kLT: return less(a, b, s);
          case ir::ComparisonDirection::kLE: return !less(b, a, s);
          case ir::ComparisonDirection::kGT: return less(b, a, s);
          case ir::ComparisonDirection::kGE: return !less(a, b, s);
        }
        break;
      }
      default:
        break;
    }
    return std::nullopt;
  }

  void make_constant(ir::Op& op, uint64_t v) {
    const ir::Type* t = op.results[0].type;
    std::vector<uint8_t> bytes(static_cast<size_t>(ir::element_storage_bytes(t->dtype)));
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(v >> (8 * i));
    ir::Op c;
    c.kind = OpKind::kConstant;
    c.loc = op.loc;
    c.results = op.results;
    c.set_attr("value", ir::DenseElementsAttr{t, m_.own_bytes(std::move(bytes)), false});
    op = std::move(c);
  }

  // --- 2: slices of updated buffers ----------------------------------------------------------

  struct Box {
    std::vector<int64_t> start, size;
    bool operator==(const Box&) const = default;
  };

  // Starts read from operands [first, first + rank) of op, clamped as StableHLO clamps them.
  std::optional<Box> clamped_box(const ir::Op& op, size_t first, const ir::Type* buf,
                                 const std::vector<int64_t>& size) const {
    if (buf == nullptr || !buf->ranked || buf->dims.size() != size.size() ||
        op.operands.size() != first + size.size())
      return std::nullopt;
    Box box{{}, size};
    for (size_t d = 0; d < size.size(); ++d) {
      std::optional<uint64_t> s = value(op.operands[first + d]);
      const int64_t dim = buf->dims[d];
      if (!s || dim < 0 || size[d] < 0 || size[d] > dim) return std::nullopt;
      int64_t v = ir::is_unsigned_int(op.operands[first + d].type->dtype)
                      ? static_cast<int64_t>(std::min<uint64_t>(*s, uint64_t(dim)))
                      : static_cast<int64_t>(*s);
      box.start.push_back(std::clamp<int64_t>(v, 0, dim - size[d]));
    }
    return box;
  }

  std::optional<Box> read_box(const ir::Op& op) const {
    const ir::Type* buf = op.operands.empty() ? nullptr : op.operands[0].type;
    if (op.kind == OpKind::kDynamicSlice)
      return clamped_box(op, 1, buf, op.get_i64s("slice_sizes"));
    if (op.kind != OpKind::kSlice || buf == nullptr || !buf->ranked) return std::nullopt;
    std::vector<int64_t> start = op.get_i64s("start_indices"), limit = op.get_i64s("limit_indices"),
                         strides = op.get_i64s("strides");
    if (start.size() != buf->dims.size() || limit.size() != start.size()) return std::nullopt;
    Box box;
    for (size_t d = 0; d < start.size(); ++d) {
      if (d < strides.size() && strides[d] != 1) return std::nullopt;
      // A malformed slice is the lowering's to refuse; the box arithmetic needs sane bounds.
      if (start[d] < 0 || limit[d] < start[d] || limit[d] > buf->dims[d]) return std::nullopt;
      box.start.push_back(start[d]);
      box.size.push_back(limit[d] - start[d]);
    }
    return box;
  }

  std::optional<Box> update_box(const ir::Op& dus) const {
    if (dus.operands.size() < 2 || dus.operands[1].type == nullptr || !dus.operands[1].type->ranked)
      return std::nullopt;
    return clamped_box(dus, 2, dus.operands[0].type, dus.operands[1].type->dims);
  }

  static bool disjoint(const Box& a, const Box& b) {
    for (size_t d = 0; d < a.start.size(); ++d)
      if (a.start[d] + a.size[d] <= b.start[d] || b.start[d] + b.size[d] <= a.start[d]) return true;
    return false;
  }

  static bool same_type(const ir::Type* a, const ir::Type* b) {
    return a != nullptr && b != nullptr && a->dtype == b->dtype && a->ranked && b->ranked &&
           a->dims == b->dims;
  }

  void forward_region(ir::Region& r) {
    for_each_op(r, [&](ir::Op& op) {
      if (op.kind != OpKind::kDynamicSlice && op.kind != OpKind::kSlice) return;
      if (op.results.size() != 1) return;
      std::optional<Box> box = read_box(op);
      if (!box) return;
      ir::Value cur = op.operands[0];
      for (;;) {
        const ir::Op* d = def(cur);
        if (d == nullptr || d->kind != OpKind::kDynamicUpdateSlice) break;
        std::optional<Box> wrote = update_box(*d);
        if (!wrote) break;
        if (*wrote == *box && same_type(d->operands[1].type, op.results[0].type)) {
          subst_[op.results[0].id] = d->operands[1];
          return;
        }
        if (!disjoint(*wrote, *box)) break;
        cur = d->operands[0];
      }
      op.operands[0] = cur;  // updates the slice does not read are skipped
    });
  }

  // --- 3: a row stacked as [1, ...] and read back ----------------------------------------------

  void reshape_back(const ir::Op& op) {
    if (op.kind != OpKind::kReshape || op.results.size() != 1 || op.operands.size() != 1) return;
    const ir::Op* d = def(op.operands[0]);
    if (d == nullptr || d->operands.empty()) return;
    const ir::Value x = d->operands[0];
    if (!same_type(x.type, op.results[0].type)) return;
    if (d->kind == OpKind::kReshape) {
      subst_[op.results[0].id] = x;
    } else if (d->kind == OpKind::kBroadcastInDim && x.type->num_elements() ==
                                                         d->results[0].type->num_elements()) {
      // Only size-1 dims added, in order (increasing dims: no transpose).
      std::vector<int64_t> dims = d->get_i64s("broadcast_dimensions");
      for (size_t i = 1; i < dims.size(); ++i)
        if (dims[i] <= dims[i - 1]) return;
      subst_[op.results[0].id] = x;
    }
  }

  ir::Module& m_;
  std::unordered_map<uint32_t, uint64_t> values_;  // scalar integer constants, normalized
  std::unordered_map<uint32_t, ir::Op*> defs_;
  std::unordered_map<uint32_t, ir::Value> subst_;
};

}  // namespace

Status forward_static_slices(ir::Module& m) {
  Folder folder(m);
  for (ir::Func& f : m.funcs) folder.run(f);
  return Status();
}

}  // namespace jaxmlx::passes
