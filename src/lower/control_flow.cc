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
#include "passes/counted_loop.h"

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

StatusOr<Values> run_counted(Interpreter& interp, const ir::Op& op,
                             const passes::CountedLoop& loop, Values carry) {
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
  std::optional<int64_t> trips = passes::counted_trips(t, *init, bound, loop);
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
    auto def = [interp](ir::Value v) { return interp->def(v); };
    if (std::optional<passes::CountedLoop> loop = passes::match_counted_loop(op, def)) {
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
