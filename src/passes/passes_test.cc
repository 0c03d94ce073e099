#include "passes/passes.h"

#include <gtest/gtest.h>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/contract_fma.h"
#include "passes/xla_cpu_version.h"

namespace jaxmlx::passes {
namespace {

using ir::OpKind;

// Builds funcs op by op; values get the next id of the current func.
struct Builder {
  ir::Module& m;
  ir::Func* f = nullptr;
  std::vector<ir::Op>* ops = nullptr;

  const ir::Type* t() { return m.types().tensor(ir::ElementType::kF32, {4}); }
  ir::Value fresh() { return ir::Value{f->num_values++, t()}; }

  ir::Func& func(const std::string& name, int nargs, int nres, bool is_private) {
    m.funcs.emplace_back();
    f = &m.funcs.back();
    f->name = name;
    f->visibility = is_private ? ir::Visibility::kPrivate : ir::Visibility::kPublic;
    f->body.blocks.emplace_back();
    for (int i = 0; i < nargs; ++i) {
      f->arg_types.push_back(t());
      f->body.blocks[0].args.push_back(fresh());
    }
    for (int i = 0; i < nres; ++i) f->result_types.push_back(t());
    f->loc = m.unknown_location();
    ops = &f->body.blocks[0].ops;
    return *f;
  }
  ir::Op& op(OpKind k, std::vector<ir::Value> operands, int nres) {
    ir::Op o;
    o.kind = k;
    o.operands = std::move(operands);
    for (int i = 0; i < nres; ++i) o.results.push_back(fresh());
    o.loc = m.unknown_location();
    ops->push_back(std::move(o));
    return ops->back();
  }
  ir::Op& generic(const std::string& name, std::vector<ir::Value> operands, int nres) {
    ir::Op& o = op(OpKind::kGeneric, std::move(operands), nres);
    o.generic_name = name;
    return o;
  }
  ir::Op& call(const std::string& callee, std::vector<ir::Value> operands, int nres) {
    ir::Op& o = op(OpKind::kFuncCall, std::move(operands), nres);
    o.set_attr("callee", ir::SymbolRefAttr{callee});
    return o;
  }
  void ret(std::vector<ir::Value> operands) { op(OpKind::kFuncReturn, std::move(operands), 0); }
};

int count_ops(const ir::Module& m, OpKind k) {
  int n = 0;
  for (const ir::Func& f : m.funcs) ir::walk(f.body, [&](const ir::Op& op) { n += op.kind == k; });
  return n;
}

TEST(Inline, CallsBecomeBodies) {
  ir::Module m;
  Builder b{m};
  b.func("twice", 1, 1, true);
  ir::Value a = b.f->args()[0];
  ir::Value s = b.op(OpKind::kAdd, {a, a}, 1).results[0];
  b.ret({s});
  b.func("main", 1, 1, false);
  ir::Value x = b.f->args()[0];
  ir::Value y = b.call("twice", {x}, 1).results[0];
  ir::Value z = b.call("twice", {y}, 1).results[0];
  ir::Value w = b.op(OpKind::kMultiply, {z, x}, 1).results[0];
  b.ret({w});
  ASSERT_TRUE(ir::verify(m).ok());

  ASSERT_TRUE(inline_calls(m).ok());
  ASSERT_TRUE(ir::verify(m).ok()) << ir::verify(m).to_string() << ir::print_module(m);
  ASSERT_EQ(m.funcs.size(), 1u);  // the private func is gone
  EXPECT_EQ(count_ops(m, OpKind::kFuncCall), 0);
  EXPECT_EQ(count_ops(m, OpKind::kAdd), 2);
  const ir::Block& body = m.funcs[0].entry();
  ASSERT_EQ(body.ops.size(), 4u);
  // add(x, x) -> add(r, r) -> multiply(r2, x) -> return
  EXPECT_EQ(body.ops[0].operands[0].id, x.id);
  EXPECT_EQ(body.ops[1].operands[0].id, body.ops[0].results[0].id);
  EXPECT_EQ(body.ops[2].operands[0].id, body.ops[1].results[0].id);
  EXPECT_EQ(body.ops[2].operands[1].id, x.id);
  EXPECT_EQ(body.ops[3].operands[0].id, body.ops[2].results[0].id);
}

TEST(Inline, NestedCallsInsideRegions) {
  ir::Module m;
  Builder b{m};
  b.func("inner", 1, 1, true);
  ir::Value a = b.f->args()[0];
  b.ret({b.op(OpKind::kNegate, {a}, 1).results[0]});
  b.func("outer", 1, 1, true);
  ir::Value c = b.f->args()[0];
  ir::Value d = b.call("inner", {c}, 1).results[0];
  b.ret({b.call("inner", {d}, 1).results[0]});
  b.func("main", 1, 1, false);
  ir::Value x = b.f->args()[0];
  // An optimization_barrier-like op with a region whose body calls @outer on an outer value.
  ir::Op& holder = b.op(OpKind::kGeneric, {x}, 1);
  holder.generic_name = "test.holder";
  ir::Value held = holder.results[0];
  ir::Region region;
  region.blocks.emplace_back();
  std::vector<ir::Op>* saved = b.ops;
  b.ops = &region.blocks[0].ops;
  ir::Value r = b.call("outer", {x}, 1).results[0];
  b.op(OpKind::kReturn, {r}, 0);
  b.ops = saved;
  b.f->body.blocks[0].ops.back().regions.push_back(std::move(region));
  b.ret({held});
  ASSERT_TRUE(ir::verify(m).ok()) << ir::verify(m).to_string();

  ASSERT_TRUE(run_passes(m).ok());
  ASSERT_TRUE(ir::verify(m).ok()) << ir::verify(m).to_string() << ir::print_module(m);
  EXPECT_EQ(m.funcs.size(), 1u);
  EXPECT_EQ(count_ops(m, OpKind::kFuncCall), 0);
  EXPECT_EQ(count_ops(m, OpKind::kNegate), 2);
  const ir::Region& inlined = m.funcs[0].entry().ops[0].regions[0];
  ASSERT_EQ(inlined.entry().ops.size(), 3u);
  EXPECT_EQ(inlined.entry().ops[0].operands[0].id, x.id);
  EXPECT_EQ(inlined.entry().ops[2].operands[0].id, inlined.entry().ops[1].results[0].id);
}

TEST(Inline, RecursionIsLeftAlone) {
  ir::Module m;
  Builder b{m};
  b.func("rec", 1, 1, true);
  b.ret({b.call("rec", {b.f->args()[0]}, 1).results[0]});
  b.func("main", 1, 1, false);
  b.ret({b.call("rec", {b.f->args()[0]}, 1).results[0]});
  ASSERT_TRUE(inline_calls(m).ok());
  EXPECT_TRUE(ir::verify(m).ok());
  EXPECT_EQ(m.funcs.size(), 2u);
}

TEST(DropSharding, AnnotationsBecomeIdentities) {
  ir::Module m;
  Builder b{m};
  b.func("main", 1, 1, false);
  ir::Value x = b.f->args()[0];
  ir::Value c = b.generic("sdy.sharding_constraint", {x}, 1).results[0];
  ir::Op& cc = b.op(OpKind::kCustomCall, {c}, 1);
  cc.set_attr("call_target_name", ir::StringAttr{"Sharding"});
  ir::Value s = cc.results[0];
  ir::Value y = b.op(OpKind::kAdd, {s, c}, 1).results[0];
  b.ret({y});
  ASSERT_TRUE(drop_sharding(m).ok());
  ASSERT_TRUE(ir::verify(m).ok()) << ir::print_module(m);
  const ir::Block& body = m.funcs[0].entry();
  ASSERT_EQ(body.ops.size(), 2u);
  EXPECT_EQ(body.ops[0].kind, OpKind::kAdd);
  EXPECT_EQ(body.ops[0].operands[0].id, x.id);
  EXPECT_EQ(body.ops[0].operands[1].id, x.id);
}

TEST(DropSharding, ManualComputationIsInlined) {
  ir::Module m;
  Builder b{m};
  b.func("main", 1, 1, false);
  ir::Value x = b.f->args()[0];
  ir::Op& mc = b.generic("sdy.manual_computation", {x}, 1);
  ir::Value out = mc.results[0];
  ir::Region region;
  region.blocks.emplace_back();
  ir::Value arg = b.fresh();
  region.blocks[0].args.push_back(arg);
  std::vector<ir::Op>* saved = b.ops;
  b.ops = &region.blocks[0].ops;
  ir::Value n = b.op(OpKind::kNegate, {arg}, 1).results[0];
  b.generic("sdy.return", {n}, 0);
  b.ops = saved;
  b.f->body.blocks[0].ops.back().regions.push_back(std::move(region));
  b.ret({out});
  ASSERT_TRUE(drop_sharding(m).ok());
  ASSERT_TRUE(ir::verify(m).ok()) << ir::print_module(m);
  const ir::Block& body = m.funcs[0].entry();
  ASSERT_EQ(body.ops.size(), 2u);
  EXPECT_EQ(body.ops[0].kind, OpKind::kNegate);
  EXPECT_EQ(body.ops[0].operands[0].id, x.id);
  EXPECT_EQ(body.ops[1].operands[0].id, body.ops[0].results[0].id);
}


TEST(XlaCpuVersion, ParsesMajorMinor) {
  EXPECT_TRUE(version_at_least("0.11.2", 0, 11));
  EXPECT_TRUE(version_at_least("0.12.0.1", 0, 11));
  EXPECT_TRUE(version_at_least("1.0", 0, 11));
  EXPECT_FALSE(version_at_least("0.10.2", 0, 11));
  EXPECT_FALSE(version_at_least("0.9", 0, 11));
  EXPECT_FALSE(version_at_least("", 0, 11));
  EXPECT_FALSE(version_at_least("eleven", 0, 11));
  EXPECT_FALSE(version_at_least("0", 0, 11));
}


// f16 a*b+c inside a sampler: contracted only when asked (jaxlib >= 0.11's rounding); an f16
// product never joins an f32 add.
TEST(ContractFma, F16OnlyWhenAsked) {
  for (bool f16 : {false, true}) {
    ir::Module m;
    Builder b{m};
    b.func("main", 3, 1, false);
    const ir::Type* h = m.types().tensor(ir::ElementType::kF16, {4});
    for (ir::Value& v : b.f->body.blocks[0].args) v.type = h;
    for (const ir::Type*& t : b.f->arg_types) t = h;
    b.f->result_types = {h};
    const ir::Location* in_sampler =
        m.intern_location(ir::Location{"", 0, 0, "jit(f)/jit(_uniform)/mul"});
    ir::Op& mul = b.op(OpKind::kMultiply, {b.f->args()[0], b.f->args()[1]}, 1);
    mul.results[0].type = h;
    mul.loc = in_sampler;
    ir::Op& add = b.op(OpKind::kAdd, {mul.results[0], b.f->args()[2]}, 1);
    add.results[0].type = h;
    add.loc = in_sampler;
    b.ret({add.results[0]});
    ASSERT_TRUE(contract_fma(m, FmaContraction::kSamplers, f16).ok());
    ASSERT_TRUE(ir::verify(m).ok()) << ir::print_module(m);
    EXPECT_EQ(count_ops(m, OpKind::kCustomCall), f16 ? 1 : 0);
    EXPECT_EQ(count_ops(m, OpKind::kMultiply), f16 ? 0 : 1);
  }
}

}  // namespace
}  // namespace jaxmlx::passes
