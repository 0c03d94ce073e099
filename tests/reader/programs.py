"""Real JAX programs for the reader tests, and the portable artifacts jaxlib makes of them.

PROGRAMS is a table of Program(name, fn, args): `jax.jit(fn).lower(*args)` is what a user's
`jax.jit(fn)(*args)` hands to a PJRT plugin. `artifact(name, target)` serializes the lowered
module as a StableHLO portable artifact (MLIR bytecode of VHLO) for one target version, the same
way jaxlib does before PJRT_Client_Compile. Lowering is cached per program, so serializing one
program for several targets lowers it once.

Run as a script to write every artifact to a folder:
  .venv/bin/python tests/reader/programs.py OUT_DIR [--targets 0.9.0,1.17.0] [--filter SUBSTR]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import pathlib
import sys
from typing import Any, Callable

import numpy as np

# Lower for jax's CPU backend only: an installed in-development plugin must not be initialized
# (jax.devices() below would load it).
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
import jax.extend.random as jax_random_ext  # noqa: E402

from jax._src.interpreters import mlir as mlir_interp  # noqa: E402
from jax._src.lib import _jax  # noqa: E402
from jaxlib.mlir.dialects import stablehlo  # noqa: E402

# Source locations must survive into the artifact (the location test checks them).
jax.config.update("jax_include_full_tracebacks_in_locations", True)

MIN_VERSION = stablehlo.get_minimum_version()
CURRENT_VERSION = stablehlo.get_current_version()
# min (bytecode v0), bytecode v3, 1.0.0 (v6), a middle one, current.
TARGETS = tuple(dict.fromkeys([MIN_VERSION, "0.12.0", "1.0.0", "1.9.0", CURRENT_VERSION]))


@dataclasses.dataclass(frozen=True)
class Program:
  name: str
  fn: Callable[..., Any]
  args: tuple
  x64: bool = False
  jit_kwargs: dict = dataclasses.field(default_factory=dict)
  platforms: tuple | None = None  # lower for these platforms (e.g. ("tpu",)) instead of the default


PROGRAMS: dict[str, Program] = {}


def add(name: str, fn: Callable[..., Any], *args, x64: bool = False, platforms=None,
        **jit_kwargs) -> None:
  assert name not in PROGRAMS, f"duplicate program {name}"
  PROGRAMS[name] = Program(name, fn, tuple(args), x64, jit_kwargs, platforms)


def S(shape, dtype=jnp.float32):  # noqa: N802 - short on purpose, used hundreds of times
  """An abstract argument: lowering needs only shapes and dtypes."""
  return jax.ShapeDtypeStruct(tuple(shape), jnp.dtype(dtype))


f32, f16, bf16 = jnp.float32, jnp.float16, jnp.bfloat16
i8, i16, i32, i64 = jnp.int8, jnp.int16, jnp.int32, jnp.int64
u8, u16, u32, u64 = jnp.uint8, jnp.uint16, jnp.uint32, jnp.uint64
c64, f64, c128 = jnp.complex64, jnp.float64, jnp.complex128
FLOATS = {"f16": f16, "bf16": bf16, "f32": f32}
INTS = {"i8": i8, "i16": i16, "i32": i32, "u8": u8, "u16": u16, "u32": u32}
INTS64 = {"i64": i64, "u64": u64}
_rng = np.random.default_rng(0)


def location_marker_program(x):
  y = jnp.cos(x)  # LOCATION-MARKER: the cosine op must point at this line
  return y * 2.0


add("location_marker", location_marker_program, S((4,)))

# ---------------------------------------------------------------- elementwise, per dtype

def _float_unary(x):
  a = jnp.sin(x) + jnp.cos(x) * jnp.tanh(x)
  b = jnp.exp(x) - jnp.log1p(jnp.abs(x)) + jnp.expm1(x)
  c = jnp.sqrt(jnp.abs(x)) + lax.rsqrt(jnp.abs(x) + 1) + jnp.cbrt(x)
  d = jnp.floor(x) + jnp.ceil(x) + jnp.round(x) + jnp.sign(x) + lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)
  e = jax.nn.sigmoid(x) + jnp.tan(x) + jnp.arctan2(x, a) + jnp.log(jnp.abs(x) + 1)
  return a, b, c, d, e, jnp.isfinite(x), jnp.isnan(b)


def _float_binary(x, y):
  return (x + y, x - y, x * y, x / y, jnp.maximum(x, y), jnp.minimum(x, y), x ** y,
          jnp.remainder(x, y), lax.rem(x, y), jnp.nextafter(x, y), x < y, x >= y, x == y,
          lax.clamp(x.dtype.type(-1), x, y))


for _n, _t in FLOATS.items():
  add(f"float_unary_{_n}", _float_unary, S((5, 7), _t))
  add(f"float_binary_{_n}", _float_binary, S((8,), _t), S((8,), _t))
  add(f"float_special_{_n}", lambda x: (lax.erf(x), lax.erf_inv(x), lax.lgamma(x), lax.digamma(x),
                                         lax.bessel_i0e(x), lax.bessel_i1e(x), jax.nn.gelu(x)),
      S((16,), _t))
  add(f"reduce_precision_{_n}", lambda x: lax.reduce_precision(x, exponent_bits=5, mantissa_bits=7),
      S((4, 4), _t))
add("float_unary_f64", _float_unary, S((5,), f64), x64=True)
add("float_binary_f64", _float_binary, S((5,), f64), S((5,), f64), x64=True)


def _int_binary(x, y):
  out = [x + y, x - y, x * y, x // jnp.where(y == 0, 1, y), x % jnp.where(y == 0, 1, y),
         x & y, x | y, x ^ y, ~x, jnp.maximum(x, y), jnp.minimum(x, y), x < y, x != y,
         lax.population_count(x), lax.clz(x), lax.shift_left(x, y), lax.shift_right_logical(x, y),
         lax.shift_right_arithmetic(x, y), lax.integer_pow(x, 3), jnp.abs(x), jnp.sign(x)]
  return out


for _n, _t in {**INTS}.items():
  add(f"int_binary_{_n}", _int_binary, S((3, 5), _t), S((3, 5), _t))
for _n, _t in INTS64.items():
  add(f"int_binary_{_n}", _int_binary, S((3, 5), _t), S((3, 5), _t), x64=True)


def _bool_ops(a, b):
  return (a & b, a | b, a ^ b, ~a, jnp.where(a, 1.0, -1.0), jnp.any(a, axis=0), jnp.all(b),
          jnp.logical_xor(a, b), a == b, jnp.sum(a), a.astype(jnp.int32))


add("bool_ops", _bool_ops, S((4, 6), bool), S((4, 6), bool))


def _complex_ops(z, w):
  return (z * w, z / w, jnp.conj(z), jnp.abs(z), jnp.angle(z), jnp.exp(z), jnp.log(z), jnp.sqrt(z),
          z.real, z.imag, lax.complex(z.real, w.imag), jnp.sum(z), z @ w.T, jnp.sin(z), z == w)


add("complex64_ops", _complex_ops, S((3, 3), c64), S((3, 3), c64))
add("complex128_ops", _complex_ops, S((3, 3), c128), S((3, 3), c128), x64=True)


def _convert_all(x):
  outs = []
  for t in [bool, i8, i16, i32, u8, u16, u32, f16, bf16, f32, c64]:
    outs.append(x.astype(t))
  outs.append(x.astype(f16).astype(u8).astype(f32))
  return outs


add("convert_all_from_f32", _convert_all, S((6,), f32))
add("convert_all_from_i32", _convert_all, S((6,), i32))
add("convert_all_from_u8", _convert_all, S((6,), u8))
add("convert_all_from_bool", _convert_all, S((6,), bool))
add("convert_all_from_bf16", _convert_all, S((6,), bf16))
add("convert_x64", lambda x: (x.astype(f64), x.astype(i64), x.astype(u64), x.astype(c128),
                              x.astype(f64).astype(f32)), S((6,), f32), x64=True)
add("bitcast_convert", lambda x: (lax.bitcast_convert_type(x, i32), lax.bitcast_convert_type(x, u8),
                                  lax.bitcast_convert_type(x.astype(f16), i16),
                                  lax.bitcast_convert_type(x.astype(bf16), u16)), S((4,), f32))
add("float8_types", lambda x: (x.astype(jnp.float8_e4m3fn).astype(f32),
                               x.astype(jnp.float8_e5m2).astype(f32),
                               x.astype(jnp.float8_e4m3fnuz).astype(f32),
                               x.astype(jnp.float8_e5m2fnuz).astype(f32),
                               x.astype(jnp.float8_e4m3b11fnuz).astype(f32)), S((8,), f32))
add("float8_new_types", lambda x: (x.astype(jnp.float8_e3m4).astype(f32),
                                   x.astype(jnp.float8_e4m3).astype(f32),
                                   x.astype(jnp.float8_e8m0fnu).astype(f32),
                                   x.astype(jnp.float4_e2m1fn).astype(f32)), S((8,), f32))
add("int4_types", lambda x: (x.astype(jnp.int4).astype(i32), x.astype(jnp.uint4).astype(i32),
                             x.astype(jnp.int2).astype(i32) if hasattr(jnp, "int2") else x),
    S((8,), i32))
add("f8_matmul", lambda a, b: jnp.matmul(a, b, preferred_element_type=f32),
    S((4, 8), jnp.float8_e4m3fn), S((8, 4), jnp.float8_e4m3fn))

# ---------------------------------------------------------------- constants of every dtype

def _const_fn(arr):
  return lambda x: x + jnp.asarray(arr).astype(x.dtype)


for _n, _t in {**FLOATS, **INTS, "bool": bool, "c64": c64}.items():
  _arr = (_rng.standard_normal((3, 4)) * 10).astype(np.float32)
  _np_t = jnp.dtype(_t)
  add(f"dense_const_{_n}", (lambda a: lambda x: (x, jnp.asarray(a), jnp.asarray(a)[::-1]))(
      np.asarray(_arr).astype(_np_t)), S((3, 4), _t))
add("dense_const_bool_pattern", lambda x: x ^ jnp.asarray(np.array([True, False, True, True, False,
                                                                     False, False, True, True]), bool),
    S((9,), bool))
add("splat_consts", lambda x: (x + 1.5, x * -0.0, jnp.full((2, 3), jnp.nan), jnp.full((3,), -jnp.inf),
                               jnp.zeros((2, 2), i32) + 7, jnp.ones((5,), bool),
                               jnp.full((2,), 1 + 2j, c64), jnp.full((2,), 255, u8)), S((4,), f32))
add("special_float_consts", lambda x: x + jnp.asarray(np.array(
    [np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45, 3.4e38, -1e-38], np.float32)), S((9,), f32))
add("dense_const_i64_u64", lambda x: (x + jnp.asarray(np.array([2**40, -3, 2**62], np.int64)),
                                      jnp.asarray(np.array([2**63 + 5, 1, 0], np.uint64))),
    S((3,), i64), x64=True)
add("dense_const_f64_c128", lambda x: (x * jnp.asarray(np.array([1e300, np.pi, -0.0], np.float64)),
                                       jnp.asarray(np.array([1 + 2j, -3j, 0], np.complex128))),
    S((3,), f64), x64=True)
_big = _rng.standard_normal((64, 64)).astype(np.float32)
add("closure_const_16k", lambda x: x @ _big, S((2, 64), f32))
add("scalar_args_all_dtypes", lambda a, b, c, d, e, f, g: (a + 1, b * 2, c - 3, d / 2, e | True,
                                                              f + 1, g * 2),
    S((), f32), S((), i32), S((), u8), S((), f16), S((), bool), S((), bf16), S((), c64))
add("zero_sized", lambda x, y: (x.sum(axis=0), jnp.concatenate([x, x]), y @ y.T), S((0, 3)),
    S((2, 0)))
add("rank_6", lambda x: jnp.transpose(x, (5, 4, 3, 2, 1, 0)).sum(axis=(1, 3)), S((1, 2, 1, 3, 2, 2)))

# ---------------------------------------------------------------- reductions

add("reduce_sum_axes", lambda x: (x.sum(), x.sum(0), x.sum((1, 2)), x.mean(-1), x.var(0), x.std()),
    S((3, 4, 5)))
add("reduce_max_min", lambda x: (x.max(), x.min(1), jnp.argmax(x, 0), jnp.argmin(x, -1),
                                 jnp.nanmax(x)), S((6, 7)))
add("reduce_int", lambda x: (x.sum(), x.prod(0), x.max(1), jnp.argmax(x), x.min()), S((6, 7), i32))
add("reduce_uint8", lambda x: (x.sum(dtype=u8), x.max(0), jnp.bitwise_or.reduce(x, axis=1)),
    S((6, 7), u8))
add("reduce_bool", lambda x: (x.any(), x.all(0), x.sum(1)), S((5, 5), bool))
add("reduce_f16_bf16", lambda x, y: (x.sum(0), y.max(1), x.mean(), jnp.argmax(y, 0)), S((4, 8), f16),
    S((4, 8), bf16))
add("cumsum_cumprod", lambda x: (jnp.cumsum(x, 0), jnp.cumprod(x, 1), lax.cummax(x, 0),
                                 lax.cummin(x, 1), lax.cumlogsumexp(x, 0)), S((8, 5)))
add("cumsum_int", lambda x: (jnp.cumsum(x), jnp.cumsum(x, dtype=i32)), S((17,), i8))
add("logsumexp_softmax", lambda x: (jax.nn.logsumexp(x, -1), jax.nn.softmax(x, -1),
                                    jax.nn.log_softmax(x, 0)), S((4, 10)))
add("variadic_reduce", lambda x, y: lax.reduce((x, y), (np.float32(-np.inf), np.int32(0)),
                                               lambda a, b: (jnp.maximum(a[0], b[0]),
                                                             jnp.where(a[0] > b[0], a[1], b[1])),
                                               (1,)), S((4, 9)), S((4, 9), i32))
add("complex_reduce", lambda z: (z.sum(0), z.prod(), jnp.mean(z)), S((5, 3), c64))
add("associative_scan", lambda x: lax.associative_scan(jnp.add, x), S((16, 3)))
add("reduce_window_pools", lambda x: (
    lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"),
    lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "VALID"),
    lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), ((0, 0), (1, 2), (2, 1), (0, 0)),
                      base_dilation=(1, 2, 1, 1), window_dilation=(1, 1, 2, 1))),
    S((2, 8, 8, 3)))
add("maxpool_grad_select_and_scatter", jax.grad(lambda x: lax.reduce_window(
    x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID").sum()), S((2, 8, 8, 3)))
add("avgpool_grad", jax.grad(lambda x: lax.reduce_window(
    x, 0.0, lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME").sum()), S((1, 6, 6, 2)))
add("histogram_bincount", lambda x: (jnp.bincount(x, length=10), jnp.histogram(x.astype(f32), 5)[0]),
    S((50,), i32))

# ---------------------------------------------------------------- shapes and movement

add("reshape_transpose", lambda x: (x.reshape(6, 4).T, jnp.swapaxes(x, 0, 2), x.ravel(),
                                    jnp.moveaxis(x, 0, -1)), S((2, 3, 4)))
add("broadcast_expand", lambda x, y: (x[:, None] + y[None, :], jnp.broadcast_to(x, (4, 3, 5)),
                                      jnp.expand_dims(y, (0, 2))), S((5,)), S((7,)))
add("concat_stack_split", lambda x, y: (jnp.concatenate([x, y], 1), jnp.stack([x, y]),
                                        jnp.split(x, 2, 0), jnp.hstack([x, y]), jnp.vstack([x, y])),
    S((4, 3)), S((4, 3)))
add("pad_modes", lambda x: (jnp.pad(x, ((1, 2), (3, 0))), jnp.pad(x, 2, mode="reflect"),
                            jnp.pad(x, 1, mode="edge"), jnp.pad(x, 2, mode="wrap"),
                            lax.pad(x, 0.0, ((-1, 2, 1), (0, -1, 2)))), S((5, 6)))
add("slices", lambda x: (x[1:3], x[::2, ::-1], x[..., 1], x[-1], x[None, 2:, :1],
                         lax.slice(x, (0, 1), (4, 5), (2, 2))), S((6, 7)))
add("dynamic_slice_update", lambda x, i, j: (lax.dynamic_slice(x, (i, j), (2, 3)),
                                             lax.dynamic_update_slice(x, jnp.ones((2, 2)), (j, i)),
                                             lax.dynamic_index_in_dim(x, i, 1)),
    S((6, 7)), S((), i32), S((), i32))
add("rev_roll_flip", lambda x: (jnp.flip(x, 0), jnp.roll(x, 3, 1), jnp.roll(x, -1), jnp.rot90(x)),
    S((5, 6)))
add("iota_arange", lambda x: (jnp.arange(10) + x, lax.iota(i32, 7), jnp.linspace(0.0, 1.0, 9),
                              lax.broadcasted_iota(u8, (3, 4), 1), jnp.eye(4, dtype=bf16)), S((), i32))
add("tile_repeat", lambda x: (jnp.tile(x, (2, 3)), jnp.repeat(x, 3, axis=0),
                              jnp.repeat(x, jnp.array([1, 2, 0]), axis=1, total_repeat_length=3)),
    S((3, 3)))
add("triu_tril_diag", lambda x: (jnp.triu(x), jnp.tril(x, -1), jnp.diag(x), jnp.diagonal(x, 1),
                                 jnp.diag(x[0]), jnp.trace(x)), S((5, 5)))
add("where_select_clip", lambda c, x, y: (jnp.where(c, x, y), lax.select(c, x, y), jnp.clip(x, -1, 1),
                                          lax.select_n(c.astype(i32), x, y)),
    S((4, 4), bool), S((4, 4)), S((4, 4)))
add("squeeze_expand", lambda x: (jnp.squeeze(x), x[:, None, :, None], jnp.atleast_3d(x[0, 0])),
    S((1, 4, 1, 5)))
add("sort_free_unique", lambda x: jnp.unique(x, size=8, fill_value=-1), S((20,), i32))
add("meshgrid_outer_kron", lambda x, y: (jnp.meshgrid(x, y), jnp.outer(x, y), jnp.kron(x[:3], y[:2])),
    S((5,)), S((4,)))
add("optimization_barrier", lambda x, y: lax.optimization_barrier((x * 2, y + 1)), S((3,)),
    S((3,), i32))
add("stop_gradient_mixed", jax.grad(lambda x: (x * lax.stop_gradient(x)).sum()), S((7,)))
add("nonzero_static_size", lambda x: (jnp.nonzero(x, size=5), jnp.argwhere(x > 0, size=3),
                                      jnp.flatnonzero(x, size=4)), S((10,), i32))
add("polyval_convolve", lambda p, x: (jnp.polyval(p, x), jnp.convolve(x, p), jnp.correlate(x, p, "same")),
    S((4,)), S((12,)))
add("interp_digitize", lambda x, xp, fp: (jnp.interp(x, xp, fp), jnp.digitize(x, xp)),
    S((9,)), S((5,)), S((5,)))

# ---------------------------------------------------------------- dot / einsum

add("matmul_f32", jnp.matmul, S((8, 16)), S((16, 4)))
add("matmul_bf16", jnp.matmul, S((8, 16), bf16), S((16, 4), bf16))
add("matmul_f16", jnp.matmul, S((8, 16), f16), S((16, 4), f16))
add("matmul_batched", jnp.matmul, S((3, 8, 16)), S((3, 16, 4)))
add("matmul_broadcast_batch", jnp.matmul, S((2, 1, 8, 16)), S((5, 16, 4)))
add("matvec_vecdot", lambda a, v: (a @ v, v @ a.T, jnp.dot(v, v), jnp.vdot(v, v), jnp.inner(v, v)),
    S((5, 6)), S((6,)))
add("dot_int8_to_i32", lambda a, b: lax.dot(a, b, preferred_element_type=i32), S((4, 8), i8),
    S((8, 3), i8))
add("dot_bf16_to_f32", lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ())),
                                                    preferred_element_type=f32), S((4, 8), bf16),
    S((8, 3), bf16))
add("dot_precision_highest", lambda a, b: jnp.matmul(a, b, precision=lax.Precision.HIGHEST),
    S((4, 8)), S((8, 3)))
add("dot_int32", jnp.matmul, S((4, 5), i32), S((5, 2), i32))
add("dot_complex", jnp.matmul, S((4, 5), c64), S((5, 2), c64))
add("einsum_attention_like", lambda q, k, v: jnp.einsum("bhqd,bhkd,bhkv->bhqv", q, k, v),
    S((2, 3, 4, 8)), S((2, 3, 5, 8)), S((2, 3, 5, 6)))
add("einsum_trace_diag", lambda x: (jnp.einsum("ii->", x), jnp.einsum("ii->i", x),
                                    jnp.einsum("ij,jk->ki", x, x)), S((4, 4)))
add("dot_general_multi_contract", lambda a, b: lax.dot_general(a, b, (((1, 3), (2, 0)), ((0,), (1,)))),
    S((2, 3, 5, 4)), S((4, 2, 3, 6)))
add("tensordot", lambda a, b: jnp.tensordot(a, b, axes=([1, 2], [0, 1])), S((3, 4, 5)), S((4, 5, 2)))

# ---------------------------------------------------------------- convolutions

def _conv(lhs_shape, rhs_shape, dtype=f32, **kw):
  return (lambda x, w: lax.conv_general_dilated(x, w, **kw)), S(lhs_shape, dtype), S(rhs_shape, dtype)


for _name, (_fn, *_args) in {
    "conv1d_valid": _conv((2, 3, 16), (4, 3, 3), window_strides=(1,), padding="VALID"),
    "conv1d_stride_pad": _conv((2, 3, 16), (4, 3, 5), window_strides=(2,), padding=((2, 1),)),
    "conv2d_same": _conv((2, 3, 8, 8), (5, 3, 3, 3), window_strides=(1, 1), padding="SAME"),
    "conv2d_strided": _conv((1, 4, 9, 9), (8, 4, 3, 3), window_strides=(2, 2), padding="VALID"),
    "conv2d_rhs_dilation": _conv((1, 2, 12, 12), (3, 2, 3, 3), window_strides=(1, 1), padding="SAME",
                                 rhs_dilation=(2, 2)),
    "conv2d_lhs_dilation": _conv((1, 2, 5, 5), (3, 2, 3, 3), window_strides=(1, 1),
                                 padding=((1, 1), (2, 2)), lhs_dilation=(2, 2)),
    "conv2d_groups": _conv((2, 6, 8, 8), (9, 2, 3, 3), window_strides=(1, 1), padding="SAME",
                           feature_group_count=3),
    "conv2d_depthwise": _conv((1, 4, 8, 8), (4, 1, 3, 3), window_strides=(1, 1), padding="SAME",
                              feature_group_count=4),
    "conv2d_batch_group": _conv((4, 3, 6, 6), (6, 3, 3, 3), window_strides=(1, 1), padding="VALID",
                                batch_group_count=2),
    "conv2d_nhwc": _conv((2, 8, 8, 3), (3, 3, 3, 4), window_strides=(1, 1), padding="SAME",
                         dimension_numbers=("NHWC", "HWIO", "NHWC")),
    "conv2d_bf16": _conv((1, 3, 8, 8), (4, 3, 3, 3), bf16, window_strides=(1, 1), padding="SAME"),
    "conv2d_f16": _conv((1, 3, 8, 8), (4, 3, 3, 3), f16, window_strides=(1, 1), padding="SAME"),
    "conv3d": _conv((1, 2, 6, 6, 6), (3, 2, 3, 3, 3), window_strides=(1, 2, 1), padding="SAME"),
    "conv3d_dilated": _conv((1, 2, 8, 8, 8), (2, 2, 2, 2, 2), window_strides=(1, 1, 1),
                            padding="VALID", rhs_dilation=(2, 1, 3)),
}.items():
  add(_name, _fn, *_args)
add("conv2d_precision", lambda x, w: lax.conv(x, w, (1, 1), "SAME", precision=lax.Precision.HIGHEST),
    S((1, 3, 5, 5)), S((2, 3, 3, 3)))
add("conv_int8_pref", lambda x, w: lax.conv_general_dilated(x, w, (1,), "SAME",
                                                            preferred_element_type=i32),
    S((1, 2, 8), i8), S((3, 2, 3), i8))
add("conv_transpose_2d", lambda x, w: lax.conv_transpose(x, w, (2, 2), "SAME",
                                                         dimension_numbers=("NHWC", "HWIO", "NHWC")),
    S((1, 5, 5, 3)), S((3, 3, 3, 6)))
add("conv_transpose_1d", lambda x, w: lax.conv_transpose(x, w, (3,), "VALID",
                                                         dimension_numbers=("NWC", "WIO", "NWC")),
    S((2, 7, 4)), S((4, 4, 2)))
add("conv2d_grad_both", jax.grad(lambda x, w: jnp.sum(lax.conv(x, w, (2, 2), "SAME") ** 2), (0, 1)),
    S((2, 3, 8, 8)), S((4, 3, 3, 3)))
add("jnp_convolve2d_scipy", lambda x, k: jax.scipy.signal.convolve2d(x, k, mode="same"),
    S((10, 10)), S((3, 3)))

# ---------------------------------------------------------------- control flow

def _scan_cumsum(x):
  return lax.scan(lambda c, xi: (c + xi, c * xi), jnp.zeros(x.shape[1:]), x)


add("scan_carry_ys", _scan_cumsum, S((10, 3)))
add("scan_reverse_unroll", lambda x: lax.scan(lambda c, xi: (c * 0.5 + xi, jnp.sin(c)), x[0], x,
                                              reverse=True, unroll=2), S((9, 4)))
add("scan_no_xs", lambda x: lax.scan(lambda c, _: (c @ c * 0.1, c.sum()), x, None, length=5), S((3, 3)))
add("scan_multi_carry", lambda x, y: lax.scan(
    lambda c, xs: ((c[0] + xs[0], c[1] * xs[1].astype(i32)), c[0].sum()),
    (jnp.zeros(4), jnp.ones((), i32)), (x, y)), S((6, 4)), S((6,), i8))
add("fori_loop_static", lambda x: lax.fori_loop(0, 7, lambda i, c: c * 1.1 + i, x), S((4,)))
add("fori_loop_dynamic", lambda x, n: lax.fori_loop(0, n, lambda i, c: c + jnp.sin(c) * i, x),
    S((4,)), S((), i32))
add("while_loop", lambda x: lax.while_loop(lambda s: s[1] < 100.0, lambda s: (s[0] + 1, s[1] * 2.0),
                                           (0, x)), S((), f32))
add("while_loop_tensor_state", lambda x: lax.while_loop(
    lambda s: jnp.linalg.norm(s[0]) > 1e-3, lambda s: (s[0] * 0.5, s[1] + 1), (x, jnp.int32(0))),
    S((8,)))
add("nested_loops", lambda x: lax.fori_loop(0, 3, lambda i, c: lax.fori_loop(
    0, 4, lambda j, d: d + i * j, c), x), S((2, 2)))
add("cond_simple", lambda p, x: lax.cond(p > 0, lambda v: jnp.sin(v), lambda v: jnp.cos(v) * 2, x),
    S((), f32), S((5,)))
add("cond_multi_operand", lambda p, x, y: lax.cond(p, lambda a, b: (a + b, a.sum()),
                                                   lambda a, b: (a * b, b.max()), x, y),
    S((), bool), S((3,)), S((3,)))
add("switch_three", lambda i, x: lax.switch(i, [jnp.sin, jnp.cos, lambda v: -v], x), S((), i32), S((4,)))
add("cond_in_scan", lambda xs: lax.scan(lambda c, x: (lax.cond(x > 0, lambda: c + x, lambda: c - x), c),
                                        0.0, xs), S((12,)))
add("scan_in_cond", lambda p, xs: lax.cond(p, lambda: _scan_cumsum(xs)[0], lambda: xs[0]),
    S((), bool), S((5, 2)))
add("lax_map", lambda xs: lax.map(lambda x: jnp.dot(x, x), xs), S((6, 4)))
add("lax_map_batched", lambda xs: lax.map(lambda x: x.sum(), xs, batch_size=2), S((6, 4)))
add("while_with_cond_inside", lambda x: lax.while_loop(
    lambda s: s[0] < 10, lambda s: (s[0] + 1, lax.cond(s[0] % 2 == 0, lambda v: v * 2, lambda v: v - 1,
                                                       s[1])), (0, x)), S((3,)))
add("scan_rnn_cell", lambda w, u, xs: lax.scan(lambda h, x: (jnp.tanh(w @ h + u @ x),) * 2,
                                               jnp.zeros(8), xs), S((8, 8)), S((8, 4)), S((10, 4)))
add("fori_loop_grad", jax.grad(lambda x: lax.fori_loop(0, 5, lambda i, c: jnp.sin(c) * 1.5, x).sum()),
    S((3,)))
add("scan_grad", jax.grad(lambda w, xs: lax.scan(lambda c, x: (jnp.tanh(c * w + x), None), 0.0,
                                                 xs)[0]), S((), f32), S((7,)))
add("checkpoint_remat", jax.grad(lambda x: jax.checkpoint(lambda y: jnp.sin(jnp.sin(y)))(x).sum()),
    S((5,)))

# ---------------------------------------------------------------- random

_key_fry = jax.eval_shape(lambda: jax.random.key(0))
_key_rbg = jax.eval_shape(lambda: jax.random.key(0, impl="rbg"))
_key_urbg = jax.eval_shape(lambda: jax.random.key(0, impl="unsafe_rbg"))
for _kn, _ks in {"threefry": _key_fry, "rbg": _key_rbg, "unsafe_rbg": _key_urbg}.items():
  add(f"random_normal_{_kn}", lambda k: jax.random.normal(k, (4, 5)), _ks)
  add(f"random_uniform_split_{_kn}", lambda k: [jax.random.uniform(s, (3,), minval=-1.0)
                                                for s in jax.random.split(k, 3)], _ks)
  add(f"random_misc_{_kn}", lambda k: (jax.random.bernoulli(k, 0.3, (8,)),
                                       jax.random.randint(jax.random.fold_in(k, 7), (4,), 0, 10),
                                       jax.random.permutation(k, 10),
                                       jax.random.categorical(k, jnp.zeros((3, 5)))), _ks)
add("random_bits_all_widths", lambda k: (jax.random.bits(k, (4,), u8), jax.random.bits(k, (4,), u16),
                                         jax.random.bits(k, (4,), u32)), _key_fry)
add("random_bits_u64", lambda k: jax.random.bits(k, (4,), u64), _key_fry, x64=True)
add("random_legacy_prngkey", lambda s: jax.random.normal(jax.random.PRNGKey(s), (3, 3)), S((), i32))
add("random_gamma_beta", lambda k: (jax.random.gamma(k, 2.5, (4,)), jax.random.beta(k, 2.0, 3.0, (3,))),
    _key_fry)
add("random_truncated_normal_choice", lambda k: (jax.random.truncated_normal(k, -1.0, 2.0, (5,)),
                                                 jax.random.choice(k, 10, (3,), replace=False)),
    _key_fry)
add("random_dropout_bf16", lambda k, x: jnp.where(jax.random.bernoulli(k, 0.9, x.shape), x / 0.9, 0),
    _key_fry, S((4, 16), bf16))
add("rng_bit_generator_direct", lambda k: (
    lax.rng_bit_generator(k, (3, 4), dtype=u32, algorithm=lax.RandomAlgorithm.RNG_THREE_FRY),
    lax.rng_bit_generator(k, (5,), dtype=u8, algorithm=lax.RandomAlgorithm.RNG_PHILOX),
    lax.rng_bit_generator(k, (2,), dtype=u32, algorithm=lax.RandomAlgorithm.RNG_DEFAULT)),
    S((4,), u32))
add("threefry_raw", lambda k, x: jax_random_ext.threefry_2x32(k, x), S((2,), u32), S((10,), u32))
add("random_vmapped_keys", jax.vmap(lambda k: jax.random.normal(k, (2,))), jax.eval_shape(
    lambda: jax.random.split(jax.random.key(0), 4)))

# ---------------------------------------------------------------- sort, top_k, search

add("sort_f32", lambda x: (jnp.sort(x), jnp.sort(x, axis=0), -jnp.sort(-x, axis=1)), S((5, 6)))
add("sort_int_stable", lambda x: (jnp.sort(x, stable=True), jnp.argsort(x, stable=True)), S((20,), i32))
add("argsort_descending", lambda x: jnp.argsort(x, descending=True, axis=-1), S((4, 9)))
add("sort_multi_operand", lambda k, v, w: lax.sort((k, v, w), num_keys=2, is_stable=True),
    S((10,), u8), S((10,), f32), S((10,), i16))
add("sort_bf16_f16_bool", lambda x, y, b: (jnp.sort(x), jnp.sort(y), jnp.sort(b)), S((7,), bf16),
    S((7,), f16), S((7,), bool))
add("sort_complex", lambda z: jnp.sort(z), S((6,), c64))
add("top_k", lambda x: lax.top_k(x, 3), S((4, 10)))
add("top_k_int", lambda x: lax.top_k(x, 1), S((10,), i32))
add("searchsorted", lambda a, v: (jnp.searchsorted(a, v), jnp.searchsorted(a, v, side="right",
                                                                            method="compare_all")),
    S((16,)), S((5,)))
add("median_quantile", lambda x: (jnp.median(x), jnp.quantile(x, 0.3), jnp.percentile(x, 90, axis=0)),
    S((11, 3)))
add("lexsort_partition", lambda a, b: (jnp.lexsort((a, b)), jnp.partition(a, 3)), S((9,)), S((9,), i32))

# ---------------------------------------------------------------- gather / scatter

add("gather_index_array", lambda x, i: (x[i], x[:, i], x[i, i]), S((8, 8)), S((3,), i32))
add("gather_2d_index", lambda x, i, j: x[i, :, j], S((5, 6, 7)), S((4,), i32), S((4,), i32))
add("gather_negative_and_bool", lambda x, i: (x[-1, i], x[jnp.array([0, -2])]), S((6, 5)), S((2,), i32))
add("take_along_axis", lambda x, i: (jnp.take_along_axis(x, i, axis=1),
                                     jnp.take(x, i[0], axis=0, mode="clip"),
                                     jnp.take(x, i[0], axis=1, mode="fill", fill_value=-1.0)),
    S((4, 6)), S((4, 2), i32))
add("scatter_add", lambda x, i, u: x.at[i].add(u), S((10, 3)), S((4,), i32), S((4, 3)))
add("scatter_set_min_max_mul", lambda x, i, u: (x.at[i].set(u), x.at[i].min(u), x.at[i].max(u),
                                                x.at[i].mul(u)), S((10,)), S((4,), i32), S((4,)))
add("scatter_modes", lambda x, i: (x.at[i].set(0.0, mode="drop"), x.at[i].add(1.0, mode="clip"),
                                   x.at[i].get(mode="fill", fill_value=9.0),
                                   x.at[i].set(1.0, unique_indices=True, indices_are_sorted=True)),
    S((8,)), S((3,), i32))
add("scatter_2d_index", lambda x, i, j, u: x.at[i, j].add(u), S((5, 5), i32), S((3,), i32),
    S((3,), i32), S((3,), i32))
add("scatter_slice_update", lambda x, u: (x.at[1:3, ::2].set(u), x.at[:, 1].add(1.0)), S((4, 6)),
    S((2, 3)))
add("scatter_u8_bf16_c64", lambda x, y, z, i: (x.at[i].add(1), y.at[i].max(y[0]), z.at[i].add(1j)),
    S((8,), u8), S((8,), bf16), S((8,), c64), S((2,), i32))
add("segment_sum_max", lambda d, s: (jax.ops.segment_sum(d, s, 4), jax.ops.segment_max(d, s, 4)),
    S((12, 2)), S((12,), i32))
add("one_hot_embedding", lambda ids, table: (jax.nn.one_hot(ids, 7), table[ids]), S((5,), i32),
    S((7, 3)))
add("gather_grad", jax.grad(lambda x, i: (x[i] ** 2).sum()), S((9, 2)), S((4,), i32))
add("dynamic_index_in_loop", lambda x: lax.fori_loop(0, x.shape[0], lambda i, c: c + x[i] * i,
                                                     jnp.zeros(x.shape[1])), S((6, 3)))
add("vmap_gather", jax.vmap(lambda x, i: x[i]), S((4, 7)), S((4,), i32))
add("vmap_scatter", jax.vmap(lambda x, i: x.at[i].add(1.0)), S((4, 7)), S((4,), i32))

# ---------------------------------------------------------------- fft

add("fft_ifft_c64", lambda z: (jnp.fft.fft(z), jnp.fft.ifft(z), jnp.fft.fft(z, n=16, axis=0)),
    S((8, 6), c64))
add("rfft_irfft", lambda x: (jnp.fft.rfft(x), jnp.fft.irfft(jnp.fft.rfft(x), n=x.shape[-1])), S((3, 16)))
add("fft2_fftn", lambda z: (jnp.fft.fft2(z), jnp.fft.ifftn(z), jnp.fft.fftn(z, axes=(0, 2))),
    S((4, 4, 4), c64))
add("rfftn_irfftn", lambda x: (jnp.fft.rfftn(x), jnp.fft.irfftn(jnp.fft.rfftn(x), s=x.shape)),
    S((6, 8, 4)))
add("fftshift_freq", lambda x: (jnp.fft.fftshift(jnp.fft.fft(x)), jnp.fft.fftfreq(8), jnp.fft.rfftfreq(8)),
    S((8,)))
add("fft_c128", lambda z: jnp.fft.fft(z), S((8,), c128), x64=True)
add("stft_like", lambda x: jnp.abs(jnp.fft.rfft(x.reshape(4, 16) * jnp.hanning(16), axis=-1)), S((64,)))

# ---------------------------------------------------------------- linalg

def _spd(a):
  return a @ a.T + 4 * jnp.eye(a.shape[0], dtype=a.dtype)


add("cholesky", lambda a: jnp.linalg.cholesky(_spd(a)), S((5, 5)))
add("qr", lambda a: jnp.linalg.qr(a), S((6, 4)))
add("qr_complete", lambda a: jnp.linalg.qr(a, mode="complete"), S((4, 6)))
add("svd", lambda a: jnp.linalg.svd(a), S((5, 3)))
add("svd_values_only", lambda a: jnp.linalg.svd(a, compute_uv=False), S((4, 4)))
add("eigh", lambda a: jnp.linalg.eigh(a + a.T), S((6, 6)))
add("eig", lambda a: jnp.linalg.eig(a), S((4, 4)))
add("solve", jnp.linalg.solve, S((5, 5)), S((5, 2)))
add("inv_det_slogdet", lambda a: (jnp.linalg.inv(a), jnp.linalg.det(a), jnp.linalg.slogdet(a)),
    S((4, 4)))
add("triangular_solve", lambda a, b: (lax.linalg.triangular_solve(a, b, left_side=True, lower=True),
                                      jax.scipy.linalg.solve_triangular(a, b, trans=1)),
    S((4, 4)), S((4, 3)))
add("lu", lambda a: (jax.scipy.linalg.lu(a), jax.scipy.linalg.lu_factor(a)), S((5, 5)))
add("pinv_lstsq", lambda a, b: (jnp.linalg.pinv(a), jnp.linalg.lstsq(a, b)[0]), S((6, 4)), S((6,)))
add("norms", lambda a: (jnp.linalg.norm(a), jnp.linalg.norm(a, 2), jnp.linalg.norm(a, "nuc"),
                        jnp.linalg.norm(a, axis=0), jnp.linalg.matrix_rank(a)), S((4, 4)))
add("matrix_power_expm", lambda a: (jnp.linalg.matrix_power(a, 5), jax.scipy.linalg.expm(a)), S((3, 3)))
add("linalg_batched", lambda a, b: jnp.linalg.solve(_spd_batched(a), b), S((3, 4, 4)), S((3, 4, 1)))
add("cholesky_grad", jax.grad(lambda a: jnp.linalg.cholesky(_spd(a)).sum()), S((4, 4)))
add("linalg_complex", lambda a: (jnp.linalg.qr(a), jnp.linalg.inv(a), jnp.linalg.eigh(a)), S((3, 3), c64))
add("linalg_f64", lambda a: (jnp.linalg.cholesky(_spd(a)), jnp.linalg.svd(a)), S((4, 4), f64), x64=True)
add("cho_solve", lambda a, b: jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(_spd(a)), b),
    S((4, 4)), S((4,)))


def _spd_batched(a):
  return a @ jnp.swapaxes(a, -1, -2) + 3 * jnp.eye(a.shape[-1])


# ---------------------------------------------------------------- autodiff, vmap

def _mlp(params, x):
  for w, b in params:
    x = jax.nn.relu(x @ w + b)
  return x


_mlp_params = [(S((8, 16)), S((16,))), (S((16, 16)), S((16,))), (S((16, 4)), S((4,)))]
add("mlp_forward", _mlp, _mlp_params, S((32, 8)))
add("mlp_grad", jax.grad(lambda p, x: _mlp(p, x).sum()), _mlp_params, S((32, 8)))
add("mlp_value_and_grad_bf16", jax.value_and_grad(lambda p, x: (_mlp(p, x) ** 2).mean()),
    [(S((8, 16), bf16), S((16,), bf16))], S((4, 8), bf16))
add("jacfwd", jax.jacfwd(lambda x: jnp.sin(x) * x.sum()), S((4,)))
add("jacrev", jax.jacrev(lambda x: jnp.tanh(x @ x.T)), S((3, 2)))
add("hessian", jax.hessian(lambda x: (x ** 3).sum() + jnp.prod(x)), S((4,)))
add("jvp", lambda x, t: jax.jvp(lambda y: jnp.exp(y) / y.sum(), (x,), (t,)), S((5,)), S((5,)))
add("vjp", lambda x, g: jax.vjp(lambda y: jnp.cumsum(y ** 2), x)[1](g), S((5,)), S((5,)))
add("grad_of_grad", jax.grad(jax.grad(lambda x: jnp.sin(x) * x ** 2)), S((), f32))


@jax.custom_jvp
def _softplus(x):
  return jnp.logaddexp(x, 0.0)


_softplus.defjvp(lambda p, t: (_softplus(p[0]), t[0] * jax.nn.sigmoid(p[0])))


@jax.custom_vjp
def _clip_grad(x):
  return x


_clip_grad.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -1, 1),))
add("custom_jvp", jax.grad(lambda x: _softplus(x).sum()), S((6,)))
add("custom_vjp", jax.grad(lambda x: (_clip_grad(x) * 5).sum()), S((6,)))
add("vmap_matmul", jax.vmap(jnp.matmul, in_axes=(0, None)), S((3, 4, 5)), S((5, 2)))
add("vmap_cond_to_select", jax.vmap(lambda p, x: lax.cond(p > 0, jnp.sin, jnp.cos, x)), S((6,)), S((6,)))
add("vmap_while", jax.vmap(lambda x: lax.while_loop(lambda v: v < 10.0, lambda v: v * 2.0 + 0.1, x)),
    S((5,)))
add("vmap_nested", jax.vmap(jax.vmap(lambda a, b: jnp.dot(a, b))), S((2, 3, 4)), S((2, 3, 4)))
add("vmap_in_out_axes", jax.vmap(lambda x: x.sum(0), in_axes=1, out_axes=1), S((3, 4, 5)))
add("per_example_grads", jax.vmap(jax.grad(lambda w, x: jnp.tanh(x @ w).sum()), in_axes=(None, 0)),
    S((4, 2)), S((8, 4)))
add("jacrev_vmap_mlp", jax.vmap(jax.jacrev(lambda x: jnp.tanh(x) * 2)), S((3, 4)))
add("linearize_transpose", lambda x, t: jax.linear_transpose(lambda v: jnp.fft.fft(v).real * 2, x)(t),
    S((8,)), S((8,)))

# ---------------------------------------------------------------- neural-network style programs

def _layernorm(x, g, b):
  mu = x.mean(-1, keepdims=True)
  var = ((x - mu) ** 2).mean(-1, keepdims=True)
  return (x - mu) * lax.rsqrt(var + 1e-5) * g + b


def _attention(q, k, v):
  s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
  mask = jnp.tril(jnp.ones((q.shape[1], k.shape[1]), bool))
  return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(jnp.where(mask, s, -1e9), -1), v)


add("layernorm", _layernorm, S((4, 32)), S((32,)), S((32,)))
add("layernorm_bf16", _layernorm, S((4, 32), bf16), S((32,), bf16), S((32,), bf16))
add("rmsnorm_f16", lambda x, w: x * lax.rsqrt((x.astype(f32) ** 2).mean(-1, keepdims=True) + 1e-6)
    .astype(f16) * w, S((4, 32), f16), S((32,), f16))
add("causal_attention", _attention, S((2, 8, 4, 16)), S((2, 8, 4, 16)), S((2, 8, 4, 16)))
add("dot_product_attention", lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=True),
    S((2, 8, 4, 16)), S((2, 8, 4, 16)), S((2, 8, 4, 16)))
add("rope", lambda x, pos: (lambda c, s: jnp.concatenate(
    [x[..., :8] * c - x[..., 8:] * s, x[..., :8] * s + x[..., 8:] * c], -1))(
    jnp.cos(pos[:, None] * jnp.arange(8.0)), jnp.sin(pos[:, None] * jnp.arange(8.0))),
    S((10, 16)), S((10,)))
add("activations", lambda x: (jax.nn.relu(x), jax.nn.gelu(x, approximate=False), jax.nn.silu(x),
                              jax.nn.elu(x), jax.nn.leaky_relu(x), jax.nn.softplus(x), jax.nn.celu(x),
                              jax.nn.glu(x), jax.nn.hard_tanh(x), jax.nn.relu6(x)), S((4, 8)))
add("cross_entropy_grad", jax.grad(lambda logits, y: -(jax.nn.log_softmax(logits) *
                                                      jax.nn.one_hot(y, 10)).sum()),
    S((8, 10)), S((8,), i32))


def _adam(p, g, m, v, t):
  m = 0.9 * m + 0.1 * g
  v = 0.999 * v + 0.001 * g * g
  mh = m / (1 - 0.9 ** t)
  vh = v / (1 - 0.999 ** t)
  return p - 1e-3 * mh / (jnp.sqrt(vh) + 1e-8), m, v


add("adam_step", _adam, S((64,)), S((64,)), S((64,)), S((64,)), S((), f32))
add("adam_step_donated", _adam, S((64,)), S((64,)), S((64,)), S((64,)), S((), f32),
    donate_argnums=(0, 2, 3))


def _cnn(x, w1, w2, wd):
  h = jax.nn.relu(lax.conv(x, w1, (1, 1), "SAME"))
  h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
  h = jax.nn.relu(lax.conv(h, w2, (1, 1), "SAME"))
  return h.reshape(h.shape[0], -1) @ wd


_cnn_args = (S((2, 1, 8, 8)), S((4, 1, 3, 3)), S((8, 4, 3, 3)), S((128, 10)))
add("cnn_forward", _cnn, *_cnn_args)
add("cnn_grad", jax.grad(lambda *a: _cnn(*a).sum(), argnums=(1, 2, 3)), *_cnn_args)
add("transformer_block_grad", jax.grad(lambda x, wq: (_layernorm(
    _attention(x @ wq, x, x), 1.0, 0.0) ** 2).sum(), argnums=1), S((1, 6, 2, 8)), S((8, 8)))
add("lstm_scan", lambda wi, wh, xs: lax.scan(lambda s, x: (lambda g: (
    (jax.nn.sigmoid(g[:4]) * s[0] + jax.nn.sigmoid(g[4:8]) * jnp.tanh(g[8:12]),
     jax.nn.sigmoid(g[12:]) * jnp.tanh(jax.nn.sigmoid(g[:4]) * s[0]
                                       + jax.nn.sigmoid(g[4:8]) * jnp.tanh(g[8:12]))),
    s[1]))(wi @ x + wh @ s[1]), (jnp.zeros(4), jnp.zeros(4)), xs), S((16, 3)), S((16, 4)), S((5, 3)))
add("embedding_mean_pool", lambda ids, table: table[ids].mean(1), S((3, 7), i32), S((50, 8)))
add("kmeans_step", lambda x, c: (lambda a: jax.ops.segment_sum(x, a, 4) /
                                 jnp.maximum(jnp.bincount(a, length=4), 1)[:, None])(
    jnp.argmin(((x[:, None] - c[None]) ** 2).sum(-1), 1)), S((20, 2)), S((4, 2)))
add("quantize_dequantize_int8", lambda x: (lambda s: (jnp.round(x / s).clip(-127, 127).astype(i8)
                                                      .astype(f32) * s))(jnp.abs(x).max() / 127),
    S((4, 16)))
add("int8_matmul_dequant", lambda a, b, s: lax.dot(a, b, preferred_element_type=i32).astype(f32) * s,
    S((4, 8), i8), S((8, 6), i8), S((6,)))

# ---------------------------------------------------------------- jit features, names, misc

add("pytree_args_results", lambda d: {"sum": d["a"] + d["b"][0], "tuple": (d["b"][1], d["a"] * 2)},
    {"a": S((3,)), "b": (S((3,)), S((2,), i32))})
add("many_results", lambda x: tuple(x * i for i in range(12)), S((2,)))
add("no_args_const_only", lambda: (jnp.arange(5.0) * 2, jnp.eye(3)))
add("keep_unused", lambda x, y: x * 2, S((3,)), S((4,), i32), keep_unused=True)
add("named_scope", lambda x: _named(x), S((4,)))
add("named_call", lambda x: jax.named_call(lambda y: y * 3, name="tripler")(x), S((4,)))
add("nested_jit_call", lambda x: jax.jit(lambda y: jnp.sin(y) + 1)(x) * jax.jit(jnp.cos)(x), S((4,)))
add("nested_jit_inline_false", lambda x: jax.jit(_private_helper, inline=False)(x) + 1, S((4,)))
add("pure_callback", lambda x: jax.pure_callback(lambda v: np.asarray(v) * 2,
                                                 jax.ShapeDtypeStruct((3,), f32), x), S((3,)))
add("debug_print", lambda x: (jax.debug.print("x={x}", x=x), x + 1)[1], S((3,)))
add("io_callback", lambda x: jax.experimental.io_callback(lambda v: np.asarray(v),
                                                          jax.ShapeDtypeStruct((2,), f32), x,
                                                          ordered=True), S((2,)))
add("sharding_constraint", lambda x: jax.lax.with_sharding_constraint(
    x * 2, jax.sharding.SingleDeviceSharding(jax.devices()[0])), S((4,)))
add("static_argnums", lambda x, n: x ** n, S((3,)), 3, static_argnums=(1,))
add("weak_type_scalars", lambda x: (x + 1, x * 2.5, 3 * jnp.ones_like(x)), S((2,), bf16))
add("cumsum_reverse_logaddexp", lambda x: (jnp.cumsum(x[::-1])[::-1], jnp.logaddexp(x, x[::-1])),
    S((9,)))
add("clamp_nan_to_num", lambda x: (jnp.nan_to_num(x), jnp.clip(x, 0.0), jnp.isinf(x), jnp.isposinf(x)),
    S((6,)))
add("gcd_lcm_int", lambda a, b: (jnp.gcd(a, b), jnp.lcm(a, b)), S((5,), i32), S((5,), i32))
add("bit_ops_uint32", lambda x: (x >> 3, x << 2, jnp.bitwise_count(x), jnp.invert(x),
                                 jnp.left_shift(x, u32(31))), S((4,), u32))
add("floor_divide_mod_signs", lambda a, b: (jnp.floor_divide(a, b), jnp.mod(a, b), jnp.fmod(a, b),
                                            jnp.divmod(a, b)), S((6,), i32), S((6,), i32))
add("power_int_float", lambda a, b: (a ** 2, jnp.power(a, b), lax.pow(a.astype(f32), b.astype(f32))),
    S((4,), i32), S((4,), i32))
add("complex_from_parts_fft_abs", lambda re, im: jnp.abs(jnp.fft.ifft(lax.complex(re, im))) ** 2,
    S((16,)), S((16,)))
add("is_close_allclose", lambda a, b: (jnp.isclose(a, b), jnp.allclose(a, b), jnp.array_equal(a, b)),
    S((5,)), S((5,)))
add("tanh_bf16_chain", lambda x: jnp.tanh(jnp.exp(x) - 1).astype(f32).sum(), S((64,), bf16))
add("expm1_log1p_f16", lambda x: (jnp.expm1(x), jnp.log1p(x), jnp.sinh(x), jnp.arccosh(x + 2)),
    S((8,), f16))
add("scipy_special", lambda x: (jax.scipy.special.gammaln(x + 1), jax.scipy.special.xlogy(x, x + 1),
                                jax.scipy.special.logit(jax.nn.sigmoid(x)), jax.scipy.special.ndtri(
                                    jax.nn.sigmoid(x)), jax.scipy.special.i0(x)), S((6,)))
add("igamma_betainc", lambda a, x: (lax.igamma(a, x), lax.igammac(a, x), lax.random_gamma_grad(a, x),
                                    jax.scipy.special.betainc(a, a, jax.nn.sigmoid(x))),
    S((5,)), S((5,)))
add("polygamma_zeta", lambda x: (lax.polygamma(jnp.ones_like(x), x + 1), lax.zeta(x + 2, x + 1)),
    S((5,)))
add("logsumexp_where_b", lambda x, w: jax.nn.logsumexp(x, axis=1, b=w), S((3, 5)), S((3, 5)))
add("piecewise_select_n", lambda x: jnp.piecewise(x, [x < 0, x > 1], [lambda v: -v, lambda v: v * v, 0.5]),
    S((7,)))
add("x64_int_math", lambda a, b: (a * b + (a >> 3), a // jnp.where(b == 0, 1, b), jnp.cumsum(a),
                                  jnp.argmax(a), a.astype(f64) / 3), S((6,), i64), S((6,), i64),
    x64=True)
add("x64_uint_scatter_sort", lambda x, i: (x.at[i].add(u64(1)), jnp.sort(x)), S((6,), u64),
    S((2,), i32), x64=True)
add("x64_scan", lambda x: lax.scan(lambda c, v: (c + v, c * v), jnp.float64(0), x), S((6,), f64), x64=True)
add("x64_random_normal", lambda k: jax.random.normal(k, (3,), dtype=f64), _key_fry, x64=True)
add("x64_iota_arange", lambda n: jnp.arange(10, dtype=i64) * n, S((), i64), x64=True)


def _named(x):
  with jax.named_scope("outer_scope"):
    y = jnp.sin(x)
    with jax.named_scope("inner"):
      return y * jnp.cos(y)


def _private_helper(x):
  return jnp.tanh(x) * 2


# ---------------------------------------------------------------- dtype sweeps of common programs

for _n, _t in {**FLOATS, "i32": i32, "u8": u8, "i8": i8, "i16": i16, "u16": u16, "u32": u32}.items():
  add(f"sum_transpose_concat_{_n}", lambda x: (jnp.concatenate([x, x.T]).sum(0), x.T.max(1), x[::2]),
      S((4, 4), _t))
  add(f"gather_scatter_{_n}", lambda x, i: (x[i], x.at[i].set(x[0]), jnp.take(x, i[:1])),
      S((8,), _t), S((3,), i32))
  add(f"sort_argsort_{_n}", lambda x: (jnp.sort(x), jnp.argsort(x), lax.top_k(x, 2)), S((9,), _t))
  add(f"where_pad_rev_{_n}", lambda x, c: (jnp.where(c, x, x[::-1]), jnp.pad(x, 1), jnp.flip(x)),
      S((6,), _t), S((6,), bool))
  add(f"scan_cumulative_{_n}", lambda x: lax.scan(lambda c, v: (jnp.maximum(c, v), c), x[0], x),
      S((5, 3), _t))
  add(f"reshape_broadcast_{_n}", lambda x: (x.reshape(2, 6), jnp.broadcast_to(x[:, None], (12, 2)),
                                            jnp.expand_dims(x, 0)), S((12,), _t))


# ---------------------------------------------------------------- other platforms, collectives,
# symbolic shapes, composites: ops the CPU lowering of a static-shape program never emits

add("tpu_cholesky_triangular_solve", lambda a, b: (
    jnp.linalg.cholesky(_spd(a)), lax.linalg.triangular_solve(a, b, left_side=True, lower=True)),
    S((4, 4)), S((4, 4)), platforms=("tpu",))
add("tpu_qr_eigh_svd", lambda a: (jnp.linalg.qr(a), jnp.linalg.eigh(a + a.T), jnp.linalg.svd(a)),
    S((4, 4)), platforms=("tpu",))
add("multi_platform_cpu_tpu", lambda a: jnp.linalg.cholesky(_spd(a)) + jnp.sin(a), S((4, 4)),
    platforms=("cpu", "tpu"))
add("cuda_lowering_sort_rng", lambda k, x: (jnp.sort(x), jax.random.normal(k, (4,))), _key_fry,
    S((9,)), platforms=("cuda",))
_mesh1 = jax.make_mesh((1,), ("x",))


def _collectives(x):
  return (lax.psum(x, "x"), lax.all_gather(x, "x"), lax.ppermute(x, "x", [(0, 0)]),
          lax.all_to_all(x, "x", 0, 0, tiled=True), lax.psum_scatter(x, "x", tiled=True),
          lax.axis_index("x"), lax.pmax(x, "x"), lax.pmean(x, "x"))


add("shard_map_collectives", jax.shard_map(_collectives, mesh=_mesh1, in_specs=jax.P(),
                                           out_specs=jax.P(), check_vma=False), S((4,)))
add("pmap_psum", lambda x: jax.pmap(lambda v: lax.psum(v, "i"), axis_name="i")(x), S((1, 4)))
_b, _n = jax.export.symbolic_shape("b, n")
add("symbolic_batch_mlp", lambda x, w: jax.nn.relu(x @ w).sum(0), S((_b, 8)), S((8, 4)))
add("symbolic_reshape_iota", lambda x: (x.reshape(-1, 2).sum(0), jnp.arange(x.shape[0]) * 2,
                                        jnp.concatenate([x, x])), S((2 * _b,)))
add("symbolic_two_dims", lambda x: (x.T @ x, jnp.pad(x, 1), x[:, ::2].shape[1] * x.sum(),
                                    jnp.broadcast_to(x[:, :1], x.shape)), S((_b, _n)))
add("composite_op", lax.composite(lambda x, y: jnp.tanh(x) * y, name="jaxmlx.tanh_mul"),
    S((4,)), S((4,)))
add("composite_with_attrs", lambda x: lax.composite(
    lambda v, alpha: jnp.where(v > 0, v, alpha * v), name="jaxmlx.leaky")(x, alpha=0.1), S((6,)))
add("round_away_from_zero_logistic", lambda x: (lax.round(x), lax.logistic(x),
                                                lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)),
    S((5,)))


def lower(name: str):
  """The lowered module (jaxlib.mlir.ir.Module) of one program, cached."""
  return _lower_cached(name)


@functools.lru_cache(maxsize=None)
def _lower_cached(name: str):
  p = PROGRAMS[name]
  with jax.enable_x64(p.x64):
    traced = jax.jit(p.fn, **p.jit_kwargs).trace(*p.args)
    lowered = traced.lower(lowering_platforms=p.platforms) if p.platforms else traced.lower()
    return lowered.compiler_ir("stablehlo")


def serialize(module, target: str, flavor: str = "pjrt") -> bytes:
  """A portable artifact of `module` for StableHLO version `target`.

  flavor "pjrt": the path jaxlib takes before PJRT compile (xla's versioned-StableHLO serializer).
  flavor "stablehlo": the StableHLO python binding; keeps FileLineColRange locations at any target.
  """
  if flavor == "pjrt":
    # From bytecode, as jax does: handing jaxlib the cached ir.Module for one target after
    # another crashed jaxlib's serializer (segfault seen on jaxlib 0.11.2 under pytest-xdist).
    return _jax.mlir.serialize_portable_artifact(mlir_interp.module_to_bytecode(module), target)
  return stablehlo.serialize_portable_artifact(module, target)


_artifacts: dict[tuple[str, str, str], bytes | Exception] = {}


def artifact(name: str, target: str, flavor: str = "pjrt") -> bytes:
  """Serialized artifact of program `name`; raises if jaxlib cannot express it at `target`.

  Results and failures are both cached: jaxlib is asked once per (program, target, flavor).
  """
  key = (name, target, flavor)
  if key not in _artifacts:
    try:
      _artifacts[key] = serialize(lower(name), target, flavor)
    except Exception as e:  # noqa: BLE001 - re-raised below, every time
      _artifacts[key] = e
  result = _artifacts[key]
  if isinstance(result, Exception):
    raise result
  return result


def marker_line(marker: str = "LOCATION-MARKER") -> int:
  """1-based line in this file that contains `marker` (after the '#')."""
  for i, line in enumerate(pathlib.Path(__file__).read_text().splitlines(), 1):
    if "# " + marker in line:
      return i
  raise LookupError(marker)


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("out_dir")
  ap.add_argument("--targets", default=",".join(TARGETS))
  ap.add_argument("--flavor", default="pjrt", choices=["pjrt", "stablehlo"])
  ap.add_argument("--filter", default="")
  ap.add_argument("--limit", type=int, default=0, help="write at most this many programs")
  ap.add_argument("--stride", type=int, default=1, help="take every n-th program")
  a = ap.parse_args(argv)
  out = pathlib.Path(a.out_dir)
  out.mkdir(parents=True, exist_ok=True)
  names = [n for n in PROGRAMS if a.filter in n][::a.stride]
  if a.limit:
    names = names[:a.limit]
  written = failed = 0
  for name in names:
    for t in a.targets.split(","):
      try:
        data = artifact(name, t, a.flavor)
      except Exception as e:  # noqa: BLE001 - report and continue
        print(f"skip {name}@{t}: {type(e).__name__}: {str(e).splitlines()[0][:120]}", file=sys.stderr)
        failed += 1
        continue
      (out / f"{name}.{t.replace('.', '_')}.{a.flavor}.mlirbc").write_bytes(data)
      written += 1
  print(f"wrote {written} artifacts ({len(names)} programs), {failed} not expressible", file=sys.stderr)
  return 0


if __name__ == "__main__":
  sys.exit(main())
