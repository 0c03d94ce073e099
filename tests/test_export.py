"""Portable programs: jax.export round trips run on the mlx platform, and stablehlo.composite ops
(which carry their decomposition) run that decomposition.

Exports are serialized, deserialized and called on the mlx device; shape-polymorphic exports are
called with concrete shapes. Every result is compared with the same function run by jax.jit on
jax's CPU backend.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax
from jax._src.lib import xla_client as xc

from tests.ops.harness import assert_same, check


def _values(shape, dtype, seed=0):
  rng = np.random.default_rng(seed)
  dtype = np.dtype(dtype)
  if dtype.kind in "iu":
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -100), min(info.max, 100), shape, dtype=dtype)
  return (rng.standard_normal(shape) * 2).astype(dtype)


def _mlp(x, w):
  return jax.nn.relu(x @ w).sum(0) + jnp.tanh(w).mean()


def _control_flow(x, n):
  def body(i, c):
    return lax.cond(i % 3 == 0, lambda v: v * 0.5, lambda v: jnp.sin(v) + i, c)
  return lax.fori_loop(0, n, body, x), lax.while_loop(lambda c: c < 100, lambda c: c * 3 + 1, n)


def _integers(a, b):
  return (a * b + (a >> 2), jnp.where(a > b, a, b), lax.shift_left(a, 3), a.astype(jnp.uint8),
          jnp.cumsum(b, axis=-1))


def _erf_composite(x):  # jax lowers erf (and friends) as stablehlo.composite "chlo.erf"
  return lax.erf(x), jax.scipy.special.erfinv(jnp.clip(x, -0.9, 0.9)) * 2


PROGRAMS = {
    "mlp": (_mlp, [((4, 8), np.float32), ((8, 3), np.float32)]),
    "control_flow": (_control_flow, [((5,), np.float32), ((), np.int32)]),
    "integers": (_integers, [((3, 4), np.int32), ((3, 4), np.int32)]),
    "erf_composite": (_erf_composite, [((7,), np.float32)]),
    "half_precision": (lambda x, y: (x * y + 1, (x.astype(jnp.float32) ** 2).sum()),
                       [((2, 3), ml_dtypes.bfloat16), ((2, 3), ml_dtypes.bfloat16)]),
}


def _args(program):
  out = []
  for i, (shape, dtype) in enumerate(PROGRAMS[program][1]):
    v = _values(shape, dtype, seed=i)
    out.append(np.abs(v) % 7 + 3 if shape == () else v)  # loop counts stay small
  return out


def _cpu(fn, *args):
  cpu = jax.devices("cpu")[0]
  return jax.tree_util.tree_map(np.asarray,
                                jax.jit(fn)(*[jax.device_put(a, cpu) for a in args]))


def _call_on(device, exp, *args):
  placed = [jax.device_put(a, device) for a in args]
  return jax.tree_util.tree_map(np.asarray, exp.call(*placed))


@pytest.mark.parametrize("platforms", [("mlx",), ("cpu", "mlx")], ids="+".join)
@pytest.mark.parametrize("program", list(PROGRAMS))
def test_export_round_trip(program, platforms):
  fn = PROGRAMS[program][0]
  args = _args(program)
  specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]
  exp = jax.export.export(jax.jit(fn), platforms=platforms)(*specs)
  assert exp.platforms == platforms
  restored = jax.export.deserialize(exp.serialize())
  assert restored.platforms == platforms
  want = _cpu(fn, *args)
  got = _call_on(jax.devices("mlx")[0], restored, *args)
  assert_same(got, want)
  if "cpu" in platforms:  # the same artifact on the CPU backend agrees with plain jit
    assert_same(_call_on(jax.devices("cpu")[0], restored, *args), want)


def test_export_called_inside_jit_and_vmap():
  fn = PROGRAMS["mlp"][0]
  x, w = _args("mlp")
  exp = jax.export.deserialize(jax.export.export(jax.jit(fn), platforms=["mlx"])(
      jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(w.shape, w.dtype)).serialize())
  mlx = jax.devices("mlx")[0]
  got = jax.jit(lambda a, b: exp.call(a, b) * 2 + 1)(jax.device_put(x, mlx),
                                                     jax.device_put(w, mlx))
  assert_same(np.asarray(got), _cpu(lambda a, b: fn(a, b) * 2 + 1, x, w))


def test_export_for_mlx_only_refuses_cpu():
  exp = jax.export.export(jax.jit(jnp.sin), platforms=["mlx"])(
      jax.ShapeDtypeStruct((3,), np.float32))
  with pytest.raises(ValueError, match="mlx"):
    exp.call(jax.device_put(np.ones(3, np.float32), jax.devices("cpu")[0]))


@pytest.mark.parametrize("batch", [1, 2, 7], ids=str)
def test_shape_polymorphic_export(batch):
  b, = jax.export.symbolic_shape("b")

  def fn(x, w):
    return jnp.tanh(x @ w) + x.sum(), jnp.concatenate([x, x * 2], axis=0).mean(0)

  exp = jax.export.export(jax.jit(fn), platforms=["mlx"])(
      jax.ShapeDtypeStruct((b, 3), np.float32), jax.ShapeDtypeStruct((3, 5), np.float32))
  restored = jax.export.deserialize(exp.serialize())
  x, w = _values((batch, 3), np.float32), _values((3, 5), np.float32, seed=1)
  assert_same(_call_on(jax.devices("mlx")[0], restored, x, w), _cpu(fn, x, w))


def test_shape_polymorphic_two_dims():
  b, n = jax.export.symbolic_shape("b, n")

  def fn(x):
    return x.reshape(-1).sum(), jnp.pad(x, 1), x[:, ::2] * 2, jnp.arange(x.shape[0]) * x.shape[1]

  exp = jax.export.export(jax.jit(fn), platforms=["mlx"])(
      jax.ShapeDtypeStruct((b, n), np.int32))
  restored = jax.export.deserialize(exp.serialize())
  for shape in [(2, 3), (4, 1), (1, 6)]:
    x = _values(shape, np.int32)
    assert_same(_call_on(jax.devices("mlx")[0], restored, x), _cpu(fn, x), exact=True)


def _linalg(a, b):
  # Each lowers through one of our jaxmlx.* custom calls (python/jax_plugins/mlx/linalg_rules.py):
  # solve and det through lu, eigvalsh through eigh, singular values through svd.
  spd = a @ jnp.swapaxes(a, -1, -2) + 4 * jnp.eye(a.shape[-1], dtype=a.dtype)
  return (jnp.linalg.solve(spd, b), jnp.linalg.det(spd), jnp.linalg.eigvalsh(spd),
          jnp.linalg.svd(a, compute_uv=False))


@pytest.mark.parametrize("polymorphic", [False, True], ids=["static", "symbolic_batch"])
def test_export_linear_algebra(polymorphic):
  # jax.export refuses custom calls it does not know to be stable; ours are registered as
  # such, and with a symbolic batch dim their result shapes travel as shape operands that
  # jax's refinement resolves when the export is called.
  batch = jax.export.symbolic_shape("b")[0] if polymorphic else 3
  exp = jax.export.export(jax.jit(_linalg), platforms=["mlx"])(
      jax.ShapeDtypeStruct((batch, 4, 4), np.float32),
      jax.ShapeDtypeStruct((batch, 4, 2), np.float32))
  text = exp.mlir_module()
  assert "jaxmlx.lu" in text and "jaxmlx.eigh" in text and "jaxmlx.svd" in text
  assert ("indices_of_shape_operands" in text) == polymorphic
  restored = jax.export.deserialize(exp.serialize())
  for n in ([1, 3, 5] if polymorphic else [3]):
    a, b = _values((n, 4, 4), np.float32), _values((n, 4, 2), np.float32, seed=1)
    assert_same(_call_on(jax.devices("mlx")[0], restored, a, b), _cpu(_linalg, a, b),
                rtol=2e-4, atol=2e-4)


def test_export_left_eigenvectors_still_refused():
  with pytest.raises(NotImplementedError, match="compute_left_eigenvectors"):
    jax.export.export(
        jax.jit(lambda a: jax.lax.linalg.eig(a, compute_left_eigenvectors=True)),
        platforms=["mlx"])(jax.ShapeDtypeStruct((3, 3), np.float32))


# ---- composites ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32],
                         ids=lambda d: np.dtype(d).name)
def test_composite_decomposition_runs(dtype):
  tanh_mul = lax.composite(lambda x, y: jnp.tanh(x) * y, name="jaxmlx.tanh_mul")
  leaky = lambda v: lax.composite(lambda u, alpha: jnp.where(u > 0, u, alpha * u),
                                  name="jaxmlx.leaky")(v, alpha=0.1)

  def fn(x, y):
    return tanh_mul(x, y) + 1, leaky(x - y)

  check(fn, _values((3, 5), dtype), _values((3, 5), dtype, seed=1))


def test_nested_composite_in_loop():
  inner = lax.composite(lambda x: x * 2 + 1, name="jaxmlx.inner")
  outer = lax.composite(lambda x, y: inner(x) - jnp.sin(y), name="jaxmlx.outer")

  def fn(x, y):
    return lax.fori_loop(0, 4, lambda i, c: outer(c, y) * 0.25, x)

  check(fn, _values((6,), np.float32), _values((6,), np.float32, seed=1))


_COMPOSITE_TEXT = """
module @composite_text attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<4xf32>, %n: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>) {
    %0 = stablehlo.composite "my.scaled_add" %x, %x {composite_attributes = {k = 2 : i64},
        decomposition = @scaled_add, version = 1 : i32}
        : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %1 = stablehlo.composite "my.int_poly" %n {decomposition = @int_poly}
        : (tensor<4xi32>) -> tensor<4xi32>
    return %0, %1 : tensor<4xf32>, tensor<4xi32>
  }
  func.func private @scaled_add(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
    %c = stablehlo.constant dense<2.5> : tensor<4xf32>
    %0 = stablehlo.multiply %a, %c : tensor<4xf32>
    %1 = stablehlo.add %0, %b : tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @int_poly(%a: tensor<4xi32>) -> tensor<4xi32> {
    %0 = stablehlo.multiply %a, %a : tensor<4xi32>
    %1 = stablehlo.subtract %0, %a : tensor<4xi32>
    return %1 : tensor<4xi32>
  }
}
"""


def _run_text(platform, text, *args):
  dev = jax.devices(platform)[0]
  exe = dev.client.compile_and_load(text, executable_devices=xc.DeviceList((dev,)),
                                    compile_options=xc.CompileOptions())
  res = exe.execute_sharded([jax.device_put(a, dev) for a in args])
  return [np.asarray(a[0]) for a in res.disassemble_into_single_device_arrays()]


def test_composite_written_in_stablehlo_text():
  args = (_values((4,), np.float32), _values((4,), np.int32))
  want = _run_text("cpu", _COMPOSITE_TEXT, *args)
  got = _run_text("mlx", _COMPOSITE_TEXT, *args)
  assert_same(got, want, exact=True)
