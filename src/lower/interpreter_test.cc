// The interpreter and the control-flow rules, with a few tiny test rules on i32 scalars (so the
// test does not depend on the other rule families).
#include "lower/interpreter.h"

#include <gtest/gtest.h>

#include <cstring>

#include "mlx/mlx.h"

namespace jaxmlx::lower {
namespace {

using ir::OpKind;

int g_compares = 0;

Registry test_registry() {
  Registry r;
  register_control_flow(r);
  r.add(OpKind::kConstant, [](LowerContext&, const ir::Op& op, const Values&) -> StatusOr<Values> {
    const auto* d = op.attr<ir::DenseElementsAttr>("value");
    int32_t v = static_cast<int32_t>(d->int_at(0));
    return Values{mx::array(v)};
  });
  r.add(OpKind::kAdd, [](LowerContext&, const ir::Op&, const Values& in) -> StatusOr<Values> {
    return Values{mx::add(in[0], in[1])};
  });
  r.add(OpKind::kMultiply, [](LowerContext&, const ir::Op&, const Values& in) -> StatusOr<Values> {
    return Values{mx::multiply(in[0], in[1])};
  });
  r.add(OpKind::kCompare, [](LowerContext&, const ir::Op&, const Values& in) -> StatusOr<Values> {
    ++g_compares;
    return Values{mx::less(in[0], in[1])};
  });
  // A broken rule: returns f32 for an i32 result.
  r.add(OpKind::kNegate, [](LowerContext&, const ir::Op&, const Values& in) -> StatusOr<Values> {
    return Values{mx::astype(in[0], mx::float32)};
  });
  return r;
}

struct Builder {
  ir::Module m;
  ir::Func* f = nullptr;
  std::vector<ir::Op>* ops = nullptr;

  const ir::Type* i32() { return m.types().tensor(ir::ElementType::kS32, {}); }
  const ir::Type* pred() { return m.types().tensor(ir::ElementType::kPred, {}); }
  ir::Value fresh(const ir::Type* t) { return ir::Value{f->num_values++, t}; }

  void main(int nargs) {
    m.funcs.emplace_back();
    f = &m.funcs.back();
    f->name = "main";
    f->body.blocks.emplace_back();
    for (int i = 0; i < nargs; ++i) {
      f->arg_types.push_back(i32());
      f->body.blocks[0].args.push_back(fresh(i32()));
    }
    ops = &f->body.blocks[0].ops;
  }
  ir::Op& op(OpKind k, std::vector<ir::Value> operands, std::vector<const ir::Type*> types) {
    ir::Op o;
    o.kind = k;
    o.operands = std::move(operands);
    for (const ir::Type* t : types) o.results.push_back(fresh(t));
    o.loc = m.intern_location(ir::Location{"test.py", 7, 3, "jit(f)/op"});
    ops->push_back(std::move(o));
    return ops->back();
  }
  ir::Value constant(int32_t v) {
    std::vector<uint8_t> bytes(4);
    std::memcpy(bytes.data(), &v, 4);
    ir::DenseElementsAttr d{i32(), m.own_bytes(std::move(bytes)), false};
    ir::Op& o = op(OpKind::kConstant, {}, {i32()});
    o.set_attr("value", d);
    return o.results[0];
  }
  ir::Value lt(ir::Value a, ir::Value b) {
    ir::Op& o = op(OpKind::kCompare, {a, b}, {pred()});
    o.set_attr("comparison_direction",
               ir::EnumAttr{ir::EnumKind::kComparisonDirection,
                            static_cast<int32_t>(ir::ComparisonDirection::kLT)});
    return o.results[0];
  }
  ir::Value bin(OpKind k, ir::Value a, ir::Value b) { return op(k, {a, b}, {i32()}).results[0]; }
  void ret(OpKind k, std::vector<ir::Value> v) { op(k, std::move(v), {}); }

  // Starts a region with `n` i32 block args; returns them. Call end_region() after.
  std::vector<ir::Value> begin_region(ir::Region& r, size_t n) {
    r.blocks.emplace_back();
    for (size_t i = 0; i < n; ++i) r.blocks[0].args.push_back(fresh(i32()));
    saved_.push_back(ops);
    ops = &r.blocks[0].ops;
    return r.blocks[0].args;
  }
  void end_region() {
    ops = saved_.back();
    saved_.pop_back();
  }
  std::vector<std::vector<ir::Op>*> saved_;
};

// while (i < n) { i += 1; acc *= k }   with n a constant (counted) or a carried value.
void build_loop(Builder& b, bool counted) {
  b.main(3);  // acc0, k, n
  ir::Value acc0 = b.f->args()[0], k = b.f->args()[1], n_arg = b.f->args()[2];
  ir::Value zero = b.constant(0);
  ir::Value ten = b.constant(10);
  std::vector<ir::Value> init = {zero, acc0, k, counted ? ten : n_arg};
  ir::Region cond, body;
  {
    auto a = b.begin_region(cond, 4);
    b.ret(OpKind::kReturn, {counted ? b.lt(a[0], b.constant(10)) : b.lt(a[1], a[3])});
    b.end_region();
  }
  {
    auto a = b.begin_region(body, 4);
    ir::Value i = b.bin(OpKind::kAdd, a[0], b.constant(1));
    ir::Value acc = b.bin(OpKind::kMultiply, a[1], a[2]);
    b.ret(OpKind::kReturn, {i, acc, a[2], a[3]});
    b.end_region();
  }
  ir::Op& w = b.op(OpKind::kWhile, init, {b.i32(), b.i32(), b.i32(), b.i32()});
  w.regions.push_back(std::move(cond));
  w.regions.push_back(std::move(body));
  ir::Value r0 = w.results[0], r1 = w.results[1];
  b.ret(OpKind::kFuncReturn, {r0, r1});
}

StatusOr<std::vector<int32_t>> run(Builder& b, RunMode mode, std::vector<int32_t> args) {
  Registry reg = test_registry();
  ProgramInfo info = analyze_program(b.m, b.m.funcs[0]);
  Interpreter interp(info, reg, mode);
  Values in;
  for (int32_t a : args) in.push_back(mx::array(a));
  ASSIGN_OR_RETURN(Values out, interp.run(b.m.funcs[0], in));
  mx::eval(out);
  std::vector<int32_t> v;
  for (const mx::array& a : out) v.push_back(a.item<int32_t>());
  return v;
}

TEST(Interpreter, CountedLoopSkipsTheCondition) {
  Builder b;
  build_loop(b, /*counted=*/true);
  g_compares = 0;
  auto out = run(b, RunMode::kExecute, {1, 2, 99});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out, (std::vector<int32_t>{10, 1024}));
  EXPECT_EQ(g_compares, 0);
}

TEST(Interpreter, DynamicLoopReadsTheCondition) {
  Builder b;
  build_loop(b, /*counted=*/false);
  g_compares = 0;
  auto out = run(b, RunMode::kExecute, {1, 3, 100});  // 1,3,9,27,81,243
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out, (std::vector<int32_t>{5, 243}));
  EXPECT_EQ(g_compares, 6);
}

TEST(Interpreter, TrialTracesEachRegionOnce) {
  Builder b;
  build_loop(b, /*counted=*/false);
  g_compares = 0;
  auto out = run(b, RunMode::kTrial, {1, 3, 100});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out, (std::vector<int32_t>{0, 1}));  // the initial carry
  EXPECT_EQ(g_compares, 1);
}

TEST(Interpreter, OpsOfConstantsAloneAreHoisted) {
  Builder b;
  b.main(1);
  ir::Value two = b.constant(2), three = b.constant(3);
  ir::Value five = b.bin(OpKind::kAdd, two, three);                // constants only: hoisted
  ir::Value product = b.bin(OpKind::kMultiply, b.f->args()[0], five);  // reads the argument
  b.ret(OpKind::kFuncReturn, {product});
  ProgramInfo info = analyze_program(b.m, b.m.funcs[0]);
  const std::vector<ir::Op>& ops = b.m.funcs[0].body.blocks[0].ops;
  ASSERT_EQ(info.constant_ops.size(), 3u);
  EXPECT_EQ(info.constant_ops[2], &ops[2]);
  ASSERT_EQ(info.hoisted.count(&ops[2]), 1u);
  EXPECT_EQ(info.hoisted.at(&ops[2]).operands, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(info.constant_index.count(&ops[3]), 0u);
  // A run reads the hoisted value it is given (here deliberately not 2 + 3) instead of adding.
  Registry reg = test_registry();
  Values constants = {mx::array(2), mx::array(3), mx::array(100)};
  Interpreter interp(info, reg, RunMode::kExecute, &constants);
  auto out = interp.run(b.m.funcs[0], {mx::array(7)});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ((*out)[0].item<int32_t>(), 700);
}

void build_case(Builder& b) {
  b.main(2);  // index, x
  ir::Value idx = b.f->args()[0], x = b.f->args()[1];
  ir::Op c;
  std::vector<ir::Region> branches(3);
  for (int br = 0; br < 3; ++br) {
    b.begin_region(branches[br], 0);
    b.ret(OpKind::kReturn, {b.bin(OpKind::kMultiply, x, b.constant(10 + br))});
    b.end_region();
  }
  ir::Op& op = b.op(OpKind::kCase, {idx}, {b.i32()});
  op.regions = std::move(branches);
  ir::Value r = op.results[0];
  b.ret(OpKind::kFuncReturn, {r});
}

TEST(Interpreter, CaseClampsTheIndex) {
  for (auto [index, expect] : std::vector<std::pair<int, int>>{{0, 20}, {1, 22}, {2, 24},
                                                              {7, 24}, {-1, 24}}) {
    Builder b;
    build_case(b);
    auto out = run(b, RunMode::kExecute, {index, 2});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ((*out)[0], expect) << "index " << index;
  }
}

TEST(Interpreter, RuleResultsAreChecked) {
  Builder b;
  b.main(1);
  ir::Value n = b.op(OpKind::kNegate, {b.f->args()[0]}, {b.i32()}).results[0];
  b.ret(OpKind::kFuncReturn, {n});
  auto out = run(b, RunMode::kExecute, {1});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), Code::kInternal);
  EXPECT_NE(out.status().message().find("stablehlo.negate at jit(f)/op  test.py:7:3"),
            std::string::npos)
      << out.status().to_string();
}

TEST(Interpreter, MissingRulesAreListed) {
  Builder b;
  b.main(1);
  ir::Value x = b.f->args()[0];
  ir::Value s = b.op(OpKind::kSine, {x}, {b.i32()}).results[0];
  ir::Value c = b.op(OpKind::kCosine, {s}, {b.i32()}).results[0];
  b.ret(OpKind::kFuncReturn, {c});
  Registry reg = test_registry();
  auto missing = find_unlowerable(b.m, b.m.funcs[0], reg);
  ASSERT_EQ(missing.size(), 2u);
  EXPECT_EQ(missing[0], "stablehlo.sine at jit(f)/op  test.py:7:3");
}

}  // namespace
}  // namespace jaxmlx::lower
