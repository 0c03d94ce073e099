"""Host <-> device transfers are bit-exact for every dtype jax can place on a device."""

from __future__ import annotations

import gc
import os

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _enable_x64():
  # int64/uint64/float64/complex128 keep their width (only within these tests).
  with jax.enable_x64(True):
    yield


SHAPES = [(), (0,), (0, 3), (1,), (7, 13), (3, 1, 5, 2)]

# name -> (dtype, generator of valid values from a seeded Generator and a shape)
def _bits(dtype, mask=None):
  def make(rng, shape):
    n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    raw = rng.integers(0, 256, size=n, dtype=np.uint8)
    if mask is not None:
      raw &= mask
    return raw.view(dtype).reshape(shape)
  return make


def _ints(dtype, lo, hi):
  return lambda rng, shape: rng.integers(lo, hi, size=shape, endpoint=True).astype(dtype)


DTYPES = {
    "bool": (np.bool_, lambda rng, shape: rng.integers(0, 2, size=shape).astype(np.bool_)),
    "int8": (np.int8, _bits(np.int8)),
    "int16": (np.int16, _bits(np.int16)),
    "int32": (np.int32, _bits(np.int32)),
    "int64": (np.int64, _bits(np.int64)),
    "uint8": (np.uint8, _bits(np.uint8)),
    "uint16": (np.uint16, _bits(np.uint16)),
    "uint32": (np.uint32, _bits(np.uint32)),
    "uint64": (np.uint64, _bits(np.uint64)),
    # Random bit patterns: NaN payloads, -0.0, infinities and subnormals all round-trip.
    "float16": (np.float16, _bits(np.float16)),
    "bfloat16": (ml_dtypes.bfloat16, _bits(ml_dtypes.bfloat16)),
    "float32": (np.float32, _bits(np.float32)),
    "float64": (np.float64, _bits(np.float64)),
    "complex64": (np.complex64, _bits(np.complex64)),
    "complex128": (np.complex128, _bits(np.complex128)),
    "int2": (ml_dtypes.int2, _ints(ml_dtypes.int2, -2, 1)),
    "int4": (ml_dtypes.int4, _ints(ml_dtypes.int4, -8, 7)),
    "uint2": (ml_dtypes.uint2, _ints(ml_dtypes.uint2, 0, 3)),
    "uint4": (ml_dtypes.uint4, _ints(ml_dtypes.uint4, 0, 15)),
    "float8_e4m3fn": (ml_dtypes.float8_e4m3fn, _bits(ml_dtypes.float8_e4m3fn)),
    "float8_e5m2": (ml_dtypes.float8_e5m2, _bits(ml_dtypes.float8_e5m2)),
    "float8_e4m3b11fnuz": (ml_dtypes.float8_e4m3b11fnuz, _bits(ml_dtypes.float8_e4m3b11fnuz)),
    "float8_e4m3fnuz": (ml_dtypes.float8_e4m3fnuz, _bits(ml_dtypes.float8_e4m3fnuz)),
    "float8_e5m2fnuz": (ml_dtypes.float8_e5m2fnuz, _bits(ml_dtypes.float8_e5m2fnuz)),
    "float8_e4m3": (ml_dtypes.float8_e4m3, _bits(ml_dtypes.float8_e4m3)),
    "float8_e3m4": (ml_dtypes.float8_e3m4, _bits(ml_dtypes.float8_e3m4)),
    "float8_e8m0fnu": (ml_dtypes.float8_e8m0fnu, _bits(ml_dtypes.float8_e8m0fnu)),
    "float4_e2m1fn": (ml_dtypes.float4_e2m1fn, _bits(ml_dtypes.float4_e2m1fn, mask=0x0F)),
}


def _assert_bit_exact(got: np.ndarray, want: np.ndarray):
  assert got.dtype == want.dtype, (got.dtype, want.dtype)
  assert got.shape == want.shape
  np.testing.assert_array_equal(np.ascontiguousarray(got).view(np.uint8),
                                np.ascontiguousarray(want).view(np.uint8))


def _supported_by_jax(dtype) -> bool:
  try:
    jax.numpy.zeros((1,), dtype)
    return True
  except (TypeError, ValueError):
    return False


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)) or "scalar")
@pytest.mark.parametrize("name", list(DTYPES))
def test_round_trip_is_bit_exact(name, shape, mlx_device):
  dtype, make = DTYPES[name]
  if not _supported_by_jax(dtype):
    pytest.skip(f"jax {jax.__version__} cannot place {name} on a device")
  x = make(np.random.default_rng(hash((name, shape)) % 2**32), shape)
  y = jax.device_put(x, mlx_device)
  assert y.dtype == x.dtype and y.shape == x.shape
  _assert_bit_exact(np.asarray(y), x)


@pytest.mark.parametrize("name", ["float32", "int8", "complex128", "bfloat16", "int4"])
def test_non_contiguous_host_arrays(name, mlx_device):
  dtype, make = DTYPES[name]
  x = make(np.random.default_rng(7), (9, 14))
  for view in (x[::2], x.T, x[::-1, 1::3], x[:, ::-2].T):
    _assert_bit_exact(np.asarray(jax.device_put(view, mlx_device)), np.ascontiguousarray(view))


def test_large_array_round_trip(mlx_device):
  x = np.random.default_rng(0).integers(0, 2**31, size=25_000_000, dtype=np.int32)  # 10^8 bytes
  y = jax.device_put(x, mlx_device)
  np.testing.assert_array_equal(np.asarray(y), x)
  y.delete()


def test_delete_then_read_is_an_error(mlx_device):
  y = jax.device_put(np.ones(4, np.float32), mlx_device)
  y.delete()
  assert y.is_deleted()
  with pytest.raises(RuntimeError, match="deleted"):
    np.asarray(y)


def test_block_until_ready_and_is_ready(mlx_device):
  y = jax.device_put(np.arange(1000, dtype=np.float32), mlx_device)
  y.block_until_ready()
  assert y.is_ready()


def test_copy_to_cpu_and_back(mlx_device, cpu_device):
  x = np.arange(12, dtype=np.float32).reshape(3, 4)
  on_mlx = jax.device_put(x, mlx_device)
  on_cpu = jax.device_put(on_mlx, cpu_device)
  back = jax.device_put(on_cpu, mlx_device)
  _assert_bit_exact(np.asarray(back), x)
  assert on_cpu.devices() == {cpu_device}


def _rss_bytes() -> int:
  with open("/proc/self/statm") as f:
    return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_put_get_delete_cycles_keep_memory_flat(mlx_device):
  x = np.random.default_rng(1).standard_normal((256, 256)).astype(np.float32)  # 256 KiB

  def cycles(n):
    for _ in range(n):
      y = jax.device_put(x, mlx_device)
      np.asarray(y)
      y.delete()
    gc.collect()

  cycles(1000)  # warm-up: allocator pools, jax caches
  before = _rss_bytes()
  cycles(10_000)
  after = _rss_bytes()
  assert after <= before * 1.05, f"RSS grew from {before} to {after} bytes"


def test_unsafe_buffer_pointer_addresses_the_elements(mlx_device):
  # jax's Array.unsafe_buffer_pointer(): the address of the dense row-major elements, stable for
  # the buffer's life; a copy or a program output has its own (even where MLX shares memory),
  # a no-op convert is its input (jax's testConvertElementTypeAvoidsCopies), a deleted buffer
  # is an error.
  import ctypes
  x = np.arange(24, dtype=np.float32).reshape(4, 6)
  a = jax.device_put(x, mlx_device)
  p = a.unsafe_buffer_pointer()
  assert p != 0 and p == a.unsafe_buffer_pointer()
  np.testing.assert_array_equal(np.ctypeslib.as_array((ctypes.c_float * 24).from_address(p)),
                                x.ravel())
  t = jax.jit(lambda v: v.T)(a)  # may be a strided view in MLX: made dense for the pointer
  q = t.unsafe_buffer_pointer()
  np.testing.assert_array_equal(np.ctypeslib.as_array((ctypes.c_float * 24).from_address(q)),
                                x.T.ravel())
  np.testing.assert_array_equal(np.asarray(t), x.T)
  assert jnp.array(a, copy=True).unsafe_buffer_pointer() != p
  assert jax.jit(lambda v: v)(a).unsafe_buffer_pointer() != p  # a new buffer, as XLA's
  assert jax.lax.convert_element_type(a, jnp.float32).unsafe_buffer_pointer() == p  # a itself
  a.delete()
  with pytest.raises(Exception, match="deleted"):
    a.unsafe_buffer_pointer()
