// exact_fma (fma.h): on MLX's CPU one Fma primitive computing std::fmaf, read through any
// strides; on GPUs emulated_fma, checked here against std::fmaf on the CPU where it claims to be
// exact (the Python tests run on the CPU, so they no longer reach the emulation).
#include "lower/fma.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "mlx/mlx.h"
#include "mlx/primitives.h"

namespace jaxmlx::lower {
namespace {

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// Operands spread over a wide exponent range, and the special values.
std::vector<float> operands(int n, int seed, int min_exp, int max_exp) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> ex(min_exp, max_exp), sign(0, 1);
  std::vector<float> v;
  for (int i = 0; i < n; ++i) v.push_back((sign(rng) ? -1.0f : 1.0f) * std::ldexp(mant(rng), ex(rng)));
  return v;
}

std::vector<float> values(const mx::array& a) {
  mx::array c = mx::contiguous(a);
  mx::eval(c);
  return std::vector<float>(c.data<float>(), c.data<float>() + c.size());
}

class Fma : public ::testing::Test {
 protected:
  void SetUp() override { mx::set_default_device(mx::Device::cpu); }
};

TEST_F(Fma, OnTheCpuItIsOnePrimitiveThatRoundsOnce) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float big = std::numeric_limits<float>::max(), tiny = std::numeric_limits<float>::denorm_min();
  std::vector<float> a = operands(4096, 1, -70, 70), b = operands(4096, 2, -70, 70),
                     c = operands(4096, 3, -140, 140);
  const std::vector<float> special{0.0f, -0.0f, inf, -inf, nan, big, -big, tiny, -tiny, 1.0f};
  for (float x : special)
    for (float y : special)
      for (float z : special) a.push_back(x), b.push_back(y), c.push_back(z);
  const int n = static_cast<int>(a.size());
  mx::array r = exact_fma(mx::array(a.data(), {n}), mx::array(b.data(), {n}), mx::array(c.data(), {n}));
  EXPECT_EQ(std::string(r.primitive().name()), "Fma");
  std::vector<float> got = values(r);
  int wrong = 0;
  for (int i = 0; i < n; ++i)
    wrong += !(bits(got[i]) == bits(std::fmaf(a[i], b[i], c[i])) ||
               (std::isnan(got[i]) && std::isnan(std::fmaf(a[i], b[i], c[i]))));
  EXPECT_EQ(wrong, 0);
}

TEST_F(Fma, OperandsAreReadThroughTheirStrides) {
  // A broadcast coefficient, a transposed operand and a sliced one, as polynomials and batch
  // norms pass them.
  mx::array x = mx::array(operands(12, 4, -3, 3).data(), {3, 4});
  mx::array coef = mx::broadcast_to(mx::array(1.2345678f), {4, 3});
  mx::array xt = mx::transpose(x);  // [4, 3], strides (1, 4)
  mx::array wide = mx::array(operands(40, 5, -3, 3).data(), {4, 10});
  mx::array cols = mx::slice(wide, {0, 2}, {4, 8}, {1, 2});  // [4, 3], strides (10, 2)
  mx::eval(coef, xt, cols);
  std::vector<float> got = values(exact_fma(xt, coef, cols));
  std::vector<float> xs = values(xt), cs = values(cols);
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(bits(got[i]), bits(std::fmaf(xs[i], 1.2345678f, cs[i]))) << i;
}

TEST_F(Fma, TheGpuEmulationIsExactWhereItSaysSo) {
  // fma.h: exact whenever a*b's rounding error is a normal float or zero (|a*b| >= 2^-102 or a
  // product of few significant bits) and a*b does not overflow on its own.
  std::vector<float> a = operands(20000, 6, -50, 50), b = operands(20000, 7, -50, 50),
                     c = operands(20000, 8, -110, 110);
  // Cancellation: c close to -a*b, where a sum's rounding decides everything.
  for (int i = 0; i < 5000; ++i) c[i] = -a[i] * b[i] * (1.0f + std::ldexp(float(i % 7 - 3), -20));
  const int n = static_cast<int>(a.size());
  std::vector<float> got = values(emulated_fma(mx::array(a.data(), {n}), mx::array(b.data(), {n}),
                                               mx::array(c.data(), {n})));
  int wrong = 0, checked = 0;
  for (int i = 0; i < n; ++i) {
    const double p = double(a[i]) * double(b[i]);
    if (std::fabs(p) < std::ldexp(1.0, -102) || std::fabs(p) > std::numeric_limits<float>::max())
      continue;
    ++checked;
    wrong += bits(got[i]) != bits(std::fmaf(a[i], b[i], c[i]));
  }
  EXPECT_GT(checked, 19000);
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace jaxmlx::lower
