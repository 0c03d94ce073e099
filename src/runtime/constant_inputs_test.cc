#include "runtime/constant_inputs.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"
#include "mlx/mlx.h"

namespace mx = mlx::core;

namespace jaxmlx::runtime {
namespace {

TEST(ConstantInputsTest, EqualSmallValuesAreGivenOnce) {
  std::vector<mx::array> constants = {
      mx::array(0.0f), mx::array(0.9f), mx::array(0.0f),  // 0 and 2: one input
      mx::array(-0.0f),                                   // other bits than +0
      mx::array(0, mx::int32),                            // other dtype than 0.0f
      mx::array({0.0f}),                                  // other shape than 0.0f
      mx::array(0.9f),                                    // as 1
      mx::array({1.0f, 2.0f}), mx::array({1.0f, 2.0f}),   // 7 and 8: one input
  };
  ConstantInputs in(constants, /*compact=*/false);
  std::vector<size_t> index;
  for (size_t i = 0; i < constants.size(); ++i) index.push_back(in.input_index(i));
  EXPECT_EQ(index, (std::vector<size_t>{0, 1, 0, 2, 3, 4, 1, 5, 5}));
  ASSERT_EQ(in.inputs().size(), 6u);
  for (size_t i = 0; i < constants.size(); ++i) {
    EXPECT_TRUE(in.input(i).is_available());
    EXPECT_TRUE(mx::array_equal(in.expand(i, in.input(i)), constants[i]).item<bool>()) << i;
  }
  EXPECT_TRUE(std::signbit(in.input(3).item<float>()));
}

TEST(ConstantInputsTest, NaNsWithOtherPayloadsStayApart) {
  const float quiet = std::numeric_limits<float>::quiet_NaN();
  std::vector<mx::array> constants = {mx::array(quiet), mx::array(-quiet), mx::array(quiet)};
  ConstantInputs in(constants, /*compact=*/false);
  EXPECT_EQ(in.input_index(0), in.input_index(2));
  EXPECT_NE(in.input_index(0), in.input_index(1));
}

TEST(ConstantInputsTest, LargeOrStridedValuesAreTheirOwnInputs) {
  mx::array big = mx::zeros({ConstantInputs::kMaxSharedBytes / 4 + 1}, mx::float32);
  mx::array big_too = mx::zeros({ConstantInputs::kMaxSharedBytes / 4 + 1}, mx::float32);
  mx::array column = mx::transpose(mx::reshape(mx::arange(6, mx::float32), {2, 3}));
  mx::array column_too = mx::transpose(mx::reshape(mx::arange(6, mx::float32), {2, 3}));
  ConstantInputs in({big, big_too, column, column_too}, /*compact=*/false);
  EXPECT_EQ(in.inputs().size(), 4u);
}

TEST(ConstantInputsTest, CompactSplatsShareTheirElement) {
  // Two splats of one value to different shapes: one scalar input, each broadcast back.
  std::vector<mx::array> constants = {mx::broadcast_to(mx::array(1.5f), {2, 3}),
                                      mx::broadcast_to(mx::array(1.5f), {4}),
                                      mx::array(1.5f)};
  ConstantInputs in(constants, /*compact=*/true);
  EXPECT_EQ(in.inputs().size(), 1u);
  EXPECT_EQ(in.input(0).ndim(), 0);
  EXPECT_EQ(in.expand(0, in.input(0)).shape(), (mx::Shape{2, 3}));
  EXPECT_EQ(in.expand(1, in.input(1)).shape(), (mx::Shape{4}));
  EXPECT_EQ(in.expand(2, in.input(2)).shape(), (mx::Shape{}));
}

}  // namespace
}  // namespace jaxmlx::runtime
