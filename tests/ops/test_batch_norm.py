"""stablehlo.batch_norm_{training,inference,grad} on mlx vs jax's CPU backend.

jax never emits these ops (flax/haiku build batch norm from reductions), but StableHLO programs
from other producers do, so each test writes the op as StableHLO text and runs it on both
backends. XLA expands them (BatchNormExpander) before codegen; lower/batch_norm.cc builds the
same expression. The sums are reductions in a different order, so floats are compared with the
dtype's tolerance from tolerances.py, and variance (E[X^2] - E[X]^2, which cancels) with an
absolute bound scaled by E[X^2].
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tests.ops.harness import assert_same
from tests.stablehlo_text import mlir_type, run_stablehlo

DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16]
# (operand shape, feature_index)
LAYOUTS = [((4, 3), 1), ((2, 5, 3), 2), ((3, 2, 4, 4), 1), ((7, 1), 1), ((1, 6), 0), ((5,), 0),
           ((0, 3), 1), ((2, 3, 1, 5), 3)]


def data(shape, dtype, seed, loc=0.5):
  rng = np.random.default_rng(seed)
  return (rng.standard_normal(shape) * 2 + loc).astype(dtype)


def feature(shape, fi):
  return (shape[fi],)


def both(text, *args):
  return run_stablehlo(text, "mlx", *args), run_stablehlo(text, "cpu", *args)


def tol(dtype):
  return {np.dtype(np.float32): 1e-5, np.dtype(np.float16): 4e-3}.get(np.dtype(dtype), 3e-2)


def compare(got, want, dtype, scale=1.0):
  t = tol(dtype)
  assert_same(got, want, rtol=t, atol=t * scale)


def ids(layouts):
  return [f"{'x'.join(map(str, s))}-f{fi}" for s, fi in layouts]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape,fi", LAYOUTS, ids=ids(LAYOUTS))
def test_training(shape, fi, dtype):
  x = data(shape, dtype, 0)
  scale, offset = data(feature(shape, fi), dtype, 1), data(feature(shape, fi), dtype, 2)
  tx, tf = mlir_type(x), mlir_type(scale)
  text = f"""module @m {{
    func.func public @main(%x: {tx}, %s: {tf}, %o: {tf}) -> ({tx}, {tf}, {tf}) {{
      %y, %m, %v = "stablehlo.batch_norm_training"(%x, %s, %o)
          {{epsilon = 1.0e-3 : f32, feature_index = {fi} : i64}} : ({tx}, {tf}, {tf}) -> ({tx}, {tf}, {tf})
      return %y, %m, %v : {tx}, {tf}, {tf}
    }}
  }}"""
  got, want = both(text, x, scale, offset)
  if x.size == 0:  # 0/0: NaN statistics on both backends
    assert_same(got, want)
    return
  ex2 = float(np.mean(np.square(x.astype(np.float64))))
  compare(got[1], want[1], dtype, scale=4)  # mean
  compare(got[2], want[2], dtype, scale=4 * ex2)  # variance: E[X^2] - E[X]^2 cancels
  compare(got[0], want[0], dtype, scale=8)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape,fi", LAYOUTS, ids=ids(LAYOUTS))
def test_inference(shape, fi, dtype):
  f = feature(shape, fi)
  x = data(shape, dtype, 0)
  scale, offset, mean = data(f, dtype, 1), data(f, dtype, 2), data(f, dtype, 3)
  var = np.abs(data(f, dtype, 4)).astype(dtype)
  tx, tf = mlir_type(x), mlir_type(scale)
  text = f"""module @m {{
    func.func public @main(%x: {tx}, %s: {tf}, %o: {tf}, %m: {tf}, %v: {tf}) -> {tx} {{
      %y = "stablehlo.batch_norm_inference"(%x, %s, %o, %m, %v)
          {{epsilon = 1.0e-5 : f32, feature_index = {fi} : i64}} : ({tx}, {tf}, {tf}, {tf}, {tf}) -> {tx}
      return %y : {tx}
    }}
  }}"""
  got, want = both(text, x, scale, offset, mean, var)
  # No reductions, but XLA:CPU's rsqrt is not 1/sqrt rounded twice (measured: 2/3 of f32
  # results equal ours bit for bit, the rest within a few ULP), so a tolerance even here.
  compare(got, want, dtype, scale=8)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape,fi", LAYOUTS, ids=ids(LAYOUTS))
def test_grad(shape, fi, dtype):
  f = feature(shape, fi)
  x, dy = data(shape, dtype, 0), data(shape, dtype, 5, loc=0.0)
  scale, mean = data(f, dtype, 1), data(f, dtype, 3)
  var = (np.abs(data(f, dtype, 4)) + 0.5).astype(dtype)
  tx, tf = mlir_type(x), mlir_type(scale)
  text = f"""module @m {{
    func.func public @main(%x: {tx}, %s: {tf}, %m: {tf}, %v: {tf}, %dy: {tx}) -> ({tx}, {tf}, {tf}) {{
      %dx, %ds, %do = "stablehlo.batch_norm_grad"(%x, %s, %m, %v, %dy)
          {{epsilon = 1.0e-3 : f32, feature_index = {fi} : i64}} : ({tx}, {tf}, {tf}, {tf}, {tx}) -> ({tx}, {tf}, {tf})
      return %dx, %ds, %do : {tx}, {tf}, {tf}
    }}
  }}"""
  got, want = both(text, x, scale, mean, var, dy)
  n = max(x.size // max(f[0], 1), 1)
  compare(got[2], want[2], dtype, scale=4 * np.sqrt(n))  # sums of n terms
  compare(got[1], want[1], dtype, scale=8 * np.sqrt(n))
  compare(got[0], want[0], dtype, scale=16 * n)  # N*dy - sum(dy) - ... cancels


def test_f64_refused():
  x = np.ones((2, 3))
  f = np.ones(3)
  text = """module @m {
    func.func public @main(%x: tensor<2x3xf64>, %s: tensor<3xf64>, %o: tensor<3xf64>) -> tensor<2x3xf64> {
      %y, %m, %v = "stablehlo.batch_norm_training"(%x, %s, %o)
          {epsilon = 1.0e-3 : f32, feature_index = 1 : i64} : (tensor<2x3xf64>, tensor<3xf64>, tensor<3xf64>) -> (tensor<2x3xf64>, tensor<3xf64>, tensor<3xf64>)
      return %y : tensor<2x3xf64>
    }
  }"""
  with pytest.raises(Exception, match="batch_norm_training"):
    run_stablehlo(text, "mlx", x, f, f)
