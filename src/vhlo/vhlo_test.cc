#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "vhlo/ops.h"
#include "vhlo/read.h"
#include "vhlo/version.h"

namespace jaxmlx::vhlo {
namespace {

namespace fs = std::filesystem;

fs::path testdata() {
  const char* env = std::getenv("JAXMLX_TESTDATA");
  return env ? fs::path(env) : fs::path("../shared/testdata");
}

std::shared_ptr<std::vector<uint8_t>> load(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::make_shared<std::vector<uint8_t>>(std::istreambuf_iterator<char>(in),
                                                std::istreambuf_iterator<char>());
}

// The first op of func @name's body.
const ir::Op& first_op(const ir::Module& m, std::string_view name) {
  const ir::Func* f = m.find_func(name);
  EXPECT_NE(f, nullptr) << name;
  return f->entry().ops.front();
}

class VhloFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::is_directory(testdata() / "vhlo")) GTEST_SKIP() << "no testdata at " << testdata();
  }
};

TEST_F(VhloFiles, EveryVersionReadsAndVerifies) {
  int count = 0;
  for (const auto& e : fs::directory_iterator(testdata() / "vhlo")) {
    std::string name = e.path().filename().string();
    if (name == "invalid_vhlo_future.mlir.bc") continue;
    auto m = read_portable_artifact(load(e.path()));
    ASSERT_TRUE(m.ok()) << name << ": " << m.status().to_string();
    Status st = ir::verify(*m);
    EXPECT_TRUE(st.ok()) << name << ": " << st.to_string();
    EXPECT_GT(m->funcs.size(), name.rfind("stablehlo_legalize", 0) == 0 ? 100u : 0u) << name;
    ++count;
  }
  EXPECT_GE(count, 30);
}

TEST_F(VhloFiles, FutureVersionRefused) {
  auto m = read_portable_artifact(load(testdata() / "vhlo" / "invalid_vhlo_future.mlir.bc"));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().to_string(),
            "INVALID_ARGUMENT: portable artifact targets StableHLO 2.0.0; this plugin reads up "
            "to 1.20.0");
}

TEST_F(VhloFiles, AttributesMatchTheTextForm) {
  // Values as jaxlib prints them for stablehlo_legalize_to_vhlo.*.mlir.bc.
  for (const char* file : {"stablehlo_legalize_to_vhlo.1_16_0.mlir.bc",
                           "stablehlo_legalize_to_vhlo.1_20_0.mlir.bc"}) {
    auto m = read_portable_artifact(load(testdata() / "vhlo" / file));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    SCOPED_TRACE(file);

    const ir::Op& cmp = first_op(*m, "attr_comparison_direction_lt");
    EXPECT_EQ(cmp.kind, ir::OpKind::kCompare);
    EXPECT_EQ(cmp.get_enum("comparison_direction"), static_cast<int>(ir::ComparisonDirection::kLT));

    const ir::Op& dot = first_op(*m, "op_dot_general");
    const ir::DotDims* dd = dot.attr<ir::DotDims>("dot_dimension_numbers");
    ASSERT_NE(dd, nullptr);
    EXPECT_EQ(dd->lhs_batching_dimensions, std::vector<int64_t>{0});
    EXPECT_EQ(dd->lhs_contracting_dimensions, std::vector<int64_t>{2});
    EXPECT_EQ(dd->rhs_contracting_dimensions, std::vector<int64_t>{1});

    const ir::Op& gather = first_op(*m, "op_gather_with_batching_dims");
    const ir::GatherDims* g = gather.attr<ir::GatherDims>("dimension_numbers");
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->collapsed_slice_dims, (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(g->operand_batching_dims, std::vector<int64_t>{0});
    EXPECT_EQ(g->index_vector_dim, 2);
    EXPECT_EQ(gather.get_i64s("slice_sizes"), (std::vector<int64_t>{1, 1, 1, 1}));
    EXPECT_TRUE(gather.get_bool("indices_are_sorted"));

    const ir::Op& conv = first_op(*m, "op_convolution");
    const ir::ConvDims* cd = conv.attr<ir::ConvDims>("dimension_numbers");
    ASSERT_NE(cd, nullptr);
    EXPECT_EQ(cd->input_feature_dimension, 3);
    EXPECT_EQ(cd->kernel_input_feature_dimension, 2);
    EXPECT_EQ(conv.get_i64s("window_strides"), (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(conv.get_i64s("padding"), (std::vector<int64_t>{1, 1, 1, 1}));
    const ir::BoolArrayAttr* rev = conv.attr<ir::BoolArrayAttr>("window_reversal");
    ASSERT_NE(rev, nullptr);
    EXPECT_EQ(rev->values, (std::vector<bool>{true, true}));

    const ir::Op& fft = first_op(*m, "op_fft");
    EXPECT_EQ(fft.get_i64s("fft_length"), std::vector<int64_t>{16});
    EXPECT_EQ(fft.get_enum("fft_type"), static_cast<int>(ir::FftType::kFFT));
    EXPECT_EQ(ir::type_to_string(*fft.results[0].type), "tensor<16xcomplex<f32>>");

    // i1 constants, bit-packed since 1.16: [true, false x7], then a splat true.
    const ir::Func* bools = m->find_func("byte_packed_boolean");
    ASSERT_NE(bools, nullptr);
    const ir::DenseElementsAttr* c0 = bools->entry().ops[0].attr<ir::DenseElementsAttr>("value");
    ASSERT_NE(c0, nullptr);
    ASSERT_EQ(c0->data.size(), 8u);
    EXPECT_EQ(c0->int_at(0), 1);
    EXPECT_EQ(c0->int_at(1), 0);
    const ir::DenseElementsAttr* c1 = bools->entry().ops[1].attr<ir::DenseElementsAttr>("value");
    ASSERT_NE(c1, nullptr);
    EXPECT_TRUE(c1->splat);
    EXPECT_EQ(c1->data.size(), 1u);
    EXPECT_EQ(c1->data[0], 1);  // 0xFF normalized (PITFALLS 2.4)
  }
}

TEST_F(VhloFiles, JaxProgramWithLocations) {
  auto m = read_portable_artifact(load(testdata() / "jax-0.11.2" / "mlp_current.mlirbc"));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->name, "jit_f");
  EXPECT_EQ(m->version[0], 1);
  EXPECT_EQ(m->version[1], 20);
  const ir::Func* f = m->find_func("main");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->visibility, ir::Visibility::kPublic);
  ASSERT_EQ(f->result_attrs.size(), 2u);
  const ir::Op& dot = f->entry().ops[0];
  EXPECT_EQ(dot.kind, ir::OpKind::kDotGeneral);
  EXPECT_EQ(dot.loc->file, "-");
  EXPECT_EQ(dot.loc->line, 3);
  EXPECT_EQ(f->entry().ops.back().kind, ir::OpKind::kFuncReturn);
  const ir::Op& reduce = f->entry().ops[4];
  ASSERT_EQ(reduce.kind, ir::OpKind::kReduce);
  EXPECT_EQ(reduce.regions[0].entry().ops.back().kind, ir::OpKind::kReturn);
}

TEST(VhloTable, CoversEveryOpKindOnce) {
  std::vector<int> seen(ir::kNumOpKinds, 0);
  for (const VhloOpInfo& op : all_vhlo_ops()) seen[static_cast<int>(op.kind)]++;
  for (int i = 0; i < ir::kNumOpKinds; ++i) {
    auto k = static_cast<ir::OpKind>(i);
    if (k == ir::OpKind::kGeneric || k == ir::OpKind::kFuncReturn) continue;
    EXPECT_GE(seen[i], 1) << ir::op_kind_name(k) << " has no VHLO op";
  }
  const VhloOpInfo* dg = find_vhlo_op("dot_general_v2");
  ASSERT_NE(dg, nullptr);
  EXPECT_EQ(dg->attrs.front(), "lhs_batching_dimensions");
  EXPECT_EQ(dg->sorted_attrs.front(), "accumulation_type");
  EXPECT_EQ(find_vhlo_op("nope_v1"), nullptr);
}

TEST(VhloHeader, RejectsGarbage) {
  auto bytes = std::make_shared<std::vector<uint8_t>>(std::vector<uint8_t>{'M', 'L', 0xEF, 'R',
                                                                           0x0D, 'x', 0});
  auto m = read_portable_artifact(bytes);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().to_string(),
            "INVALID_ARGUMENT: not a StableHLO portable artifact (producer \"x\")");
  auto empty = read_portable_artifact(std::make_shared<std::vector<uint8_t>>());
  EXPECT_FALSE(empty.ok());
}

}  // namespace
}  // namespace jaxmlx::vhlo
