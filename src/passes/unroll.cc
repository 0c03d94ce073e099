// unroll: see unroll.h.
#include "passes/unroll.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/attributes.h"
#include "ir/types.h"
#include "passes/counted_loop.h"
#include "passes/passes.h"
#include "passes/value_calls.h"

namespace jaxmlx::passes {

int64_t unroll_limit() {
  const char* v = std::getenv("JAXMLX_UNROLL");
  if (v == nullptr || *v == '\0') return 16384;
  char* end = nullptr;
  long long n = std::strtoll(v, &end, 10);
  return end != v && n > 0 ? static_cast<int64_t>(n) : 0;
}

namespace {

using OpKind = ir::OpKind;

// Ops a copy of the body may not hold: they read the host, have an effect, or stay loops.
bool blocks_unrolling(const ir::Op& op) {
  switch (op.kind) {
    case OpKind::kWhile: case OpKind::kCase: case OpKind::kIf: case OpKind::kFuncCall:
    case OpKind::kInfeed: case OpKind::kOutfeed: case OpKind::kSend: case OpKind::kRecv:
    case OpKind::kRng: case OpKind::kGeneric:
      return true;
    case OpKind::kCustomCall:
      return !is_value_call(op);
    default:
      return false;
  }
}

// Calls fn(id) for every value an op reads, in its nested regions too.
template <typename Fn>
void for_each_read(const ir::Op& op, Fn&& fn) {
  for (const ir::Value& v : op.operands) fn(v.id);
  for (const ir::Region& r : op.regions)
    ir::walk(r, [&](const ir::Op& inner) {
      for (const ir::Value& v : inner.operands) fn(v.id);
    });
}

// Calls fn(id) for every value an op defines: its results, and its regions' arguments and ops.
template <typename Fn>
void for_each_def(const ir::Op& op, Fn&& fn) {
  for (const ir::Value& v : op.results) fn(v.id);
  for (const ir::Region& r : op.regions)
    for (const ir::Block& b : r.blocks) {
      for (const ir::Value& a : b.args) fn(a.id);
      for (const ir::Op& inner : b.ops) for_each_def(inner, fn);
    }
}

class Unroller {
 public:
  Unroller(ir::Module& m, int64_t max_ops) : m_(m), max_ops_(max_ops) {}

  void run_func(ir::Func& f) {
    f_ = &f;
    subst_.clear();
    constants_.clear();
    for (ir::Block& b : f.body.blocks) process_block(b);
  }

 private:
  ir::Value resolve(ir::Value v) const {
    auto it = subst_.find(v.id);
    return it == subst_.end() ? v : it->second;
  }

  // Rewrites `b` in place: reads of replaced loops' results resolved, inner regions first, and
  // every loop that can be unrolled replaced by its copies.
  void process_block(ir::Block& b) {
    std::vector<ir::Op> out;
    out.reserve(b.ops.size());
    for (ir::Op& op : b.ops) {
      for (ir::Value& v : op.operands) v = resolve(v);
      for (ir::Region& r : op.regions)
        for (ir::Block& inner : r.blocks) process_block(inner);
      if (constant_int(&op)) constants_.emplace(op.results[0].id, op);
      if (op.kind == OpKind::kWhile && unroll(op, out)) continue;
      out.push_back(std::move(op));
    }
    b.ops = std::move(out);
  }

  // A scalar integer constant of type `t` holding `value` (wrapped to the type's width).
  ir::Value emit_constant(const ir::Type* t, int64_t value, const ir::Location* loc,
                          std::vector<ir::Op>& out) {
    int bytes = ir::element_storage_bytes(t->dtype);
    std::vector<uint8_t> data(static_cast<size_t>(bytes));
    std::memcpy(data.data(), &value, data.size());  // little-endian
    ir::Op c;
    c.kind = OpKind::kConstant;
    c.loc = loc;
    c.results.push_back(ir::Value{f_->num_values++, t});
    c.set_attr("value", ir::DenseElementsAttr{t, m_.own_bytes(std::move(data)), false});
    out.push_back(std::move(c));
    return out.back().results[0];
  }

  // Appends the unrolled copies of `loop` to `out` and records what its results become; false
  // (nothing appended) when it is not a loop this pass unrolls.
  bool unroll(const ir::Op& loop, std::vector<ir::Op>& out) {
    if (max_ops_ <= 0 || loop.regions.size() != 2 || loop.regions[1].blocks.size() != 1)
      return false;
    const ir::Block& body = loop.regions[1].entry();
    if (body.ops.empty() || body.ops.back().kind != OpKind::kReturn) return false;
    const ir::Op& ret = body.ops.back();
    const size_t n = loop.operands.size();
    if (body.args.size() != n || ret.operands.size() != n || loop.results.size() != n)
      return false;

    std::unordered_map<uint32_t, const ir::Op*> local_defs;  // the cond's and body's own ops
    for (const ir::Region& r : loop.regions)
      for (const ir::Op& o : r.entry().ops)
        for (const ir::Value& v : o.results) local_defs[v.id] = &o;
    DefOf def = [&](ir::Value v) -> const ir::Op* {
      if (auto it = local_defs.find(v.id); it != local_defs.end()) return it->second;
      if (auto it = constants_.find(v.id); it != constants_.end()) return &it->second;
      return nullptr;
    };
    std::optional<CountedLoop> counted = match_counted_loop(loop, def);
    if (!counted || !counted->bound_const) return false;
    std::optional<int64_t> init = constant_int(def(loop.operands[counted->index]));
    if (!init) return false;
    const ir::Type* counter_type = body.args[counted->index].type;
    std::optional<int64_t> trips =
        counted_trips(counter_type, *init, *counted->bound_const, *counted);
    if (!trips) return false;

    int64_t body_ops = 0;
    bool blocked = false;
    ir::walk(loop.regions[1], [&](const ir::Op& o) {
      ++body_ops;
      blocked |= blocks_unrolling(o);
    });
    if (blocked || *trips > max_ops_ / std::max<int64_t>(body_ops, 1)) return false;
    const int64_t ops = *trips * body_ops;
    if (unrolled_ops_ + ops > kProgramBudget * max_ops_) return false;
    unrolled_ops_ += ops;

    // Ops that read no carry value that changes (jax passes the values a body closes over as
    // carry elements it returns unchanged), directly or through other ops, are emitted once.
    std::unordered_set<uint32_t> variant;
    for (size_t i = 0; i < n; ++i)
      if (ret.operands[i].id != body.args[i].id) variant.insert(body.args[i].id);
    std::vector<bool> invariant(body.ops.size() - 1);
    for (size_t k = 0; k + 1 < body.ops.size(); ++k) {
      bool reads = false;
      for_each_read(body.ops[k], [&](uint32_t id) { reads |= variant.count(id) > 0; });
      invariant[k] = !reads;
      if (reads)
        for (const ir::Value& r : body.ops[k].results) variant.insert(r.id);
    }
    // Every id the body defines (its ops' results, nested regions' arguments and results),
    // numbered, and whether it belongs to an op emitted once.
    struct Local {
      uint32_t index;
      bool once;
    };
    std::unordered_map<uint32_t, Local> local;
    for (size_t k = 0; k + 1 < body.ops.size(); ++k)
      for_each_def(body.ops[k], [&](uint32_t id) {
        local.emplace(id, Local{static_cast<uint32_t>(local.size()), invariant[k]});
      });
    const uint32_t span = static_cast<uint32_t>(local.size());
    std::unordered_map<uint32_t, size_t> arg_index;
    for (size_t i = 0; i < n; ++i) arg_index.emplace(body.args[i].id, i);

    const uint32_t invariant_base = f_->num_values;
    f_->num_values += span;
    std::vector<ir::Value> carry(loop.operands.begin(), loop.operands.end());
    uint32_t base = invariant_base;
    ValueMap map = [&](ir::Value v) -> ir::Value {
      if (auto a = arg_index.find(v.id); a != arg_index.end()) return carry[a->second];
      auto it = local.find(v.id);
      if (it == local.end()) return v;  // defined outside the loop
      return ir::Value{(it->second.once ? invariant_base : base) + it->second.index, v.type};
    };
    for (size_t k = 0; k + 1 < body.ops.size(); ++k) {
      if (!invariant[k]) continue;
      out.push_back(body.ops[k]);
      remap_op(out.back(), map);
    }
    for (int64_t it = 0; it < *trips; ++it) {
      carry[counted->index] =
          emit_constant(counter_type, *init + it * counted->step, loop.loc, out);
      base = f_->num_values;
      f_->num_values += span;
      for (size_t k = 0; k + 1 < body.ops.size(); ++k) {
        if (invariant[k]) continue;
        out.push_back(body.ops[k]);
        remap_op(out.back(), map);
      }
      std::vector<ir::Value> next;
      next.reserve(n);
      for (const ir::Value& v : ret.operands) next.push_back(map(v));
      carry = std::move(next);
    }
    for (size_t i = 0; i < n; ++i) subst_[loop.results[i].id] = carry[i];
    return true;
  }

  // All the loops of a program together unroll into at most this many times max_ops.
  static constexpr int64_t kProgramBudget = 4;

  ir::Module& m_;
  const int64_t max_ops_;
  int64_t unrolled_ops_ = 0;
  ir::Func* f_ = nullptr;
  std::unordered_map<uint32_t, ir::Value> subst_;  // results of unrolled loops
  std::unordered_map<uint32_t, ir::Op> constants_;  // integer scalar constants seen so far
};

}  // namespace

Status unroll_counted_loops(ir::Module& m, int64_t max_ops) {
  if (max_ops <= 0) return Status();
  Unroller u(m, max_ops);
  for (ir::Func& f : m.funcs) u.run_func(f);
  return Status();
}

}  // namespace jaxmlx::passes
