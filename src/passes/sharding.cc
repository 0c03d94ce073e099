// drop_sharding: on one device every sharding annotation is an identity (or, without a result,
// nothing).
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "passes/passes.h"
#include "passes/threefry.h"

namespace jaxmlx::passes {
namespace {

bool is_identity_annotation(const ir::Op& op) {
  if (op.operands.size() != op.results.size()) return false;
  if (op.kind == ir::OpKind::kGeneric) {
    std::string_view n = op.generic_name;
    return n == "sdy.sharding_constraint" || n == "sdy.reshard" ||
           n == "sdy.propagation_barrier" || n == "mhlo.sharding_constraint";
  }
  if (op.kind == ir::OpKind::kCustomCall) {
    std::string_view t = op.get_string("call_target_name");
    if (t != "Sharding" && t != "SPMDFullToShardShape" && t != "SPMDShardToFullShape") return false;
    for (size_t i = 0; i < op.operands.size(); ++i)
      if (!(*op.operands[i].type == *op.results[i].type)) return false;  // a real reshape
    return true;
  }
  return false;
}

// sdy.sharding_group (jax.experimental.shard_alike): asks that its operand be sharded like the
// others of its group. It has no result, so on one device there is nothing to keep.
bool is_sharding_group(const ir::Op& op) {
  return op.kind == ir::OpKind::kGeneric && op.generic_name == "sdy.sharding_group" &&
         op.results.empty() && op.regions.empty();
}

// sdy.manual_computation over a single device: its body runs once on the whole arrays.
bool is_trivial_manual_computation(const ir::Op& op) {
  if (op.kind != ir::OpKind::kGeneric || op.generic_name != "sdy.manual_computation") return false;
  if (!body_reads_operands(op)) return false;
  const ir::Op& ret = op.regions[0].entry().ops.back();
  if (ret.operands.size() != op.results.size()) return false;
  for (size_t i = 0; i < ret.operands.size(); ++i)
    if (!(*ret.operands[i].type == *op.results[i].type)) return false;
  return true;
}

void drop_in_region(ir::Region& r, std::unordered_map<uint32_t, ir::Value>& subst) {
  for (ir::Block& b : r.blocks) {
    std::vector<ir::Op> out;
    out.reserve(b.ops.size());
    for (ir::Op& op : b.ops) {
      for (ir::Region& nested : op.regions) drop_in_region(nested, subst);
      if (is_sharding_group(op)) continue;
      if (is_identity_annotation(op)) {
        for (size_t i = 0; i < op.results.size(); ++i) subst[op.results[i].id] = op.operands[i];
        continue;
      }
      if (is_trivial_manual_computation(op)) {
        const std::vector<ir::Value> returned = splice_body(op, out, subst);
        for (size_t i = 0; i < op.results.size(); ++i) subst[op.results[i].id] = returned[i];
        continue;
      }
      out.push_back(std::move(op));
    }
    b.ops = std::move(out);
  }
}

void replace_in_region(ir::Region& r, const std::unordered_map<uint32_t, ir::Value>& subst);

ir::Value resolve(ir::Value v, const std::unordered_map<uint32_t, ir::Value>& subst) {
  for (size_t guard = 0; guard <= subst.size(); ++guard) {
    auto it = subst.find(v.id);
    if (it == subst.end()) return v;
    v = it->second;
  }
  return v;  // a cycle cannot come from SSA input; stop rather than loop
}

void replace_in_region(ir::Region& r, const std::unordered_map<uint32_t, ir::Value>& subst) {
  for (ir::Block& b : r.blocks)
    for (ir::Op& op : b.ops) {
      for (ir::Value& v : op.operands) v = resolve(v, subst);
      for (ir::Region& nested : op.regions) replace_in_region(nested, subst);
    }
}

}  // namespace

UseCounts count_uses(const ir::Region& r) {
  UseCounts uses;
  ir::walk(r, [&](const ir::Op& op) {
    for (const ir::Value& v : op.operands) ++uses[v.id];
  });
  return uses;
}

void erase_ops(ir::Block& b, const std::vector<bool>& drop) {
  std::vector<ir::Op> kept;
  kept.reserve(b.ops.size());
  for (size_t i = 0; i < b.ops.size(); ++i)
    if (!drop[i]) kept.push_back(std::move(b.ops[i]));
  b.ops = std::move(kept);
}

bool body_reads_operands(const ir::Op& op) {
  if (op.regions.size() != 1 || op.regions[0].blocks.size() != 1) return false;
  const ir::Block& b = op.regions[0].entry();
  if (b.args.size() != op.operands.size() || b.ops.empty()) return false;
  for (size_t i = 0; i < b.args.size(); ++i)
    if (b.args[i].type == nullptr || op.operands[i].type == nullptr ||
        !(*b.args[i].type == *op.operands[i].type))
      return false;
  return true;
}

std::vector<ir::Value> splice_body(ir::Op& op, std::vector<ir::Op>& out,
                                   std::unordered_map<uint32_t, ir::Value>& subst) {
  ir::Block& body = op.regions[0].blocks[0];
  for (size_t i = 0; i < body.args.size(); ++i) subst[body.args[i].id] = op.operands[i];
  std::vector<ir::Value> returned = body.ops.back().operands;
  for (size_t i = 0; i + 1 < body.ops.size(); ++i) out.push_back(std::move(body.ops[i]));
  return returned;
}

void replace_uses(ir::Func& f, const std::unordered_map<uint32_t, ir::Value>& subst) {
  if (!subst.empty()) replace_in_region(f.body, subst);
}

Status drop_sharding(ir::Module& m) {
  for (ir::Func& f : m.funcs) {
    std::unordered_map<uint32_t, ir::Value> subst;
    drop_in_region(f.body, subst);
    replace_uses(f, subst);
  }
  return Status();
}

Status run_passes(ir::Module& m, const PassOptions& opts) {
  if (opts.drop_sharding) RETURN_IF_ERROR(drop_sharding(m));
  RETURN_IF_ERROR(inline_async_ops(m));
  if (opts.threefry) RETURN_IF_ERROR(recognize_threefry(m));
  if (opts.inline_calls) RETURN_IF_ERROR(inline_calls(m));
  return Status();
}

}  // namespace jaxmlx::passes
