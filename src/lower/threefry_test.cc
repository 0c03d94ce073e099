// threefry2x32 (rng.h): on MLX's CPU one Threefry2x32 primitive reading its operands through any
// strides; elsewhere threefry2x32_ops. Both against the scalar reference (passes/threefry.h,
// itself checked against Random123's known answers in passes_test).
#include "lower/rng.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "mlx/mlx.h"
#include "mlx/primitives.h"
#include "passes/threefry.h"

namespace jaxmlx::lower {
namespace {

namespace mx = mlx::core;

std::vector<uint32_t> values(const mx::array& a) {
  mx::array c = mx::contiguous(a);
  mx::eval(c);
  return {c.data<uint32_t>(), c.data<uint32_t>() + c.size()};
}

mx::array random_u32(const mx::Shape& shape, int seed) {
  std::mt19937 rng(seed);
  size_t n = 1;
  for (int d : shape) n *= static_cast<size_t>(d);
  std::vector<uint32_t> v(n);
  for (uint32_t& x : v) x = static_cast<uint32_t>(rng());
  return mx::array(v.data(), shape, mx::uint32);
}

// Each output element against the reference, with every operand broadcast to the result first.
void expect_reference(const std::array<mx::array, 2>& y, const mx::array& x0, const mx::array& x1,
                      const mx::array& k0, const mx::array& k1) {
  const mx::Shape& shape = y[0].shape();
  std::vector<uint32_t> a = values(mx::broadcast_to(x0, shape)),
                        b = values(mx::broadcast_to(x1, shape)),
                        c = values(mx::broadcast_to(k0, shape)),
                        d = values(mx::broadcast_to(k1, shape));
  std::vector<uint32_t> y0 = values(y[0]), y1 = values(y[1]);
  ASSERT_EQ(y0.size(), a.size());
  int wrong = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    uint32_t p = a[i], q = b[i];
    passes::threefry2x32_reference(c[i], d[i], p, q);
    wrong += (y0[i] != p) + (y1[i] != q);
  }
  EXPECT_EQ(wrong, 0);
}

// Both paths on the CPU: the primitive (threefry2x32) and the MLX ops.
void check(const mx::array& x0, const mx::array& x1, const mx::array& k0, const mx::array& k1) {
  std::array<mx::array, 2> y = threefry2x32(x0, x1, k0, k1);
  EXPECT_EQ(std::string(y[0].primitive().name()), "Threefry2x32");
  expect_reference(y, x0, x1, k0, k1);
  expect_reference(threefry2x32_ops(x0, x1, k0, k1), x0, x1, k0, k1);
}

class ThreefryTest : public ::testing::Test {
 protected:
  void SetUp() override { mx::set_default_device(mx::Device::cpu); }
};

TEST_F(ThreefryTest, OneKeyOverContiguousCounters) {
  // 1,037 pairs: not a multiple of any vector width.
  check(random_u32({1037}, 1), random_u32({1037}, 2), mx::array(0x13198a2eu, mx::uint32),
        random_u32({1}, 3));
}

TEST_F(ThreefryTest, KeysPerElement) {
  check(random_u32({5, 7}, 4), random_u32({5, 7}, 5), random_u32({5, 7}, 6),
        random_u32({5, 7}, 7));
  // One key word per element, the other one for all.
  check(random_u32({9}, 8), random_u32({9}, 9), random_u32({9}, 10), random_u32({}, 11));
}

TEST_F(ThreefryTest, StridedAndBroadcastCounters) {
  mx::array t = mx::transpose(random_u32({6, 11}, 12));  // column-major view, [11, 6]
  mx::array col = mx::broadcast_to(random_u32({11, 1}, 13), {11, 6});  // stride 0 along dim 1
  check(t, col, random_u32({}, 14), random_u32({}, 15));
  mx::array sliced = mx::slice(random_u32({40}, 16), {3}, {40}, {3});  // stride 3
  check(sliced, mx::zeros({13}, mx::uint32), random_u32({}, 17), random_u32({}, 18));
  check(mx::array(5u, mx::uint32), random_u32({4, 4}, 19), random_u32({}, 20),
        random_u32({}, 21));  // a scalar counter spread over the other's shape
}

TEST_F(ThreefryTest, KeyPairReadInPlace) {
  // One u32[2] key (passes/threefry.h's three-operand call): contiguous, and a strided view (a
  // column of a [2, 3] array).
  mx::array x0 = random_u32({4, 5}, 31), x1 = random_u32({4, 5}, 32);
  for (const mx::array& key : {random_u32({2}, 33),
                               mx::reshape(mx::slice(random_u32({2, 3}, 34), {0, 1}, {2, 2}), {2})}) {
    std::array<mx::array, 2> y = threefry2x32(x0, x1, key);
    EXPECT_EQ(std::string(y[0].primitive().name()), "Threefry2x32");
    mx::array k0 = mx::reshape(mx::slice(key, {0}, {1}), {});
    mx::array k1 = mx::reshape(mx::slice(key, {1}, {2}), {});
    expect_reference(y, x0, x1, k0, k1);
  }
}

TEST_F(ThreefryTest, DyingCountersLendTheirMemory) {
  // Counters computed in the same graph (nothing else holds them) become the result's buffers;
  // the values must not change for it.
  mx::array base = random_u32({4096}, 22);
  mx::array x0 = mx::add(base, mx::array(1u, mx::uint32));
  mx::array x1 = mx::bitwise_xor(base, mx::array(7u, mx::uint32));
  std::array<mx::array, 2> y = threefry2x32(x0, x1, random_u32({}, 23), random_u32({}, 24));
  std::vector<uint32_t> b = values(base), y0 = values(y[0]), y1 = values(y[1]);
  mx::array k0 = random_u32({}, 23), k1 = random_u32({}, 24);
  mx::eval({k0, k1});
  int wrong = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    uint32_t p = b[i] + 1, q = b[i] ^ 7u;
    passes::threefry2x32_reference(k0.item<uint32_t>(), k1.item<uint32_t>(), p, q);
    wrong += (y0[i] != p) + (y1[i] != q);
  }
  EXPECT_EQ(wrong, 0);
}

TEST_F(ThreefryTest, EmptyCounters) {
  std::array<mx::array, 2> y = threefry2x32(mx::zeros({0, 3}, mx::uint32),
                                            mx::zeros({0, 3}, mx::uint32), random_u32({}, 25),
                                            random_u32({}, 26));
  mx::eval({y[0], y[1]});
  EXPECT_EQ(y[0].shape(), (mx::Shape{0, 3}));
  EXPECT_EQ(y[1].size(), 0u);
}

TEST_F(ThreefryTest, OtherDevicesGetTheOps) {
  // Anything but four u32 operands (never built by our rules) takes the ops, which MLX checks.
  std::array<mx::array, 2> y = threefry2x32_ops(random_u32({3}, 27), random_u32({3}, 28),
                                                random_u32({}, 29), random_u32({}, 30));
  EXPECT_NE(std::string(y[0].primitive().name()), "Threefry2x32");
}

}  // namespace
}  // namespace jaxmlx::lower
