// inline_async_ops: on one device an asynchronous computation runs where it starts.
//
// jax's asynchronous collectives (lax.parallel's psum_start(...).done(), all_gather_start,
// ppermute_start, ...) lower to `%f = stablehlo.async_start(%x) ({ the collective })` and a later
// `stablehlo.async_done(%f)`, whose results are the body's. With one device there is nothing to
// overlap: the body's ops take the async_start's place (its block arguments read the operands),
// and the async_done's results become the values the body returns. A future read by anything
// but one async_done (returned, passed into a loop) is left as it is, and refused when lowered.
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "passes/passes.h"

namespace jaxmlx::passes {
namespace {

// An async_start whose body can take its place (body_reads_operands), with one future result.
bool is_inlinable_start(const ir::Op& op) {
  return op.kind == ir::OpKind::kAsyncStart && op.results.size() == 1 &&
         body_reads_operands(op) && op.regions[0].entry().ops.back().kind == ir::OpKind::kReturn;
}

// Whether `done` gives exactly what the body of `start` returns.
bool done_matches(const ir::Op& start, const ir::Op& done) {
  const ir::Op& ret = start.regions[0].entry().ops.back();
  if (done.results.size() != ret.operands.size()) return false;
  for (size_t i = 0; i < ret.operands.size(); ++i)
    if (done.results[i].type == nullptr || ret.operands[i].type == nullptr ||
        !(*done.results[i].type == *ret.operands[i].type))
      return false;
  return true;
}

class AsyncInliner {
 public:
  explicit AsyncInliner(ir::Func& f) : f_(f) {}

  void run() {
    // Futures read once, by an async_done that matches their start.
    const UseCounts uses = count_uses(f_.body);
    std::unordered_map<uint32_t, const ir::Op*> starts;
    ir::walk(f_.body, [&](const ir::Op& op) {
      if (is_inlinable_start(op)) starts[op.results[0].id] = &op;
    });
    ir::walk(f_.body, [&](const ir::Op& op) {
      if (op.kind != ir::OpKind::kAsyncDone || op.operands.size() != 1) return;
      auto it = starts.find(op.operands[0].id);
      auto n = uses.find(op.operands[0].id);
      if (it != starts.end() && n != uses.end() && n->second == 1 && done_matches(*it->second, op))
        inlined_.insert(op.operands[0].id);
    });
    if (inlined_.empty()) return;
    rewrite(f_.body);
    replace_uses(f_, subst_);
  }

 private:
  void rewrite(ir::Region& r) {
    for (ir::Block& b : r.blocks) {
      std::vector<ir::Op> out;
      out.reserve(b.ops.size());
      for (ir::Op& op : b.ops) {
        for (ir::Region& nested : op.regions) rewrite(nested);
        if (op.kind == ir::OpKind::kAsyncStart && inlined_.count(op.results[0].id)) {
          returned_[op.results[0].id] = splice_body(op, out, subst_);
          continue;
        }
        if (op.kind == ir::OpKind::kAsyncDone && op.operands.size() == 1 &&
            returned_.count(op.operands[0].id)) {
          const std::vector<ir::Value>& values = returned_[op.operands[0].id];
          for (size_t i = 0; i < op.results.size(); ++i) subst_[op.results[i].id] = values[i];
          continue;
        }
        out.push_back(std::move(op));
      }
      b.ops = std::move(out);
    }
  }

  ir::Func& f_;
  std::unordered_set<uint32_t> inlined_;  // futures whose start and done are replaced
  std::unordered_map<uint32_t, std::vector<ir::Value>> returned_;  // future -> body's results
  std::unordered_map<uint32_t, ir::Value> subst_;
};

}  // namespace

Status inline_async_ops(ir::Module& m) {
  for (ir::Func& f : m.funcs) AsyncInliner(f).run();
  return Status();
}

}  // namespace jaxmlx::passes
