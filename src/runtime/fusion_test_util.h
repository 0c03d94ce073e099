// Helpers shared by the fusion tests (cpu_fusion_test.cc, gpu_fusion_test.cc): both evaluate a
// graph as built and again after a rewrite, on MLX's CPU, and compare bits.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
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

// Whether the graph above `outputs` has no cycle (a rewrite that wired a node to read its own
// result would send MLX's recursive graph walks into a stack overflow). Iterative, three colours.
inline bool is_acyclic(const std::vector<mx::array>& outputs) {
  std::unordered_map<std::uintptr_t, bool> open;  // id -> still on the walk's path
  std::vector<std::pair<mx::array, size_t>> stack;
  for (const mx::array& o : outputs) {
    if (open.count(o.id())) continue;
    open[o.id()] = true;
    stack.emplace_back(o, 0);
    while (!stack.empty()) {
      auto& [a, next] = stack.back();
      if (next == a.inputs().size()) {
        open[a.id()] = false;
        stack.pop_back();
        continue;
      }
      const mx::array in = a.inputs()[next++];
      auto it = open.find(in.id());
      if (it != open.end()) {
        if (it->second) return false;
        continue;
      }
      open[in.id()] = true;
      stack.emplace_back(in, 0);
    }
  }
  return true;
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
  c.chains = fuse(c.fused);
  if (!is_acyclic(c.fused)) {
    ADD_FAILURE() << "the rewrite closed a cycle";
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
