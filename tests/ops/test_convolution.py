"""Differential tests of stablehlo.convolution (src/lower/convolution.cc) against jax's CPU.

lax.conv_general_dilated in 1-, 2- and 3-D over many dimension layouts, paddings (SAME, VALID,
explicit, negative), strides, lhs/rhs dilations, feature groups (grouped, depthwise) and batch
groups; conv_transpose; jnp.convolve / jnp.correlate; gradients of a small CNN wrt inputs and
weights (lhs dilation, batch_group_count from grouped convs); f16/bf16/f32/complex64 and
preferred_element_type; integer convolutions compared bit for bit (wrapping sums); 0-D
convolutions (no spatial dims, a grouped matmul), with groups and gradients; bool convolutions
(XLA's or-of-and), compared exactly.

Most float inputs hold small integers, so every product and partial sum is exact in f32 and the
default tolerances compare a result that is independent of summation order. Tests on general
floats pass F32_SUM_TOL: XLA and MLX sum the window in different orders, so results differ by
a few ULP of the largest partial sum (not of the result, which may cancel to near zero).
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from tests.ops.edge_values import dtype_id, rand, values
from tests.ops.harness import check

F32_SUM_TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(params=[("1", "1"), ("0", "1"), ("1", "0"), ("0", "0"), ("1", "gpu"),
                        ("0", "gpu")],
                ids=["phases", "dilated", "phases-mlx", "dilated-mlx", "phases-gpu",
                     "dilated-gpu"])
def phases(request, monkeypatch):
  """Both ways of an input-dilated float convolution: one undilated convolution per output phase
  (the CPU's default: src/lower/convolution.cc, phase_conv), or the input dilated (patches over
  it on the CPU, MLX's own dilation elsewhere, on CUDA where the key of MLX's cache of cuDNN
  graphs is not another dilation's, else explicitly: `gpu` runs that record); each with the CPU's
  patch matmuls, with MLX's own convolution for everything (JAXMLX_CONV_PATCHES=0), which takes a
  kernel reversed by jax's input gradients as its `flip` (passes/reversed_kernel.h), or with the
  mix a GPU runs (`gpu`: patch matmuls for jax's weight gradients, MLX's convolution elsewhere)."""
  monkeypatch.setenv("JAXMLX_CONV_PHASES", request.param[0])
  monkeypatch.setenv("JAXMLX_CONV_PATCHES", request.param[1])
  return request.param


def small_ints(dt, shape, seed=0, lo=-4, hi=5):
  """Small integer values in `dt` (floats too: their products and sums are exact)."""
  rng = np.random.default_rng(seed)
  lo = 0 if np.dtype(dt).kind == "u" else lo
  return rng.integers(lo, hi, shape).astype(dt)


def layout_array(spec: str, sizes: dict[str, int], dt=np.float32, seed=0):
  """An array whose dims follow `spec` (e.g. "NHWC"), sized by dim letter."""
  return small_ints(dt, tuple(sizes[c] for c in spec), seed)


# ---- 2-D layouts x paddings x strides ---------------------------------------------------------

def layout_operands(dn, seeds):
  """An input [N=2, C=3, 7, 6] and a kernel [O=4, I=3, 3, 2] in the layouts of `dn`."""
  lhs_spec, rhs_spec, _ = dn
  x = layout_array(lhs_spec.replace("H", "h").replace("W", "w"),
                   dict(N=2, C=3, h=7, w=6), seed=seeds[0])
  w = layout_array(rhs_spec.replace("H", "h").replace("W", "w"),
                   dict(O=4, I=3, h=3, w=2), seed=seeds[1])
  return x, w


LAYOUTS = [("NCHW", "OIHW", "NCHW"), ("NHWC", "HWIO", "NHWC"), ("NHWC", "OIHW", "NCHW"),
           ("CHWN", "IHWO", "WHCN"), ("HNWC", "OHWI", "CNWH")]
PADDINGS = ["SAME", "VALID", [(1, 2), (0, 1)], [(-1, 1), (2, -1)]]


@pytest.mark.parametrize("strides", [(1, 1), (2, 3)], ids=str)
@pytest.mark.parametrize("padding", PADDINGS, ids=str)
@pytest.mark.parametrize("dn", LAYOUTS, ids=lambda d: "-".join(d))
def test_conv2d_layouts(dn, padding, strides):
  x, w = layout_operands(dn, seeds=(1, 2))
  check(lambda a, b: lax.conv_general_dilated(a, b, strides, padding, dimension_numbers=dn),
        x, w)


@pytest.mark.parametrize("patches", ["1", "gpu"])
@pytest.mark.parametrize("strides", [(1, 1), (2, 1)], ids=str)
@pytest.mark.parametrize("padding", ["SAME", [(1, 0), (0, 2)]], ids=str)
@pytest.mark.parametrize("dn", LAYOUTS, ids=lambda d: "-".join(d))
def test_gradients_in_layouts(dn, padding, strides, patches, monkeypatch):
  # jax's kernel gradient reads x and dy in transposed layouts and writes the kernel's layout: the
  # patch matmuls read them as they lie and make their rows in the result's order
  # (convolution.cc, patch_matmul_conv). Small integers: the sums are exact in any order.
  monkeypatch.setenv("JAXMLX_CONV_PATCHES", patches)
  x, w = layout_operands(dn, seeds=(3, 4))
  conv = lambda a, b: lax.conv_general_dilated(a, b, strides, padding, dimension_numbers=dn)
  ct = small_ints(np.float32, jax.eval_shape(conv, x, w).shape, 5)
  check(jax.grad(lambda a, b, c: jnp.sum(conv(a, b) * c), argnums=(0, 1)), x, w, ct)


# ---- dilations ------------------------------------------------------------------------------


@pytest.mark.usefixtures("phases")
@pytest.mark.parametrize("lhs_dil,rhs_dil,padding,strides", [
    ((1, 1), (2, 2), "VALID", (1, 1)),
    ((1, 1), (2, 3), "SAME", (2, 1)),
    ((2, 2), (1, 1), [(1, 1), (1, 1)], (1, 1)),
    ((2, 1), (1, 2), [(2, 0), (0, 3)], (1, 2)),
    ((3, 2), (2, 1), [(-1, 2), (1, -2)], (2, 2)),
    ((2, 2), (2, 2), [(0, 0), (0, 0)], (1, 1)),
    ((1, 3), (1, 1), [(-2, -1), (0, 0)], (1, 1)),
    ((2, 2), (1, 1), [(-1, -1), (-1, -1)], (3, 1)),
], ids=str)
def test_conv2d_dilations(lhs_dil, rhs_dil, padding, strides):
  x = small_ints(np.float32, (2, 3, 6, 5), 3)
  w = small_ints(np.float32, (2, 3, 3, 2), 4)
  check(lambda a, b: lax.conv_general_dilated(a, b, strides, padding, lhs_dil, rhs_dil), x, w)


# ---- input dilation by output phases --------------------------------------------------------
# Output position q * D + p of an input dilated by D reads the kernel's taps r::D only (src/lower/
# convolution.cc, phase_conv): phases without taps, paddings beyond the kernel or cropping whole
# phases, the most phases (64) and one more, and what phases do not take (a stride or a dilated
# kernel along a dilated dim: the input is dilated).


@pytest.mark.usefixtures("phases")
@pytest.mark.parametrize("lhs_dil,k,padding,strides,rhs_dil", [
    ((4,), 3, [(2, 2)], (1,), (1,)),            # dilation beyond the kernel: empty phases
    ((3,), 2, [(0, 0)], (1,), (1,)),
    ((2,), 3, [(5, 4)], (1,), (1,)),            # padding beyond the kernel
    ((2,), 3, [(-3, -4)], (1,), (1,)),          # cropping
    ((3,), 4, [(-5, 6)], (1,), (1,)),
    ((5,), 2, [(-9, -9)], (1,), (1,)),          # cropping all but one element per side
    ((4,), 1, [(-21, 30)], (1,), (1,)),         # phases reading only past the input's end
    ((4,), 2, [(30, -21)], (1,), (1,)),         # phases reading only before its start
    ((2, 1), 3, [(1, 2), (0, 0)], (1, 2), (1, 1)),  # a stride along an undilated dim
    ((2, 3), 2, [(0, 1), (2, 0)], (1, 1), (2, 1)),  # a dilated kernel along an undilated dim
    ((4, 4, 4), 2, [(1, 1)] * 3, (1, 1, 1), (1, 1, 1)),  # 64 phases
    ((4, 4, 5), 2, [(1, 1)] * 3, (1, 1, 1), (1, 1, 1)),  # 80: dilated instead
    ((2,), 3, [(1, 1)], (1,), (2,)),            # a dilated kernel along a dilated dim
    ((2,), 3, [(1, 1)], (2,), (1,)),            # a stride along a dilated dim
], ids=str)
def test_input_dilation_edges(lhs_dil, k, padding, strides, rhs_dil):
  n = len(lhs_dil)
  x = small_ints(np.float32, (2, 3) + (5, 4, 3)[:n], 77)
  w = small_ints(np.float32, (4, 3) + (k,) * n, 78)
  check(lambda a, b: lax.conv_general_dilated(a, b, strides, padding, lhs_dil, rhs_dil), x, w)


@pytest.mark.usefixtures("phases")
@pytest.mark.parametrize("lhs_dil", [(1, 1), (2, 3)], ids=str)
def test_crops_of_one_image(lhs_dil):
  # Cropping one NHWC image along H leaves a row-contiguous view at an offset of 15 floats, the
  # kind of view cuDNN rejected as misaligned on CUDA for a phase's kernel taps
  # (src/lower/convolution.cc, cudnn_operand).
  x = small_ints(np.float32, (1, 5, 5, 3), 85)
  w = small_ints(np.float32, (3, 3, 3, 2), 86)
  check(lambda a, b: lax.conv_general_dilated(a, b, (1, 1), [(-1, 0), (-2, 0)], lhs_dil,
                                              dimension_numbers=("NHWC", "HWIO", "NHWC")), x, w)


def test_a_slice_of_one_image():
  # jax's own slice of one image along H: also a row-contiguous view at an offset.
  x = small_ints(np.float32, (1, 6, 5, 3), 89)
  w = small_ints(np.float32, (3, 2, 3, 2), 90)
  check(lambda a, b: lax.conv_general_dilated(a[:, 1:], b, (1, 1), "SAME",
                                              dimension_numbers=("NHWC", "HWIO", "NHWC")), x, w)


def test_a_dim_cropped_at_one_end_and_padded_at_the_other():
  # XLA's CPU convolution (jaxlib 0.10.2) of a dim padded (-2, 1) reads past the input's end,
  # into the next row, where the padding's zero is: the reference here is the same padding made
  # explicit (lax.pad) before a VALID convolution, which jax's CPU computes right.
  from tests.ops.harness import assert_same, run_on
  x = small_ints(np.float32, (1, 5, 5, 3), 87)
  w = small_ints(np.float32, (3, 3, 3, 2), 88)
  dn = ("NHWC", "HWIO", "NHWC")
  padding = [(0, 0), (-2, 1)]

  def padded(a, b):
    a = lax.pad(a, np.float32(0), [(0, 0, 0)] + [(lo, hi, 0) for lo, hi in padding] + [(0, 0, 0)])
    return lax.conv_general_dilated(a, b, (1, 1), "VALID", dimension_numbers=dn)

  got = run_on(jax.devices("mlx")[0],
               lambda a, b: lax.conv_general_dilated(a, b, (1, 1), padding, dimension_numbers=dn),
               x, w)
  assert_same(got, run_on(jax.devices("cpu")[0], padded, x, w))


@pytest.mark.usefixtures("phases")
@pytest.mark.parametrize("groups", [2, 6])
def test_input_dilation_with_groups(groups):
  x = small_ints(np.float32, (2, 7, 6, 6), 79)
  w = small_ints(np.float32, (3, 3, 6 // groups, 12), 80)
  check(lambda a, b: lax.conv_general_dilated(a, b, (1, 1), [(2, 1), (0, 2)], (3, 2),
                                              feature_group_count=groups,
                                              dimension_numbers=("NHWC", "HWIO", "NHWC")), x, w)


@pytest.mark.usefixtures("phases")
def test_input_dilation_complex64():
  x = (small_ints(np.float32, (2, 3, 6), 81) + 1j * small_ints(np.float32, (2, 3, 6), 82))
  w = (small_ints(np.float32, (4, 3, 3), 83) - 2j * small_ints(np.float32, (4, 3, 3), 84))
  check(lambda a, b: lax.conv_general_dilated(a, b, (1,), [(1, 2)], (2,)),
        x.astype(np.complex64), w.astype(np.complex64))


# ---- 1-D and 3-D ------------------------------------------------------------------------------


@pytest.mark.parametrize("cfg", [
    dict(window_strides=(1,), padding="VALID"),
    dict(window_strides=(2,), padding="SAME"),
    dict(window_strides=(1,), padding=[(3, -1)], rhs_dilation=(2,)),
    dict(window_strides=(3,), padding=[(1, 1)], lhs_dilation=(2,)),
    dict(window_strides=(1,), padding="SAME", feature_group_count=3),
    dict(window_strides=(1,), padding="SAME", dimension_numbers=("NWC", "WIO", "NWC")),
    dict(window_strides=(1,), padding="VALID", dimension_numbers=("WCN", "OWI", "NCW")),
], ids=str)
def test_conv1d(cfg):
  dn = cfg.get("dimension_numbers", ("NCW", "OIW", "NCW"))
  groups = cfg.get("feature_group_count", 1)
  x = layout_array(dn[0], dict(N=2, C=3, W=11), seed=5)
  w = layout_array(dn[1], dict(O=6, I=3 // groups, W=3), seed=6)
  check(lambda a, b: lax.conv_general_dilated(a, b, **cfg), x, w)


@pytest.mark.parametrize("cfg", [
    dict(window_strides=(1, 1, 1), padding="VALID"),
    dict(window_strides=(2, 1, 2), padding="SAME"),
    dict(window_strides=(1, 1, 1), padding=[(1, 0), (-1, 1), (0, 2)], rhs_dilation=(1, 2, 1)),
    dict(window_strides=(1, 2, 1), padding=[(1, 1), (0, 1), (2, 0)], lhs_dilation=(2, 1, 1)),
    dict(window_strides=(1, 1, 2), padding="SAME", feature_group_count=4),
    dict(window_strides=(1, 1, 1), padding="SAME", feature_group_count=2),
    dict(window_strides=(1, 1, 1), padding="VALID",
         dimension_numbers=("NDHWC", "DHWIO", "NDHWC")),
], ids=str)
def test_conv3d(cfg):
  dn = cfg.get("dimension_numbers", ("NCDHW", "OIDHW", "NCDHW"))
  groups = cfg.get("feature_group_count", 1)
  x = layout_array(dn[0], dict(N=2, C=4, D=4, H=5, W=4), seed=7)
  w = layout_array(dn[1], dict(O=4, I=4 // groups, D=2, H=3, W=2), seed=8)
  check(lambda a, b: lax.conv_general_dilated(a, b, **cfg), x, w)


# ---- groups -----------------------------------------------------------------------------------


@pytest.mark.parametrize("groups,cin,cout", [(1, 4, 6), (2, 4, 6), (4, 4, 4), (4, 4, 8),
                                             (3, 6, 3), (6, 6, 12)], ids=str)
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_feature_groups(groups, cin, cout, padding):
  x = small_ints(np.float32, (2, cin, 5, 6), 9)
  w = small_ints(np.float32, (cout, cin // groups, 3, 3), 10)
  check(lambda a, b: lax.conv_general_dilated(a, b, (1, 2), padding,
                                              feature_group_count=groups), x, w)


# Depthwise (one input feature per group) runs on MLX's CPU as a sum of shifted inputs times the
# kernel's taps; other groups as one matmul of patches per group (src/lower/convolution.cc).
@pytest.mark.parametrize("cfg", [
    dict(shape=(2, 12, 11, 6), k=(7, 7), mult=1, strides=(1, 1), padding="SAME"),
    dict(shape=(2, 12, 11, 6), k=(3, 3), mult=2, strides=(2, 1), padding="VALID"),
    dict(shape=(2, 12, 11, 4), k=(3, 2), mult=1, strides=(1, 1), padding="SAME", rhs_dil=(2, 3)),
    dict(shape=(2, 9, 5), k=(4,), mult=3, strides=(2,), padding=[(2, 1)]),
    dict(shape=(1, 5, 6, 4, 3), k=(3, 3, 2), mult=1, strides=(1, 2, 1), padding="SAME"),
], ids=lambda c: f"{len(c['k'])}d-k{c['k']}-m{c['mult']}")
def test_depthwise(cfg):
  x = rand(np.float32, cfg["shape"], 73)
  c = cfg["shape"][-1]
  w = rand(np.float32, (*cfg["k"], 1, c * cfg["mult"]), 74)
  sp = "DHW"[-len(cfg["k"]):]
  dn = (f"N{sp}C", f"{sp}IO", f"N{sp}C")

  def f(a, b):
    return lax.conv_general_dilated(a, b, cfg["strides"], cfg["padding"],
                                    rhs_dilation=cfg.get("rhs_dil"), dimension_numbers=dn,
                                    feature_group_count=c)

  check(f, x, w, **F32_SUM_TOL)
  # The gradients: a depthwise input gradient, and a weight gradient whose "kernel" is the
  # cotangent (more offsets than the depthwise sum takes: grouped patches).
  check(jax.grad(lambda a, b: jnp.sum(jnp.tanh(f(a, b))), argnums=(0, 1)), x, w, **F32_SUM_TOL)


@pytest.mark.usefixtures("phases")
def test_depthwise_conv_transpose():
  x = rand(np.float32, (2, 5, 6, 4), 75)
  w = rand(np.float32, (3, 3, 1, 4), 76)
  check(lambda a, b: lax.conv_general_dilated(a, b, (1, 1), [(2, 2), (1, 2)], lhs_dilation=(2, 2),
                                              dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                              feature_group_count=4), x, w, **F32_SUM_TOL)


@pytest.mark.parametrize("bgc,n,cout", [(2, 4, 2), (2, 2, 6), (3, 6, 3), (4, 4, 8)], ids=str)
def test_batch_groups(bgc, n, cout):
  x = small_ints(np.float32, (n, 3, 5, 4), 11)
  w = small_ints(np.float32, (cout, 3, 2, 2), 12)
  check(lambda a, b: lax.conv_general_dilated(a, b, (1, 1), [(1, 0), (0, 1)],
                                              batch_group_count=bgc), x, w)


def test_batch_groups_nhwc():
  x = small_ints(np.float32, (4, 5, 4, 3), 13)
  w = small_ints(np.float32, (2, 2, 3, 4), 14)
  check(lambda a, b: lax.conv_general_dilated(a, b, (2, 1), "SAME", batch_group_count=2,
                                              dimension_numbers=("NHWC", "HWIO", "NHWC")), x, w)


# ---- dtypes and preferred_element_type --------------------------------------------------------


@pytest.mark.parametrize("dt", [np.float16, jnp.bfloat16, np.float32],
                         ids=["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("pet", [None, np.float32], ids=["same", "f32"])
def test_float_dtypes(dt, pet):
  x = small_ints(dt, (2, 3, 6, 6), 15)
  w = small_ints(dt, (4, 3, 3, 3), 16)
  check(lambda a, b: lax.conv_general_dilated(a, b, (1, 1), "SAME",
                                              preferred_element_type=pet), x, w)


@pytest.mark.parametrize("dt,rtol", [(np.float16, 4e-3), (jnp.bfloat16, 3e-2),
                                     (np.float32, None)], ids=["float16", "bfloat16", "float32"])
def test_general_floats(dt, rtol):
  # Non-integer values: summation order shows. Half-float results round the f32 sum once
  # (XLA may round partial sums), so they get ~2 ULP more than the dtype default.
  x = rand(np.float32, (2, 4, 7, 7), 17).astype(dt)
  w = rand(np.float32, (3, 4, 3, 3), 18).astype(dt)
  tol = F32_SUM_TOL if rtol is None else dict(rtol=rtol, atol=rtol)
  check(lambda a, b: lax.conv_general_dilated(a, b, (2, 1), "SAME"), x, w, **tol)


def test_special_values():
  # inf and NaN in the input propagate to the windows that cover them.
  x = small_ints(np.float32, (1, 2, 5, 5), 19)
  x[0, 0, 1, 1], x[0, 1, 3, 4] = np.inf, np.nan
  w = np.abs(small_ints(np.float32, (2, 2, 2, 2), 20)) + 1
  check(lambda a, b: lax.conv_general_dilated(a, b, (1, 1), "VALID"), x, w)


def test_complex64():
  x = (small_ints(np.float32, (2, 3, 5, 4), 21) + 1j * small_ints(np.float32, (2, 3, 5, 4), 22))
  w = (small_ints(np.float32, (2, 3, 2, 3), 23) + 1j * small_ints(np.float32, (2, 3, 2, 3), 24))
  check(lambda a, b: lax.conv_general_dilated(a, b, (1, 2), [(1, 0), (1, 1)]),
        x.astype(np.complex64), w.astype(np.complex64))


# ---- integers (bit-exact, wrapping) ----------------------------------------------------------

INT_TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


@pytest.mark.parametrize("dt", INT_TYPES, ids=lambda d: np.dtype(d).name)
def test_int_conv_small(dt):
  x = small_ints(dt, (2, 3, 6, 5), 25)
  w = small_ints(dt, (4, 3, 3, 2), 26)
  check(lambda a, b: lax.conv_general_dilated(a, b, (1, 1), "SAME"), x, w)


@pytest.mark.parametrize("dt", INT_TYPES, ids=lambda d: np.dtype(d).name)
def test_int_conv_wraps(dt):
  # Edge values (min, max, ...) make the sums overflow: results wrap as in XLA.
  x = values(dt, (2, 4, 5, 5), 1)
  w = values(dt, (4, 2, 3, 3), 5)
  check(lambda a, b: lax.conv_general_dilated(a, b, (2, 1), [(1, -1), (0, 2)], (1, 2),
                                              feature_group_count=2), x, w)


@pytest.mark.parametrize("dt,pet", [(np.int8, np.int32), (np.uint8, np.int32),
                                    (np.int16, np.int64), (np.uint8, np.uint32)], ids=str)
def test_int_preferred(dt, pet):
  # Wide accumulation: int8 windows of 4*3*3 products near 127*127 need more than 16 bits
  # (and more than f32's 24-bit mantissa for the wider types).
  x = values(dt, (2, 4, 6, 6), 2)
  w = values(dt, (5, 4, 3, 3), 7)
  check(lambda a, b: lax.conv_general_dilated(a, b, (1, 1), "SAME",
                                              preferred_element_type=pet), x, w)


def test_int32_exact_beyond_f32():
  # Sums around 2^30 with odd low bits: exact in int32, not representable in f32.
  x = np.full((1, 2, 4, 4), (1 << 20) + 1, np.int32)
  w = np.full((1, 2, 3, 3), 57, np.int32)
  check(lambda a, b: lax.conv_general_dilated(a, b, (1, 1), "VALID"), x, w)


def test_int_batch_groups_and_dilation():
  x = small_ints(np.int32, (4, 3, 5, 5), 27)
  w = small_ints(np.int32, (4, 3, 2, 2), 28)
  check(lambda a, b: lax.conv_general_dilated(a, b, (1, 1), [(1, 1), (0, 0)], (2, 1), (1, 2),
                                              batch_group_count=2), x, w)


# ---- 0-D (no spatial dims: a grouped matmul) -------------------------------------------------

DN_0D = ("NC", "OI", "NC")
ZERO_D_DTYPES = [np.float32, np.float16, jnp.bfloat16, np.int32, np.int8, np.uint16,
                 np.complex64]


@pytest.mark.parametrize("dt", ZERO_D_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("groups,n,cin,cout", [(1, 3, 4, 5), (2, 3, 4, 6), (4, 1, 4, 4),
                                               (1, 1, 1, 1)], ids=str)
def test_conv_0d(dt, groups, n, cin, cout):
  x = small_ints(dt, (n, cin), 50)
  w = small_ints(dt, (cout, cin // groups), 51)
  check(lambda a, b: lax.conv_general_dilated(a, b, (), (), dimension_numbers=DN_0D,
                                              feature_group_count=groups), x, w)


@pytest.mark.parametrize("bgc,n,cout", [(2, 4, 2), (3, 3, 6)], ids=str)
@pytest.mark.parametrize("dt", [np.float32, np.int32], ids=dtype_id)
def test_conv_0d_batch_groups(dt, bgc, n, cout):
  x = small_ints(dt, (n, 3), 52)
  w = small_ints(dt, (cout, 3), 53)
  check(lambda a, b: lax.conv_general_dilated(a, b, (), (), dimension_numbers=DN_0D,
                                              batch_group_count=bgc), x, w)


@pytest.mark.parametrize("dn", [("NC", "OI", "NC"), ("CN", "IO", "CN"), ("NC", "IO", "CN")],
                         ids="-".join)
def test_conv_0d_layouts_general_floats(dn):
  x = rand(np.float32, (4, 7) if dn[0] == "NC" else (7, 4), 54)
  w = rand(np.float32, (5, 7) if dn[1] == "OI" else (7, 5), 55)
  check(lambda a, b: lax.conv_general_dilated(a, b, (), (), dimension_numbers=dn), x, w,
        **F32_SUM_TOL)


@pytest.mark.parametrize("pet", [np.int32, np.float32], ids=dtype_id)
def test_conv_0d_preferred(pet):
  x = values(np.int8, (3, 6), 1)
  w = values(np.int8, (2, 6), 4)
  check(lambda a, b: lax.conv_general_dilated(a, b, (), (), dimension_numbers=DN_0D,
                                              preferred_element_type=pet), x, w)


@pytest.mark.parametrize("xs,ws", [((0, 3), (2, 3)), ((2, 0), (2, 0)), ((2, 3), (0, 3))],
                         ids=str)
def test_conv_0d_empty(xs, ws):
  check(lambda a, b: lax.conv_general_dilated(a, b, (), (), dimension_numbers=DN_0D),
        small_ints(np.float32, xs), small_ints(np.float32, ws))


@pytest.mark.parametrize("groups", [1, 2])
def test_conv_0d_grad(groups):
  x = rand(np.float32, (3, 4), 56)
  w = rand(np.float32, (6, 4 // groups), 57)
  ct = rand(np.float32, (3, 6), 58)

  def f(a, b):
    y = lax.conv_general_dilated(a, b, (), (), dimension_numbers=DN_0D,
                                 feature_group_count=groups)
    return jnp.sum(jnp.tanh(y) * ct)

  check(jax.grad(f, argnums=(0, 1)), x, w, **F32_SUM_TOL)


def test_conv_transpose_0d():
  x = small_ints(np.float32, (3, 4), 59)
  w = small_ints(np.float32, (4, 5), 60)
  check(lambda a, b: lax.conv_transpose(a, b, (), "SAME", dimension_numbers=("NC", "IO", "NC")),
        x, w)


# ---- bool (XLA: or of ands) ---------------------------------------------------------------------


def rand_bools(shape, seed, p=0.3):
  return np.random.default_rng(seed).random(shape) < p


@pytest.mark.parametrize("cfg", [
    dict(window_strides=(1, 1), padding="SAME"),
    dict(window_strides=(2, 1), padding=[(1, -1), (0, 2)], lhs_dilation=(1, 2)),
    dict(window_strides=(1, 1), padding="VALID", rhs_dilation=(2, 1), feature_group_count=2),
    dict(window_strides=(1, 2), padding="SAME", batch_group_count=2),
], ids=str)
@pytest.mark.parametrize("p", [0.1, 0.5], ids=str)
def test_bool_conv(cfg, p):
  x = rand_bools((4, 4, 6, 5), 61, p)
  w = rand_bools((4, 4 // cfg.get("feature_group_count", 1), 3, 2), 62, p)
  check(lambda a, b: lax.conv_general_dilated(a, b, **cfg), x, w)


@pytest.mark.parametrize("groups", [1, 3])
def test_bool_conv_0d_and_1d(groups):
  x, w = rand_bools((5, 6), 63), rand_bools((3, 6 // groups), 64)
  check(lambda a, b: lax.conv_general_dilated(a, b, (), (), dimension_numbers=DN_0D,
                                              feature_group_count=groups), x, w)
  x, w = rand_bools((2, 6, 9), 65), rand_bools((3, 6 // groups, 4), 66)
  check(lambda a, b: lax.conv_general_dilated(a, b, (2,), "SAME", feature_group_count=groups),
        x, w)


def test_bool_conv_all_true_and_empty():
  # Every window all true (the count reaches C*K, still nonzero) and an empty contraction.
  check(lambda a, b: lax.conv_general_dilated(a, b, (1,), "VALID"),
        np.ones((1, 64, 9), bool), np.ones((2, 64, 9), bool))
  check(lambda a, b: lax.conv_general_dilated(a, b, (1,), "VALID"),
        np.ones((2, 0, 5), bool), np.ones((3, 0, 2), bool))


# ---- conv_transpose -------------------------------------------------------------------------


@pytest.mark.usefixtures("phases")
@pytest.mark.parametrize("strides", [(1, 1), (2, 2), (3, 2)], ids=str)
@pytest.mark.parametrize("padding", ["SAME", "VALID", [(1, 2), (0, 1)]], ids=str)
def test_conv_transpose(strides, padding):
  x = small_ints(np.float32, (2, 5, 4, 3), 29)
  w = small_ints(np.float32, (3, 3, 3, 4), 30)
  check(lambda a, b: lax.conv_transpose(a, b, strides, padding,
                                        dimension_numbers=("NHWC", "HWIO", "NHWC")), x, w)


@pytest.mark.usefixtures("phases")
@pytest.mark.parametrize("transpose_kernel", [False, True])
@pytest.mark.parametrize("rhs_dil", [(1,), (2,)], ids=str)
def test_conv_transpose_1d(transpose_kernel, rhs_dil):
  x = small_ints(np.float32, (2, 7, 3), 31)
  w = small_ints(np.float32, (3, 3, 3), 32)
  check(lambda a, b: lax.conv_transpose(a, b, (2,), "SAME", rhs_dilation=rhs_dil,
                                        dimension_numbers=("NWC", "WIO", "NWC"),
                                        transpose_kernel=transpose_kernel), x, w)


# ---- jnp.convolve / jnp.correlate -------------------------------------------------------------


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("fn", [jnp.convolve, jnp.correlate], ids=["convolve", "correlate"])
@pytest.mark.parametrize("n,m", [(9, 3), (4, 4), (5, 8), (1, 1)], ids=str)
def test_convolve_1d(fn, mode, n, m):
  a = small_ints(np.float32, (n,), 33)
  v = small_ints(np.float32, (m,), 34)
  check(lambda x, y: fn(x, y, mode=mode), a, v)


@pytest.mark.parametrize("fn", [jnp.convolve, jnp.correlate], ids=["convolve", "correlate"])
@pytest.mark.parametrize("dt", [np.int32, np.int8, np.complex64], ids=lambda d: np.dtype(d).name)
def test_convolve_dtypes(fn, dt):
  a = small_ints(np.float32, (10,), 35).astype(dt)
  v = small_ints(np.float32, (4,), 36).astype(dt)
  if np.dtype(dt).kind == "c":
    a = (a + 1j * small_ints(np.float32, (10,), 37)).astype(dt)
  check(lambda x, y: fn(x, y, mode="full"), a, v)


# ---- a small CNN: forward and gradients -----------------------------------------------------


def cnn(x, w1, w2, groups):
  y = lax.conv_general_dilated(x, w1, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
  y = jnp.tanh(y)
  y = lax.conv_general_dilated(y, w2, (1, 1), [(1, 1), (0, 2)], rhs_dilation=(1, 2),
                               feature_group_count=groups,
                               dimension_numbers=("NHWC", "HWIO", "NHWC"))
  return jnp.sum(y * y)


@pytest.mark.usefixtures("phases")
@pytest.mark.parametrize("groups", [1, 2, 4])
@pytest.mark.parametrize("argnums", [0, 1, 2], ids=["dx", "dw1", "dw2"])
def test_cnn_grad(groups, argnums):
  x = rand(np.float32, (2, 8, 7, 3), 38)
  w1 = rand(np.float32, (3, 3, 3, 4), 39) / 2
  w2 = rand(np.float32, (2, 2, 4 // groups, 8), 40) / 2
  check(jax.grad(lambda *a: cnn(*a, groups), argnums=argnums), x, w1, w2, **F32_SUM_TOL)


@pytest.mark.usefixtures("phases")
@pytest.mark.parametrize("groups", [1, 3])
def test_conv_grads_exact(groups):
  # Integer-valued floats: the gradients of a linear loss are exact sums, so order-free.
  # (A stride along H together with rhs dilation along W makes XLA's CPU algebraic simplifier
  # abort on the weight gradient, so the stride is along W here.)
  x = small_ints(np.float32, (2, 6, 5, 6), 41)
  w = small_ints(np.float32, (3, 2, 3, 6 // groups), 42)
  ct = small_ints(np.float32, (2, 7, 1, 3), 43)

  def f(a, b):
    y = lax.conv_general_dilated(a, b, (1, 2), [(1, 1), (0, 1)], rhs_dilation=(1, 2),
                                 feature_group_count=groups,
                                 dimension_numbers=("NHWC", "OHWI", "NHWC"))
    return jnp.sum(y * ct)

  check(jax.grad(f, argnums=(0, 1)), x, w)


# ---- empty shapes ---------------------------------------------------------------------------


@pytest.mark.parametrize("xs,ws", [((0, 3, 5, 5), (2, 3, 3, 3)), ((2, 0, 5, 5), (2, 0, 3, 3)),
                                   ((2, 3, 5, 5), (0, 3, 3, 3)), ((2, 3, 2, 2), (2, 3, 3, 3))],
                         ids=str)
@pytest.mark.parametrize("dt", [np.float32, np.int32], ids=["float32", "int32"])
def test_empty(xs, ws, dt):
  check(lambda a, b: lax.conv_general_dilated(a, b, (1, 1), "VALID"), small_ints(dt, xs),
        small_ints(dt, ws))


# ---- window_reversal (jax never emits it: StableHLO text) -------------------------------------


@pytest.mark.parametrize("reversal", ["true, false", "false, true", "true, true"])
@pytest.mark.parametrize("dt", [np.float32, np.int32], ids=["float32", "int32"])
def test_window_reversal(reversal, dt):
  from tests.stablehlo_text import mlir_type, run_stablehlo
  x = small_ints(dt, (2, 5, 6, 3), 44)
  w = small_ints(dt, (3, 2, 3, 4), 45)
  y = np.zeros((2, 4, 6, 4), dt)
  text = f"""
  func.func @main(%x: {mlir_type(x)}, %w: {mlir_type(w)}) -> {mlir_type(y)} {{
    %0 = "stablehlo.convolution"(%x, %w) {{
      batch_group_count = 1 : i64, feature_group_count = 1 : i64,
      dimension_numbers = #stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>,
      lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 2>,
      padding = dense<[[0, 1], [1, 1]]> : tensor<2x2xi64>, window_strides = array<i64: 1, 1>,
      window_reversal = array<i1: {reversal}>
    }} : ({mlir_type(x)}, {mlir_type(w)}) -> {mlir_type(y)}
    return %0 : {mlir_type(y)}
  }}"""
  want = run_stablehlo(text, "cpu", x, w)
  got = run_stablehlo(text, "mlx", x, w)
  np.testing.assert_array_equal(got[0], want[0])


# ---- operands that are views ----------------------------------------------------------------


@pytest.mark.parametrize("make", ["ones", "crop", "columns", "transposed", "broadcast"])
def test_operands_that_are_views(make):
  # On the CPU a convolution's patches read the input's memory row-major: an unpadded input that
  # is a view (a broadcast constant, a crop, a transpose) must be made contiguous first (jax's
  # testConvTransposePaddingList: "AsStrided must be used with row contiguous arrays only").
  x = small_ints(np.float32, (30, 30), 70)
  w = small_ints(np.float32, (3, 3), 71)
  makers = {"ones": lambda x: jnp.ones((28, 28), jnp.float32),
            "crop": lambda x: x[1:29, :28],
            "columns": lambda x: x[:28, 2:],
            "transposed": lambda x: x[:28, :28].T,
            "broadcast": lambda x: jnp.broadcast_to(x[0, :28], (28, 28))}

  def f(x, b):
    a = makers[make](x)
    return lax.conv_general_dilated(a[None, None], b[None, None], (1, 1), [(0, 0), (0, 0)])

  check(f, x, w)


@pytest.mark.usefixtures("phases")
@pytest.mark.parametrize("k,strides", [((2, 3), (2, 2)), ((4, 5), (2, 3)), ((3, 1), (3, 1)),
                                       ((5, 2), (4, 2))], ids=str)
def test_input_gradients_of_strided_convs(k, strides):
  # jax's input gradient convolves dy with the kernel reversed over its spatial dims (a flip for
  # MLX's convolution); each output phase takes every stride-th tap of it. Kernel sizes that are
  # not multiples of the stride give the phases different tap counts and offsets. The cotangent
  # is an argument: a constant one would make the gradient a constant of the program.
  x = small_ints(np.float32, (2, 9, 8, 3), 44)
  w = small_ints(np.float32, (*k, 3, 4), 45)
  dn = ("NHWC", "HWIO", "NHWC")
  ct = small_ints(np.float32, jax.eval_shape(
      lambda a, b: lax.conv_general_dilated(a, b, strides, "VALID", dimension_numbers=dn),
      x, w).shape, 46)

  def f(a, b, c):
    return jnp.sum(lax.conv_general_dilated(a, b, strides, "VALID", dimension_numbers=dn) * c)

  check(jax.grad(f), x, w, ct)
