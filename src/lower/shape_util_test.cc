// shape_util's view helpers: which MLX nodes a chain of transposes and reshapes becomes
// (permuted_view, view_of) and when a reshape of a strided view only splits its dims
// (only_splits). The values are the Python tests' (tests/ops/test_shape.py, test_dot.py).
#include "lower/shape_util.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mlx/mlx.h"

namespace jaxmlx::lower::shape_util {
namespace {

std::string name(const mx::array& a) {
  return a.has_primitive() ? a.primitive().name() : "input";
}

TEST(OnlySplits, SplitsAndSizeOneDims) {
  EXPECT_TRUE(only_splits({1, 1, 32}, {1, 1, 4, 8}));
  EXPECT_TRUE(only_splits({1, 1, 32}, {1, 4, 1, 8}));
  EXPECT_TRUE(only_splits({4, 6}, {2, 2, 2, 3}));
  EXPECT_TRUE(only_splits({4, 6}, {4, 6}));
  EXPECT_TRUE(only_splits({1, 4, 1}, {4}));
  EXPECT_TRUE(only_splits({}, {1, 1}));
  EXPECT_FALSE(only_splits({4, 6}, {8, 3}));     // merges across 4 and 6
  EXPECT_FALSE(only_splits({2, 6}, {4, 3}));     // 2 is not a product of leading 4
  EXPECT_FALSE(only_splits({4, 6}, {24}));       // a merge
  EXPECT_FALSE(only_splits({6}, {2, 2}));        // sizes differ
}

TEST(ViewOf, LooksThroughTransposesAndSizeOneReshapes) {
  mx::array x = mx::zeros({1, 4, 6, 8});
  mx::array t = mx::transpose(x, {0, 1, 3, 2});       // [1, 4, 8, 6]
  mx::array r = mx::reshape(t, {4, 8, 6});            // drops the size-1 dim
  ViewOf v = view_of(r);
  EXPECT_EQ(v.source.id(), x.id());
  EXPECT_EQ(v.dims, (std::vector<int>{1, 3, 2}));
  EXPECT_EQ(v.chain.size(), 3u);
  // A primitive without inputs (an arange) ends the walk.
  mx::array i = mx::reshape(mx::arange(4.0f), {1, 4});
  ViewOf vi = view_of(i);
  EXPECT_EQ(vi.source.shape(), (mx::Shape{4}));
  EXPECT_EQ(view_of(vi.source).source.id(), vi.source.id());
  // A reshape that splits a dim stops the walk: its dims are not one dim of its input each.
  mx::array s = mx::reshape(x, {1, 4, 6, 2, 4});
  EXPECT_EQ(view_of(s).source.id(), s.id());
}

TEST(PermutedView, AChainThatCancelsIsItsSource) {
  mx::array cache = mx::zeros({1, 4, 6, 8});
  // jax's k^T, jnp.matmul's [1, H, D, S] -> [H, D, S], then back as [1, H, S, D].
  mx::array kt = mx::reshape(mx::transpose(cache, {0, 1, 3, 2}), {4, 8, 6});
  mx::array k = permuted_view(kt, {0, 2, 1}, {1, 4, 6, 8});
  EXPECT_EQ(k.id(), cache.id());
}

TEST(PermutedView, MovedSizeOneDimsAreOneReshapeOrOneTranspose) {
  mx::array x = mx::zeros({1, 1, 4, 8});
  // The heads of one token: only size-1 dims move, a reshape of x.
  mx::array q = permuted_view(x, {0, 2, 1, 3}, {1, 4, 1, 8});
  EXPECT_EQ(name(q), "Reshape");
  EXPECT_EQ(q.inputs()[0].id(), x.id());
  // Through a reshape of a transpose, a transpose of the source.
  mx::array y = mx::zeros({1, 3, 5});
  mx::array chain = mx::reshape(mx::transpose(y, {2, 0, 1}), {5, 3});
  mx::array z = permuted_view(chain, {1, 0}, {1, 3, 5});
  EXPECT_EQ(z.id(), y.id());
  mx::array w = permuted_view(chain, {0, 1}, {5, 1, 3});
  EXPECT_EQ(name(w), "Transpose");
  EXPECT_EQ(w.inputs()[0].id(), y.id());
  EXPECT_TRUE(mx::array_equal(w, mx::reshape(mx::transpose(y, {2, 0, 1}), {5, 1, 3})).item<bool>());
}

TEST(PermutedView, MergedDimsAreTheDirectReshape) {
  mx::array x = mx::zeros({2, 3, 4});
  mx::array t = mx::transpose(x, {1, 0, 2});
  mx::array m = permuted_view(t, {0, 1, 2}, {6, 4});  // merges a transposed pair: a copy
  EXPECT_EQ(name(m), "Reshape");
  EXPECT_EQ(m.inputs()[0].id(), t.id());
}

TEST(ReshapeView, SplitsOfASliceReshapeTheSlice) {
  mx::array p = mx::zeros({1, 1, 96});
  mx::array s = mx::slice(p, {0, 0, 32}, {1, 1, 64});
  mx::array heads = mx::reshape(s, {1, 1, 4, 8});
  mx::array r = reshape_view(heads, {1, 4, 1, 8});
  EXPECT_EQ(r.inputs()[0].id(), s.id());
  // A merge of the slice's split dims keeps the first reshape (it may be a copy others read).
  mx::array t = mx::transpose(mx::zeros({6, 4}), {1, 0});
  mx::array split = mx::reshape(t, {4, 2, 3});
  EXPECT_EQ(reshape_view(split, {8, 3}).inputs()[0].id(), split.id());
}

}  // namespace
}  // namespace jaxmlx::lower::shape_util
