// NormChain: the pieces of jax's norm chains (f32, over the last dim) that both the norm
// recognizer (norms.h) and the norm-gradient recognizer (norm_grads.h) read: a keepdims mean,
// the centred values, the reciprocal rsqrt(mean + eps), BACK chains along the last dim.
//
// Each matcher appends the ops it walked to `ops` (those a rewrite replaces) and returns the
// value the piece starts from, or nullopt; on a failed match `ops` may hold a partial walk, which
// the caller trims back to where it was.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "passes/chain_match.h"

namespace jaxmlx::passes {

class NormChain : public ChainMatcher {
 public:
  using Ops = std::vector<const ir::Op*>;
  using ChainMatcher::ChainMatcher;

  // rsqrt(add(MEAN(%squares), eps)) defining `r` (x's keepdims shape).
  struct Reciprocal {
    ir::Value squares;  // what MEAN averages
    uint32_t eps_bits = 0;
    std::optional<ir::Value> scale;  // the scale multiplied into it (flax), when matched so
  };

  static void add(const ir::Op* op, Ops& ops);

  // Adds the ops from `v` back to (not including) the op defining `source`.
  void add_chain(const ir::Value& v, const ir::Value& source, Ops& ops) const;

  // Whether every value the `ops` define is read by them or by `root` alone.
  bool self_contained(const ir::Op& root, const Ops& ops) const;

  static std::vector<int64_t> last_dim(const ir::Value& x) { return {x.type->rank() - 1}; }

  // BACK(v) along the last dim of `x`: the value it starts from.
  std::optional<ir::Value> back(const ir::Value& v, const ir::Value& x, Ops& ops) const;

  // PARAM(p): `v` is a 1-D %p of x's element type and last dim size, taken along the last dim.
  std::optional<ir::Value> param(const ir::Value& v, const ir::Value& x, Ops& ops) const;

  // The reduce result that `v` is, or that the broadcasts and reshapes defining `v` (at most 4)
  // start from; with `read_once`, each value below `v` on the way is read once.
  std::optional<ir::Value> reduce_below(const ir::Value& v, bool read_once) const;

  // MEAN(a) defining `m` (divide(K(reduce(a) over the last dim), N)), a of x's type: a.
  std::optional<ir::Value> mean_of(const ir::Value& m, const ir::Value& x, Ops& ops) const;

  // `r` = rsqrt(add(MEAN(%sq), eps)) (either order).
  std::optional<Reciprocal> rsqrt_of(const ir::Value& r, const ir::Value& x, Ops& ops) const;

  // `c` = subtract(x, BACK(MEAN(x))): x.
  std::optional<ir::Value> centred(const ir::Value& c, Ops& ops) const;

  // The MEAN(x) value the centred `c` (a subtract matched by centred()) subtracts.
  std::optional<ir::Value> mean_subtracted(const ir::Value& c) const;
};

}  // namespace jaxmlx::passes
