"""Differential checking: run a function on jax's CPU backend and on the mlx platform.

    check(fn, *args)                     # exact for ints/bools, TOLERANCES for floats
    check(fn, *args, exact=True)         # bit-exact whatever the dtype
    check(fn, *args, rtol=1e-5)          # explicit float tolerance

Arguments are numpy arrays (or scalars); each backend gets its own device_put copy. Outputs may
be any pytree of arrays. Comparisons: dtype and shape must match exactly; integer, bool and
unsigned results bit for bit; floats within the tolerance of tolerances.py for that dtype, with
NaN matching NaN in the same positions and infinities (and their signs) matching exactly.
"""

from __future__ import annotations

import jax
import ml_dtypes
import numpy as np

from tests.ops.tolerances import tolerance_for


def _is_ml_float(dtype) -> bool:
  try:
    ml_dtypes.finfo(dtype)
    return True
  except ValueError:
    return False


def run_on(device, fn, *args, jit_kwargs=None):
  placed = [jax.device_put(a, device) if isinstance(a, np.ndarray) or np.isscalar(a) else a
            for a in args]
  out = jax.jit(fn, **(jit_kwargs or {}))(*placed)
  return jax.tree_util.tree_map(np.asarray, out)


def assert_same(got, want, *, exact=False, rtol=None, atol=None, err_msg="", nan_payloads=True):
  """`exact`: floats compared bit for bit too; with `nan_payloads=False` a NaN only has to be a
  NaN where the reference has one (for NaNs the arithmetic makes: x86's default NaN is
  0xFFC00000, a CUDA GPU's 0x7FFFFFFF)."""
  got_leaves, got_tree = jax.tree_util.tree_flatten(got)
  want_leaves, want_tree = jax.tree_util.tree_flatten(want)
  assert got_tree == want_tree, f"{err_msg} output structure {got_tree} != {want_tree}"
  for i, (g, w) in enumerate(zip(got_leaves, want_leaves)):
    g, w = np.asarray(g), np.asarray(w)
    where = f"{err_msg} output {i}"
    assert g.dtype == w.dtype, f"{where}: dtype {g.dtype} != {w.dtype}"
    assert g.shape == w.shape, f"{where}: shape {g.shape} != {w.shape}"
    # ml_dtypes floats (bfloat16, float8) have numpy kind 'V': they are floats all the same.
    kind = "f" if w.dtype.kind == "V" and _is_ml_float(w.dtype) else w.dtype.kind
    if exact or kind in "biuV":
      g, w = np.ascontiguousarray(g), np.ascontiguousarray(w)
      if not nan_payloads and kind in "fc":
        g_nan, w_nan = np.isnan(g), np.isnan(w)
        np.testing.assert_array_equal(g_nan, w_nan, err_msg=where + " (NaN)")
        g, w = np.where(g_nan, np.zeros_like(g), g), np.where(w_nan, np.zeros_like(w), w)
      np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8), err_msg=where)
      continue
    if w.dtype.itemsize == 1 and rtol is None and atol is None:
      # float8: one ULP is coarse; compare bit patterns unless a tolerance is given.
      np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8), err_msg=where)
      continue
    t_rtol, t_atol = tolerance_for(w.dtype)
    rtol_i = t_rtol if rtol is None else rtol
    atol_i = t_atol if atol is None else atol
    g64 = g.astype(np.complex128 if kind == "c" else np.float64)
    w64 = w.astype(np.complex128 if kind == "c" else np.float64)
    np.testing.assert_allclose(g64, w64, rtol=rtol_i, atol=atol_i, equal_nan=True, err_msg=where)
    # assert_allclose treats inf == inf only with equal signs; NaN positions must agree too.
    np.testing.assert_array_equal(np.isnan(g64), np.isnan(w64), err_msg=where + " (NaN)")


def x86_host_has_avx512_fp16() -> bool:
  """Where jaxlib 0.10's XLA:CPU computes f16 natively and contracts f16 multiply-adds as 0.11's
  does everywhere (src/passes/contract_fma.h); Linux x86 only, as the plugin's own check."""
  import platform
  if platform.system() != "Linux" or platform.machine() != "x86_64":
    return False
  with open("/proc/cpuinfo") as f:
    return any(line.startswith("flags") and " avx512_fp16" in line for line in f)


def xla_cpu_contracts_f16(version: str) -> bool:
  """Whether jax's CPU backend of jaxlib `version` contracts f16 multiply-adds on this host."""
  return not version.startswith("0.10") or x86_host_has_avx512_fp16()


def check(fn, *args, exact=False, rtol=None, atol=None, jit_kwargs=None, nan_payloads=True):
  """Runs fn on cpu and on mlx and compares (assert_same); returns the mlx result."""
  cpu = jax.devices("cpu")[0]
  mlx = jax.devices("mlx")[0]
  want = run_on(cpu, fn, *args, jit_kwargs=jit_kwargs)
  got = run_on(mlx, fn, *args, jit_kwargs=jit_kwargs)
  assert_same(got, want, exact=exact, rtol=rtol, atol=atol, nan_payloads=nan_payloads)
  return got
