// counted_loop: see counted_loop.h.
#include "passes/counted_loop.h"

#include <cstdint>

#include "ir/attributes.h"
#include "ir/types.h"

namespace jaxmlx::passes {
namespace {

const ir::Op* terminator(const ir::Region& r) {
  if (r.blocks.size() != 1 || r.entry().ops.empty()) return nullptr;
  return &r.entry().ops.back();
}

std::optional<size_t> arg_index(const ir::Block& b, ir::Value v) {
  for (size_t i = 0; i < b.args.size(); ++i)
    if (b.args[i].id == v.id) return i;
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> constant_int(const ir::Op* op) {
  if (op == nullptr || op->kind != ir::OpKind::kConstant) return std::nullopt;
  const auto* d = op->attr<ir::DenseElementsAttr>("value");
  if (d == nullptr || d->type == nullptr || d->num_elements() != 1) return std::nullopt;
  if (!ir::is_integer(d->type->dtype)) return std::nullopt;
  return d->int_at(0);
}

std::optional<CountedLoop> match_counted_loop(const ir::Op& op, const DefOf& def) {
  if (op.kind != ir::OpKind::kWhile || op.regions.size() != 2) return std::nullopt;
  const ir::Op* cret = terminator(op.regions[0]);
  const ir::Op* bret = terminator(op.regions[1]);
  if (!cret || !bret || cret->operands.size() != 1) return std::nullopt;
  const ir::Block& cb = op.regions[0].entry();
  const ir::Block& bb = op.regions[1].entry();
  // The condition is not read on a counted loop: it must have no effect of its own (a
  // jax.debug.print in it runs once per test, as on the CPU backend).
  bool cond_has_effects = false;
  ir::walk(op.regions[0], [&](const ir::Op& o) {
    cond_has_effects |= o.kind == ir::OpKind::kCustomCall || !o.regions.empty();
  });
  if (cond_has_effects) return std::nullopt;
  const ir::Op* cmp = def(cret->operands[0]);
  if (!cmp || cmp->kind != ir::OpKind::kCompare || cmp->operands.size() != 2) return std::nullopt;
  int dir = cmp->get_enum("comparison_direction", -1);
  CountedLoop loop;
  if (dir == static_cast<int>(ir::ComparisonDirection::kLE)) loop.inclusive = true;
  else if (dir != static_cast<int>(ir::ComparisonDirection::kLT)) return std::nullopt;
  std::optional<size_t> k = arg_index(cb, cmp->operands[0]);
  if (!k || *k >= bret->operands.size() || *k >= op.operands.size()) return std::nullopt;
  const ir::Type* t = cb.args[*k].type;
  if (!t || !ir::is_integer(t->dtype) || t->rank() != 0) return std::nullopt;
  if (ir::is_unsigned_int(t->dtype) && ir::element_bit_width(t->dtype) == 64) return std::nullopt;
  loop.index = *k;
  loop.bound_const = constant_int(def(cmp->operands[1]));
  if (!loop.bound_const) {
    std::optional<size_t> j = arg_index(cb, cmp->operands[1]);
    // The bound must be carried through the body unchanged.
    if (!j || *j >= bret->operands.size() || *j == *k) return std::nullopt;
    if (arg_index(bb, bret->operands[*j]) != j) return std::nullopt;
    loop.bound_index = *j;
  }
  const ir::Op* add = def(bret->operands[*k]);
  if (!add || add->kind != ir::OpKind::kAdd) return std::nullopt;
  std::optional<int64_t> step;
  if (arg_index(bb, add->operands[0]) == k) step = constant_int(def(add->operands[1]));
  else if (arg_index(bb, add->operands[1]) == k) step = constant_int(def(add->operands[0]));
  if (!step || *step <= 0) return std::nullopt;
  loop.step = *step;
  return loop;
}

std::optional<int64_t> counted_trips(const ir::Type* t, int64_t init, int64_t bound,
                                     const CountedLoop& loop) {
  int bits = ir::element_bit_width(t->dtype);
  __int128 hi = ir::is_signed_int(t->dtype) ? (((__int128)1 << (bits - 1)) - 1)
                                            : (((__int128)1 << bits) - 1);
  __int128 end = (__int128)bound + (loop.inclusive ? 1 : 0);
  if (end <= init) return 0;
  __int128 trips = (end - init + loop.step - 1) / loop.step;
  if ((__int128)init + trips * loop.step > hi) return std::nullopt;  // the last add wraps
  if (trips > INT64_MAX) return std::nullopt;  // a u64 counter's
  return static_cast<int64_t>(trips);
}

}  // namespace jaxmlx::passes
