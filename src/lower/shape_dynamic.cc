// Lowering rules: ops of StableHLO's dynamic-shape and tuple vocabulary that reach us with static
// shapes: get_dimension_size, set_dimension_size, dynamic_pad, and tuple/get_tuple_element left
// over by passes/fold_tuples (refused: our values are arrays, never tuples).
//
// dynamic_iota, dynamic_broadcast_in_dim, dynamic_reshape (shape.cc) and real_dynamic_slice
// (shape_slice.cc) live with their static twins.
#include <vector>

#include "lower/shape_util.h"

namespace jaxmlx::lower {

using namespace shape_util;

namespace {

// spec: get_dimension_size — the size of `dimension` as a tensor<i32>.
StatusOr<Values> lower_get_dimension_size(LowerContext& ctx, const ir::Op& op, const Values&) {
  const ir::Type& t = operand_type(op, 0);
  const int64_t d = op.get_i64("dimension", -1);
  if (d < 0 || d >= t.rank()) return ctx.malformed(op, "dimension out of range");
  if (t.dims[d] < 0) return ctx.unsupported(op, "a dynamic dimension");
  return Values{mx::array(static_cast<int32_t>(t.dims[d]), mx::int32)};
}

// set_dimension_size marks a dim as dynamic (bounded). With a static result type nothing is
// dynamic any more and the data passes through; a truly dynamic result is refused.
StatusOr<Values> lower_set_dimension_size(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const ir::Type& t = operand_type(op, 0);
  const ir::Type& rt = result_type(op);
  if (!is_static(rt) || !is_static(t) || t.dims != rt.dims)
    return ctx.unsupported(op, "bounded dynamic shapes");
  return Values{in[0]};
}

// The func holding `user`, found by address (value ids are only unique per func).
const ir::Func* func_of(const ir::Module& m, const ir::Op& user) {
  for (const ir::Func& f : m.funcs) {
    bool found = false;
    ir::walk(f.body, [&](const ir::Op& op) { found |= &op == &user; });
    if (found) return &f;
  }
  return nullptr;
}

// The integer elements of the stablehlo.constant defining `v`, if a constant defines it.
std::optional<std::vector<int64_t>> constant_ints(const ir::Func& f, const ir::Value& v) {
  std::optional<std::vector<int64_t>> out;
  ir::walk(f.body, [&](const ir::Op& op) {
    if (op.kind == ir::OpKind::kConstant && op.results.size() == 1 && op.results[0] == v)
      out = op.get_i64s("value");
  });
  return out;
}

// spec: dynamic_pad — pad whose edge/interior amounts are tensors. The result shape is static
// only when they are known, so they must be constants; the static pad rule does the work.
StatusOr<Values> lower_dynamic_pad(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (op.operands.size() != 5) return ctx.malformed(op, "dynamic_pad takes 5 operands");
  const ir::Func* f = func_of(ctx.module(), op);
  const size_t rank = static_cast<size_t>(operand_type(op, 0).rank());
  std::vector<int64_t> amounts[3];
  for (int i = 0; i < 3; ++i) {
    auto c = f ? constant_ints(*f, op.operands[2 + i]) : std::nullopt;
    if (!c) return ctx.unsupported(op, "padding amounts that are not constants");
    if (c->size() != rank) return ctx.malformed(op, "padding amounts do not match the rank");
    amounts[i] = std::move(*c);
  }
  ir::Op pad;
  pad.kind = ir::OpKind::kPad;
  pad.operands = {op.operands[0], op.operands[1]};
  pad.results = op.results;
  pad.loc = op.loc;
  pad.set_attr("edge_padding_low", ir::I64ArrayAttr{amounts[0]});
  pad.set_attr("edge_padding_high", ir::I64ArrayAttr{amounts[1]});
  pad.set_attr("interior_padding", ir::I64ArrayAttr{amounts[2]});
  const LowerFn* rule = Registry::global().find(ir::OpKind::kPad);
  if (rule == nullptr) return ctx.unsupported(op, "no pad rule");
  return (*rule)(ctx, pad, Values{in[0], in[1]});
}

StatusOr<Values> lower_tuple_value(LowerContext& ctx, const ir::Op& op, const Values&) {
  return ctx.unsupported(op, "tuple values that escape (a tuple argument, result or carry)");
}

}  // namespace

void register_shape_dynamic(Registry& r) {
  r.add(ir::OpKind::kGetDimensionSize, lower_get_dimension_size);
  r.add(ir::OpKind::kSetDimensionSize, lower_set_dimension_size);
  r.add(ir::OpKind::kDynamicPad, lower_dynamic_pad);
  r.add(ir::OpKind::kTuple, lower_tuple_value);
  r.add(ir::OpKind::kGetTupleElement, lower_tuple_value);
}

}  // namespace jaxmlx::lower
