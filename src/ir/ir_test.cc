#include <cmath>

#include <gtest/gtest.h>

#include "ir/cost.h"
#include "ir/json.h"
#include "ir/module.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace jaxmlx::ir {
namespace {

// func.func @main(%0: tensor<4xf32>) -> tensor<4xf32> { %1 = add %0, %0; return %1 }
Module add_module() {
  Module m;
  const Type* t = m.types().tensor(ElementType::kF32, {4});
  Func f;
  f.name = "main";
  f.arg_types = {t};
  f.result_types = {t};
  Block& b = f.body.blocks.emplace_back();
  b.args.push_back({0, t});
  Op add;
  add.kind = OpKind::kAdd;
  add.operands = {{0, t}, {0, t}};
  add.results = {{1, t}};
  add.loc = m.intern_location({"model.py", 42, 7, "jit(f)/add"});
  b.ops.push_back(add);
  Op ret;
  ret.kind = OpKind::kFuncReturn;
  ret.operands = {{1, t}};
  ret.loc = m.unknown_location();
  b.ops.push_back(ret);
  f.num_values = 2;
  m.funcs.push_back(std::move(f));
  return m;
}

TEST(Types, PrintAndIntern) {
  TypeArena arena;
  const Type* a = arena.tensor(ElementType::kF32, {4, 8});
  EXPECT_EQ(a, arena.tensor(ElementType::kF32, {4, 8}));
  EXPECT_NE(a, arena.tensor(ElementType::kF32, {8, 4}));
  EXPECT_EQ(type_to_string(*a), "tensor<4x8xf32>");
  EXPECT_EQ(type_to_string(*arena.tensor(ElementType::kPred, {})), "tensor<i1>");
  EXPECT_EQ(type_to_string(*arena.tensor(ElementType::kU8, {kDynamic, 3})), "tensor<?x3xui8>");
  EXPECT_EQ(type_to_string(*arena.tensor(ElementType::kC64, {2})), "tensor<2xcomplex<f32>>");
  EXPECT_EQ(type_to_string(*arena.scalar(ElementType::kBF16)), "bf16");
  Type tok;
  tok.dtype = ElementType::kToken;
  tok.is_tensor = false;
  Type tup;
  tup.dtype = ElementType::kTuple;
  tup.is_tensor = false;
  tup.members = {a, arena.intern(tok)};
  EXPECT_EQ(type_to_string(*arena.intern(tup)), "tuple<tensor<4x8xf32>, !stablehlo.token>");
  EXPECT_EQ(a->num_elements(), 32);
  EXPECT_EQ(arena.tensor(ElementType::kF32, {kDynamic})->num_elements(), -1);
}

TEST(OpKinds, TableRoundTrips) {
  EXPECT_EQ(op_kind_name(OpKind::kAdd), "stablehlo.add");
  EXPECT_EQ(op_kind_from_name("stablehlo.dot_general"), OpKind::kDotGeneral);
  EXPECT_EQ(op_kind_from_name("stablehlo.cross-replica-sum"), OpKind::kCrossReplicaSum);
  EXPECT_EQ(op_kind_from_name("func.call"), OpKind::kFuncCall);
  EXPECT_EQ(op_kind_from_name("sdy.sharding_constraint"), OpKind::kGeneric);
  EXPECT_EQ(op_kind_num_operands(OpKind::kSelect), 3);
  EXPECT_EQ(op_kind_num_regions(OpKind::kWhile), 2);
  EXPECT_EQ(op_kind_num_results(OpKind::kReduce), -1);
  for (int i = 0; i < kNumOpKinds; ++i) {
    auto k = static_cast<OpKind>(i);
    if (k != OpKind::kGeneric) {
      EXPECT_EQ(op_kind_from_name(op_kind_name(k)), k) << i;
    }
  }
}

// The elementwise column (the one list cost analysis, the emulated types and constant hoisting
// read): fixed-arity ops with one result and no regions, and none of the data movers.
TEST(OpKinds, ElementwiseColumn) {
  for (OpKind k : {OpKind::kAdd, OpKind::kSelect, OpKind::kConvert, OpKind::kLogistic,
                   OpKind::kReducePrecision, OpKind::kShiftRightLogical, OpKind::kAtan2})
    EXPECT_TRUE(op_kind_is_elementwise(k)) << op_kind_name(k);
  for (OpKind k : {OpKind::kBroadcastInDim, OpKind::kReshape, OpKind::kTranspose,
                   OpKind::kBitcastConvert, OpKind::kDot, OpKind::kReduce, OpKind::kMap,
                   OpKind::kIota, OpKind::kConstant, OpKind::kGeneric})
    EXPECT_FALSE(op_kind_is_elementwise(k)) << op_kind_name(k);
  int n = 0;
  for (int i = 0; i < kNumOpKinds; ++i) {
    auto k = static_cast<OpKind>(i);
    if (!op_kind_is_elementwise(k)) continue;
    ++n;
    EXPECT_GE(op_kind_num_operands(k), 1) << op_kind_name(k);
    EXPECT_EQ(op_kind_num_results(k), 1) << op_kind_name(k);
    EXPECT_EQ(op_kind_num_regions(k), 0) << op_kind_name(k);
  }
  EXPECT_EQ(n, 46);
}

TEST(Attributes, PrintAndAccess) {
  Op op;
  op.kind = OpKind::kTranspose;
  op.set_attr("permutation", I64ArrayAttr{{1, 0}});
  op.set_attr("dimension", IntAttr{3, ElementType::kS64});
  op.set_attr("comparison_direction", EnumAttr{EnumKind::kComparisonDirection, 5});
  EXPECT_EQ(op.get_i64s("permutation"), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(op.get_i64("dimension"), 3);
  EXPECT_EQ(op.get_i64("missing", -1), -1);
  EXPECT_EQ(op.get_enum("comparison_direction"),
            static_cast<int>(ComparisonDirection::kLT));
  EXPECT_EQ(attr_to_string(*op.find_attr("permutation")), "array<i64: 1, 0>");
  EXPECT_EQ(attr_to_string(*op.find_attr("comparison_direction")),
            "#stablehlo<comparison_direction LT>");
  EXPECT_EQ(attr_to_string(Attribute(DotDims{{0}, {0}, {2}, {1}})),
            "#stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], "
            "lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>");
  EXPECT_TRUE(op.get_bool("absent_unit") == false);
  op.set_attr("use_global_device_ids", UnitAttr{});
  EXPECT_TRUE(op.get_bool("use_global_device_ids"));
}

TEST(Attributes, DenseIntAt) {
  TypeArena arena;
  const uint8_t bytes[] = {0xff, 0x7f, 0x01, 0x00};
  DenseElementsAttr d{arena.tensor(ElementType::kS16, {2}), bytes, false};
  EXPECT_EQ(d.int_at(0), 32767 * 0 + 0x7fff);
  EXPECT_EQ(d.int_at(1), 1);
  DenseElementsAttr s{arena.tensor(ElementType::kS8, {3}), std::span(bytes, 1), true};
  EXPECT_EQ(s.int_at(2), -1);
}

TEST(Printer, Module) {
  Module m = add_module();
  std::string text = print_module(m, {.locations = true});
  EXPECT_NE(text.find("func.func public @main(%0: tensor<4xf32>) -> (tensor<4xf32>)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("%1 = stablehlo.add(%0, %0) : (tensor<4xf32>, tensor<4xf32>) -> "
                      "tensor<4xf32> loc(\"jit(f)/add\" \"model.py\":42:7)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("func.return(%1)"), std::string::npos) << text;
  EXPECT_EQ(describe_op(m.funcs[0].entry().ops[0]), "stablehlo.add at jit(f)/add  model.py:42:7");
  EXPECT_NE(to_json(m).find("\"name\":\"stablehlo.add\",\"operands\":[0,0]"), std::string::npos);
}

TEST(Verifier, AcceptsWellFormed) { EXPECT_TRUE(verify(add_module()).ok()); }

TEST(Verifier, OperandCount) {
  Module m = add_module();
  m.funcs[0].body.blocks[0].ops[0].operands.pop_back();
  Status st = verify(m);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("stablehlo.add at jit(f)/add  model.py:42:7: has 1 operands, "
                              "expected 2"),
            std::string::npos)
      << st.message();
}

TEST(Verifier, UseBeforeDefinition) {
  Module m = add_module();
  m.funcs[0].body.blocks[0].ops[0].operands[1].id = 1;  // its own result
  Status st = verify(m);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("uses %1 before its definition"), std::string::npos)
      << st.message();
}

TEST(Verifier, OperandTypedOtherwiseThanItsDefinition) {
  // Rules read an operand's type at its use; the interpreter hands them what the definition
  // made. A program where the two differ is refused before any rule runs.
  Module m = add_module();
  m.funcs[0].body.blocks[0].ops[0].operands[1].type = m.types().tensor(ElementType::kF32, {2, 2});
  Status st = verify(m);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("uses %0 as tensor<2x2xf32>, defined as tensor<4xf32>"),
            std::string::npos)
      << st.message();
}

TEST(Verifier, TerminatorAndReturnTypes) {
  Module m = add_module();
  m.funcs[0].body.blocks[0].ops.pop_back();
  EXPECT_NE(verify(m).message().find("must end in func.return"), std::string::npos);
  Module m2 = add_module();
  m2.funcs[0].result_types = {m2.types().tensor(ElementType::kF16, {4})};
  EXPECT_NE(verify(m2).message().find("result 0 type differs"), std::string::npos);
}

TEST(Verifier, MissingRegion) {
  Module m = add_module();
  Op& add = m.funcs[0].body.blocks[0].ops[0];
  add.kind = OpKind::kWhile;  // needs two regions
  add.operands.pop_back();
  EXPECT_NE(verify(m).message().find("has 0 regions, expected 2"), std::string::npos)
      << verify(m).message();
}

TEST(Verifier, VariadicOperandsTheLoweringsIndex) {
  // A dynamic_update_slice left with its operand alone (found by jaxmlx-mutate-compile under
  // ASan: the lowering read the update's type past the operand list).
  Module m = add_module();
  Op& op = m.funcs[0].body.blocks[0].ops[0];
  op.kind = OpKind::kDynamicUpdateSlice;
  op.operands.pop_back();
  EXPECT_NE(verify(m).message().find("has 1 operands, expected at least 2 (the operand and the "
                                     "update)"),
            std::string::npos)
      << verify(m).message();
  // Two operands are a dynamic_update_slice of rank 0.
  Module ok = add_module();
  ok.funcs[0].body.blocks[0].ops[0].kind = OpKind::kDynamicUpdateSlice;
  EXPECT_TRUE(verify(ok).ok()) << verify(ok).message();
  // A reduce's inputs pair with its init values.
  Module reduce = add_module();
  Op& r = reduce.funcs[0].body.blocks[0].ops[0];
  r.kind = OpKind::kReduce;
  r.regions.emplace_back();
  r.operands.push_back(r.operands[0]);
  EXPECT_NE(verify(reduce).message().find("odd number of operands"), std::string::npos)
      << verify(reduce).message();
  Module scatter = add_module();
  scatter.funcs[0].body.blocks[0].ops[0].kind = OpKind::kScatter;
  scatter.funcs[0].body.blocks[0].ops[0].regions.emplace_back();
  EXPECT_NE(verify(scatter).message().find("expected at least 3"), std::string::npos)
      << verify(scatter).message();
}

TEST(Cost, AddsOfMainAndItsCalls) {
  Module m = add_module();
  EXPECT_EQ(program_cost(m).flops, 4);
  EXPECT_EQ(program_cost(m).bytes_accessed, 3 * 16);  // two f32[4] read, one written
  EXPECT_EQ(program_cost(Module{}).flops, 0);           // no main
}

TEST(Cost, CallsFanningOutOrRecursingAreCountedOnce) {
  // f0 (main) calls f1 twice, f1 calls f2 twice, ... f60 calls itself: counted by walking each
  // func once (2^60 calls if followed), and the recursion counts nothing more.
  Module m;
  const Type* t = m.types().tensor(ElementType::kF32, {4});
  constexpr int kFuncs = 61;
  for (int i = 0; i < kFuncs; ++i) {
    Func f;
    f.name = i == 0 ? "main" : "f" + std::to_string(i);
    Block& b = f.body.blocks.emplace_back();
    b.args.push_back({0, t});
    const std::string callee = i + 1 < kFuncs ? "f" + std::to_string(i + 1) : f.name;
    for (int c = 0; c < 2; ++c) {
      Op call;
      call.kind = OpKind::kFuncCall;
      call.operands = {{0, t}};
      call.results = {{static_cast<uint32_t>(1 + c), t}};
      call.set_attr("callee", SymbolRefAttr{callee});
      call.loc = m.unknown_location();
      b.ops.push_back(std::move(call));
    }
    Op neg;
    neg.kind = OpKind::kNegate;
    neg.operands = {{1, t}};
    neg.results = {{3, t}};
    neg.loc = m.unknown_location();
    b.ops.push_back(std::move(neg));
    f.num_values = 4;
    m.funcs.push_back(std::move(f));
  }
  const Cost c = program_cost(m);
  EXPECT_GT(c.flops, 0);
  EXPECT_TRUE(std::isfinite(c.flops));
}

TEST(Cost, MalformedConvolutionsAndReductionsCountWithoutReadingPastThem) {
  Module m = add_module();
  Op& op = m.funcs[0].body.blocks[0].ops[0];
  // A convolution with strides and dilations near 2^63 and no dimension numbers, then with.
  op.kind = OpKind::kConvolution;
  const int64_t huge = int64_t{1} << 62;
  op.set_attr("window_strides", I64ArrayAttr{{huge}});
  op.set_attr("lhs_dilation", I64ArrayAttr{{huge}});
  op.set_attr("rhs_dilation", I64ArrayAttr{{huge}});
  EXPECT_EQ(program_cost(m).flops, 0);
  ConvDims dn;
  dn.input_batch_dimension = 0;
  dn.input_feature_dimension = 0;
  dn.input_spatial_dimensions = {0};
  dn.kernel_input_feature_dimension = 0;
  dn.kernel_output_feature_dimension = 0;
  dn.kernel_spatial_dimensions = {0};
  dn.output_batch_dimension = 0;
  dn.output_feature_dimension = 0;
  dn.output_spatial_dimensions = {0};
  op.set_attr("dimension_numbers", dn);
  EXPECT_TRUE(std::isfinite(program_cost(m).flops));
  // Dynamic ('?') dims and windows whose size overflows: counts, never negative or NaN.
  op.operands[0].type = m.types().tensor(ElementType::kF32, {kDynamic, 4});
  op.kind = OpKind::kDotGeneral;
  DotDims dd;
  dd.lhs_contracting_dimensions = {0};
  dd.rhs_contracting_dimensions = {0};
  op.set_attr("dot_dimension_numbers", dd);
  EXPECT_GE(program_cost(m).flops, 0);
  op.kind = OpKind::kReduceWindow;
  op.set_attr("window_dimensions", I64ArrayAttr{std::vector<int64_t>(17, huge)});  // 2^1054
  op.regions.emplace_back();  // a body of no flops: infinity times zero
  EXPECT_GE(program_cost(m).flops, 0);
  op.set_attr("window_dimensions", I64ArrayAttr{{-3, 2}});
  EXPECT_GE(program_cost(m).flops, 0);
  op.regions.clear();
  // Variadic ops with too few operands and no regions.
  for (OpKind k : {OpKind::kReduce, OpKind::kScatter, OpKind::kSort, OpKind::kReduceWindow,
                   OpKind::kSelectAndScatter, OpKind::kDotGeneral, OpKind::kWhile}) {
    op.kind = k;
    op.operands.clear();
    EXPECT_EQ(program_cost(m).flops, 0) << static_cast<int>(k);
  }
}

TEST(Module, MoveKeepsPointers) {
  Module m = add_module();
  const Location* loc = m.funcs[0].entry().ops[0].loc;
  const Type* t = m.funcs[0].arg_types[0];
  Module moved = std::move(m);
  EXPECT_EQ(moved.funcs[0].entry().ops[0].loc, loc);
  EXPECT_EQ(loc->line, 42);
  EXPECT_EQ(moved.types().tensor(ElementType::kF32, {4}), t);
}

}  // namespace
}  // namespace jaxmlx::ir
