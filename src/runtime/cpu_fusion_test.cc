// CPU fusion (cpu_fusion.h) on MLX graphs built directly: each graph is evaluated as built and
// again after fuse_cpu_elementwise rewrote a copy of it, and the two must agree bit for bit;
// the rewritten graph must hold the expected FusedElementwise nodes and nothing it replaced.
#include "runtime/cpu_fusion.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include "lower/fma.h"
#include "mlx/mlx.h"
#include "mlx/primitives.h"
#include "runtime/elementwise_chains.h"
#include "runtime/fused_elementwise.h"
#include "runtime/fusion_test_util.h"
#include "runtime/graph_stats.h"

namespace mx = mlx::core;

namespace jaxmlx::runtime {
namespace {

using testing::normal;
using testing::same_bits;

using Case = testing::FusionCase;

Case run(const std::function<std::vector<mx::array>()>& build) {
  return testing::fuse_and_eval(build, fuse_cpu_elementwise);
}

using CpuFusion = testing::OnCpu;

TEST_F(CpuFusion, AdamUpdateBecomesOneKernel) {
  mx::array p = normal({7, 33}, 1), g = normal({7, 33}, 2), m = normal({7, 33}, 3);
  mx::array v = mx::abs(normal({7, 33}, 4));
  mx::eval(v);
  auto build = [&] {
    // Scalars as jax's optax passes them (bias corrections are computed once, apart).
    mx::array b1(0.9f), c1(1.0f - 0.9f), b2(0.999f), c2(1.0f - 0.999f), lr(1e-3f), eps(1e-8f);
    mx::array m2 = mx::add(mx::multiply(b1, m), mx::multiply(c1, g));
    mx::array v2 = mx::add(mx::multiply(b2, v), mx::multiply(c2, mx::square(g)));
    mx::array p2 = mx::subtract(p, mx::divide(mx::multiply(lr, m2), mx::add(mx::sqrt(v2), eps)));
    return std::vector<mx::array>{p2, m2, v2};
  };
  Case c = run(build);
  for (size_t i = 0; i < c.plain.size(); ++i) EXPECT_TRUE(same_bits(c.plain[i], c.fused[i])) << i;
  // m2 and v2 are results of the graph and operands of p2: one primitive with three results.
  EXPECT_EQ(c.chains, 1);
  EXPECT_EQ(c.census["FusedElementwise"], 1);
  for (const char* gone : {"Add", "Multiply", "Subtract", "Divide", "Sqrt", "Square", "Broadcast"})
    EXPECT_EQ(c.census.count(gone), 0u) << gone;
  // With one result per chain (JAXMLX_CPU_FUSION_MULTI=0), m2 and v2 end chains: three.
  setenv("JAXMLX_CPU_FUSION_MULTI", "0", 1);
  Case single = run(build);
  unsetenv("JAXMLX_CPU_FUSION_MULTI");
  for (size_t i = 0; i < c.plain.size(); ++i) EXPECT_TRUE(same_bits(c.plain[i], single.fused[i])) << i;
  EXPECT_EQ(single.chains, 3);
  EXPECT_EQ(single.census["FusedElementwise"], 3);
}

TEST_F(CpuFusion, ThreefryRoundsBecomeOneKernelWithBothWords) {
  // jax's threefry2x32: every round reads both words, each read twice; one result per chain cut
  // it at every word. Here: both final words from one primitive.
  mx::array k0({0x13198A2Eu, 7u, 0xFFFFFFFFu, 0u}, {4}), k1({0x03707344u, 1u, 2u, 3u}, {4});
  auto build = [&] {
    mx::array x0 = k0, x1 = k1;
    for (uint32_t r : {13u, 15u, 26u, 6u, 17u, 29u, 16u, 24u}) {
      x0 = mx::add(x0, x1);
      x1 = mx::bitwise_xor(mx::bitwise_or(mx::left_shift(x1, mx::array(r)),
                                          mx::right_shift(x1, mx::array(32u - r))), x0);
    }
    return std::vector<mx::array>{x0, x1};
  };
  Case c = run(build);
  for (size_t i = 0; i < c.plain.size(); ++i) EXPECT_TRUE(same_bits(c.plain[i], c.fused[i])) << i;
  EXPECT_EQ(c.census["FusedElementwise"], 1) << c.chains;
  for (const char* gone : {"Add", "LeftShift", "RightShift", "BitwiseOr", "BitwiseXor"})
    EXPECT_EQ(c.census.count(gone), 0u) << gone;
}

TEST_F(CpuFusion, AResultReadByALaterResultComputesFirst) {
  // Graph results {x0, x1} with x1 reading x0: x0 joins x1's chain as a result and must be
  // computed before x1 reads it (the tape once put x1 first when both were listed).
  mx::array a = normal({3, 5}, 20), b = normal({3, 5}, 21), d = normal({3, 5}, 22);
  auto build = [&] {
    mx::array x0 = mx::add(a, b);
    mx::array x1 = mx::add(mx::multiply(x0, d), mx::array(1.0f));
    return std::vector<mx::array>{x0, x1};
  };
  Case c = run(build);
  for (size_t i = 0; i < c.plain.size(); ++i) EXPECT_TRUE(same_bits(c.plain[i], c.fused[i])) << i;
  EXPECT_EQ(c.census["FusedElementwise"], 1);
  EXPECT_EQ(c.census.count("Add"), 0u);
}

TEST_F(CpuFusion, ViewsOfSmallConstantsAreFolded) {
  // Exact f32 constants written as int bits viewed as f32 (lower/xla_cpu_log.cc): the view is
  // read as a constant, not run on every replay; a view of a computed array is fused.
  mx::array x = normal({4, 6}, 30);
  auto build = [&] {
    mx::array third = mx::view(mx::array(static_cast<int32_t>(0x3EAAAAABu), mx::int32), mx::float32);
    mx::array nan = mx::view(mx::array(static_cast<int32_t>(0x7FC00123u), mx::int32), mx::float32);
    mx::array y = mx::add(mx::multiply(x, third), mx::array(1.0f));
    return std::vector<mx::array>{mx::where(mx::greater(y, mx::array(2.0f)), nan, y),
                                  mx::view(mx::sqrt(mx::abs(x)), mx::int32)};
  };
  Case c = run(build);
  for (size_t i = 0; i < c.plain.size(); ++i) EXPECT_TRUE(same_bits(c.plain[i], c.fused[i])) << i;
  EXPECT_EQ(c.census.count("View_float32"), 0u);  // both constants folded
  EXPECT_EQ(c.census.count("View_int32"), 0u);    // the view of sqrt fused into its chain
  EXPECT_EQ(c.census["FusedElementwise"], 2);
}

TEST_F(CpuFusion, LongChainsKeepAFewScratchSlots) {
  // 600 instructions in one chain (over the old 256 cap; the chain's 300 broadcast scalars count
  // toward the 1024 members too), each value read once or twice: the
  // plan reuses scratch slots as values die; the result is the unfused one, bit for bit.
  mx::array x = normal({3, 300}, 31), y = normal({3, 300}, 32);
  auto build = [&] {
    mx::array a = x, b = y;
    for (int i = 0; i < 150; ++i) {
      mx::array t = mx::add(mx::multiply(a, mx::array(0.5f)), b);
      b = mx::subtract(a, mx::multiply(t, mx::array(0.25f)));
      a = t;
    }
    return std::vector<mx::array>{mx::add(a, b)};
  };
  Case c = run(build);
  EXPECT_TRUE(same_bits(c.plain[0], c.fused[0]));
  EXPECT_EQ(c.census["FusedElementwise"], 1);
}

TEST_F(CpuFusion, BroadcastAndTransposedOperandsAreReadThroughStrides) {
  mx::array x = normal({5, 6}, 5), row = normal({6}, 6), col = normal({5, 1}, 7);
  mx::array t = normal({6, 5}, 8);
  auto build = [&] {
    mx::array y = mx::multiply(mx::add(x, row), mx::subtract(col, mx::transpose(t)));
    return std::vector<mx::array>{mx::tanh(mx::exp(mx::negative(mx::abs(y))))};
  };
  Case c = run(build);
  EXPECT_TRUE(same_bits(c.plain[0], c.fused[0]));
  EXPECT_EQ(c.census["FusedElementwise"], 1);
  EXPECT_EQ(c.census.count("Broadcast"), 0u);
}

TEST_F(CpuFusion, SizeOneDimsOfStridedOperandsAreSteppedOver) {
  // Windows of a padded input (strided views, as a depthwise convolution's shifted inputs) times
  // per-feature taps, in an output with size-1 dims in the middle and last: same bits as unfused.
  mx::array xp = normal({2, 9, 10, 6}, 18), taps = normal({3, 6, 1}, 19);
  auto build = [&] {
    std::optional<mx::array> sum;
    for (int k = 0; k < 3; ++k) {
      mx::array window = mx::as_strided(xp, {2, 7, 1, 8, 6, 1}, {540, 60, 0, 6, 1, 0}, k * 66);
      mx::array term = mx::multiply(window, mx::slice(taps, {k, 0, 0}, {k + 1, 6, 1}));
      sum = sum ? mx::add(*sum, term) : term;
    }
    return std::vector<mx::array>{*sum};
  };
  Case c = run(build);
  EXPECT_TRUE(same_bits(c.plain[0], c.fused[0]));
  EXPECT_EQ(c.census["FusedElementwise"], 1);
}

TEST_F(CpuFusion, ChainsOfMostlyWindowsStayUnfused) {
  // A depthwise convolution's sum: each shifted window is gathered chunk by chunk when fused,
  // slower than MLX's separate kernels (cpu_fusion.cc, mostly_windows). Three windows fuse.
  mx::array xp = normal({2, 9, 10, 6}, 20), taps = normal({5, 6}, 21);
  auto build_sum = [&](int n) {
    return [&, n] {
      std::optional<mx::array> sum;
      for (int k = 0; k < n; ++k) {
        mx::array window = mx::as_strided(xp, {2, 7, 6, 6}, {540, 60, 6, 1}, k * 7);
        mx::array tap = mx::reshape(mx::slice(taps, {k, 0}, {k + 1, 6}), {6});
        mx::array term = mx::multiply(window, tap);
        sum = sum ? mx::add(*sum, term) : term;
      }
      return std::vector<mx::array>{mx::tanh(*sum)};
    };
  };
  Case five = run(build_sum(5));
  EXPECT_TRUE(same_bits(five.plain[0], five.fused[0]));
  EXPECT_EQ(five.census.count("FusedElementwise"), 0u);
  EXPECT_EQ(five.census["Multiply"], 5);
  Case three = run(build_sum(3));
  EXPECT_TRUE(same_bits(three.plain[0], three.fused[0]));
  EXPECT_EQ(three.census["FusedElementwise"], 1);
}

TEST_F(CpuFusion, ReshapesOfLeadingOnesAreReadThroughToo) {
  mx::array x = normal({2, 3, 8}, 13), b = normal({8}, 14), c = normal({1, 1, 8}, 15);
  mx::array m = normal({4, 8}, 16), y = normal({4, 5, 8}, 17);
  auto build = [&] {
    // jax's bias: [8] -> [1, 1, 8] -> [2, 3, 8]; and [1, 1, 8] -> [8] under a chain of [8].
    mx::array biased = mx::multiply(mx::add(x, mx::broadcast_to(mx::reshape(b, {1, 1, 8}), {2, 3, 8})),
                                    mx::array(2.0f));
    mx::array flat = mx::exp(mx::subtract(mx::reshape(c, {8}), b));
    // A size-1 dim in the middle moves the data against the trailing alignment: kept apart.
    mx::array mid = mx::add(y, mx::broadcast_to(mx::reshape(m, {4, 1, 8}), {4, 5, 8}));
    return std::vector<mx::array>{biased, flat, mx::negative(mid)};
  };
  Case c_ = run(build);
  for (size_t i = 0; i < c_.plain.size(); ++i)
    EXPECT_TRUE(same_bits(c_.plain[i], c_.fused[i])) << i;
  EXPECT_EQ(c_.census["FusedElementwise"], 3);
  EXPECT_EQ(c_.census["Reshape"], 1);  // the middle one
}

TEST_F(CpuFusion, EdgeValuesKeepTheirBits) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  mx::array x({0.0f, -0.0f, inf, -inf, nan, 1e-45f, -3.5f, 1e38f, 2.0f, -1e-40f}, {10});
  mx::array y({-0.0f, 0.0f, inf, 1.0f, 2.0f, nan, 0.0f, 1e38f, -inf, 3.0f}, {10});
  auto build = [&] {
    mx::array q = mx::divide(x, y);
    mx::array mx_ = mx::maximum(mx::minimum(q, x), mx::rsqrt(mx::abs(y)));
    mx::array sel = mx::where(mx::greater_equal(x, y), mx_, mx::log(mx::abs(q)));
    return std::vector<mx::array>{mx::add(sel, mx::sigmoid(x))};
  };
  Case c = run(build);
  EXPECT_TRUE(same_bits(c.plain[0], c.fused[0]));
  EXPECT_EQ(c.chains, 1);
}

TEST_F(CpuFusion, PowersJoinChainsWithTheirEdgeValues) {
  // Adam's bias corrections, 1 - b ** t with t an integer step count made a float: one kernel
  // with the conversion, the power and the subtract; pow's edge cases keep MLX's bits.
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  mx::array b({0.9f, 0.999f, -2.0f, -0.0f, 0.0f, inf, -inf, nan, 1.0f, -1.0f}, {10});
  mx::array t({1, 7, 3, -3, 0, -2, 5, 0, 100000, 2147483647}, {10});
  Case c = run([&] {
    return std::vector<mx::array>{
        mx::subtract(mx::array(1.0f), mx::power(b, mx::astype(t, mx::float32))),
        mx::power(mx::astype(t, mx::float32), mx::multiply(b, mx::array(0.5f)))};
  });
  for (size_t i = 0; i < c.plain.size(); ++i) EXPECT_TRUE(same_bits(c.plain[i], c.fused[i])) << i;
  EXPECT_EQ(c.chains, 2);
  EXPECT_EQ(c.census["FusedElementwise"], 2);
  EXPECT_EQ(c.census.count("Power"), 0u);
}

TEST_F(CpuFusion, IntegerAndBoolChainsWrapAndCompareExactly) {
  mx::array a({INT32_MAX, INT32_MIN, -7, 0, 5, 123456789}, {6});
  mx::array b({1, -1, 3, 0, -5, 987654321}, {6});
  mx::array u({0xFFFFFFFFu, 0u, 7u, 0x80000000u, 3u, 12345u}, {6});
  auto build = [&] {
    mx::array s = mx::multiply(mx::add(a, b), mx::subtract(a, b));  // wraps
    mx::array m = mx::maximum(s, mx::negative(b));
    mx::array keep = mx::logical_and(mx::less(a, b), mx::logical_not(mx::equal(s, m)));
    mx::array w = mx::add(mx::multiply(u, mx::array(2654435761u)), mx::astype(m, mx::uint32));
    mx::array f = mx::astype(mx::where(keep, m, mx::bitwise_xor(s, b)), mx::float32);
    return std::vector<mx::array>{f, mx::bitwise_and(w, mx::array(0xFFFFu)), keep};
  };
  Case c = run(build);
  for (size_t i = 0; i < c.plain.size(); ++i) EXPECT_TRUE(same_bits(c.plain[i], c.fused[i])) << i;
  EXPECT_GE(c.chains, 2);
}

TEST_F(CpuFusion, RandomBitsToFloatsFuseWholeShiftsViewsAndFulls) {
  // As jax.random builds uniform floats from threefry's bits: rotations (shifts and ors), the
  // mantissa trick (bits >> 9 | 1.0's exponent, viewed as a float), and our exact FMA's pieces
  // (views between float and int bits, bool compares, mx::zeros_like's Full).
  mx::array k({0x243F6A88u, 0x85A308D3u, 0x13198A2Eu, 0x03707344u, 0u, 0xFFFFFFFFu}, {6});
  mx::array x({1.5f, -0.0f, 3e-39f, -7.25f, 1e30f, 0.1f}, {6});
  auto build = [&] {
    mx::array r = mx::add(k, mx::array(0x9E3779B9u));
    r = mx::bitwise_xor(mx::bitwise_or(mx::left_shift(r, mx::array(13u)),
                                       mx::right_shift(r, mx::array(19u))), k);
    mx::array f = mx::view(mx::bitwise_or(mx::right_shift(r, mx::array(9u)),
                                          mx::array(0x3F800000u)), mx::float32);
    mx::array u = mx::subtract(f, mx::array(1.0f));
    mx::array bits = mx::view(x, mx::int32);
    mx::array neg = mx::less(bits, mx::zeros_like(bits));                         // Full
    mx::array same = mx::logical_or(mx::equal(neg, mx::less(x, mx::zeros_like(x))),  // bool ==
                                    mx::logical_not(mx::logical_and(neg, mx::isnan(x))));
    mx::array half = mx::right_shift(bits, mx::array(1));                         // arithmetic
    mx::array y = mx::where(same, mx::add(u, mx::view(half, mx::float32)), u);
    return std::vector<mx::array>{y, mx::view(mx::left_shift(half, mx::array(3)), mx::uint32)};
  };
  Case c = run(build);
  for (size_t i = 0; i < c.plain.size(); ++i) EXPECT_TRUE(same_bits(c.plain[i], c.fused[i])) << i;
  EXPECT_EQ(c.census["FusedElementwise"], 2);  // y's (u, half within), the second result's
  for (const char* gone : {"LeftShift", "RightShift", "BitwiseOr", "Full", "Equal", "Less"})
    EXPECT_EQ(c.census.count(gone), 0u) << gone;
}

TEST_F(CpuFusion, ShiftsByTheWidthOrMoreGiveXlasResult) {
  // MLX's kernels leave `x << 32` to C++ (undefined); our lowering never reads those lanes, and
  // the fused kernel gives XLA's answer there: zero, or the sign for an arithmetic right shift.
  mx::array a({-8, 8, -1, 12345, 7}, {5});
  mx::array n({32, 33, 40, -1, 31}, {5});
  mx::array un = mx::astype(n, mx::uint32), ua = mx::astype(a, mx::uint32);
  mx::eval(un, ua);
  // Per-element amounts, and one amount for all (the scalar-shift path) of the width.
  std::vector<mx::array> out{mx::add(mx::left_shift(a, n), mx::array(1)),
                             mx::add(mx::right_shift(a, n), mx::array(1)),
                             mx::add(mx::right_shift(ua, un), mx::array(1u)),
                             mx::add(mx::right_shift(a, mx::array(32)), mx::array(1))};
  EXPECT_EQ(fuse_cpu_elementwise(out), 4);
  mx::eval(out);
  auto ints = [](const mx::array& x) {
    std::vector<int64_t> v;
    for (size_t i = 0; i < x.size(); ++i)
      v.push_back(x.dtype() == mx::int32 ? int64_t{x.data<int32_t>()[i]}
                                         : int64_t{x.data<uint32_t>()[i]});
    return v;
  };
  EXPECT_EQ(ints(out[0]), (std::vector<int64_t>{1, 1, 1, 1, int64_t{INT32_MIN} + 1}));
  EXPECT_EQ(ints(out[1]), (std::vector<int64_t>{0, 1, 0, 1, 1}));
  EXPECT_EQ(ints(out[2]), (std::vector<int64_t>{1, 1, 1, 1, 1}));
  EXPECT_EQ(ints(out[3]), (std::vector<int64_t>{0, 1, 0, 1, 1}));
}

TEST_F(CpuFusion, ChainsThatFeedFusedChainsAreRewiredWhereTheFusedArrayReadsThem) {
  // A target may build more than one array per chain (elementwise_chains.h): here the fused
  // primitive reads an extra leading input and float inputs through views, and its result is a
  // view. A chain fused after one of its readers (adam: the update p2 is fused before m2 and v2,
  // which it reads) must be rewired at the slot the made arrays read it from, not at its index
  // among the chain's inputs (a crash or wrong values before).
  FusionTarget shifted;
  shifted.supports = &FusedProgram::supports;
  shifted.max_chain = 64;
  shifted.make =
      [](const mx::Stream& stream, std::shared_ptr<const FusedProgram> program,
         const std::vector<mx::array>& inputs, const mx::Shape& shape,
         const std::vector<mx::Dtype>& dtypes,
         const std::vector<mx::array>&) -> std::optional<std::vector<mx::array>> {
        const mx::Dtype dtype = dtypes.at(0);
        auto p = std::make_shared<FusedProgram>(*program);
        p->num_inputs += 1;  // a leading input the program never reads
        for (FusedInstr& ins : p->code)
          for (int& a : ins.args) ++a;
        for (int& o : p->outputs) ++o;
        std::vector<mx::array> ins{mx::array(0.0f)};
        for (const mx::array& in : inputs)
          ins.push_back(in.dtype() == mx::float32 ? mx::view(mx::view(in, mx::int32), mx::float32)
                                                  : in);
        mx::array out(shape, dtype, std::make_shared<FusedElementwise>(stream, p), ins);
        return std::vector<mx::array>{
            dtype == mx::float32 ? mx::view(mx::view(out, mx::uint32), mx::float32) : out};
      };
  mx::array p = mx::random::normal({6, 5}, mx::random::key(40));
  mx::array g = mx::random::normal({6, 5}, mx::random::key(41));
  mx::array m = mx::random::normal({6, 5}, mx::random::key(42));
  mx::array v = mx::abs(mx::random::normal({6, 5}, mx::random::key(43)));
  mx::eval(p, g, m, v);
  auto build = [&] {
    mx::array m2 = mx::add(mx::multiply(mx::array(0.9f), m), mx::multiply(mx::array(0.1f), g));
    mx::array v2 = mx::add(mx::multiply(mx::array(0.999f), v), mx::multiply(g, g));
    mx::array p2 = mx::subtract(p, mx::divide(m2, mx::add(mx::sqrt(v2), mx::array(1e-8f))));
    return std::vector<mx::array>{p2, m2, v2};
  };
  std::vector<mx::array> plain = build(), fused = build();
  EXPECT_EQ(fuse_elementwise_chains(fused, shifted), 3);
  mx::eval(plain);
  mx::eval(fused);
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_EQ(std::memcmp(plain[i].data<char>(), fused[i].data<char>(), plain[i].nbytes()), 0) << i;
}

TEST_F(CpuFusion, AnIntermediateReadElsewhereStaysAResult) {
  mx::array x = normal({4, 8}, 9);
  auto build = [&] {
    mx::array h = mx::multiply(mx::add(x, mx::array(1.0f)), x);  // read by the sum too
    mx::array s = mx::sum(h, 1, /*keepdims=*/true);
    return std::vector<mx::array>{mx::subtract(mx::exp(h), s)};
  };
  Case c = run(build);
  EXPECT_TRUE(same_bits(c.plain[0], c.fused[0]));
  EXPECT_EQ(c.census["FusedElementwise"], 2);
  EXPECT_EQ(c.census["Sum"], 1);
}

TEST_F(CpuFusion, ExactFmasJoinChains) {
  // A polynomial in Horner form with exact FMAs (lower/fma.h: the Fma primitive on the CPU), as
  // XLA:CPU's log and jax.random's erf_inv compute: one primitive, the same bits as std::fmaf.
  mx::array x = normal({5, 67}, 30);
  auto build = [&] {
    mx::array p = mx::broadcast_to(mx::array(0.0123f), x.shape());
    for (float c : {-0.25f, 0.3333333f, -0.5f, 1.0f})
      p = lower::exact_fma(p, x, mx::broadcast_to(mx::array(c), x.shape()));
    return std::vector<mx::array>{mx::multiply(p, x)};
  };
  Case c = run(build);
  EXPECT_TRUE(same_bits(c.plain[0], c.fused[0]));
  EXPECT_EQ(c.census["FusedElementwise"], 1);
  EXPECT_EQ(c.census.count("Fma"), 0u);
  EXPECT_EQ(primitive_counts(build())["Fma"], 4);
}

TEST_F(CpuFusion, LoneOpsAndOtherDtypesAreLeftAlone) {
  mx::array x = normal({3, 4}, 10), h = mx::astype(normal({3, 4}, 11), mx::float16);
  mx::eval(h);
  auto build = [&] {
    return std::vector<mx::array>{mx::add(x, x), mx::multiply(mx::add(h, h), h)};
  };
  Case c = run(build);
  EXPECT_EQ(c.chains, 0);
  EXPECT_EQ(c.census.count("FusedElementwise"), 0u);
  for (size_t i = 0; i < c.plain.size(); ++i) EXPECT_TRUE(same_bits(c.plain[i], c.fused[i])) << i;
}

TEST_F(CpuFusion, LargeAndEmptyArrays) {
  mx::array big = normal({3, 1000}, 12);  // several chunks, a partial last one
  mx::array empty = mx::zeros({0, 5}, mx::float32);
  mx::eval(empty);
  auto build = [&] {
    return std::vector<mx::array>{mx::sqrt(mx::add(mx::square(big), mx::array(1.0f))),
                                  mx::exp(mx::add(empty, mx::array(2.0f)))};
  };
  Case c = run(build);
  for (size_t i = 0; i < c.plain.size(); ++i) EXPECT_TRUE(same_bits(c.plain[i], c.fused[i])) << i;
  EXPECT_EQ(c.fused[1].size(), 0u);
}

TEST_F(CpuFusion, OffSwitch) {
  ::setenv("JAXMLX_CPU_FUSION", "0", 1);
  EXPECT_FALSE(cpu_fusion_enabled());
  ::unsetenv("JAXMLX_CPU_FUSION");
  EXPECT_TRUE(cpu_fusion_enabled());
}

}  // namespace
}  // namespace jaxmlx::runtime
