"""Dynamic-shape and tuple ops with static shapes, on mlx vs jax's CPU backend.

jax emits these only in shape-polymorphic exports (jax.export with symbolic dims); calling such an
export with concrete shapes refines it, so each op is also written as StableHLO text with static
shapes and constant shape operands, the form that reaches a plugin. Results must match bit for
bit (these ops move data; none computes).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from tests.ops.harness import assert_same
from tests.stablehlo_text import mlir_type, run_stablehlo

DTYPES = [np.float32, np.int32, np.uint8, np.int64, np.float16, ml_dtypes.bfloat16, np.bool_]


def values(shape, dtype, seed=0):
  rng = np.random.default_rng(seed)
  if np.dtype(dtype) == np.bool_:
    return rng.integers(0, 2, shape).astype(np.bool_)
  return rng.integers(-50, 50, shape).astype(dtype) if np.dtype(dtype).kind in "iu" else \
      rng.standard_normal(shape).astype(dtype)


def both(text, *args):
  return run_stablehlo(text, "mlx", *args), run_stablehlo(text, "cpu", *args)


def check_text(text, *args):
  got, want = both(text, *args)
  assert_same(got, want, exact=True)


def dense(v):
  return "dense<[" + ", ".join(str(int(i)) for i in v) + "]>"


def ids(x):
  return np.dtype(x).name if isinstance(x, type) else str(x)


# ---- get_dimension_size / set_dimension_size ---------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 3), (0, 5), (7,), (1, 1, 4)], ids=ids)
def test_get_dimension_size(shape):
  x = values(shape, np.float32)
  t = mlir_type(x)
  outs = ", ".join(["tensor<i32>"] * len(shape))
  body = "\n".join(f"%d{i} = stablehlo.get_dimension_size %x, dim = {i} : ({t}) -> tensor<i32>"
                   for i in range(len(shape)))
  rets = ", ".join(f"%d{i}" for i in range(len(shape)))
  check_text(f"""module @m {{
    func.func public @main(%x: {t}) -> ({outs}) {{
      {body}
      return {rets} : {outs}
    }}
  }}""", x)


# ---- dynamic_pad ---------------------------------------------------------------------------------

PADS = [  # shape, low, high, interior
    ((4,), [1], [2], [0]), ((3, 2), [0, 1], [1, 0], [1, 2]), ((5,), [-2], [1], [0]),
    ((2, 3), [-1, 2], [3, -1], [2, 0]), ((0, 2), [1, 1], [1, 0], [0, 1]), ((1,), [0], [0], [3]),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("shape,lo,hi,interior", PADS, ids=[str(p) for p in range(len(PADS))])
def test_dynamic_pad(shape, lo, hi, interior, dtype):
  x = values(shape, dtype)
  pv = np.asarray(values((), dtype, seed=1))
  out = [max(lo[d] + hi[d] + shape[d] + max(shape[d] - 1, 0) * interior[d], 0)
         for d in range(len(shape))]
  tr = mlir_type(np.zeros(out, dtype))
  ti = f"tensor<{len(shape)}xi64>"
  check_text(f"""module @m {{
    func.func public @main(%x: {mlir_type(x)}, %p: {mlir_type(pv)}) -> {tr} {{
      %lo = stablehlo.constant {dense(lo)} : {ti}
      %hi = stablehlo.constant {dense(hi)} : {ti}
      %in = stablehlo.constant {dense(interior)} : {ti}
      %r = stablehlo.dynamic_pad %x, %p, %lo, %hi, %in
          : ({mlir_type(x)}, {mlir_type(pv)}, {ti}, {ti}, {ti}) -> {tr}
      return %r : {tr}
    }}
  }}""", x, pv)


def test_dynamic_pad_runtime_amounts_refused():
  x, pv, a = np.ones(4, np.float32), np.float32(0), np.array([1], np.int64)
  text = """module @m {
    func.func public @main(%x: tensor<4xf32>, %p: tensor<f32>, %lo: tensor<1xi64>) -> tensor<6xf32> {
      %z = stablehlo.constant dense<[1]> : tensor<1xi64>
      %i = stablehlo.constant dense<[0]> : tensor<1xi64>
      %r = stablehlo.dynamic_pad %x, %p, %lo, %z, %i
          : (tensor<4xf32>, tensor<f32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<6xf32>
      return %r : tensor<6xf32>
    }
  }"""
  with pytest.raises(Exception, match="dynamic_pad.*not constants"):
    run_stablehlo(text, "mlx", x, pv, a)


# ---- dynamic_iota, dynamic_broadcast_in_dim, dynamic_reshape, real_dynamic_slice -----------------

@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.uint8, np.int64, np.float16], ids=ids)
@pytest.mark.parametrize("shape,dim", [((5,), 0), ((2, 3), 1), ((3, 0), 0), ((2, 3, 4), 2)],
                         ids=str)
def test_dynamic_iota(shape, dim, dtype):
  t = mlir_type(np.zeros(shape, dtype))
  check_text(f"""module @m {{
    func.func public @main() -> {t} {{
      %s = stablehlo.constant {dense(shape)} : tensor<{len(shape)}xi64>
      %r = stablehlo.dynamic_iota %s, dim = {dim} : (tensor<{len(shape)}xi64>) -> {t}
      return %r : {t}
    }}
  }}""")


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("shape,out,dims", [((3,), (2, 3), [1]), ((1, 4), (3, 2, 4), [1, 2]),
                                            ((), (2, 2), []), ((2, 1), (2, 5), [0, 1])], ids=str)
def test_dynamic_broadcast_in_dim(shape, out, dims, dtype):
  x = values(shape, dtype)
  t, tr = mlir_type(x), mlir_type(np.zeros(out, dtype))
  check_text(f"""module @m {{
    func.func public @main(%x: {t}) -> {tr} {{
      %s = stablehlo.constant {dense(out)} : tensor<{len(out)}xi64>
      %r = stablehlo.dynamic_broadcast_in_dim %x, %s, dims = [{", ".join(map(str, dims))}]
          : ({t}, tensor<{len(out)}xi64>) -> {tr}
      return %r : {tr}
    }}
  }}""", x)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("shape,out", [((2, 3), (3, 2)), ((6,), (1, 6)), ((0, 4), (4, 0)),
                                       ((1,), ())], ids=str)
def test_dynamic_reshape(shape, out, dtype):
  x = values(shape, dtype)
  t, tr = mlir_type(x), mlir_type(np.zeros(out, dtype))
  check_text(f"""module @m {{
    func.func public @main(%x: {t}) -> {tr} {{
      %s = stablehlo.constant {dense(out)} : tensor<{len(out)}xi64>
      %r = stablehlo.dynamic_reshape %x, %s : ({t}, tensor<{len(out)}xi64>) -> {tr}
      return %r : {tr}
    }}
  }}""", x)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("shape,start,limit,strides", [
    ((8,), [1], [7], [2]), ((4, 5), [0, 1], [3, 5], [1, 3]), ((3, 3), [1, 1], [1, 3], [1, 1])],
    ids=str)
def test_real_dynamic_slice(shape, start, limit, strides, dtype):
  x = values(shape, dtype)
  out = [max(0, -(-(limit[d] - start[d]) // strides[d])) for d in range(len(shape))]
  t, tr = mlir_type(x), mlir_type(np.zeros(out, dtype))
  ti = f"tensor<{len(shape)}xi64>"
  check_text(f"""module @m {{
    func.func public @main(%x: {t}) -> {tr} {{
      %a = stablehlo.constant {dense(start)} : {ti}
      %b = stablehlo.constant {dense(limit)} : {ti}
      %c = stablehlo.constant {dense(strides)} : {ti}
      %r = stablehlo.real_dynamic_slice %x, %a, %b, %c : ({t}, {ti}, {ti}, {ti}) -> {tr}
      return %r : {tr}
    }}
  }}""", x)


# ---- tuple / get_tuple_element ---------------------------------------------------------------------

def test_tuple_unpacked():
  x, y = values((2, 3), np.float32), values((4,), np.int32)
  check_text("""module @m {
    func.func public @main(%x: tensor<2x3xf32>, %y: tensor<4xi32>) -> (tensor<4xi32>, tensor<2x3xf32>) {
      %t = stablehlo.tuple %x, %y : tuple<tensor<2x3xf32>, tensor<4xi32>>
      %n = stablehlo.tuple %t, %x : tuple<tuple<tensor<2x3xf32>, tensor<4xi32>>, tensor<2x3xf32>>
      %inner = stablehlo.get_tuple_element %n[0] : (tuple<tuple<tensor<2x3xf32>, tensor<4xi32>>, tensor<2x3xf32>>) -> tuple<tensor<2x3xf32>, tensor<4xi32>>
      %a = stablehlo.get_tuple_element %inner[1] : (tuple<tensor<2x3xf32>, tensor<4xi32>>) -> tensor<4xi32>
      %b = stablehlo.get_tuple_element %t[0] : (tuple<tensor<2x3xf32>, tensor<4xi32>>) -> tensor<2x3xf32>
      %c = stablehlo.add %b, %b : tensor<2x3xf32>
      return %a, %c : tensor<4xi32>, tensor<2x3xf32>
    }
  }""", x, y)


def test_escaping_tuple_refused():
  x = values((3,), np.float32)
  text = """module @m {
    func.func private @f(%t: tuple<tensor<3xf32>>) -> tensor<3xf32> {
      %a = stablehlo.get_tuple_element %t[0] : (tuple<tensor<3xf32>>) -> tensor<3xf32>
      return %a : tensor<3xf32>
    }
    func.func public @main(%x: tensor<3xf32>) -> tensor<3xf32> {
      %t = stablehlo.tuple %x : tuple<tensor<3xf32>>
      %r = stablehlo.while(%it = %t) : tuple<tensor<3xf32>>
        cond {
          %c = stablehlo.constant dense<false> : tensor<i1>
          stablehlo.return %c : tensor<i1>
        } do {
          stablehlo.return %it : tuple<tensor<3xf32>>
        }
      %a = stablehlo.get_tuple_element %r[0] : (tuple<tensor<3xf32>>) -> tensor<3xf32>
      return %a : tensor<3xf32>
    }
  }"""
  with pytest.raises(Exception, match="tuple"):
    run_stablehlo(text, "mlx", x)


# ---- through jax.export with symbolic shapes -----------------------------------------------------

POLY = {
    "arange": lambda x: x + jnp.arange(x.shape[0], dtype=x.dtype)[:, None],
    "broadcast": lambda x: jnp.broadcast_to(x[:1], x.shape) * 2,
    "reshape": lambda x: x.reshape(-1, x.shape[0]).sum(0),
    "pad": lambda x: jnp.pad(x, ((1, 2), (0, 1))),
    "slice": lambda x: x[1:] - x[:-1],
    "size": lambda x: x * x.shape[0] + x.shape[1],
}


@pytest.mark.parametrize("name", POLY, ids=list(POLY))
def test_shape_polymorphic_export(name, monkeypatch):
  # Bit-exact needs XLA:CPU's f32 multiply-add fusion everywhere ("size" is x*n + m), which the
  # plugin applies by default only inside jax.random's samplers. "reshape" ends in a sum, whose
  # order is the backend's (1 ULP apart on MLX's CUDA): within the f32 tolerance.
  monkeypatch.setenv("JAX_MLX_CONTRACT_FMA", "all")
  b, = jax.export.symbolic_shape("b")
  exp = jax.export.export(jax.jit(POLY[name]), platforms=("cpu", "mlx"))(
      jax.ShapeDtypeStruct((b, 3), np.float32))
  for n in (2, 5):
    x = values((n, 3), np.float32, seed=n)
    got = np.asarray(jax.jit(exp.call)(jax.device_put(x, jax.devices("mlx")[0])))
    want = np.asarray(jax.jit(exp.call)(jax.device_put(x, jax.devices("cpu")[0])))
    assert_same(got, want, exact=name != "reshape")
