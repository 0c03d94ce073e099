#include "runtime/device_scalars.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "mlx/mlx.h"
#include "mlx/primitives.h"
#include "runtime/constant_inputs.h"

namespace mx = mlx::core;

namespace jaxmlx::runtime {
namespace {

bool same_bits(const mx::array& a, const mx::array& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.data<char>(), b.data<char>(), a.nbytes()) == 0;
}

TEST(DeviceScalarsTest, CopiesViewABufferLargerThanThePool) {
  for (const mx::array& a : {mx::array(-0.0f), mx::array(true), mx::array(int64_t{-7}),
                             mx::array({1.5f, 2.5f}), mx::array(mx::complex64_t{1, -2})}) {
    mx::array s = a;
    mx::eval(s);
    ASSERT_TRUE(in_small_buffer(s));
    mx::array c = device_copy(s);
    EXPECT_TRUE(c.is_available());
    EXPECT_FALSE(c.has_primitive());
    EXPECT_GT(c.buffer_size(), 8u);
    EXPECT_FALSE(in_small_buffer(c));
    EXPECT_TRUE(same_bits(c, s));
  }
}

TEST(DeviceScalarsTest, WhatIsNoPoolValueIsNotOne) {
  mx::array big = mx::zeros({3}, mx::float32);  // 12 bytes
  mx::array column = mx::slice(mx::arange(8, mx::float32), {0}, {1});  // a view of 32 bytes
  mx::array pending = mx::add(mx::array(1.0f), mx::array(2.0f));
  mx::eval(big, column);
  EXPECT_FALSE(in_small_buffer(big));
  EXPECT_FALSE(in_small_buffer(column));
  EXPECT_FALSE(in_small_buffer(pending));
}

TEST(DeviceScalarsTest, ConstantInputsOfAtMost8BytesAreCopies) {
  mx::array wide = mx::array({1.0f, 2.0f, 3.0f});
  std::vector<mx::array> constants = {mx::array(0.5f), mx::broadcast_to(mx::array(2.0f), {2, 3}),
                                      wide};
  ConstantInputs in(constants, /*compact=*/true, /*device=*/true);
  ASSERT_EQ(in.inputs().size(), 3u);
  EXPECT_GT(in.input(0).buffer_size(), 8u);
  EXPECT_GT(in.input(1).buffer_size(), 8u);  // the splat's element
  EXPECT_EQ(in.input(2).id(), wide.id());   // 12 bytes: as it is
  EXPECT_EQ(in.input(0).item<float>(), 0.5f);
  EXPECT_TRUE(mx::array_equal(in.expand(1, in.input(1)), constants[1]).item<bool>());
}

TEST(DeviceScalarsTest, TheGraphReadsItsScalarsThroughViewsOfCopies) {
  mx::array x = mx::arange(6, mx::float32);
  mx::eval(x);
  mx::array two = mx::array(2.0f), other_two = mx::array(2.0f), three = mx::array(3.0f);
  // x * 2 + 2 * 3 (each scalar read broadcast), a sum, and a multi-output primitive.
  std::vector<mx::array> parts = mx::split(mx::add(mx::multiply(x, two), mx::multiply(other_two,
                                                                                     three)), 2);
  std::vector<mx::array> outputs = {parts[0], mx::sum(parts[1])};
  std::vector<mx::array> want = {mx::array({6.0f, 8.0f, 10.0f}), mx::array(42.0f)};
  EXPECT_EQ(place_scalars_on_device(outputs), 3);
  // Every rank-0 array the graph reads is made by a reshape of a [1] copy (2.0 once).
  std::vector<mx::array> stack = outputs;
  std::vector<std::uintptr_t> copies;
  while (!stack.empty()) {
    mx::array a = stack.back();
    stack.pop_back();
    if (!a.has_primitive()) continue;
    for (const mx::array& in : a.inputs()) {
      if (in.ndim() == 0 && !in.has_primitive()) ADD_FAILURE() << "a scalar leaf left";
      if (in.ndim() == 0 && in.has_primitive() &&
          std::string(in.primitive().name()) == "Reshape") {
        const mx::array& copy = in.inputs().at(0);
        EXPECT_EQ(copy.shape(), mx::Shape{1});
        EXPECT_GT(copy.buffer_size(), 8u);
        if (std::find(copies.begin(), copies.end(), copy.id()) == copies.end())
          copies.push_back(copy.id());
        continue;
      }
      stack.push_back(in);
    }
  }
  EXPECT_EQ(copies.size(), 2u);  // 2.0 and 3.0
  mx::eval(outputs);
  EXPECT_TRUE(mx::array_equal(outputs[0], want[0]).item<bool>());
  EXPECT_TRUE(mx::array_equal(outputs[1], want[1]).item<bool>());
}

}  // namespace
}  // namespace jaxmlx::runtime
