// fold_tuples: see fold_tuples.h.
#include "passes/fold_tuples.h"

#include <unordered_map>
#include <vector>

#include "passes/passes.h"

namespace jaxmlx::passes {
namespace {

using Tuples = std::unordered_map<uint32_t, const ir::Op*>;

// Records every tuple op of the func (value ids are unique per func, across regions).
void find_tuples(const ir::Region& r, Tuples& tuples) {
  ir::walk(r, [&](const ir::Op& op) {
    if (op.kind == ir::OpKind::kTuple && op.results.size() == 1) tuples[op.results[0].id] = &op;
  });
}

// Maps each get_tuple_element of a known tuple to the element; returns how many it mapped.
size_t forward_elements(const ir::Region& r, const Tuples& tuples,
                        std::unordered_map<uint32_t, ir::Value>& subst) {
  size_t n = 0;
  ir::walk(r, [&](const ir::Op& op) {
    if (op.kind != ir::OpKind::kGetTupleElement || op.operands.size() != 1 ||
        op.results.size() != 1)
      return;
    auto it = tuples.find(op.operands[0].id);
    const int64_t i = op.get_i64("index", -1);
    if (it == tuples.end() || i < 0 || i >= static_cast<int64_t>(it->second->operands.size()))
      return;
    subst[op.results[0].id] = it->second->operands[static_cast<size_t>(i)];
    ++n;
  });
  return n;
}

// Drops forwarded get_tuple_elements and tuples nothing reads any more.
void drop_dead(ir::Region& r, const std::unordered_map<uint32_t, ir::Value>& forwarded,
               const std::unordered_map<uint32_t, int>& uses) {
  for (ir::Block& b : r.blocks) {
    std::vector<ir::Op> kept;
    kept.reserve(b.ops.size());
    for (ir::Op& op : b.ops) {
      for (ir::Region& nested : op.regions) drop_dead(nested, forwarded, uses);
      const bool is_forwarded = op.kind == ir::OpKind::kGetTupleElement &&
                                forwarded.count(op.results[0].id);
      const bool dead_tuple = op.kind == ir::OpKind::kTuple && !uses.count(op.results[0].id);
      if (!is_forwarded && !dead_tuple) kept.push_back(std::move(op));
    }
    b.ops = std::move(kept);
  }
}

// One round: forward get_tuple_element of tuples, drop what that left unused. Returns whether
// anything changed (nested tuples unpack over several rounds).
bool fold_once(ir::Func& f) {
  Tuples tuples;
  find_tuples(f.body, tuples);
  if (tuples.empty()) return false;
  std::unordered_map<uint32_t, ir::Value> subst;
  forward_elements(f.body, tuples, subst);
  replace_uses(f, subst);
  // Uses after forwarding, not counting the get_tuple_elements about to go.
  std::unordered_map<uint32_t, int> uses;
  ir::walk(f.body, [&](const ir::Op& op) {
    if (op.kind == ir::OpKind::kGetTupleElement && subst.count(op.results[0].id)) return;
    for (const ir::Value& v : op.operands) ++uses[v.id];
  });
  size_t before = 0, after = 0;
  ir::walk(f.body, [&](const ir::Op&) { ++before; });
  drop_dead(f.body, subst, uses);
  ir::walk(f.body, [&](const ir::Op&) { ++after; });
  return !subst.empty() || after != before;
}

}  // namespace

Status fold_tuples(ir::Module& m) {
  for (ir::Func& f : m.funcs)
    for (int round = 0; round < 64 && fold_once(f); ++round) {
    }
  return Status();
}

}  // namespace jaxmlx::passes
