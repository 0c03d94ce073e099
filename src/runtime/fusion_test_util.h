// Helpers shared by the fusion tests (cpu_fusion_test.cc, gpu_fusion_test.cc): both evaluate a
// graph as built and again after a rewrite, on MLX's CPU, and compare bits.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "mlx/mlx.h"
#include "runtime/graph_stats.h"

namespace jaxmlx::runtime::testing {

namespace mx = mlx::core;

// Same dtype, shape and bytes (NaN payloads and signed zeros included).
inline bool same_bits(const mx::array& a, const mx::array& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  mx::array x = mx::contiguous(a), y = mx::contiguous(b);
  mx::eval(x, y);
  return std::memcmp(x.data<char>(), y.data<char>(), x.nbytes()) == 0;
}

// An evaluated f32 array of normal values (standard deviation 3) from `seed`.
inline mx::array normal(const mx::Shape& s, int seed) {
  mx::array a = mx::random::normal(s, mx::float32, 0.0, 3.0, mx::random::key(seed));
  mx::eval(a);
  return a;
}

// A graph built twice from the same (evaluated) leaves: once as is, once rewritten by a fusion.
struct FusionCase {
  std::vector<mx::array> plain, fused;
  std::map<std::string, int> census;  // the rewritten graph's primitives, counted before evaluation
  int chains = 0;                     // what the fusion returned
};

// Builds, rewrites the second copy with `fuse`, counts its primitives, evaluates both.
inline FusionCase fuse_and_eval(const std::function<std::vector<mx::array>()>& build,
                                const std::function<int(std::vector<mx::array>&)>& fuse) {
  FusionCase c;
  c.plain = build();
  c.fused = build();
  try {
    c.chains = fuse(c.fused);
  } catch (const std::logic_error& e) {  // the rewrite closed a cycle (elementwise_chains.h)
    ADD_FAILURE() << e.what();
    c.fused = c.plain;
    return c;
  }
  c.census = primitive_counts(c.fused);
  mx::eval(c.plain);
  mx::eval(c.fused);
  return c;
}

// Tests that build graphs on MLX's CPU.
class OnCpu : public ::testing::Test {
 protected:
  void SetUp() override { mx::set_default_device(mx::Device::cpu); }
};

}  // namespace jaxmlx::runtime::testing
