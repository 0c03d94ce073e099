#include "passes/passes.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/argminmax.h"
#include "passes/attention.h"
#include "passes/contract_fma.h"
#include "passes/dce.h"
#include "passes/negated_sum.h"
#include "passes/norm_grads.h"
#include "passes/norm_scales.h"
#include "passes/norms.h"
#include "passes/reversed_kernel.h"
#include "passes/softmax.h"
#include "passes/threefry.h"
#include "passes/transposed_dot.h"
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
  // A one-block region of one argument that negates it; `terminate` adds its terminator, given
  // the negation (the builder appends to the region's block meanwhile).
  ir::Region negate_region(const std::function<void(ir::Value)>& terminate) {
    ir::Region region;
    region.blocks.emplace_back();
    ir::Value arg = fresh();
    region.blocks[0].args.push_back(arg);
    std::vector<ir::Op>* saved = ops;
    ops = &region.blocks[0].ops;
    terminate(op(OpKind::kNegate, {arg}, 1).results[0]);
    ops = saved;
    return region;
  }
  static ir::Value typed(ir::Op& o, const ir::Type* t) {
    o.results[0].type = t;
    return o.results[0];
  }
  // A scalar constant of type `t` holding the 32-bit pattern `bits`; for f16 and bf16 `bits` is
  // an f32 whose value they get in their own format (the data must fit the type: the verifier
  // checks it).
  ir::Value constant32(uint32_t bits, const ir::Type* t) {
    std::vector<uint8_t> bytes(4);
    std::memcpy(bytes.data(), &bits, 4);
    if (t->dtype == ir::ElementType::kBF16) {
      const uint16_t h = static_cast<uint16_t>(bits >> 16);
      bytes.assign(2, 0);
      std::memcpy(bytes.data(), &h, 2);
    } else if (t->dtype == ir::ElementType::kF16) {
      float f = 0;
      std::memcpy(&f, &bits, 4);
      const _Float16 h = static_cast<_Float16>(f);
      bytes.assign(2, 0);
      std::memcpy(bytes.data(), &h, 2);
    }
    ir::Op& o = op(OpKind::kConstant, {}, 1);
    o.set_attr("value", ir::DenseElementsAttr{t, m.own_bytes(std::move(bytes)), false});
    return typed(o, t);
  }
  ir::Value bcast(ir::Value in, std::vector<int64_t> dims, const ir::Type* t) {
    ir::Op& o = op(OpKind::kBroadcastInDim, {in}, 1);
    o.set_attr("broadcast_dimensions", ir::I64ArrayAttr{std::move(dims)});
    return typed(o, t);
  }
  // reduce(in init: constant32(init)) applies `body_kind` across `dim`, giving type `t`.
  ir::Value reduce(ir::Value in, uint32_t init, OpKind body_kind, int64_t dim,
                   const ir::Type* scalar, const ir::Type* t) {
    ir::Value c = constant32(init, scalar);
    ir::Region body;
    body.blocks.emplace_back();
    ir::Block& blk = body.blocks[0];
    for (int i = 0; i < 2; ++i) blk.args.push_back(ir::Value{f->num_values++, scalar});
    std::vector<ir::Op>* outer = ops;
    ops = &blk.ops;
    ir::Value r = typed(op(body_kind, {blk.args[0], blk.args[1]}, 1), scalar);
    op(OpKind::kReturn, {r}, 0);
    ops = outer;
    ir::Op& red = op(OpKind::kReduce, {in, c}, 1);
    red.set_attr("dimensions", ir::I64ArrayAttr{{dim}});
    red.regions.push_back(std::move(body));
    return typed(red, t);
  }
  // An optimization_barrier-like op of `operand` ("test.holder") whose one-block region holds the
  // ops `body` adds.
  ir::Op& holder(ir::Value operand, const std::function<void()>& body) {
    ir::Region region;
    region.blocks.emplace_back();
    std::vector<ir::Op>* saved = ops;
    ops = &region.blocks[0].ops;
    body();
    ops = saved;
    ir::Op& o = generic("test.holder", {operand}, 1);
    o.regions.push_back(std::move(region));
    return o;
  }
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
  ir::Value held = b.holder(x, [&] {
    ir::Value r = b.call("outer", {x}, 1).results[0];
    b.op(OpKind::kReturn, {r}, 0);
  }).results[0];
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

TEST(DropSharding, ShardingGroupsAreDropped) {
  ir::Module m;
  Builder b{m};
  b.func("main", 1, 1, false);
  ir::Value x = b.f->args()[0];
  ir::Value y = b.op(OpKind::kNegate, {x}, 1).results[0];
  b.generic("sdy.sharding_group", {x}, 0);
  b.generic("sdy.sharding_group", {y}, 0);
  b.ret({y});
  ASSERT_TRUE(drop_sharding(m).ok());
  ASSERT_TRUE(ir::verify(m).ok()) << ir::print_module(m);
  const ir::Block& body = m.funcs[0].entry();
  ASSERT_EQ(body.ops.size(), 2u);
  EXPECT_EQ(body.ops[0].kind, OpKind::kNegate);
}

// jax's psum_start(x).done() on one device: async_start's body takes its place and
// async_done's result is what the body returns.
ir::Op& async_start_of_negate(Builder& b, ir::Value x) {
  ir::Type future;
  future.dtype = ir::ElementType::kFuture;
  future.is_tensor = false;
  future.members = {b.t()};
  ir::Op& start = b.op(OpKind::kAsyncStart, {x}, 1);
  Builder::typed(start, b.m.types().intern(future));
  start.regions.push_back(b.negate_region([&](ir::Value n) { b.op(OpKind::kReturn, {n}, 0); }));
  return start;
}

TEST(AsyncOps, StartAndDoneBecomeTheBody) {
  ir::Module m;
  Builder b{m};
  b.func("main", 1, 1, false);
  ir::Value x = b.f->args()[0];
  ir::Value future = async_start_of_negate(b, x).results[0];
  ir::Value r = b.op(OpKind::kAsyncDone, {future}, 1).results[0];
  ir::Value y = b.op(OpKind::kAdd, {r, x}, 1).results[0];
  b.ret({y});
  ASSERT_TRUE(ir::verify(m).ok()) << ir::verify(m).to_string() << ir::print_module(m);
  ASSERT_TRUE(run_passes(m).ok());
  ASSERT_TRUE(ir::verify(m).ok()) << ir::print_module(m);
  const ir::Block& body = m.funcs[0].entry();
  ASSERT_EQ(body.ops.size(), 3u) << ir::print_module(m);
  EXPECT_EQ(body.ops[0].kind, OpKind::kNegate);
  EXPECT_EQ(body.ops[0].operands[0].id, x.id);
  EXPECT_EQ(body.ops[1].kind, OpKind::kAdd);
  EXPECT_EQ(body.ops[1].operands[0].id, body.ops[0].results[0].id);
}

// A future read by more than its async_done stays (and is refused when lowered).
TEST(AsyncOps, AFutureReadTwiceIsLeftAlone) {
  ir::Module m;
  Builder b{m};
  b.func("main", 1, 1, false);
  ir::Value x = b.f->args()[0];
  ir::Value future = async_start_of_negate(b, x).results[0];
  ir::Value r1 = b.op(OpKind::kAsyncDone, {future}, 1).results[0];
  ir::Value r2 = b.op(OpKind::kAsyncDone, {future}, 1).results[0];
  b.ret({b.op(OpKind::kAdd, {r1, r2}, 1).results[0]});
  ASSERT_TRUE(inline_async_ops(m).ok());
  EXPECT_EQ(count_ops(m, OpKind::kAsyncStart), 1);
  EXPECT_EQ(count_ops(m, OpKind::kAsyncDone), 2);
}

TEST(DropSharding, ManualComputationIsInlined) {
  ir::Module m;
  Builder b{m};
  b.func("main", 1, 1, false);
  ir::Value x = b.f->args()[0];
  ir::Op& mc = b.generic("sdy.manual_computation", {x}, 1);
  ir::Value out = mc.results[0];
  mc.regions.push_back(b.negate_region([&](ir::Value n) { b.generic("sdy.return", {n}, 0); }));
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


// ---- argminmax ------------------------------------------------------------------------------

// What a variant of jax's argmax reduce differs in (each one is another reduction).
struct ArgVariant {
  bool is_max = true;
  uint32_t init_bits = 0xFF800000u;  // -inf
  int32_t index_init = 0;
  bool index_is_iota = true;
  ir::ComparisonDirection tie = ir::ComparisonDirection::kLT;
  bool value_returned = false;  // the max itself is a result too (else only the indices)
};

// main(x: f32[3,5], other: s32[3,5]) = reduce((x, iota dim 1), (init, index_init)) over dim 1,
// with jax's comparator; returns the indices.
ir::Module argmax_module(const ArgVariant& v) {
  ir::Module m;
  Builder b{m};
  b.func("main", 2, 1, false);
  const ir::Type* x_t = m.types().tensor(ir::ElementType::kF32, {3, 5});
  const ir::Type* i_t = m.types().tensor(ir::ElementType::kS32, {3, 5});
  const ir::Type* f = m.types().tensor(ir::ElementType::kF32, {});
  const ir::Type* s = m.types().tensor(ir::ElementType::kS32, {});
  const ir::Type* p = m.types().tensor(ir::ElementType::kPred, {});
  b.f->body.blocks[0].args[0].type = x_t;
  b.f->body.blocks[0].args[1].type = i_t;
  b.f->arg_types = {x_t, i_t};
  b.f->result_types = {m.types().tensor(ir::ElementType::kS32, {3})};
  if (v.value_returned) b.f->result_types.push_back(m.types().tensor(ir::ElementType::kF32, {3}));
  auto typed = [](ir::Op& o, const ir::Type* t) -> ir::Value {
    o.results[0].type = t;
    return o.results[0];
  };
  auto constant = [&](uint32_t bits, const ir::Type* t) {
    std::vector<uint8_t> bytes(4);
    std::memcpy(bytes.data(), &bits, 4);
    ir::Op& o = b.op(OpKind::kConstant, {}, 1);
    o.set_attr("value", ir::DenseElementsAttr{t, m.own_bytes(std::move(bytes)), false});
    return typed(o, t);
  };
  ir::Op& iota_op = b.op(OpKind::kIota, {}, 1);
  iota_op.set_attr("iota_dimension", ir::IntAttr{1, ir::ElementType::kS64});
  ir::Value iota = typed(iota_op, i_t);
  ir::Value init_v = constant(v.init_bits, f);
  ir::Value init_i = constant(static_cast<uint32_t>(v.index_init), s);
  ir::Value index = v.index_is_iota ? iota : b.f->args()[1];

  ir::Region body;
  body.blocks.emplace_back();
  ir::Block& blk = body.blocks[0];
  for (const ir::Type* t : {f, s, f, s}) blk.args.push_back(ir::Value{b.f->num_values++, t});
  std::vector<ir::Op>* outer = b.ops;
  b.ops = &blk.ops;
  auto cmp = [&](ir::ComparisonDirection d, ir::Value l, ir::Value r, ir::ComparisonType ct) {
    ir::Op& o = b.op(OpKind::kCompare, {l, r}, 1);
    o.set_attr("comparison_direction",
               ir::EnumAttr{ir::EnumKind::kComparisonDirection, static_cast<int32_t>(d)});
    o.set_attr("compare_type", ir::EnumAttr{ir::EnumKind::kComparisonType, static_cast<int32_t>(ct)});
    return typed(o, p);
  };
  const ir::Value &a = blk.args[0], &ia = blk.args[1], &c = blk.args[2], &ic = blk.args[3];
  using D = ir::ComparisonDirection;
  using T = ir::ComparisonType;
  ir::Value better = cmp(v.is_max ? D::kGT : D::kLT, a, c, T::kFloat);
  ir::Value nan = cmp(D::kNE, a, a, T::kFloat);
  ir::Value pick = typed(b.op(OpKind::kOr, {better, nan}, 1), p);
  ir::Value eq = cmp(D::kEQ, a, c, T::kFloat);
  ir::Value lower = cmp(v.tie, ia, ic, T::kSigned);
  ir::Value tie = typed(b.op(OpKind::kAnd, {eq, lower}, 1), p);
  ir::Value pick_i = typed(b.op(OpKind::kOr, {pick, tie}, 1), p);
  ir::Value rv = typed(b.op(OpKind::kSelect, {pick, a, c}, 1), f);
  ir::Value ri = typed(b.op(OpKind::kSelect, {pick_i, ia, ic}, 1), s);
  b.op(OpKind::kReturn, {rv, ri}, 0);
  b.ops = outer;

  ir::Op& red = b.op(OpKind::kReduce, {b.f->args()[0], index, init_v, init_i}, 2);
  red.results[0].type = m.types().tensor(ir::ElementType::kF32, {3});
  red.results[1].type = m.types().tensor(ir::ElementType::kS32, {3});
  red.set_attr("dimensions", ir::I64ArrayAttr{{1}});
  red.regions.push_back(std::move(body));
  if (v.value_returned) b.ret({red.results[1], red.results[0]});
  else b.ret({red.results[1]});
  return m;
}

// The target of the call that replaced the reduce, or "" when the reduce is still there.
std::string rewritten_to(const ArgVariant& v) {
  ir::Module m = argmax_module(v);
  EXPECT_TRUE(ir::verify(m).ok()) << ir::print_module(m);
  EXPECT_TRUE(recognize_argminmax(m).ok());
  EXPECT_TRUE(ir::verify(m).ok()) << ir::print_module(m);
  std::string target;
  ir::walk(m.funcs[0].body, [&](const ir::Op& op) {
    if (op.kind != OpKind::kCustomCall) return;
    target = std::string(op.get_string("call_target_name"));
    EXPECT_EQ(op.get_i64("dimension", -1), 1);
    EXPECT_EQ(op.operands.size(), 1u);
    EXPECT_EQ(op.results.size(), v.value_returned ? 2u : 1u);  // no unread value result
  });
  EXPECT_EQ(count_ops(m, OpKind::kReduce), target.empty() ? 1 : 0);
  return target;
}

TEST(ArgMinMax, JaxsArgmaxAndArgminBecomeOneCall) {
  EXPECT_EQ(rewritten_to({}), kArgmaxTarget);
  EXPECT_EQ(rewritten_to({.is_max = false, .init_bits = 0x7F800000u}), kArgminTarget);
  EXPECT_EQ(rewritten_to({.value_returned = true}), kArgmaxTarget);
}

TEST(ArgMinMax, LookalikesStayReduces) {
  EXPECT_EQ(rewritten_to({.init_bits = 0}), "");                      // init 0.0, not -inf
  EXPECT_EQ(rewritten_to({.init_bits = 0x7F800000u}), "");             // argmax body, +inf init
  EXPECT_EQ(rewritten_to({.index_init = 3}), "");                      // index init not 0
  EXPECT_EQ(rewritten_to({.index_is_iota = false}), "");               // indices not an iota
  EXPECT_EQ(rewritten_to({.tie = ir::ComparisonDirection::kGT}), "");  // last index on ties
}

// ---- softmax ---------------------------------------------------------------------------------

// What a variant of jax.nn.softmax's chain differs in (each one but the first two is another
// computation, or needs a value the call would not give).
struct SoftmaxVariant {
  std::vector<int64_t> shape = {2, 4, 8};
  int64_t dim = 2;                   // the reduced dim
  uint32_t max_init = 0xFF800000u;   // -inf
  uint32_t sum_init = 0;             // +0
  bool initial_max = true;           // jnp.max's maximum(broadcast(-inf), r)
  bool reshape_keepdims = false;     // keepdims by reshape (else broadcast_in_dim)
  bool exp_also_returned = false;    // the exponentials are a result too
  bool transposed_back = false;      // the sum goes back along the wrong dim (square x only)
  ir::ElementType type = ir::ElementType::kF32;
};

// main(x) = jax.nn.softmax(x, axis=dim) as jax 0.10 emits it, with the variant's changes.
ir::Module softmax_module(const SoftmaxVariant& v) {
  ir::Module m;
  Builder b{m};
  b.func("main", 1, v.exp_also_returned ? 2 : 1, false);
  const ir::Type* x_t = m.types().tensor(v.type, v.shape);
  std::vector<int64_t> kept_shape, kept_dims, keep_shape = v.shape;
  for (int64_t d = 0; d < static_cast<int64_t>(v.shape.size()); ++d)
    if (d != v.dim) kept_shape.push_back(v.shape[d]), kept_dims.push_back(d);
  keep_shape[v.dim] = 1;
  const ir::Type* r_t = m.types().tensor(v.type, kept_shape);
  const ir::Type* k_t = m.types().tensor(v.type, keep_shape);
  const ir::Type* scalar = m.types().tensor(v.type, {});
  b.f->body.blocks[0].args[0].type = x_t;
  b.f->arg_types = {x_t};
  b.f->result_types = std::vector<const ir::Type*>(v.exp_also_returned ? 2 : 1, x_t);
  ir::Value x = b.f->args()[0];
  auto typed = &Builder::typed;
  auto constant = [&](uint32_t bits) { return b.constant32(bits, scalar); };
  auto reduce = [&](ir::Value in, uint32_t init, OpKind body_kind) {
    return b.reduce(in, init, body_kind, v.dim, scalar, r_t);
  };
  auto bcast = [&](ir::Value in, std::vector<int64_t> dims, const ir::Type* t) {
    return b.bcast(in, std::move(dims), t);
  };
  std::vector<int64_t> all(v.shape.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  auto back = [&](ir::Value r, bool wrong) {
    ir::Value k = v.reshape_keepdims ? typed(b.op(OpKind::kReshape, {r}, 1), k_t)
                                     : bcast(r, kept_dims, k_t);
    if (!wrong) return bcast(k, all, x_t);
    // x is square: take the kept dim back along the reduced one instead.
    return bcast(r, {v.dim}, x_t);
  };
  ir::Value mx = reduce(x, v.max_init, OpKind::kMaximum);
  if (v.initial_max) {
    ir::Value inf = bcast(constant(0xFF800000u), {}, r_t);
    mx = typed(b.op(OpKind::kMaximum, {inf, mx}, 1), r_t);
  }
  ir::Value sub = typed(b.op(OpKind::kSubtract, {x, back(mx, false)}, 1), x_t);
  ir::Value e = typed(b.op(OpKind::kExponential, {sub}, 1), x_t);
  ir::Value sum = reduce(e, v.sum_init, OpKind::kAdd);
  ir::Value y = typed(b.op(OpKind::kDivide, {e, back(sum, v.transposed_back)}, 1), x_t);
  if (v.exp_also_returned) b.ret({y, e});
  else b.ret({y});
  return m;
}

// The dims of the softmax call that replaced the chain (checking that the dead chain is gone),
// or empty when the chain is still there.
std::vector<int64_t> softmax_dims(const SoftmaxVariant& v) {
  ir::Module m = softmax_module(v);
  EXPECT_TRUE(ir::verify(m).ok()) << ir::verify(m).to_string() << ir::print_module(m);
  EXPECT_TRUE(recognize_softmax(m).ok());
  EXPECT_TRUE(drop_dead_ops(m).ok());
  EXPECT_TRUE(ir::verify(m).ok()) << ir::print_module(m);
  std::vector<int64_t> dims;
  ir::walk(m.funcs[0].body, [&](const ir::Op& op) {
    if (op.kind != OpKind::kCustomCall) return;
    EXPECT_EQ(op.get_string("call_target_name"), kSoftmaxTarget);
    EXPECT_EQ(op.operands.size(), 1u);
    EXPECT_EQ(op.operands[0].id, m.funcs[0].args()[0].id);
    dims = op.get_i64s("dimensions");
  });
  if (!dims.empty()) EXPECT_EQ(m.funcs[0].entry().ops.size(), 2u) << ir::print_module(m);
  else EXPECT_EQ(count_ops(m, OpKind::kReduce), 2);
  return dims;
}

TEST(Softmax, JaxsChainBecomesOneCall) {
  EXPECT_EQ(softmax_dims({}), std::vector<int64_t>{2});
  EXPECT_EQ(softmax_dims({.dim = 0}), std::vector<int64_t>{0});
  EXPECT_EQ(softmax_dims({.initial_max = false, .reshape_keepdims = true}),
            std::vector<int64_t>{2});
  // Size-1 dims may land anywhere: [1, 4, 8] over dim 2.
  EXPECT_EQ(softmax_dims({.shape = {1, 4, 8}}), std::vector<int64_t>{2});
}

TEST(Softmax, LookalikesStayAsTheyAre) {
  EXPECT_TRUE(softmax_dims({.max_init = 0}).empty());                // max from 0, not -inf
  EXPECT_TRUE(softmax_dims({.sum_init = 0x3F800000u}).empty());      // sum from 1
  EXPECT_TRUE(softmax_dims({.exp_also_returned = true}).empty());    // exp needed elsewhere
  EXPECT_TRUE(softmax_dims({.type = ir::ElementType::kF16}).empty());  // f32 only
  EXPECT_TRUE(
      softmax_dims({.shape = {4, 4}, .dim = 1, .transposed_back = true}).empty());
}

// ---- threefry --------------------------------------------------------------------------------

// What a variant of jax's threefry2x32 func differs in (anything but the defaults: a lookalike).
struct ThreefryVariant {
  std::string name = "threefry2x32";
  int first_rotation = 13;       // jax's first rotation; another makes another function
  bool keys_as_counters = false;  // keys of the counters' shape (older jax broadcast them)
  bool batched = false;  // vmap's form: keys u32[2,1], counters u32[1,3], results u32[2,3]
  bool key_injection_constant = true;  // the block number added at each key injection
  // main unpacks k0, k1 from one u32[2] key as jax does (reshape(slice(key, [i:i+1]))), with the
  // words in this order (swapped: k0 from key[1], which the pair form must not take).
  enum { kSeparate, kPair, kSwappedPair } key = kSeparate;
};

// main(k0, k1, x0, x1) calls a private func built as jax's threefry2x32 lowering writes it.
ir::Module threefry_module(const ThreefryVariant& v) {
  ir::Module m;
  Builder b{m};
  const ir::Type* s = m.types().tensor(ir::ElementType::kU32, {});
  const ir::Type* c = m.types().tensor(ir::ElementType::kU32, {2, 3});
  const ir::Type* k = v.batched ? m.types().tensor(ir::ElementType::kU32, {2, 1})
                                 : (v.keys_as_counters ? c : s);
  const ir::Type* counters = v.batched ? m.types().tensor(ir::ElementType::kU32, {1, 3}) : c;
  auto set_types = [&](ir::Func& f) {
    f.arg_types = {k, k, counters, counters};
    f.result_types = {c, c};
    for (int i = 0; i < 4; ++i) f.body.blocks[0].args[i].type = f.arg_types[i];
  };
  ir::Func& callee = b.func(v.name, 4, 2, /*is_private=*/true);
  set_types(callee);
  const std::vector<ir::Value> a = callee.args();
  auto wide = [&](ir::Value x) {
    if (x.type->rank() == 0) return b.bcast(x, {}, c);
    return *x.type == *c ? x : b.bcast(x, {0, 1}, c);  // size-1 dims spread
  };
  auto op2 = [&](OpKind kind, ir::Value x, ir::Value y) {
    return Builder::typed(b.op(kind, {x, y}, 1), x.type);
  };
  auto splat = [&](uint32_t bits) { return b.bcast(b.constant32(bits, s), {}, c); };
  ir::Value magic = b.constant32(0x1BD11BDAu, s);
  if (k->rank() != 0) magic = b.bcast(magic, {}, k);
  const ir::Value ks[3] = {a[0], a[1], op2(OpKind::kXor, op2(OpKind::kXor, a[0], a[1]), magic)};
  ir::Value x0 = op2(OpKind::kAdd, wide(a[2]), wide(ks[0]));
  ir::Value x1 = op2(OpKind::kAdd, wide(a[3]), wide(ks[1]));
  const int rot[2][4] = {{v.first_rotation, 15, 26, 6}, {17, 29, 16, 24}};
  for (int block = 0; block < 5; ++block) {
    for (int r : rot[block % 2]) {
      x0 = op2(OpKind::kAdd, x0, x1);
      ir::Value rotated = op2(OpKind::kOr, op2(OpKind::kShiftLeft, x1, splat(uint32_t(r))),
                              op2(OpKind::kShiftRightLogical, x1, splat(uint32_t(32 - r))));
      x1 = op2(OpKind::kXor, x0, rotated);
    }
    x0 = op2(OpKind::kAdd, x0, wide(ks[(block + 1) % 3]));
    x1 = op2(OpKind::kAdd, x1, wide(ks[(block + 2) % 3]));
    if (v.key_injection_constant) x1 = op2(OpKind::kAdd, x1, splat(uint32_t(block + 1)));
  }
  b.ret({x0, x1});
  const bool pair = v.key != ThreefryVariant::kSeparate;
  ir::Func& main = b.func("main", pair ? 3 : 4, 2, /*is_private=*/false);
  std::vector<ir::Value> args;
  if (pair) {
    const ir::Type* key_t = m.types().tensor(ir::ElementType::kU32, {2});
    const ir::Type* word_t = m.types().tensor(ir::ElementType::kU32, {1});
    main.arg_types = {key_t, c, c};
    main.result_types = {c, c};
    for (int i = 0; i < 3; ++i) main.body.blocks[0].args[i].type = main.arg_types[i];
    const ir::Value key = main.args()[0];
    auto word = [&](int64_t i) {
      ir::Op& sl = b.op(OpKind::kSlice, {key}, 1);
      sl.set_attr("start_indices", ir::I64ArrayAttr{{i}});
      sl.set_attr("limit_indices", ir::I64ArrayAttr{{i + 1}});
      sl.set_attr("strides", ir::I64ArrayAttr{{1}});
      return Builder::typed(b.op(OpKind::kReshape, {Builder::typed(sl, word_t)}, 1), s);
    };
    const bool swapped = v.key == ThreefryVariant::kSwappedPair;
    ir::Value w0 = word(swapped ? 1 : 0), w1 = word(swapped ? 0 : 1);
    args = {w0, w1, main.args()[1], main.args()[2]};
  } else {
    set_types(main);
    args = {main.args()[0], main.args()[1], main.args()[2], main.args()[3]};
  }
  ir::Op& call = b.call(v.name, args, 2);
  call.results[0].type = call.results[1].type = c;
  b.ret(call.results);
  return m;
}

// Whether run_passes turned main's call into the threefry custom call (else it was inlined).
bool threefry_recognized(const ThreefryVariant& v) {
  ir::Module m = threefry_module(v);
  EXPECT_TRUE(ir::verify(m).ok()) << ir::verify(m).to_string() << ir::print_module(m);
  EXPECT_EQ(is_threefry_func(m.funcs[0]), v.name.rfind("threefry2x32", 0) == 0 &&
                                               v.first_rotation == 13 && v.key_injection_constant);
  EXPECT_TRUE(run_passes(m).ok());
  EXPECT_TRUE(ir::verify(m).ok()) << ir::print_module(m);
  EXPECT_EQ(m.funcs.size(), 1u);  // the callee is gone either way (called, then unreferenced)
  EXPECT_EQ(count_ops(m, OpKind::kFuncCall), 0);
  EXPECT_TRUE(drop_dead_ops(m).ok());
  const int calls = count_ops(m, OpKind::kCustomCall);
  if (calls == 1) {
    // The pair form reads main's key itself and the unpacking ops died; swapped words are passed
    // one by one, after their two slices and two reshapes.
    const bool pair = v.key == ThreefryVariant::kPair;
    const size_t unpacking = v.key == ThreefryVariant::kSwappedPair ? 4 : 0;
    const ir::Op& op = m.funcs[0].entry().ops[unpacking];
    EXPECT_EQ(op.get_string("call_target_name"), kThreefryTarget);
    EXPECT_EQ(op.operands.size(), pair ? 3u : 4u);
    if (pair) {
      EXPECT_EQ(op.operands[0].id, m.funcs[0].args()[0].id);
    }
    EXPECT_EQ(count_ops(m, OpKind::kSlice), static_cast<int>(unpacking / 2));
    EXPECT_EQ(m.funcs[0].entry().ops.size(), unpacking + 2);  // and the return
  } else {
    EXPECT_EQ(calls, 0);
    EXPECT_EQ(count_ops(m, OpKind::kShiftLeft), 20);
  }
  return calls == 1;
}

TEST(Threefry, ReferenceMatchesKnownAnswers) {
  // Random123's known-answer vectors for Threefry-2x32-20 (also jax's own test values).
  struct Case { uint32_t k0, k1, x0, x1, y0, y1; };
  for (Case t : {Case{0, 0, 0, 0, 0x6b200159u, 0x99ba4efeu},
                 Case{~0u, ~0u, ~0u, ~0u, 0x1cb996fcu, 0xbb002be7u},
                 Case{0x13198a2eu, 0x03707344u, 0x243f6a88u, 0x85a308d3u, 0xc4923a9cu,
                      0x483df7a0u}}) {
    threefry2x32_reference(t.k0, t.k1, t.x0, t.x1);
    EXPECT_EQ(t.x0, t.y0);
    EXPECT_EQ(t.x1, t.y1);
  }
}

TEST(Threefry, JaxsFuncBecomesOneCall) {
  EXPECT_TRUE(threefry_recognized({}));
  EXPECT_TRUE(threefry_recognized({.name = "threefry2x32_0"}));
  EXPECT_TRUE(threefry_recognized({.keys_as_counters = true}));
  EXPECT_TRUE(threefry_recognized({.batched = true}));
  EXPECT_TRUE(threefry_recognized({.key = ThreefryVariant::kPair}));
  // Words swapped: still threefry, with the key words passed one by one.
  EXPECT_TRUE(threefry_recognized({.key = ThreefryVariant::kSwappedPair}));
}

TEST(Threefry, LookalikesAreInlined) {
  EXPECT_FALSE(threefry_recognized({.name = "threefry4x32"}));
  EXPECT_FALSE(threefry_recognized({.first_rotation = 12}));
  EXPECT_FALSE(threefry_recognized({.key_injection_constant = false}));
}

// ---- norms -----------------------------------------------------------------------------------

// What a variant of a norm chain differs in (from `lookalike` on, another computation or a chain
// whose intermediates are needed elsewhere).
struct NormVariant {
  enum Kind { kLayer, kFlax, kRms } kind = kLayer;  // kFlax: the scale times the reciprocal
  bool scale = true, bias = true;
  std::vector<int64_t> shape = {2, 3, 8};
  ir::ElementType type = ir::ElementType::kF32;
  std::optional<ir::ElementType> io;  // kRms: x, scale and result of this type, computed in `type`
  // Lookalikes:
  float mean_count = 0;          // divide the variance's sum by this (0: the last dim's size)
  bool reduce_first_dim = false;  // the mean over dim 0
  bool mean_also_returned = false;
  bool second_mean_of_scale_free = false;  // the second `x - mean` subtracts another mean
};

// main(x, scale, bias) = the variant's norm of x as jax 0.10 emits it (bench/workloads'
// layer_norm, flax's LayerNorm(use_fast_variance=False), an RMS norm).
ir::Module norm_module(const NormVariant& v) {
  ir::Module m;
  Builder b{m};
  b.func("main", 3, v.mean_also_returned ? 2 : 1, false);
  const int64_t rank = static_cast<int64_t>(v.shape.size());
  const int64_t last = v.reduce_first_dim ? 0 : rank - 1;
  std::vector<int64_t> kept_shape, kept_dims, keep_shape = v.shape;
  for (int64_t d = 0; d < rank; ++d)
    if (d != last) kept_shape.push_back(v.shape[d]), kept_dims.push_back(d);
  keep_shape[last] = 1;
  const ir::Type* x_t = m.types().tensor(v.type, v.shape);
  const ir::Type* p_t = m.types().tensor(v.type, {v.shape.back()});
  const ir::Type* r_t = m.types().tensor(v.type, kept_shape);
  const ir::Type* k_t = m.types().tensor(v.type, keep_shape);
  const ir::Type* scalar = m.types().tensor(v.type, {});
  const bool convert = v.io.has_value();
  const ir::Type* io_t = m.types().tensor(v.io.value_or(v.type), v.shape);
  const ir::Type* io_p_t = m.types().tensor(v.io.value_or(v.type), {v.shape.back()});
  b.f->arg_types = {convert ? io_t : x_t, convert ? io_p_t : p_t, p_t};
  for (int i = 0; i < 3; ++i) b.f->body.blocks[0].args[i].type = b.f->arg_types[i];
  b.f->result_types = std::vector<const ir::Type*>(v.mean_also_returned ? 2 : 1,
                                                   convert ? io_t : x_t);
  if (v.mean_also_returned) b.f->result_types[1] = k_t;
  ir::Value x = b.f->args()[0], scale = b.f->args()[1], bias = b.f->args()[2];
  auto typed = &Builder::typed;
  auto constant = [&](float f) {
    uint32_t bits = 0;
    std::memcpy(&bits, &f, 4);
    return b.constant32(bits, scalar);
  };
  auto bcast = [&](ir::Value in, std::vector<int64_t> dims, const ir::Type* t) {
    return b.bcast(in, std::move(dims), t);
  };
  auto binary = [&](OpKind k, ir::Value l, ir::Value r) {
    return typed(b.op(k, {l, r}, 1), r.type->rank() > l.type->rank() ? r.type : l.type);
  };
  std::vector<int64_t> all(v.shape.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  auto mean = [&](ir::Value in, float count) {  // jnp.mean(in, last, keepdims=True)
    ir::Value k = bcast(b.reduce(in, 0u, OpKind::kAdd, last, scalar, r_t), kept_dims, k_t);
    return binary(OpKind::kDivide, k, bcast(constant(count), {}, k_t));
  };
  auto param = [&](ir::Value p) {
    std::vector<int64_t> ones(v.shape.size(), 1);
    ones.back() = v.shape.back();
    const ir::Type* o_t = m.types().tensor(p.type->dtype, ones);
    return bcast(bcast(p, {rank - 1}, o_t), all, m.types().tensor(p.type->dtype, v.shape));
  };
  const float n = static_cast<float>(v.shape[last]);
  ir::Value y, mu;
  auto reciprocal = [&](ir::Value sq) {  // rsqrt(mean(sq) + eps)
    ir::Value var = mean(sq, v.mean_count != 0 ? v.mean_count : n);
    ir::Value r = typed(b.op(OpKind::kRsqrt, {binary(OpKind::kAdd, var,
                                                      bcast(constant(1e-5f), {}, k_t))}, 1), k_t);
    return bcast(r, all, x_t);
  };
  if (v.kind == NormVariant::kRms) {
    if (convert) x = typed(b.op(OpKind::kConvert, {x}, 1), x_t);
    y = binary(OpKind::kMultiply, x, reciprocal(binary(OpKind::kMultiply, x, x)));
    if (convert) y = typed(b.op(OpKind::kConvert, {y}, 1), io_t);
  } else {
    mu = mean(x, n);
    ir::Value c = binary(OpKind::kSubtract, x, bcast(mu, all, x_t));
    ir::Value other = v.second_mean_of_scale_free ? mean(binary(OpKind::kMultiply, x, x), n) : mu;
    ir::Value w = reciprocal(binary(OpKind::kMultiply, c, c));
    if (v.kind == NormVariant::kFlax && v.scale) w = binary(OpKind::kMultiply, w, param(scale));
    ir::Value c2 = binary(OpKind::kSubtract, x, bcast(other, all, x_t));
    y = binary(OpKind::kMultiply, c2, w);
  }
  if (v.scale && v.kind != NormVariant::kFlax) y = binary(OpKind::kMultiply, y, param(scale));
  if (v.bias) y = binary(OpKind::kAdd, param(bias), y);
  if (v.mean_also_returned) b.ret({y, mu});
  else b.ret({y});
  return m;
}

struct NormCall {
  std::string target;  // "" when the chain is still there
  size_t operands = 0;
  size_t ops = 0;  // ops left in main (the call and the return, when it replaced the chain)
};

// The call that replaced the chain, if any, after the pass and dce.
NormCall norm_call(const NormVariant& v) {
  ir::Module m = norm_module(v);
  EXPECT_TRUE(ir::verify(m).ok()) << ir::verify(m).to_string() << ir::print_module(m);
  EXPECT_TRUE(recognize_norms(m).ok());
  EXPECT_TRUE(drop_dead_ops(m).ok());
  EXPECT_TRUE(ir::verify(m).ok()) << ir::print_module(m);
  NormCall got;
  got.ops = m.funcs[0].entry().ops.size();
  ir::walk(m.funcs[0].body, [&](const ir::Op& op) {
    if (op.kind != OpKind::kCustomCall) return;
    got.target = op.get_string("call_target_name");
    got.operands = op.operands.size();
    EXPECT_EQ(op.operands[0].id, m.funcs[0].args()[0].id);
    const auto* eps = op.attr<ir::FloatAttr>("epsilon");
    ASSERT_NE(eps, nullptr);
    EXPECT_FLOAT_EQ(static_cast<float>(eps->value), 1e-5f);
    EXPECT_EQ(op.get_bool("has_scale"), v.scale);
    if (op.operands.size() > 1) EXPECT_EQ(op.operands[1].id, m.funcs[0].args()[v.scale ? 1 : 2].id);
  });
  return got;
}

// The chain became one call of `target` with `operands` operands, and nothing else is left.
void expect_norm_call(const NormVariant& v, const std::string& target, size_t operands) {
  NormCall got = norm_call(v);
  EXPECT_EQ(got.target, target);
  EXPECT_EQ(got.operands, operands);
  EXPECT_EQ(got.ops, 2u);
}

TEST(Norms, JaxsChainsBecomeOneCall) {
  expect_norm_call({}, kLayerNormTarget, 3);
  expect_norm_call({.kind = NormVariant::kFlax}, kLayerNormTarget, 3);
  expect_norm_call({.scale = false}, kLayerNormTarget, 2);
  expect_norm_call({.bias = false}, kLayerNormTarget, 2);
  expect_norm_call({.scale = false, .bias = false}, kLayerNormTarget, 1);
  expect_norm_call({.kind = NormVariant::kRms, .bias = false}, kRmsNormTarget, 2);
  expect_norm_call({.kind = NormVariant::kRms, .scale = false, .bias = false}, kRmsNormTarget, 1);
  expect_norm_call({.kind = NormVariant::kRms, .bias = false, .io = ir::ElementType::kBF16},
                   kRmsNormTarget, 2);
  expect_norm_call({.kind = NormVariant::kRms, .scale = false, .bias = false,
                    .io = ir::ElementType::kF16}, kRmsNormTarget, 1);
  expect_norm_call({.shape = {8}}, kLayerNormTarget, 3);
  expect_norm_call({.shape = {1, 1, 8}}, kLayerNormTarget, 3);
}

TEST(Norms, LookalikesStayAsTheyAre) {
  EXPECT_EQ(norm_call({.mean_count = 7}).target, "");  // jnp.var(ddof=1)
  EXPECT_EQ(norm_call({.scale = false, .bias = false, .shape = {8, 3, 8},
                       .reduce_first_dim = true}).target, "");
  EXPECT_EQ(norm_call({.mean_also_returned = true}).target, "");  // training keeps the mean
  EXPECT_EQ(norm_call({.second_mean_of_scale_free = true}).target, "");
  EXPECT_EQ(norm_call({.type = ir::ElementType::kF16}).target, "");
  // MLX's RMS norm has no bias: the add stays after the call.
  NormCall rms_bias = norm_call({.kind = NormVariant::kRms, .scale = false});
  EXPECT_EQ(rms_bias.target, kRmsNormTarget);
  EXPECT_GT(rms_bias.ops, 2u);
}

// ---- norms' scales in training (norm_scales.h) ------------------------------------------------

// What a variant of the post-norms training program differs in.
struct ScaleVariant {
  bool forward = true;        // the scaled, shifted norm is returned (else only the gradients)
  bool late_scale = false;    // the scale is exp(arg), computed after the scale gradient's sum
  bool normalized_returned = false;  // the normalized values are read a third time
};

// main(x [6, 8], dy, g [8], b [8]) after norm_grads.h and norms.h (the calls, jax's affine and
// its gradients around them): returns [y,] dx, dg, db.
ir::Module scale_module(const ScaleVariant& v) {
  ir::Module m;
  Builder b{m};
  const ir::Type* x_t = m.types().tensor(ir::ElementType::kF32, {6, 8});
  const ir::Type* p_t = m.types().tensor(ir::ElementType::kF32, {8});
  const ir::Type* scalar = m.types().tensor(ir::ElementType::kF32, {});
  const int nres = 3 + v.forward + v.normalized_returned;
  b.func("main", 4, nres, false);
  b.f->arg_types = {x_t, x_t, p_t, p_t};
  for (int i = 0; i < 4; ++i) b.f->body.blocks[0].args[i].type = b.f->arg_types[i];
  ir::Value x = b.f->args()[0], dy = b.f->args()[1], g = b.f->args()[2], bias = b.f->args()[3];
  auto typed = &Builder::typed;
  auto call = [&](const char* target, std::vector<ir::Value> operands) {
    ir::Op& o = b.op(OpKind::kCustomCall, std::move(operands), 1);
    o.set_attr("call_target_name", ir::StringAttr{target});
    o.set_attr("epsilon", ir::FloatAttr{0x3727C5ACu, ir::ElementType::kF32, 1e-5});
    return typed(o, x_t);
  };
  auto mul = [&](ir::Value l, ir::Value r) { return typed(b.op(OpKind::kMultiply, {l, r}, 1), x_t); };
  auto along_rows = [&](ir::Value p) { return b.bcast(p, {1}, x_t); };
  ir::Value n = call(kLayerNormTarget, {x});
  std::vector<ir::Value> results;
  if (v.forward) {
    ir::Value y = typed(b.op(OpKind::kAdd, {mul(n, along_rows(g)), along_rows(bias)}, 1), x_t);
    results.push_back(y);
  }
  if (v.normalized_returned) results.push_back(n);
  ir::Value dg = b.reduce(mul(dy, n), 0u, OpKind::kAdd, 0, scalar, p_t);
  if (v.late_scale) g = typed(b.op(OpKind::kExponential, {g}, 1), p_t);
  ir::Value db = b.reduce(dy, 0u, OpKind::kAdd, 0, scalar, p_t);
  ir::Value dx = call(kLayerNormGradTarget, {x, mul(along_rows(g), dy)});
  for (ir::Value r : {dx, dg, db}) results.push_back(r);
  b.f->result_types.clear();
  for (const ir::Value& r : results) b.f->result_types.push_back(r.type);
  b.ret(results);
  return m;
}

// The module after the fold and dce, checked valid.
ir::Module folded(const ScaleVariant& v) {
  ir::Module m = scale_module(v);
  EXPECT_TRUE(ir::verify(m).ok()) << ir::verify(m).to_string() << ir::print_module(m);
  EXPECT_TRUE(fold_norm_scales(m).ok());
  EXPECT_TRUE(drop_dead_ops(m).ok());
  EXPECT_TRUE(ir::verify(m).ok()) << ir::verify(m).to_string() << ir::print_module(m);
  return m;
}

int scaled_calls(const ir::Module& m) {
  int n = 0;
  ir::walk(m.funcs[0].body, [&](const ir::Op& op) { n += op.get_bool("has_scale"); });
  return n;
}

TEST(NormScales, TheAffineAndItsGradientsGoIntoTheCalls) {
  ir::Module m = folded({});
  EXPECT_EQ(scaled_calls(m), 2);
  // The two calls and the return: every multiply, broadcast and sum is gone.
  EXPECT_EQ(m.funcs[0].entry().ops.size(), 3u) << ir::print_module(m);
  const ir::Op& grad = m.funcs[0].entry().ops[1];
  EXPECT_EQ(grad.operands.size(), 4u);  // x, dy, g, b
  EXPECT_EQ(grad.results.size(), 3u);   // dx, dg, db
  EXPECT_TRUE(grad.get_bool("has_bias"));
  // Only the gradients: the bias is not known, its gradient stays jax's sum.
  m = folded({.forward = false});
  EXPECT_EQ(scaled_calls(m), 1);
  EXPECT_EQ(count_ops(m, OpKind::kReduce), 1);
}

TEST(NormScales, LookalikesStayAsTheyAre) {
  // A scale computed after the first gradient's place: the call could not go there.
  EXPECT_EQ(scaled_calls(folded({.forward = false, .late_scale = true})), 0);
  // The normalized values are returned too: nothing to gain, and they would be computed twice.
  EXPECT_EQ(scaled_calls(folded({.normalized_returned = true})), 0);
}

// ---- attention --------------------------------------------------------------------------------

// What a variant of jax's attention chain differs in (from `lookalike` on, another computation
// or a chain whose intermediates are needed elsewhere).
struct AttentionVariant {
  bool mask = true, scale = true;
  bool decode = false;  // batch 1: jnp.matmul drops the size-1 dim around each product
  uint32_t fill = 0xFF7FFFFFu;  // finfo(f32).min
  bool probs_returned = false;
  int64_t softmax_dim = 3;
  ir::ElementType type = ir::ElementType::kF32;
};

// q, k, v [b, 4, t, 8] (k transposed for the product as jax does), mask [1, 1, t, 16] broadcast,
// softmax over the keys (16), then the product with v.
ir::Module attention_module(const AttentionVariant& v) {
  ir::Module m;
  Builder b{m};
  b.func("main", 4, v.probs_returned ? 2 : 1, false);
  const int64_t batch = v.decode ? 1 : 2, t = v.decode ? 1 : 16;
  auto tensor = [&](std::vector<int64_t> dims, ir::ElementType e) {
    return m.types().tensor(e, std::move(dims));
  };
  const ir::ElementType f = v.type;
  const ir::Type *q_t = tensor({batch, 4, t, 8}, f), *kv_t = tensor({batch, 4, 16, 8}, f),
                 *s_t = tensor({batch, 4, t, 16}, f), *p_t = tensor({1, 1, t, 16}, ir::ElementType::kPred);
  ir::Value q = b.f->args()[0], k = b.f->args()[1], val = b.f->args()[2], pred = b.f->args()[3];
  q.type = q_t, k.type = kv_t, val.type = kv_t, pred.type = p_t;
  b.f->body.blocks[0].args = {q, k, val, pred};
  b.f->arg_types = {q_t, kv_t, kv_t, p_t};
  ir::Op& kt_op = b.op(OpKind::kTranspose, {k}, 1);
  kt_op.set_attr("permutation", ir::I64ArrayAttr{{0, 1, 3, 2}});
  ir::Value kt = Builder::typed(kt_op, tensor({batch, 4, 8, 16}, f));
  auto dot = [&](ir::Value l, ir::Value r, ir::DotDims dd, const ir::Type* out) {
    ir::Op& o = b.op(OpKind::kDotGeneral, {l, r}, 1);
    o.set_attr("dot_dimension_numbers", dd);
    return Builder::typed(o, out);
  };
  auto view = [&](ir::Value x, const ir::Type* out) {
    return Builder::typed(b.op(OpKind::kReshape, {x}, 1), out);
  };
  ir::Value s;
  if (v.decode) {  // [4, 1, 8] x [4, 8, 16] -> [4, 1, 16], broadcast back to [1, 4, 1, 16]
    ir::Value q3 = view(q, tensor({4, 1, 8}, f)), k3 = view(kt, tensor({4, 8, 16}, f));
    ir::Value s3 = dot(q3, k3, {{0}, {0}, {2}, {1}}, tensor({4, 1, 16}, f));
    s = b.bcast(s3, {1, 2, 3}, s_t);
  } else {
    s = dot(q, kt, {{0, 1}, {0, 1}, {3}, {2}}, s_t);
  }
  if (v.scale) {
    ir::Value c = b.bcast(b.constant32(0x3E3504F3u, m.types().tensor(ir::ElementType::kF32, {})),
                          {}, s_t);
    s = Builder::typed(b.op(OpKind::kMultiply, {s, c}, 1), s_t);
  }
  if (v.mask) {
    ir::Value wide = b.bcast(pred, {0, 1, 2, 3}, tensor({batch, 4, t, 16}, ir::ElementType::kPred));
    ir::Value fill = b.bcast(b.constant32(v.fill, m.types().tensor(ir::ElementType::kF32, {})),
                             {}, s_t);
    s = Builder::typed(b.op(OpKind::kSelect, {wide, s, fill}, 1), s_t);
  }
  ir::Op& sm = b.op(OpKind::kCustomCall, {s}, 1);
  sm.set_attr("call_target_name", ir::StringAttr{kSoftmaxTarget});
  sm.set_attr("dimensions", ir::I64ArrayAttr{{v.softmax_dim}});
  ir::Value p = Builder::typed(sm, s_t);
  ir::Value o;
  if (v.decode) {
    ir::Value p3 = view(p, tensor({4, 1, 16}, f)), v3 = view(val, tensor({4, 16, 8}, f));
    o = b.bcast(dot(p3, v3, {{0}, {0}, {2}, {1}}, tensor({4, 1, 8}, f)), {1, 2, 3}, q_t);
  } else {
    o = dot(p, val, {{0, 1}, {0, 1}, {3}, {2}}, q_t);
  }
  b.f->result_types = {q_t};
  if (v.probs_returned) b.f->result_types.push_back(s_t);
  if (v.probs_returned) b.ret({o, p});
  else b.ret({o});
  return m;
}

// The attention call that replaced the chain (after the pass and dce), or nullopt.
std::optional<ir::Op> attention_call(const AttentionVariant& v) {
  ir::Module m = attention_module(v);
  EXPECT_TRUE(ir::verify(m).ok()) << ir::verify(m).to_string() << ir::print_module(m);
  EXPECT_TRUE(recognize_attention(m).ok());
  EXPECT_TRUE(drop_dead_ops(m).ok());
  EXPECT_TRUE(ir::verify(m).ok()) << ir::print_module(m);
  std::optional<ir::Op> got;
  ir::walk(m.funcs[0].body, [&](const ir::Op& op) {
    if (op.kind == OpKind::kCustomCall && op.get_string("call_target_name") == kAttentionTarget)
      got = op;
  });
  if (got) {  // nothing of the chain is left but the views of its operands
    EXPECT_EQ(count_ops(m, OpKind::kDotGeneral), 0) << ir::print_module(m);
    EXPECT_EQ(count_ops(m, OpKind::kSelect), 0) << ir::print_module(m);
    if (!v.decode) {
      EXPECT_EQ(got->operands[0].id, m.funcs[0].args()[0].id);
    }
  }
  return got;
}

TEST(Attention, JaxsChainBecomesOneCall) {
  std::optional<ir::Op> a = attention_call({});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->operands.size(), 4u);  // q, k (transposed), v, the mask before its broadcast
  EXPECT_EQ(a->get_i64s("q_dims"), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(a->get_i64s("k_dims"), (std::vector<int64_t>{0, 1, 3, 2}));
  EXPECT_EQ(a->get_i64s("v_dims"), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(a->get_i64s("mask_dims"), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(a->get_i64("batch"), 2);
  EXPECT_EQ(a->get_i64("q_free"), 1);
  EXPECT_TRUE(a->get_bool("mask_keeps"));
  EXPECT_FLOAT_EQ(static_cast<float>(a->attr<ir::FloatAttr>("scale")->value), 0.17677669f);

  std::optional<ir::Op> plain = attention_call({.mask = false, .scale = false});
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->operands.size(), 3u);
  EXPECT_EQ(plain->attr<ir::FloatAttr>("scale")->value, 1.0);
  EXPECT_TRUE(attention_call({.fill = 0xCE6E6B28u}).has_value());  // -1e9

  // Decode (batch 1): the products in jnp.matmul's squeezed frame, the mask in jax's.
  std::optional<ir::Op> d = attention_call({.decode = true});
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->get_i64("batch"), 1);
  EXPECT_EQ(d->get_i64s("scores"), (std::vector<int64_t>{1, 4, 1, 16}));
}

TEST(Attention, LookalikesStayAsTheyAre) {
  EXPECT_FALSE(attention_call({.probs_returned = true}).has_value());  // training keeps them
  EXPECT_FALSE(attention_call({.fill = 0xC61C4000u}).has_value());     // -1e4: not -inf enough
  EXPECT_FALSE(attention_call({.fill = 0xFF800000u}).has_value());     // -inf: empty rows NaN
  EXPECT_FALSE(attention_call({.softmax_dim = 2}).has_value());        // over the queries
  EXPECT_FALSE(attention_call({.type = ir::ElementType::kBF16}).has_value());
}

// ---- dce --------------------------------------------------------------------------------------

TEST(Dce, DeadChainsGoSideEffectsAndRegionReadsStay) {
  ir::Module m;
  Builder b{m};
  b.func("main", 1, 1, false);
  ir::Value x = b.f->args()[0];
  ir::Value dead1 = b.op(OpKind::kNegate, {x}, 1).results[0];
  b.op(OpKind::kAdd, {dead1, dead1}, 1);                     // dead chain: add(negate)
  b.op(OpKind::kCustomCall, {x}, 1).set_attr("call_target_name", ir::StringAttr{"effect"});
  // Our own calls compute values only: an unread one goes (an attention call leaves one).
  b.op(OpKind::kCustomCall, {x}, 1).set_attr("call_target_name", ir::StringAttr{kSoftmaxTarget});
  ir::Value read_in_region = b.op(OpKind::kAbs, {x}, 1).results[0];
  ir::Value held = b.holder(x, [&] {
    b.op(OpKind::kSqrt, {x}, 1);  // dead inside the region
    b.op(OpKind::kReturn, {b.op(OpKind::kExponential, {read_in_region}, 1).results[0]}, 0);
  }).results[0];
  b.ret({held});
  ASSERT_TRUE(ir::verify(m).ok()) << ir::print_module(m);
  ASSERT_TRUE(drop_dead_ops(m).ok());
  ASSERT_TRUE(ir::verify(m).ok()) << ir::print_module(m);
  EXPECT_EQ(count_ops(m, OpKind::kNegate), 0);
  EXPECT_EQ(count_ops(m, OpKind::kAdd), 0);
  EXPECT_EQ(count_ops(m, OpKind::kSqrt), 0);
  EXPECT_EQ(count_ops(m, OpKind::kCustomCall), 1);   // "effect": unused, but may have effects
  EXPECT_EQ(count_ops(m, OpKind::kAbs), 1);          // read inside the region
  EXPECT_EQ(count_ops(m, OpKind::kExponential), 1);  // returned by the region
  EXPECT_EQ(count_ops(m, OpKind::kGeneric), 1);
}

}  // namespace
}  // namespace jaxmlx::passes

namespace jaxmlx::passes {
namespace {

// main(a: f32[sa], b: f32[sb]) = transpose(dot_general(a, b), perm), with `extra_use`: the
// product returned as well.
ir::Module transposed_dot_module(std::vector<int64_t> sa, std::vector<int64_t> sb, ir::DotDims dd,
                                 std::vector<int64_t> dot_dims, std::vector<int64_t> perm,
                                 bool extra_use = false) {
  ir::Module m;
  Builder b{m};
  b.func("main", 2, extra_use ? 2 : 1, false);
  const ir::Type* ta = m.types().tensor(ir::ElementType::kF32, sa);
  const ir::Type* tb = m.types().tensor(ir::ElementType::kF32, sb);
  b.f->arg_types = {ta, tb};
  b.f->body.blocks[0].args[0].type = ta;
  b.f->body.blocks[0].args[1].type = tb;
  ir::Op& dot = b.op(OpKind::kDotGeneral, {b.f->args()[0], b.f->args()[1]}, 1);
  dot.set_attr("dot_dimension_numbers", dd);
  dot.set_attr("precision_config", ir::ArrayAttr{{ir::EnumAttr{ir::EnumKind::kPrecision, 2},
                                                  ir::EnumAttr{ir::EnumKind::kPrecision, 0}}});
  ir::Value p = Builder::typed(dot, m.types().tensor(ir::ElementType::kF32, dot_dims));
  std::vector<int64_t> t_dims;
  for (int64_t d : perm) t_dims.push_back(dot_dims[d]);
  ir::Op& t = b.op(OpKind::kTranspose, {p}, 1);
  t.set_attr("permutation", ir::I64ArrayAttr{perm});
  ir::Value r = Builder::typed(t, m.types().tensor(ir::ElementType::kF32, t_dims));
  b.f->result_types = {r.type};
  if (extra_use) b.f->result_types.push_back(p.type);
  b.ret(extra_use ? std::vector<ir::Value>{r, p} : std::vector<ir::Value>{r});
  return m;
}

TEST(FoldTransposedDots, AWeightGradientIsTheSwappedProduct) {
  // jax's dW of x @ w: dot_general(g[3,4], x[3,5]) over dim 0, then transpose [1, 0].
  ir::Module m = transposed_dot_module({3, 4}, {3, 5}, ir::DotDims{{}, {}, {0}, {0}}, {4, 5},
                                       {1, 0});
  const uint32_t g = m.funcs[0].args()[0].id, x = m.funcs[0].args()[1].id;
  ASSERT_TRUE(ir::verify(m).ok()) << ir::print_module(m);
  ASSERT_TRUE(fold_transposed_dots(m).ok());
  ASSERT_TRUE(ir::verify(m).ok()) << ir::verify(m).to_string() << ir::print_module(m);
  const ir::Block& body = m.funcs[0].entry();
  ASSERT_EQ(body.ops.size(), 2u) << ir::print_module(m);
  const ir::Op& dot = body.ops[0];
  EXPECT_EQ(dot.kind, OpKind::kDotGeneral);
  EXPECT_EQ(dot.operands[0].id, x);
  EXPECT_EQ(dot.operands[1].id, g);
  EXPECT_EQ(dot.results[0].type->dims, (std::vector<int64_t>{5, 4}));
  EXPECT_EQ(*dot.attr<ir::DotDims>("dot_dimension_numbers"), (ir::DotDims{{}, {}, {0}, {0}}));
  EXPECT_EQ(dot.attr<ir::ArrayAttr>("precision_config")->items[0].as<ir::EnumAttr>()->value, 0);
  EXPECT_EQ(body.ops[1].operands[0].id, dot.results[0].id);  // returned
}

TEST(FoldTransposedDots, BatchDimsStayFirst) {
  // [2,3,4] x [2,4,5] -> [2,3,5]; transposed to [2,5,3]: dot_general(b, a) over the same dims.
  ir::Module m = transposed_dot_module({2, 3, 4}, {2, 4, 5}, ir::DotDims{{0}, {0}, {2}, {1}},
                                       {2, 3, 5}, {0, 2, 1});
  ASSERT_TRUE(fold_transposed_dots(m).ok());
  ASSERT_TRUE(ir::verify(m).ok()) << ir::verify(m).to_string() << ir::print_module(m);
  const ir::Block& body = m.funcs[0].entry();
  ASSERT_EQ(body.ops.size(), 2u) << ir::print_module(m);
  EXPECT_EQ(*body.ops[0].attr<ir::DotDims>("dot_dimension_numbers"),
            (ir::DotDims{{0}, {0}, {1}, {2}}));
  EXPECT_EQ(body.ops[0].results[0].type->dims, (std::vector<int64_t>{2, 5, 3}));
}

TEST(FoldTransposedDots, OtherTransposesAndSharedProductsStay) {
  // Batch dims moved: not the swap.
  ir::Module moved = transposed_dot_module({2, 3, 4}, {2, 4, 5}, ir::DotDims{{0}, {0}, {2}, {1}},
                                           {2, 3, 5}, {2, 1, 0});
  ASSERT_TRUE(fold_transposed_dots(moved).ok());
  EXPECT_EQ(count_ops(moved, OpKind::kTranspose), 1);
  // The product is read elsewhere too: swapping it would compute it twice.
  ir::Module shared = transposed_dot_module({3, 4}, {3, 5}, ir::DotDims{{}, {}, {0}, {0}}, {4, 5},
                                            {1, 0}, /*extra_use=*/true);
  ASSERT_TRUE(fold_transposed_dots(shared).ok());
  EXPECT_EQ(count_ops(shared, OpKind::kTranspose), 1);
  EXPECT_EQ(shared.funcs[0].entry().ops[0].operands[0].id, shared.funcs[0].args()[0].id);
}

}  // namespace
}  // namespace jaxmlx::passes

namespace jaxmlx::passes {
namespace {

// main(x: f32[2, 3, 4]) = reduce(negate(x) init: `init`) applies add across dim 2, the negation
// returned too when `extra_use`.
ir::Module negated_sum_module(uint32_t init, bool extra_use = false,
                              ir::ElementType type = ir::ElementType::kF32) {
  ir::Module m;
  Builder b{m};
  b.func("main", 1, extra_use ? 2 : 1, false);
  const ir::Type* x_t = m.types().tensor(type, {2, 3, 4});
  const ir::Type* r_t = m.types().tensor(type, {2, 3});
  const ir::Type* scalar = m.types().tensor(type, {});
  b.f->arg_types = {x_t};
  b.f->body.blocks[0].args[0].type = x_t;
  ir::Value n = Builder::typed(b.op(OpKind::kNegate, {b.f->args()[0]}, 1), x_t);
  ir::Value r = b.reduce(n, init, OpKind::kAdd, 2, scalar, r_t);
  b.f->result_types = {r_t};
  if (extra_use) b.f->result_types.push_back(x_t);
  b.ret(extra_use ? std::vector<ir::Value>{r, n} : std::vector<ir::Value>{r});
  return m;
}

TEST(SinkNegations, ASumOfNegationsIsTheNegatedSum) {
  ir::Module m = negated_sum_module(0u);
  const uint32_t x = m.funcs[0].args()[0].id;
  ASSERT_TRUE(ir::verify(m).ok()) << ir::print_module(m);
  ASSERT_TRUE(sink_negations(m).ok());
  ASSERT_TRUE(drop_dead_ops(m).ok());
  ASSERT_TRUE(ir::verify(m).ok()) << ir::verify(m).to_string() << ir::print_module(m);
  const std::vector<ir::Op>& ops = m.funcs[0].entry().ops;
  ASSERT_EQ(ops.size(), 4u) << ir::print_module(m);  // constant, reduce, negate, return
  const ir::Op& reduce = ops[1];
  ASSERT_EQ(reduce.kind, OpKind::kReduce);
  EXPECT_EQ(reduce.operands[0].id, x);
  const ir::Op& neg = ops[2];
  ASSERT_EQ(neg.kind, OpKind::kNegate);
  EXPECT_EQ(neg.operands[0].id, reduce.results[0].id);
  EXPECT_EQ(neg.results[0].type->dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(ops[3].operands[0].id, neg.results[0].id);  // returned
}

TEST(SinkNegations, ASharedNegationStaysForItsOtherReaders) {
  ir::Module m = negated_sum_module(0u, /*extra_use=*/true);
  const uint32_t x = m.funcs[0].args()[0].id;
  ASSERT_TRUE(sink_negations(m).ok());
  ASSERT_TRUE(drop_dead_ops(m).ok());
  ASSERT_TRUE(ir::verify(m).ok()) << ir::verify(m).to_string() << ir::print_module(m);
  EXPECT_EQ(count_ops(m, OpKind::kNegate), 2);  // x's, returned; the sum's
  ir::walk(m.funcs[0].body, [&](const ir::Op& op) {
    if (op.kind == OpKind::kReduce) EXPECT_EQ(op.operands[0].id, x);
  });
}

TEST(SinkNegations, OtherSumsStay) {
  // From -0 or 1: left as written.
  for (uint32_t init : {0x80000000u, 0x3F800000u}) {
    ir::Module m = negated_sum_module(init);
    ASSERT_TRUE(sink_negations(m).ok());
    ir::walk(m.funcs[0].body, [&](const ir::Op& op) {
      if (op.kind == OpKind::kReduce) EXPECT_NE(op.operands[0].id, m.funcs[0].args()[0].id);
    });
  }
  // f32 only.
  ir::Module half = negated_sum_module(0u, false, ir::ElementType::kF16);
  ASSERT_TRUE(sink_negations(half).ok());
  ir::walk(half.funcs[0].body, [&](const ir::Op& op) {
    if (op.kind == OpKind::kReduce) EXPECT_NE(op.operands[0].id, half.funcs[0].args()[0].id);
  });
}

// main(x: f32[1, 5, 5, 2], w: f32[3, 3, 2, 4]) = convolution(x, reverse(w, `dims`)) in NHWC /
// HWIO, its window reversal `reversal` (none when empty); the reverse also returned when
// `extra_use`.
ir::Module reversed_kernel_module(std::vector<int64_t> dims, std::vector<bool> reversal,
                                  bool extra_use = false) {
  ir::Module m;
  Builder b{m};
  b.func("main", 2, extra_use ? 2 : 1, false);
  const ir::Type* x_t = m.types().tensor(ir::ElementType::kF32, {1, 5, 5, 2});
  const ir::Type* w_t = m.types().tensor(ir::ElementType::kF32, {3, 3, 2, 4});
  const ir::Type* y_t = m.types().tensor(ir::ElementType::kF32, {1, 3, 3, 4});
  b.f->arg_types = {x_t, w_t};
  b.f->body.blocks[0].args[0].type = x_t;
  b.f->body.blocks[0].args[1].type = w_t;
  ir::Op& rev = b.op(OpKind::kReverse, {b.f->args()[1]}, 1);
  rev.set_attr("dimensions", ir::I64ArrayAttr{dims});
  ir::Value r = Builder::typed(rev, w_t);
  ir::Op& conv = b.op(OpKind::kConvolution, {b.f->args()[0], r}, 1);
  conv.set_attr("dimension_numbers", ir::ConvDims{0, 3, {1, 2}, 2, 3, {0, 1}, 0, 3, {1, 2}});
  if (!reversal.empty()) conv.set_attr("window_reversal", ir::BoolArrayAttr{reversal});
  ir::Value y = Builder::typed(conv, y_t);
  b.f->result_types = {y_t};
  if (extra_use) b.f->result_types.push_back(w_t);
  b.ret(extra_use ? std::vector<ir::Value>{y, r} : std::vector<ir::Value>{y});
  return m;
}

const ir::Op& only_conv(const ir::Module& m) {
  for (const ir::Op& op : m.funcs[0].entry().ops)
    if (op.kind == OpKind::kConvolution) return op;
  ADD_FAILURE() << "no convolution";
  return m.funcs[0].entry().ops[0];
}

TEST(FoldReversedKernels, JaxsReversedKernelBecomesTheWindowReversal) {
  // jax's input gradient: the kernel reversed over both spatial dims.
  ir::Module m = reversed_kernel_module({0, 1}, {});
  ASSERT_TRUE(ir::verify(m).ok()) << ir::print_module(m);
  ASSERT_TRUE(fold_reversed_kernels(m).ok());
  ASSERT_TRUE(drop_dead_ops(m).ok());
  ASSERT_TRUE(ir::verify(m).ok()) << ir::verify(m).to_string() << ir::print_module(m);
  const ir::Op& conv = only_conv(m);
  EXPECT_EQ(conv.operands[1].id, m.funcs[0].args()[1].id);
  EXPECT_EQ(conv.attr<ir::BoolArrayAttr>("window_reversal")->values,
            (std::vector<bool>{true, true}));
  EXPECT_EQ(count_ops(m, OpKind::kReverse), 0);
  // One spatial dim, onto a window already reversed in both: the other stays reversed.
  ir::Module twice = reversed_kernel_module({1}, {true, true});
  ASSERT_TRUE(fold_reversed_kernels(twice).ok());
  EXPECT_EQ(only_conv(twice).attr<ir::BoolArrayAttr>("window_reversal")->values,
            (std::vector<bool>{true, false}));
}

TEST(FoldReversedKernels, FeatureReversalsAndOtherReadersStay) {
  // A feature dim reversed too: not a window reversal.
  ir::Module features = reversed_kernel_module({0, 3}, {});
  ASSERT_TRUE(fold_reversed_kernels(features).ok());
  EXPECT_NE(only_conv(features).operands[1].id, features.funcs[0].args()[1].id);
  EXPECT_EQ(only_conv(features).attr<ir::BoolArrayAttr>("window_reversal"), nullptr);
  // The reverse is returned as well: the convolution reads the kernel, the reverse stays.
  ir::Module shared = reversed_kernel_module({0, 1}, {}, /*extra_use=*/true);
  ASSERT_TRUE(fold_reversed_kernels(shared).ok());
  ASSERT_TRUE(drop_dead_ops(shared).ok());
  ASSERT_TRUE(ir::verify(shared).ok()) << ir::print_module(shared);
  EXPECT_EQ(only_conv(shared).operands[1].id, shared.funcs[0].args()[1].id);
  EXPECT_EQ(count_ops(shared, OpKind::kReverse), 1);
}

}  // namespace
}  // namespace jaxmlx::passes
