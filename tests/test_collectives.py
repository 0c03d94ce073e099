"""Collectives on one device: jax.pmap over the mlx device and jax.shard_map over a 1-device mesh
(all_reduce, all_gather, reduce_scatter, all_to_all, collective_permute, axis_index), plus
StableHLO collectives written by hand (collective_broadcast, replica_id, a collective that names
a second process). Results are compared with the same program on jax's CPU backend.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax
from jax._src.lib import xla_client as xc
from jax.sharding import Mesh, PartitionSpec as P

from tests.ops.harness import assert_same

NUMERIC = [np.int8, np.int32, np.uint8, np.uint32, np.float16, ml_dtypes.bfloat16, np.float32,
           np.complex64]


def _values(shape, dtype, seed=0):
  rng = np.random.default_rng(seed)
  dtype = np.dtype(dtype)
  if dtype == np.bool_:
    return rng.integers(0, 2, shape).astype(dtype)
  if dtype.kind in "iu":
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
  if dtype.kind == "c":
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
  return (rng.standard_normal(shape) * 4).astype(dtype)


def _pmap_both(fn, *args, **pmap_kwargs):
  """Runs jax.pmap(fn) over one cpu device and over the mlx device; returns (cpu, mlx)."""
  outs = []
  for platform in ("cpu", "mlx"):
    f = jax.pmap(fn, axis_name="i", devices=jax.devices(platform)[:1], **pmap_kwargs)
    outs.append(jax.tree_util.tree_map(np.asarray, f(*args)))
  return outs


def _shard_map_both(fn, in_specs, out_specs, *args):
  outs = []
  for platform in ("cpu", "mlx"):
    mesh = Mesh(np.array(jax.devices(platform)[:1]), ("x",))
    f = jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                              check_vma=False))
    placed = [jax.device_put(a, jax.sharding.NamedSharding(mesh, s))
              for a, s in zip(args, in_specs)]
    outs.append(jax.tree_util.tree_map(np.asarray, f(*placed)))
  return outs


# ---- pmap ---------------------------------------------------------------------------------------

PMAP_REDUCTIONS = {
    "psum": lambda x: lax.psum(x, "i"),
    "pmax": lambda x: lax.pmax(x, "i"),
    "pmin": lambda x: lax.pmin(x, "i"),
}


@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 3)], ids=str)
@pytest.mark.parametrize("op, dtype", [
    (op, dtype) for op in PMAP_REDUCTIONS for dtype in NUMERIC
    if op == "psum" or np.dtype(dtype).kind != "c"  # jax defines pmax/pmin for real types only
], ids=lambda v: v if isinstance(v, str) else np.dtype(v).name)
def test_pmap_reductions(op, dtype, shape):
  x = _values((1, *shape), dtype)
  want, got = _pmap_both(PMAP_REDUCTIONS[op], x)
  assert_same(got, want, exact=True)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.complex64],
                         ids=lambda d: np.dtype(d).name)
def test_pmap_pmean(dtype):
  want, got = _pmap_both(lambda x: lax.pmean(x, "i"), _values((1, 7), dtype))
  assert_same(got, want, exact=True)


@pytest.mark.parametrize("dtype", NUMERIC + [np.bool_], ids=lambda d: np.dtype(d).name)
def test_pmap_gather_permute_index(dtype):
  def fn(x):
    return (lax.all_gather(x, "i"), lax.all_gather(x, "i", axis=1, tiled=True),
            lax.ppermute(x, "i", [(0, 0)]), lax.ppermute(x, "i", []), lax.axis_index("i"))

  want, got = _pmap_both(fn, _values((1, 3, 2), dtype))
  assert_same(got, want, exact=True)


def test_pmap_variadic_psum_and_scatter():
  # A tuple psum is one variadic all_reduce; psum_scatter / all_to_all on a 1-sized axis.
  def fn(a, b):
    s = lax.psum((a, b, a * 2), "i")
    return (s, lax.psum_scatter(a[None], "i"), lax.psum_scatter(b, "i", tiled=True),
            lax.all_to_all(a[None], "i", 0, 0), lax.pmax(b, "i") + lax.axis_index("i"))

  want, got = _pmap_both(fn, _values((1, 4), np.float32), _values((1, 6), np.int32))
  assert_same(got, want, exact=True)


def test_pmap_collectives_in_compute():
  # Collectives mixed with compute and a loop: the usual data-parallel training step shape.
  def step(w, x):
    def body(i, w):
      g = lax.pmean(jnp.tanh(x @ w), "i").sum(0)
      return w - 0.1 * g[:, None] * lax.psum(jnp.float32(1), "i")
    return lax.fori_loop(0, 3, body, w)

  want, got = _pmap_both(step, _values((1, 3, 3), np.float32), _values((1, 2, 3), np.float32))
  assert_same(got, want)


# ---- shard_map ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: np.dtype(d).name)
def test_shard_map_collectives(dtype):
  def fn(x):
    return (lax.psum(x, "x"), lax.all_gather(x, "x", tiled=True), lax.all_gather(x, "x"),
            lax.all_to_all(x, "x", 0, 0, tiled=True), lax.psum_scatter(x, "x", tiled=True),
            lax.ppermute(x, "x", [(0, 0)]), lax.axis_index("x")[None])

  specs = (P(), P(), P(None, "x"), P("x"), P("x"), P("x"), P("x"))
  want, got = _shard_map_both(fn, (P("x"),), specs, _values((4, 3), dtype))
  assert_same(got, want, exact=True)


def test_shard_map_psum_matmul():
  def fn(a, b):
    return lax.psum(a @ b, "x"), lax.pmax(jnp.abs(a).max(), "x")

  want, got = _shard_map_both(fn, (P(None, "x"), P("x", None)), (P(), P()),
                              _values((3, 4), np.float32), _values((4, 5), np.float32))
  assert_same(got, want)


# ---- StableHLO written by hand ------------------------------------------------------------------

def _run_text(platform, text, *args):
  dev = jax.devices(platform)[0]
  exe = dev.client.compile_and_load(text, executable_devices=xc.DeviceList((dev,)),
                                    compile_options=xc.CompileOptions())
  res = exe.execute_sharded([jax.device_put(a, dev) for a in args])
  return [np.asarray(a[0]) for a in res.disassemble_into_single_device_arrays()]


_HAND_WRITTEN = """
module @collectives attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<2x3xf32>, %n: tensor<4xi32>) -> (tensor<2x3xf32>,
      tensor<4xi32>, tensor<ui32>, tensor<ui32>, tensor<2x3xf32>, tensor<4xi32>, tensor<2x3xf32>) {
    %b = stablehlo.negate %x : tensor<2x3xf32>
    %r = "stablehlo.all_reduce"(%n) ({
      ^bb0(%a: tensor<i32>, %c: tensor<i32>):
        %m = stablehlo.multiply %a, %c : tensor<i32>
        stablehlo.return %m : tensor<i32>
    }) {replica_groups = dense<> : tensor<0x0xi64>} : (tensor<4xi32>) -> tensor<4xi32>
    %rid = stablehlo.replica_id : tensor<ui32>
    %pid = stablehlo.partition_id : tensor<ui32>
    %p = "stablehlo.collective_permute"(%x) {
        source_target_pairs = dense<[[0, 0]]> : tensor<1x2xi64>}
        : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %s = "stablehlo.reduce_scatter"(%n) ({
      ^bb0(%a: tensor<i32>, %c: tensor<i32>):
        %m = stablehlo.add %a, %c : tensor<i32>
        stablehlo.return %m : tensor<i32>
    }) {replica_groups = dense<[[0]]> : tensor<1x1xi64>, scatter_dimension = 0 : i64}
        : (tensor<4xi32>) -> tensor<4xi32>
    %t = "stablehlo.all_to_all"(%x) {replica_groups = dense<[[0]]> : tensor<1x1xi64>,
        split_dimension = 1 : i64, concat_dimension = 0 : i64, split_count = 1 : i64}
        : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %b, %r, %rid, %pid, %p, %s, %t : tensor<2x3xf32>, tensor<4xi32>, tensor<ui32>,
        tensor<ui32>, tensor<2x3xf32>, tensor<4xi32>, tensor<2x3xf32>
  }
}
"""


def test_hand_written_collectives():
  args = (_values((2, 3), np.float32), _values((4,), np.int32))
  want = _run_text("cpu", _HAND_WRITTEN, *args)
  got = _run_text("mlx", _HAND_WRITTEN, *args)
  assert_same(got, want, exact=True)
  assert_same(got[1], args[1], exact=True)  # one participant: the all_reduce body never runs


def test_collective_broadcast():
  # XLA:CPU has no collective-broadcast; per the spec, with one process in the group the
  # result is the operand (the source's value).
  text = """
  module @bcast attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
    func.func public @main(%x: tensor<2x3xf32>, %n: tensor<5xui8>) -> (tensor<2x3xf32>,
        tensor<5xui8>) {
      %b = "stablehlo.collective_broadcast"(%x) {replica_groups = dense<[[0]]> : tensor<1x1xi64>}
          : (tensor<2x3xf32>) -> tensor<2x3xf32>
      %c = "stablehlo.collective_broadcast"(%n) {replica_groups = dense<0> : tensor<1x1xi64>,
          channel_handle = #stablehlo.channel_handle<handle = 1, type = 0>}
          : (tensor<5xui8>) -> tensor<5xui8>
      return %b, %c : tensor<2x3xf32>, tensor<5xui8>
    }
  }
  """
  args = [_values((2, 3), np.float32), _values((5,), np.uint8)]
  assert_same(_run_text("mlx", text, *args), args, exact=True)


def test_collective_naming_another_process_is_refused():
  text = """
  module @two attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
    func.func public @main(%x: tensor<4xf32>) -> tensor<8xf32> {
      %g = "stablehlo.all_gather"(%x) {all_gather_dim = 0 : i64,
          replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<8xf32>
      return %g : tensor<8xf32>
    }
  }
  """
  with pytest.raises(Exception, match=r"stablehlo.all_gather.*process 1"):
    _run_text("mlx", text, np.ones(4, np.float32))
