// sink_negations: see negated_sum.h.
#include "passes/negated_sum.h"

#include <unordered_map>
#include <utility>
#include <vector>

#include "passes/chain_match.h"

namespace jaxmlx::passes {
namespace {

using ir::OpKind;

// Reduce result id -> the value its negated operand negates, for every reduce to rewrite.
using Matches = std::unordered_map<uint32_t, ir::Value>;

void find(const ir::Region& r, const ChainMatcher& m, Matches& out) {
  for (const ir::Block& b : r.blocks)
    for (const ir::Op& op : b.ops) {
      for (const ir::Region& nested : op.regions) find(nested, m, out);
      if (op.kind != OpKind::kReduce || op.operands.size() != 2 || op.results.size() != 1)
        continue;
      const ir::Value& n = op.operands[0];
      const ir::Op* neg = m.single(n, OpKind::kNegate, 1);
      if (neg == nullptr || !ChainMatcher::is_f32_tensor(n)) continue;
      if (!m.reduce_of(op.results[0], n, OpKind::kAdd, 0u)) continue;  // a sum from +0
      out.emplace(op.results[0].id, neg->operands[0]);
    }
}

void rewrite(ir::Region& r, ir::Func& f, const Matches& matches) {
  for (ir::Block& b : r.blocks) {
    std::vector<ir::Op> ops;
    ops.reserve(b.ops.size());
    for (ir::Op& op : b.ops) {
      for (ir::Region& nested : op.regions) rewrite(nested, f, matches);
      auto it = op.results.size() == 1 ? matches.find(op.results[0].id) : matches.end();
      if (it == matches.end()) {
        ops.push_back(std::move(op));
        continue;
      }
      const ir::Value r = op.results[0];
      const ir::Value s{f.num_values++, r.type};
      const ir::Location* loc = op.loc;
      op.operands[0] = it->second;
      op.results[0] = s;
      ops.push_back(std::move(op));
      ir::Op neg;
      neg.kind = OpKind::kNegate;
      neg.operands = {s};
      neg.results = {r};
      neg.loc = loc;
      ops.push_back(std::move(neg));
    }
    b.ops = std::move(ops);
  }
}

}  // namespace

Status sink_negations(ir::Module& m) {
  for (ir::Func& f : m.funcs) {
    Matches matches;
    {
      ChainMatcher cm(f);
      find(f.body, cm, matches);
    }
    if (!matches.empty()) rewrite(f.body, f, matches);
  }
  return Status();
}

}  // namespace jaxmlx::passes
