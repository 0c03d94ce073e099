"""float64 policy (DESIGN.md decision 5): f64/c128 compute is refused at compile time, naming
the op and the user's source line, unless JAX_MLX_F64=downcast opts in to computing it in
f32/c64 (lossy; results keep the float64 dtype). Transfers and pure data movement of f64 stay
bit-exact either way, and so do the exact conversions f32 <-> f64.

The variable is read once per process (the first time a program is lowered), so the downcast
tests run in a subprocess with it set.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.conftest import REPO
from tests.ops.harness import check

F64_EDGES = np.array([0.0, -0.0, 1.0, -1.5, np.pi, 1e300, -1e-300, 5e-324, np.inf, -np.inf,
                      np.nan, 2.0**-1022, 1.7976931348623157e308, 3.4028235e38, 1e-45],
                     np.float64)


@pytest.fixture(autouse=True)
def _x64():
  with jax.enable_x64(True):
    yield


def downcast_enabled_here() -> bool:
  return os.environ.get("JAX_MLX_F64") == "downcast"


@pytest.mark.skipif(downcast_enabled_here(), reason="this process opted in to downcast")
def test_refusal_names_op_line_and_variable(mlx_device):
  x = jax.device_put(np.ones(4, np.float64), mlx_device)
  with pytest.raises(Exception) as info:
    jax.jit(lambda v: jnp.sin(v) * 2.0)(x)
  msg = str(info.value)
  assert "UNIMPLEMENTED" in msg, msg
  assert "stablehlo.sine" in msg, msg
  assert "f64" in msg and "JAX_MLX_F64=downcast" in msg, msg
  assert "test_f64.py" in msg, msg  # the user's source line


@pytest.mark.skipif(downcast_enabled_here(), reason="this process opted in to downcast")
def test_complex128_refused(mlx_device):
  x = jax.device_put(np.ones(3, np.complex128), mlx_device)
  with pytest.raises(Exception) as info:
    jax.jit(lambda v: v * v)(x)
  assert "complex<f64>" in str(info.value) or "c128" in str(info.value), str(info.value)
  assert "JAX_MLX_F64=downcast" in str(info.value)


@pytest.mark.parametrize("dt", [np.float64, np.complex128], ids=str)
def test_transfer_bit_exact(mlx_device, dt):
  x = F64_EDGES.astype(dt)
  if dt == np.complex128:
    x = x + 1j * np.roll(F64_EDGES, 3)
  y = np.asarray(jax.device_put(x, mlx_device))
  assert y.dtype == dt
  np.testing.assert_array_equal(y.view(np.uint8), x.view(np.uint8))


def test_data_movement_bit_exact():
  x = np.resize(F64_EDGES, (3, 5))
  check(lambda x: (x.T, x[1:, ::2], jnp.concatenate([x, x[::-1]]), x.reshape(5, 3)), x,
        exact=True)


def test_exact_conversions_without_downcast():
  # f32 -> f64 is exact and f64 -> f32 rounds once: neither needs the opt-in.
  # (No f32 denormals: jax's CPU flushes them to zero.)
  x32 = np.array([0.0, -0.0, 1.5, 3.4028235e38, 1.5e-38, np.inf, -np.inf, np.nan, 0.1],
                 np.float32)
  check(lambda x: x.astype(np.float64), x32, exact=True)
  x64 = np.concatenate([F64_EDGES, [1 + 2.0**-24, 1 + 3 * 2.0**-24, 1 + 2.0**-24 + 2.0**-50,
                                     3.4028235677973366e38, 3.4028235677973367e38,
                                     1.401298464324817e-45, 7.006492321624085e-46,
                                     7.006492321624087e-46]])
  # f64 values that land on f32 denormals are flushed to zero by jax's CPU backend; compare
  # those against the exact rounding numpy does instead.
  got = check(lambda x: x[:14].astype(np.float32), x64, exact=True)  # x64[14] = 1e-45
  mlx = jax.devices("mlx")[0]
  tail = np.asarray(jax.jit(lambda x: x.astype(np.float32))(jax.device_put(x64, mlx)))
  np.testing.assert_array_equal(tail.view(np.uint32), x64.astype(np.float32).view(np.uint32))
  assert got.dtype == np.float32


_DOWNCAST_SCRIPT = textwrap.dedent("""
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_enable_x64", True)
    cpu, mlx = jax.devices("cpu")[0], jax.devices("mlx")[0]
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (4, 5))
    y = rng.uniform(0.5, 2, (5, 3))
    z = x[:, :3] + 1j * x[:, 1:4]
    programs = {
        "arith": (lambda x, y: jnp.sin(x) * 2.0 + jnp.exp(x) / 3.0 - x ** 2, (x, x)),
        "matmul": (lambda x, y: x @ y, (x, y)),
        "reduce": (lambda x, y: (jnp.sum(x, axis=0), jnp.max(x), jnp.mean(y)), (x, y)),
        "softmax": (lambda x, y: jax.nn.softmax(x, axis=-1), (x, y)),
        "grad": (lambda x, y: jax.grad(lambda a: jnp.sum(jnp.tanh(a @ y)))(x), (x, y)),
        "complex": (lambda z, y: (z * z.conj() + jnp.exp(z), jnp.abs(z)), (z, y)),
        "iota_compare": (lambda x, y: jnp.where(x > 0, jnp.arange(5.0), -x), (x, y)),
        "convert": (lambda x, y: (x.astype(np.float32), x.astype(np.int32),
                                  (x * 3).astype(np.int8)), (x, y)),
    }
    for name, (fn, args) in programs.items():
        want = jax.jit(fn)(*[jax.device_put(a, cpu) for a in args])
        got = jax.jit(fn)(*[jax.device_put(a, mlx) for a in args])
        for w, g in zip(jax.tree_util.tree_leaves(want), jax.tree_util.tree_leaves(got)):
            assert g.dtype == w.dtype, (name, g.dtype, w.dtype)
            # f32 compute: a few f32 ULP relative to the values involved.
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=2e-5,
                                       err_msg=name)
    # Transfers stay exact with the variable set, too.
    e = np.array([np.pi, 1e300, 5e-324, -0.0, np.nan])
    assert (np.asarray(jax.device_put(e, mlx)).view(np.uint64) == e.view(np.uint64)).all()
    print("DOWNCAST-OK")
""")


def test_downcast_runs_f64_programs():
  env = dict(os.environ, JAX_MLX_F64="downcast", JAX_PLATFORMS="cpu,mlx")
  r = subprocess.run([sys.executable, "-c", _DOWNCAST_SCRIPT], env=env, cwd=REPO,
                     capture_output=True, text=True, timeout=600)
  assert r.returncode == 0 and "DOWNCAST-OK" in r.stdout, r.stdout[-3000:] + r.stderr[-5000:]
