// GPU fusion (gpu_fusion.h) run on MLX's CPU, which builds the same Compiled primitive with the
// host compiler: each graph is evaluated as built and again after fuse_gpu_elementwise rewrote
// a copy of it; the two must agree bit for bit, and the rewritten graph must hold the expected
// Compiled nodes. The contraction this fusion avoids happens only in GPU compilers (x86-64's
// baseline has no FMA): here the tests check which ops share a kernel, under both arithmetics
// (kSplit: MLX's functors, as on Metal; kRounded: ours, as on CUDA, whose kernel source the host
// compiler builds here in its C++ form).
#include "runtime/gpu_fusion.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "mlx/compile.h"
#include "mlx/mlx.h"
#include "mlx/primitives.h"
#include "runtime/elementwise_chains.h"
#include "runtime/fusion_test_util.h"
#include "runtime/graph_stats.h"

namespace mx = mlx::core;

namespace jaxmlx::runtime {
namespace {

using testing::normal;
using testing::same_bits;

using Case = testing::FusionCase;

// Fused on MLX's CPU; the census counts every Compiled* primitive as "Compiled". Every result
// must keep the unfused bits.
Case run(const std::function<std::vector<mx::array>()>& build,
         FusedArithmetic arithmetic = FusedArithmetic::kSplit) {
  Case c = testing::fuse_and_eval(build, [&](std::vector<mx::array>& out) {
    return fuse_gpu_elementwise(out, mx::Device::cpu, arithmetic);
  });
  std::map<std::string, int> census;
  for (const auto& [name, n] : c.census) census[name.rfind("Compiled", 0) == 0 ? "Compiled" : name] += n;
  c.census = std::move(census);
  for (size_t i = 0; i < c.plain.size(); ++i)
    EXPECT_TRUE(same_bits(c.plain[i], c.fused[i])) << "result " << i;
  return c;
}

using GpuFusion = testing::OnCpu;

TEST_F(GpuFusion, AProductFeedingASumStaysApart) {
  // a*b + c in one GPU kernel is one FMA (one rounding instead of two): never fused.
  mx::array a = normal({4, 9}, 1), b = normal({4, 9}, 2), d = normal({4, 9}, 3);
  Case c = run([&] { return std::vector<mx::array>{mx::add(mx::multiply(a, b), d)}; });
  EXPECT_EQ(c.chains, 0);
  EXPECT_EQ(c.census["Multiply"], 1);
  EXPECT_EQ(c.census["Add"], 1);
  // Nor through a negation, nor a square or an exp (whose device code may end in a multiply);
  // the negation and the subtraction reading it from memory may share one.
  Case n = run([&] {
    return std::vector<mx::array>{mx::subtract(d, mx::negative(mx::multiply(a, b))),
                                  mx::add(mx::square(a), d), mx::add(mx::exp(a), d)};
  });
  EXPECT_EQ(n.chains, 1);
  for (const char* kept : {"Multiply", "Square", "Exp"}) EXPECT_EQ(n.census[kept], 1) << kept;
  EXPECT_EQ(n.census["Add"], 2);
}

TEST_F(GpuFusion, SumsFeedingProductsShareAKernel) {
  // (a + b) * c, then max(., 0) and a comparison: one kernel.
  mx::array a = normal({5, 7}, 4), b = normal({5, 7}, 5), d = normal({5, 7}, 6);
  Case c = run([&] {
    mx::array h = mx::maximum(mx::multiply(mx::add(a, b), d), mx::array(0.0f));
    return std::vector<mx::array>{mx::where(mx::greater(h, mx::array(1.0f)), h, a)};
  });
  EXPECT_EQ(c.chains, 1);
  EXPECT_EQ(c.census["Compiled"], 1);
  for (const char* gone : {"Add", "Multiply", "Maximum", "Greater", "Select", "Broadcast"})
    EXPECT_EQ(c.census.count(gone), 0u) << gone;
}

// An adam step's update of p, m and v (results p2, m2, v2), fused under `arithmetic`.
Case adam_update(FusedArithmetic arithmetic) {
  mx::array p = normal({7, 33}, 7), g = normal({7, 33}, 8), m = normal({7, 33}, 9);
  mx::array v = mx::abs(normal({7, 33}, 10));
  mx::eval(v);
  Case c = run([&] {
    mx::array b1(0.9f), c1(0.1f), b2(0.999f), c2(0.001f), eps(1e-8f);
    mx::array m2 = mx::add(mx::multiply(b1, m), mx::multiply(c1, g));
    mx::array v2 = mx::add(mx::multiply(b2, v), mx::multiply(c2, mx::square(g)));
    mx::array p2 = mx::subtract(p, mx::divide(m2, mx::add(mx::sqrt(v2), eps)));
    return std::vector<mx::array>{p2, m2, v2};
  }, arithmetic);
  return c;
}

TEST_F(GpuFusion, AdamUpdateKeepsItsProductsApart) {
  Case c = adam_update(FusedArithmetic::kSplit);
  // The sums and the division (m2, v2 and p2 as three results) are one kernel; the four
  // products feed sums and stay out; c2 * square(g) is a product of a product: one more kernel.
  EXPECT_EQ(c.census["Compiled"], 2);
  EXPECT_EQ(c.census["Multiply"], 3);
  // Broadcast scalars are read through strides by the kernels (eps by the sums'); the three
  // lone products keep theirs (one op is not worth a kernel build).
  EXPECT_EQ(c.census["Broadcast"], 3);
  for (const char* gone : {"Add", "Subtract", "Divide", "Sqrt", "Square"})
    EXPECT_EQ(c.census.count(gone), 0u) << gone;
}

TEST_F(GpuFusion, IntegerAndBoolChainsFuseWhole) {
  // jax.random's bits to floats: shifts, ors, compares, selects, conversions.
  mx::array k({0x13198A2Eu, 7u, 0xFFFFFFFFu, 0u, 12345u, 99u}, {2, 3});
  Case c = run([&] {
    mx::array x = mx::bitwise_xor(mx::left_shift(k, mx::array(13u)), mx::right_shift(k, mx::array(19u)));
    mx::array f = mx::astype(mx::right_shift(x, mx::array(9u)), mx::float32);
    mx::array keep = mx::logical_and(mx::greater(f, mx::array(100.0f)), mx::not_equal(x, k));
    return std::vector<mx::array>{mx::where(keep, f, mx::array(0.0f)), mx::astype(keep, mx::int32)};
  });
  // The conversion of `keep` (tape order: the last result) grows one kernel over everything
  // before it; the select then reads its results with one op left: not worth a kernel.
  EXPECT_EQ(c.census["Compiled"], 1);
  EXPECT_EQ(c.census["Select"], 1);
  for (const char* gone : {"LeftShift", "RightShift", "BitwiseXor", "AsType", "Greater"})
    EXPECT_EQ(c.census.count(gone), 0u) << gone;
}

TEST_F(GpuFusion, ChainsOfManyInputsAreCutToTheKernelsArgumentSlots) {
  // A sum of 40 inputs: 41 arrays in one chain, more than a kernel takes (24): cut in pieces,
  // each within the bound, with the same bits.
  std::vector<mx::array> xs;
  for (int i = 0; i < 40; ++i) xs.push_back(normal({3, 4}, 100 + i));
  Case c = run([&] {
    mx::array s = xs[0];
    for (int i = 1; i < 40; ++i) s = mx::add(s, xs[i]);
    return std::vector<mx::array>{s};
  });
  EXPECT_GE(c.census["Compiled"], 2);
  EXPECT_LE(c.census["Compiled"], 4);
  EXPECT_EQ(c.census.count("Add"), 0u);
}

TEST_F(GpuFusion, ASumOverManyStepsIsCutAtMlxsDepthIntoOneKernelRepeated) {
  // A gradient summed over an unrolled loop's 33 steps: 33 adds in a row. Cut as MLX's own
  // fusion cuts (11 levels), it is one kernel of 11 adds three times (one NVRTC build on CUDA),
  // where the argument-slot bound alone made pieces of several lengths.
  std::vector<mx::array> xs;
  for (int i = 0; i < 34; ++i) xs.push_back(normal({3, 4}, 200 + i));
  auto build = [&] {
    mx::array s = xs[0];
    for (int i = 1; i < 34; ++i) s = mx::add(s, xs[i]);
    return std::vector<mx::array>{s};
  };
  Case c = testing::fuse_and_eval(build, [](std::vector<mx::array>& out) {
    return fuse_gpu_elementwise(out, mx::Device::cpu, FusedArithmetic::kSplit);
  });
  EXPECT_TRUE(same_bits(c.plain[0], c.fused[0]));
  std::map<std::string, int> kernels;
  for (const auto& [name, n] : c.census)
    if (name.rfind("Compiled", 0) == 0) kernels[name] += n;
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels.begin()->second, 3);
  EXPECT_EQ(c.census.count("Add"), 0u);
}

TEST_F(GpuFusion, TracedChainsThatDifferOnlyInWiringStayDistinct) {
  // Under mx::compile, the traced graph is simplified after our rewrite: arrays of equivalent
  // primitives over the same inputs (and not results of the function) are merged. MLX calls two
  // Compiled primitives equivalent when their ops match, whatever each op reads: (x - y) * x and
  // (x - y) * y became one, read twice by the concatenation.
  mx::array x = normal({6}, 11), y = normal({6}, 12);
  auto f = [](const std::vector<mx::array>& in) {
    std::vector<mx::array> out{mx::concatenate({mx::multiply(mx::subtract(in[0], in[1]), in[0]),
                                                mx::multiply(mx::subtract(in[0], in[1]), in[1])})};
    EXPECT_EQ(fuse_gpu_elementwise(out, mx::Device::cpu, FusedArithmetic::kSplit), 2);
    return out;
  };
  mx::set_compile_mode(mx::CompileMode::no_fuse);  // as graph replay traces
  std::vector<mx::array> out = mx::compile(f)({x, y});
  mx::set_compile_mode(mx::CompileMode::enabled);
  EXPECT_TRUE(same_bits(out[0], mx::concatenate({mx::multiply(mx::subtract(x, y), x),
                                                 mx::multiply(mx::subtract(x, y), y)})));
}

TEST_F(GpuFusion, OnlyTheGivenDevicesPrimitivesAreFused) {
  mx::array a = normal({4}, 13), b = normal({4}, 14);
  Case c = run([&] { return std::vector<mx::array>{mx::multiply(mx::add(a, b), b)}; });
  EXPECT_EQ(c.chains, 1);
  std::vector<mx::array> out{mx::multiply(mx::add(a, b), b)};
  EXPECT_EQ(fuse_gpu_elementwise(out), 0);  // the default device is the GPU: nothing here
}


TEST_F(GpuFusion, InputsWithMoreLeadingOnesAreReshapedForTheKernel) {
  // A bias's adam update: the gradient is a keepdims sum [1, n], reshaped to the bias's [n]; the
  // chain reads the sum itself (the reshape is a view it reads through), which has more dims
  // than the chain. MLX's kernel reads inputs broadcast trailing-aligned: it gets a reshape.
  mx::array x = normal({6, 9}, 15), b = normal({9}, 16);
  Case c = run([&] {
    mx::array g = mx::reshape(mx::sum(x, 0, true), {9});
    return std::vector<mx::array>{mx::subtract(b, mx::multiply(mx::array(0.1f), mx::sqrt(mx::abs(g))))};
  }, FusedArithmetic::kRounded);
  EXPECT_EQ(c.census["Compiled"], 1);
  for (const char* gone : {"Subtract", "Multiply", "Sqrt", "Abs"})
    EXPECT_EQ(c.census.count(gone), 0u) << gone;
  EXPECT_EQ(c.census["Sum"], 1);
}

TEST_F(GpuFusion, AChainReadThroughAnotherChainsInputReshapeClosesNoCycle) {
  // jax's log-sum-exp and its gradient, reduced to its wiring: `m` (the row max, made finite)
  // feeds a keepdims sum outside any chain; the gradient's chain reads that sum through the
  // reshape the kernel gets (one more leading dim) and its `abs` is read by `log(.) + m`. Fusing
  // `m` into that last chain too would make it read its own result through the sum: the walk
  // that refuses such a chain must pass through the reshape the first fusion made.
  // (kRounded: the sum `log(.) + m` may share a kernel with both its operands, as on CUDA.)
  mx::array x = normal({5, 7}, 21), w = normal({3, 5, 7}, 22);
  Case c = run([&] {
    mx::array m = mx::multiply(mx::add(x, mx::array(1.0f)), mx::array(2.0f));
    mx::array s = mx::sum(mx::multiply(mx::broadcast_to(m, {3, 5, 7}), w), 0, true);
    mx::array a = mx::abs(mx::reshape(s, {5, 7}));
    mx::array grad = mx::divide(mx::array(1.0f), mx::add(a, mx::array(1.0f)));
    return std::vector<mx::array>{mx::add(mx::log(a), m), grad};
  }, FusedArithmetic::kRounded);
  // `m`, the gradient, and `log(.) + m` reading `m` from memory.
  EXPECT_EQ(c.census["Compiled"], 3);
  for (const char* gone : {"Add", "Log", "Abs", "Divide"}) EXPECT_EQ(c.census.count(gone), 0u) << gone;
  EXPECT_EQ(c.census["Sum"], 1);
}

TEST_F(GpuFusion, ACycleIsFoundAtAnyDepth) {
  // What fuse_elementwise_chains checks its result with (and throws on): a graph that reads its
  // own result, found by an iterative walk however deep the graph.
  mx::array x = normal({3}, 23);
  mx::array first = mx::add(x, mx::array(1.0f));
  mx::array last = first;
  for (int i = 0; i < 100000; ++i) last = mx::multiply(last, mx::array(1.0f));
  EXPECT_TRUE(graph_is_acyclic({last}));
  first.inputs()[0] = last;  // `first` now reads the end of the chain it starts
  EXPECT_FALSE(graph_is_acyclic({last}));
  first.inputs()[0] = x;  // undone: the arrays can be freed
  EXPECT_TRUE(graph_is_acyclic({last, first}));
}

// kRounded: the rounded functors let products and sums share a kernel.

// The library names of the Compiled primitives kRounded fusion makes of the graph.
std::vector<std::string> library_names(const std::function<std::vector<mx::array>()>& build) {
  std::vector<mx::array> outputs = build();
  fuse_gpu_elementwise(outputs, mx::Device::cpu, FusedArithmetic::kRounded);
  std::vector<std::string> names;
  std::vector<mx::array> todo = outputs;
  std::set<std::uintptr_t> seen;
  while (!todo.empty()) {
    mx::array a = todo.back();
    todo.pop_back();
    if (!a.has_primitive() || !seen.insert(a.id()).second) continue;
    if (const auto* c = dynamic_cast<const mx::Compiled*>(&a.primitive())) names.push_back(c->lib_name());
    for (const mx::array& in : a.inputs()) todo.push_back(in);
  }
  return names;
}

TEST_F(GpuFusion, RoundedProductsAndSumsShareAKernel) {
  mx::array a = normal({4, 9}, 1), b = normal({4, 9}, 2), d = normal({4, 9}, 3);
  auto build = [&] {
    mx::array ab = mx::multiply(a, b);
    return std::vector<mx::array>{mx::subtract(mx::add(ab, d), mx::negative(mx::square(ab)))};
  };
  Case c = run(build, FusedArithmetic::kRounded);
  EXPECT_EQ(c.census["Compiled"], 1);
  for (const char* gone : {"Multiply", "Add", "Subtract", "Negative", "Square"})
    EXPECT_EQ(c.census.count(gone), 0u) << gone;
  // Every name MLX prints or counts is an identifier; the kernel's definitions come first.
  for (const auto& [name, n] : c.census)
    EXPECT_EQ(name.find_first_of(" ;{}"), std::string::npos) << name;
  std::vector<std::string> libs = library_names(build);
  ASSERT_EQ(libs.size(), 1u);
  EXPECT_EQ(libs[0].find_first_of(" ;{}"), std::string::npos) << libs[0];
  EXPECT_LT(libs[0].find("JaxmlxRn1Defs"), libs[0].find("JaxmlxRn1Multiply")) << libs[0];
}

TEST_F(GpuFusion, RoundedAdamUpdateIsOneKernel) {
  Case c = adam_update(FusedArithmetic::kRounded);
  EXPECT_EQ(c.census["Compiled"], 1);
  for (const char* gone : {"Add", "Subtract", "Multiply", "Divide", "Sqrt", "Square"})
    EXPECT_EQ(c.census.count(gone), 0u) << gone;
}

TEST_F(GpuFusion, RoundedKernelsKeepLibraryFunctionsApart) {
  // exp, tanh... are device library code that may end in a multiply or begin with an add of
  // their operand: one never reads another (nor through a negation) in one kernel. Rounded
  // products and sums feed them and read them freely.
  mx::array a = normal({3, 8}, 4), b = normal({3, 8}, 5), d = normal({3, 8}, 6);
  Case c = run([&] {
    return std::vector<mx::array>{mx::add(mx::exp(mx::tanh(mx::multiply(a, b))), d),
                                  mx::log(mx::negative(mx::exp(mx::add(a, d))))};
  }, FusedArithmetic::kRounded);
  // {a*b, tanh}, {exp, + d}; {a + d, exp}, {-, log}.
  EXPECT_EQ(c.census["Compiled"], 4);
  for (const char* gone : {"Exp", "Tanh", "Log", "Negative", "Multiply", "Add"})
    EXPECT_EQ(c.census.count(gone), 0u) << gone;
}

TEST_F(GpuFusion, RoundedKernelsTakeAdamsBiasCorrections) {
  // 1 - b1 ** t and 1 - b2 ** t over a float step count: the conversion, both powers and both
  // subtracts are two kernels, not five (pow is library code; the rounded subtracts read it):
  // each result's chain, one of them also converting the count.
  mx::array t({3}, {1}), b1({0.9f}, {1}), b2({0.999f}, {1});
  Case c = run([&] {
    mx::array tf = mx::astype(t, mx::float32);
    return std::vector<mx::array>{mx::subtract(mx::array(1.0f), mx::power(b1, tf)),
                                  mx::subtract(mx::array(1.0f), mx::power(b2, tf))};
  }, FusedArithmetic::kRounded);
  EXPECT_EQ(c.census["Compiled"], 2);
  for (const char* gone : {"Power", "Subtract", "AsType"})
    EXPECT_EQ(c.census.count(gone), 0u) << gone;
}

// A layer norm's row statistics ([n, 1], each a small chain or one op after a row sum) are
// computed again in the [n, d] kernels that read them broadcast: 2 kernels instead of 4. jax's
// layer norm subtracts the mean twice (for the variance, and to normalize).
mx::array layer_norm_rows(const mx::array& x, bool subtract_twice) {
  const mx::array d(static_cast<float>(x.shape(-1)));
  mx::array mean = mx::divide(mx::sum(x, -1, true), d);
  mx::array c = mx::subtract(x, mean);
  mx::array var = mx::divide(mx::sum(mx::square(c), -1, true), d);
  if (subtract_twice) c = mx::subtract(x, mean);
  return mx::multiply(c, mx::rsqrt(mx::add(var, mx::array(1e-5f))));
}

TEST_F(GpuFusion, RowStatisticsJoinTheKernelsReadingThemBroadcast) {
  mx::array x = normal({6, 40}, 7);
  for (bool twice : {false, true}) {
    Case c = run([&] { return std::vector<mx::array>{layer_norm_rows(x, twice)}; },
                 FusedArithmetic::kRounded);
    EXPECT_EQ(c.census["Compiled"], 2) << twice;
    EXPECT_EQ(c.census["Sum"], 2) << twice;
    for (const char* gone : {"Divide", "Rsqrt", "Add", "Subtract", "Square", "Multiply"})
      EXPECT_EQ(c.census.count(gone), 0u) << gone << twice;
  }
}

TEST_F(GpuFusion, ANegatedRowSumJoinsTheKernelReadingIt) {
  // A negation never shares a kernel with library code or a product it reads (it would fold
  // into an add reading it); a row sum is no such thing: it is read from memory either way.
  mx::array x = normal({6, 40}, 10), y = normal({6, 40}, 11);
  Case c = run([&] {
    return std::vector<mx::array>{mx::add(mx::multiply(y, y), mx::negative(mx::sum(x, -1, true)))};
  }, FusedArithmetic::kRounded);
  EXPECT_EQ(c.census["Compiled"], 1);
  EXPECT_EQ(c.census.count("Negative"), 0u);
}

TEST_F(GpuFusion, ARowStatisticReadElsewhereIsNotRecomputed) {
  // The mean is a result too: it is computed once, at its own shape, and read broadcast.
  mx::array x = normal({6, 40}, 8);
  Case c = run([&] {
    mx::array mean = mx::divide(mx::sum(x, -1, true), mx::array(40.0f));
    return std::vector<mx::array>{mx::square(mx::subtract(x, mean)), mean};
  }, FusedArithmetic::kRounded);
  EXPECT_EQ(c.census["Divide"], 1);
  EXPECT_EQ(c.census["Compiled"], 1);
  // A statistic read by something other than an elementwise op (a reduction) stays too.
  Case r = run([&] {
    mx::array mean = mx::divide(mx::sum(x, -1, true), mx::array(40.0f));
    return std::vector<mx::array>{mx::sum(mx::broadcast_to(mean, x.shape()), 0)};
  }, FusedArithmetic::kRounded);
  EXPECT_EQ(r.census["Divide"], 1);
}

TEST_F(GpuFusion, RoundedKernelsOverIntegerInputsAndIntegerOnlyChains) {
  // The definitions element reads the kernel's first input, whatever its dtype; a chain with no
  // f32 arithmetic has none.
  mx::array k({3u, 7u, 0xFFFFFFFFu, 0u, 12345u, 99u}, {2, 3});
  mx::array i({-4, 9, 0, 1, 2147483647, -2147483647 - 1}, {2, 3});
  auto build = [&] {
    mx::array f = mx::astype(mx::right_shift(k, mx::array(9u)), mx::float32);
    mx::array h = mx::add(mx::multiply(f, mx::astype(i, mx::float32)), mx::array(0.5f));
    mx::array bits = mx::bitwise_xor(mx::left_shift(k, mx::array(13u)), mx::right_shift(k, mx::array(19u)));
    return std::vector<mx::array>{h, mx::bitwise_or(bits, mx::array(1u))};
  };
  Case c = run(build, FusedArithmetic::kRounded);
  EXPECT_EQ(c.census["Compiled"], 2);
  int defined = 0;
  for (const std::string& lib : library_names(build)) defined += lib.find("JaxmlxRn1Defs") != std::string::npos;
  EXPECT_EQ(defined, 1);
}

}  // namespace
}  // namespace jaxmlx::runtime
