// Lowering rules: control_flow family (see lowering.h for the rule contract).
//
// while: counted loops (cond `i < N` / `i <= N`, body `i = i + c`, N a constant or a loop
// invariant) run their trip count without reading the condition, with an async_eval every
// loop_chunk() iterations; other loops evaluate the condition (and flush the carry) each iteration.
// case / if read the index on the host. In the compile-time trial every region is traced once.
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>

#include "lower/interpreter.h"
#include "lower/lowering.h"
#include "mlx/mlx.h"

namespace jaxmlx::lower {
namespace {

// Counted-loop iterations traced between two async_evals (JAXMLX_LOOP_CHUNK overrides).
int64_t loop_chunk() {
  static const int64_t chunk = [] {
    const char* v = std::getenv("JAXMLX_LOOP_CHUNK");
    int64_t n = v ? std::atoll(v) : 0;
    return n > 0 ? n : int64_t{8};
  }();
  return chunk;
}

RunMode mode_of(LowerContext& ctx) {
  auto* interp = dynamic_cast<Interpreter*>(&ctx);
  return interp ? interp->mode() : RunMode::kExecute;
}

bool same_kind(const mx::array& a, const mx::array& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape();
}

Status check_carry(LowerContext& ctx, const ir::Op& op, const Values& want, const Values& got,
                   const char* what) {
  if (got.size() != want.size())
    return ctx.malformed(op, std::string(what) + " returns " + std::to_string(got.size()) +
                                 " values for " + std::to_string(want.size()));
  for (size_t i = 0; i < got.size(); ++i)
    if (!same_kind(want[i], got[i]))
      return ctx.malformed(op, std::string(what) + " result " + std::to_string(i) +
                                   " differs in shape or dtype from the loop carry");
  return Status();
}

Status check_pred(LowerContext& ctx, const ir::Op& op, const Values& c) {
  if (c.size() != 1 || c[0].size() != 1 || c[0].dtype() != mx::bool_)
    return ctx.malformed(op, "condition must return one scalar i1");
  return Status();
}

// A counted loop: carry element `index` goes from its initial value up by `step` while it is
// less than (or, with `inclusive`, equal to) the bound.
struct CountedLoop {
  size_t index = 0;
  int64_t step = 0;
  bool inclusive = false;
  std::optional<int64_t> bound_const;  // else the bound is carry element bound_index
  size_t bound_index = 0;
};

const ir::Op* terminator(const ir::Region& r) {
  if (r.blocks.size() != 1 || r.entry().ops.empty()) return nullptr;
  return &r.entry().ops.back();
}

std::optional<size_t> arg_index(const ir::Block& b, ir::Value v) {
  for (size_t i = 0; i < b.args.size(); ++i)
    if (b.args[i].id == v.id) return i;
  return std::nullopt;
}

std::optional<CountedLoop> match_counted(Interpreter& interp, const ir::Op& op) {
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
  const ir::Op* cmp = interp.def(cret->operands[0]);
  if (!cmp || cmp->kind != ir::OpKind::kCompare || cmp->operands.size() != 2) return std::nullopt;
  int dir = cmp->get_enum("comparison_direction", -1);
  CountedLoop loop;
  if (dir == static_cast<int>(ir::ComparisonDirection::kLE)) loop.inclusive = true;
  else if (dir != static_cast<int>(ir::ComparisonDirection::kLT)) return std::nullopt;
  std::optional<size_t> k = arg_index(cb, cmp->operands[0]);
  if (!k || *k >= bret->operands.size()) return std::nullopt;
  const ir::Type* t = cb.args[*k].type;
  if (!t || !ir::is_integer(t->dtype) || t->rank() != 0) return std::nullopt;
  if (ir::is_unsigned_int(t->dtype) && ir::element_bit_width(t->dtype) == 64) return std::nullopt;
  loop.index = *k;
  loop.bound_const = interp.constant_int(cmp->operands[1]);
  if (!loop.bound_const) {
    std::optional<size_t> j = arg_index(cb, cmp->operands[1]);
    // The bound must be carried through the body unchanged.
    if (!j || *j >= bret->operands.size() || *j == *k) return std::nullopt;
    if (arg_index(bb, bret->operands[*j]) != j) return std::nullopt;
    loop.bound_index = *j;
  }
  const ir::Op* add = interp.def(bret->operands[*k]);
  if (!add || add->kind != ir::OpKind::kAdd) return std::nullopt;
  std::optional<int64_t> step;
  if (arg_index(bb, add->operands[0]) == k) step = interp.constant_int(add->operands[1]);
  else if (arg_index(bb, add->operands[1]) == k) step = interp.constant_int(add->operands[0]);
  if (!step || *step <= 0) return std::nullopt;
  loop.step = *step;
  return loop;
}

// The trip count, or nullopt when the counter would wrap around its type (left to the
// dynamic loop, which then follows the exact semantics).
std::optional<int64_t> trip_count(const ir::Type* t, int64_t init, int64_t bound,
                                  const CountedLoop& loop) {
  int bits = ir::element_bit_width(t->dtype);
  __int128 hi = ir::is_signed_int(t->dtype) ? (((__int128)1 << (bits - 1)) - 1)
                                            : (((__int128)1 << bits) - 1);
  __int128 end = (__int128)bound + (loop.inclusive ? 1 : 0);
  if (end <= init) return 0;
  __int128 trips = (end - init + loop.step - 1) / loop.step;
  if ((__int128)init + trips * loop.step > hi) return std::nullopt;  // the last add wraps
  return static_cast<int64_t>(trips);
}

StatusOr<Values> run_counted(Interpreter& interp, const ir::Op& op, const CountedLoop& loop,
                             Values carry) {
  const ir::Type* t = op.regions[0].entry().args[loop.index].type;
  std::optional<int64_t> init = interp.constant_int(op.operands[loop.index]);
  if (!init) {
    ASSIGN_OR_RETURN(int64_t v, interp.read_scalar(carry[loop.index]));
    init = v;
  }
  int64_t bound = 0;
  if (loop.bound_const) {
    bound = *loop.bound_const;
  } else {
    ASSIGN_OR_RETURN(bound, interp.read_scalar(carry[loop.bound_index]));
  }
  std::optional<int64_t> trips = trip_count(t, *init, bound, loop);
  if (!trips) return Status(Code::kAborted, "not counted");
  for (int64_t i = 0; i < *trips; ++i) {
    ASSIGN_OR_RETURN(carry, interp.call_loop_region(op.regions[1], carry));
    if ((i + 1) % loop_chunk() == 0 && i + 1 < *trips) mx::async_eval(carry);
  }
  return carry;
}

StatusOr<Values> lower_while(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (op.regions.size() != 2) return ctx.malformed(op, "while needs a cond and a body region");
  RunMode mode = mode_of(ctx);
  if (mode == RunMode::kTrial) {
    ASSIGN_OR_RETURN(Values c, ctx.call_region(op.regions[0], in));
    RETURN_IF_ERROR(check_pred(ctx, op, c));
    ASSIGN_OR_RETURN(Values next, ctx.call_region(op.regions[1], in));
    RETURN_IF_ERROR(check_carry(ctx, op, in, next, "the body"));
    return in;
  }
  if (mode == RunMode::kTrace) return ctx.unsupported(op, "while loop inside a compiled trace");
  if (auto* interp = dynamic_cast<Interpreter*>(&ctx)) {
    if (std::optional<CountedLoop> loop = match_counted(*interp, op)) {
      StatusOr<Values> out = run_counted(*interp, op, *loop, in);
      if (out.ok() || out.status().code() != Code::kAborted) return out;
    }
  }
  auto* interp = dynamic_cast<Interpreter*>(&ctx);
  auto call = [&](const ir::Region& r, const Values& args) {
    return interp ? interp->call_loop_region(r, args) : ctx.call_region(r, args);
  };
  Values carry = in;
  for (;;) {
    ASSIGN_OR_RETURN(Values c, call(op.regions[0], carry));
    RETURN_IF_ERROR(check_pred(ctx, op, c));
    // Flush the carry with the condition so the lazy graph does not grow across iterations.
    Values pending = carry;
    pending.push_back(c[0]);
    RETURN_IF_ERROR(ctx.eval(pending));
    if (!c[0].item<bool>()) break;
    ASSIGN_OR_RETURN(carry, call(op.regions[1], carry));
  }
  return carry;
}

// Traces every branch (trial) and checks they agree with the first.
StatusOr<Values> trial_branches(LowerContext& ctx, const ir::Op& op) {
  Values first;
  for (size_t b = 0; b < op.regions.size(); ++b) {
    ASSIGN_OR_RETURN(Values out, ctx.call_region(op.regions[b], {}));
    if (b == 0) {
      first = out;
      continue;
    }
    if (out.size() != first.size()) return ctx.malformed(op, "branches return different counts");
    for (size_t i = 0; i < out.size(); ++i)
      if (!same_kind(out[i], first[i]))
        return ctx.malformed(op, "branch " + std::to_string(b) + " result " + std::to_string(i) +
                                     " differs in shape or dtype from branch 0");
  }
  return first;
}

StatusOr<Values> lower_case(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (op.regions.empty() || in.size() != 1) return ctx.malformed(op, "case needs an index and branches");
  RunMode mode = mode_of(ctx);
  if (mode == RunMode::kTrial) return trial_branches(ctx, op);
  if (mode == RunMode::kTrace) return ctx.unsupported(op, "case inside a compiled trace");
  mx::array idx = mx::astype(mx::reshape(in[0], {}), mx::int64);
  RETURN_IF_ERROR(ctx.eval({idx}));
  int64_t i = idx.item<int64_t>();
  int64_t n = static_cast<int64_t>(op.regions.size());
  if (i < 0 || i >= n) i = n - 1;  // out-of-range index selects the last branch
  return ctx.call_region(op.regions[static_cast<size_t>(i)], {});
}

StatusOr<Values> lower_if(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (op.regions.size() != 2 || in.size() != 1) return ctx.malformed(op, "if needs a pred and two branches");
  RunMode mode = mode_of(ctx);
  if (mode == RunMode::kTrial) return trial_branches(ctx, op);
  if (mode == RunMode::kTrace) return ctx.unsupported(op, "if inside a compiled trace");
  mx::array pred = mx::reshape(in[0], {});
  RETURN_IF_ERROR(ctx.eval({pred}));
  bool taken = mx::astype(pred, mx::bool_).item<bool>();
  return ctx.call_region(op.regions[taken ? 0 : 1], {});
}

StatusOr<Values> lower_call(LowerContext& ctx, const ir::Op& op, const Values& in) {
  std::string_view callee = op.get_string("callee");
  if (callee.empty()) return ctx.malformed(op, "func.call without a callee");
  return ctx.call_func(callee, in);
}

StatusOr<Values> lower_identity(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != op.results.size()) return ctx.malformed(op, "operand and result counts differ");
  return in;
}

StatusOr<Values> lower_token(LowerContext& ctx, const ir::Op& op, const Values& in) {
  return Values{mx::array(false)};
}

}  // namespace

void register_control_flow(Registry& r) {
  r.add(ir::OpKind::kWhile, lower_while);
  r.add(ir::OpKind::kCase, lower_case);
  r.add(ir::OpKind::kIf, lower_if);
  r.add(ir::OpKind::kFuncCall, lower_call);
  r.add(ir::OpKind::kOptimizationBarrier, lower_identity);
  r.add(ir::OpKind::kAfterAll, lower_token);
  r.add(ir::OpKind::kCreateToken, lower_token);
}

}  // namespace jaxmlx::lower
