// dce: see dce.h.
#include "passes/dce.h"

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "passes/argminmax.h"
#include "passes/attention.h"
#include "passes/contract_fma.h"
#include "passes/norms.h"
#include "passes/passes.h"
#include "passes/softmax.h"

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

// The custom calls our own passes make compute values and nothing else (an attention call
// leaves the softmax call it replaced dead, with the scores it read).
bool pure_call(const ir::Op& op) {
  if (op.kind != ir::OpKind::kCustomCall) return false;
  const std::string_view t = op.get_string("call_target_name");
  for (const char* pure : {kSoftmaxTarget, kLayerNormTarget, kRmsNormTarget, kAttentionTarget,
                           kArgmaxTarget, kArgminTarget, kFmaTarget, kFmsTarget, kFnmaTarget})
    if (t == pure) return true;
  return false;
}

// Whether dropping `op` (its results unread) cannot be observed: a removable kind whose bodies
// (a reduce's, a sort's comparator, ...) hold only removable ops.
bool removable(const ir::Op& op) {
  if (op.results.empty() || (!removable_kind(op.kind) && !pure_call(op))) return false;
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
    if (!any) continue;
    std::vector<ir::Op> kept;
    kept.reserve(b.ops.size());
    for (size_t i = 0; i < b.ops.size(); ++i)
      if (!dead[i]) kept.push_back(std::move(b.ops[i]));
    b.ops = std::move(kept);
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
