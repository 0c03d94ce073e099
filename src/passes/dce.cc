// dce: see dce.h.
#include "passes/dce.h"

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "passes/passes.h"
#include "passes/value_calls.h"

namespace jaxmlx::passes {
namespace {

bool removable_kind(ir::OpKind k) {
  switch (k) {
    case ir::OpKind::kCustomCall: case ir::OpKind::kReturn: case ir::OpKind::kFuncReturn:
    case ir::OpKind::kFuncCall: case ir::OpKind::kGeneric: case ir::OpKind::kAfterAll:
    case ir::OpKind::kCreateToken: case ir::OpKind::kInfeed: case ir::OpKind::kOutfeed:
    case ir::OpKind::kSend: case ir::OpKind::kRecv: case ir::OpKind::kAllGather:
    case ir::OpKind::kAllReduce: case ir::OpKind::kAllToAll: case ir::OpKind::kCollectiveBroadcast:
    case ir::OpKind::kCollectivePermute: case ir::OpKind::kCollectiveReduce:
    case ir::OpKind::kCrossReplicaSum: case ir::OpKind::kReduceScatter:
    case ir::OpKind::kAsyncStart: case ir::OpKind::kAsyncDone:
    case ir::OpKind::kOptimizationBarrier: case ir::OpKind::kComposite:
    case ir::OpKind::kWhile: case ir::OpKind::kCase: case ir::OpKind::kIf:
      return false;
    default:
      return true;
  }
}

// Whether dropping `op` (its results unread) cannot be observed: a removable kind whose bodies
// (a reduce's, a sort's comparator, ...) hold only removable ops.
bool removable(const ir::Op& op) {
  if (op.results.empty() || (!removable_kind(op.kind) && !is_value_call(op))) return false;
  for (const ir::Region& r : op.regions)
    for (const ir::Block& b : r.blocks)
      for (const ir::Op& inner : b.ops)
        if (inner.kind != ir::OpKind::kReturn && !removable(inner)) return false;
  return true;
}

// Values are used only after (and below) their definition, so walking each block backwards --
// nested regions before the op holding them -- sees every use of a value before its definition,
// and a chain of dead ops goes in one sweep.
void sweep(ir::Region& r, UseCounts& uses) {
  for (ir::Block& b : r.blocks) {
    std::vector<bool> dead(b.ops.size(), false);
    bool any = false;
    for (size_t i = b.ops.size(); i-- > 0;) {
      ir::Op& op = b.ops[i];
      for (ir::Region& nested : op.regions) sweep(nested, uses);
      if (!removable(op)) continue;
      bool used = false;
      for (const ir::Value& v : op.results) used = used || uses[v.id] > 0;
      if (used) continue;
      dead[i] = any = true;
      for (const ir::Value& v : op.operands) --uses[v.id];
      for (const ir::Region& nested : op.regions)  // bodies may read outer values too
        ir::walk(nested, [&](const ir::Op& o) {
          for (const ir::Value& v : o.operands) --uses[v.id];
        });
    }
    if (any) erase_ops(b, dead);
  }
}

}  // namespace

Status drop_dead_ops(ir::Module& m) {
  for (ir::Func& f : m.funcs) {
    UseCounts uses = count_uses(f.body);
    sweep(f.body, uses);
  }
  return Status();
}

}  // namespace jaxmlx::passes
