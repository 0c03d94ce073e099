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

  // How to copy a loop's body: which ops read a changing carry value, and fresh ids for every
  // value a copy defines.
  struct Copier {
    const ir::Block* body = nullptr;
    std::vector<bool> invariant;  // per op of the body but its return
    struct Local {
      uint32_t index;
      bool once;
    };
    std::unordered_map<uint32_t, Local> local;  // ids the body defines
    std::unordered_map<uint32_t, size_t> arg_index;
    uint32_t span = 0;
    uint32_t invariant_base = 0;
  };

  Copier plan_copies(const ir::Block& body) {
    Copier c;
    c.body = &body;
    const size_t n = body.args.size();
    const ir::Op& ret = body.ops.back();
    // Ops that read no carry value that changes (jax passes the values a body closes over as
    // carry elements it returns unchanged), directly or through other ops, are emitted once.
    std::unordered_set<uint32_t> variant;
    for (size_t i = 0; i < n; ++i)
      if (ret.operands[i].id != body.args[i].id) variant.insert(body.args[i].id);
    c.invariant.resize(body.ops.size() - 1);
    for (size_t k = 0; k + 1 < body.ops.size(); ++k) {
      bool reads = false;
      for_each_read(body.ops[k], [&](uint32_t id) { reads |= variant.count(id) > 0; });
      c.invariant[k] = !reads;
      if (reads)
        for (const ir::Value& r : body.ops[k].results) variant.insert(r.id);
    }
    // Every id the body defines (its ops' results, nested regions' arguments and results),
    // numbered, and whether it belongs to an op emitted once.
    for (size_t k = 0; k + 1 < body.ops.size(); ++k)
      for_each_def(body.ops[k], [&](uint32_t id) {
        c.local.emplace(id, Copier::Local{static_cast<uint32_t>(c.local.size()), c.invariant[k]});
      });
    c.span = static_cast<uint32_t>(c.local.size());
    for (size_t i = 0; i < n; ++i) c.arg_index.emplace(body.args[i].id, i);
    c.invariant_base = f_->num_values;
    f_->num_values += c.span;
    return c;
  }

  // Appends one copy of the body to `out` reading `carry` for its arguments: its invariant ops
  // (`once`, with the carry the loop starts from) or the others; returns the copy's results.
  std::vector<ir::Value> copy_body(const Copier& c, const std::vector<ir::Value>& carry, bool once,
                                   std::vector<ir::Op>& out) {
    const uint32_t base = once ? c.invariant_base : f_->num_values;
    if (!once) f_->num_values += c.span;
    ValueMap map = [&](ir::Value v) -> ir::Value {
      if (auto a = c.arg_index.find(v.id); a != c.arg_index.end()) return carry[a->second];
      auto it = c.local.find(v.id);
      if (it == c.local.end()) return v;  // defined outside the loop
      return ir::Value{(it->second.once ? c.invariant_base : base) + it->second.index, v.type};
    };
    const std::vector<ir::Op>& ops = c.body->ops;
    for (size_t k = 0; k + 1 < ops.size(); ++k) {
      if (c.invariant[k] != once) continue;
      out.push_back(ops[k]);
      remap_op(out.back(), map);
    }
    std::vector<ir::Value> next;
    for (const ir::Value& v : ops.back().operands) next.push_back(map(v));
    return next;
  }

  // Appends the unrolled copies of `loop` to `out` and records what its results become, or, for
  // a loop too long to unroll whole, the first trips % k copies and a loop running k copies per
  // iteration; false (nothing appended) when it is not a loop this pass unrolls.
  bool unroll(const ir::Op& loop, std::vector<ir::Op>& out) {
    if (max_ops_ <= 0 || loop.regions.size() != 2 || loop.regions[1].blocks.size() != 1)
      return false;
    const ir::Block& body = loop.regions[1].entry();
    if (body.ops.empty() || body.ops.back().kind != OpKind::kReturn) return false;
    const size_t n = loop.operands.size();
    if (body.args.size() != n || body.ops.back().operands.size() != n || loop.results.size() != n)
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
    if (blocked) return false;
    body_ops = std::max<int64_t>(body_ops, 1);
    const bool whole = *trips <= max_ops_ / body_ops &&
                       unrolled_ops_ + *trips * body_ops <= kProgramBudget * max_ops_;
    // Too long to unroll whole: k copies per iteration, k as large as max_ops / 16 ops allow.
    const int64_t k = whole ? *trips : std::min(*trips, max_ops_ / kChunkFraction / body_ops);
    if (!whole && k < 2) return false;
    const int64_t peeled = whole ? *trips : *trips % k;
    unrolled_ops_ += whole ? *trips * body_ops : 0;

    const Copier copier = plan_copies(body);
    std::vector<ir::Value> carry(loop.operands.begin(), loop.operands.end());
    copy_body(copier, carry, /*once=*/true, out);
    for (int64_t it = 0; it < peeled; ++it) {
      carry[counted->index] =
          emit_constant(counter_type, *init + it * counted->step, loop.loc, out);
      carry = copy_body(copier, carry, /*once=*/false, out);
    }
    if (whole) {
      for (size_t i = 0; i < n; ++i) subst_[loop.results[i].id] = carry[i];
      return true;
    }
    // The loop that stays: from the first counter after the peeled copies, k copies per
    // iteration, the counter returned as arg + k * step so that it is still counted.
    carry[counted->index] =
        emit_constant(counter_type, *init + peeled * counted->step, loop.loc, out);
    ir::Op chunked;
    chunked.kind = OpKind::kWhile;
    chunked.loc = loop.loc;
    chunked.attrs = loop.attrs;
    chunked.operands = carry;
    chunked.results = loop.results;
    chunked.regions.push_back(loop.regions[0]);
    ir::Block& nb = chunked.regions.emplace_back().blocks.emplace_back();
    for (const ir::Value& a : body.args) nb.args.push_back(ir::Value{f_->num_values++, a.type});
    std::vector<ir::Value> inner(nb.args.begin(), nb.args.end());
    for (int64_t c = 0; c < k; ++c) inner = copy_body(copier, inner, /*once=*/false, nb.ops);
    ir::Value stride = emit_constant(counter_type, k * counted->step, loop.loc, nb.ops);
    ir::Op add;
    add.kind = OpKind::kAdd;
    add.loc = loop.loc;
    add.operands = {nb.args[counted->index], stride};
    add.results = {ir::Value{f_->num_values++, counter_type}};
    inner[counted->index] = add.results[0];
    nb.ops.push_back(std::move(add));
    ir::Op ret = body.ops.back();
    ret.operands = inner;
    nb.ops.push_back(std::move(ret));
    out.push_back(std::move(chunked));
    return true;
  }

  // All the loops of a program together unroll into at most this many times max_ops; a loop
  // too long for that runs max_ops / kChunkFraction ops of copies per iteration.
  static constexpr int64_t kProgramBudget = 4;
  static constexpr int64_t kChunkFraction = 16;

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
