"""CPU elementwise fusion (src/runtime/cpu_fusion.cc): chains of MLX elementwise primitives,
traced for graph replay on MLX's CPU, become one FusedElementwise primitive each.

The rewrite runs MLX's own scalar functors in the graph's order, so it must change no bit. Every
case here runs on the mlx device twice, with JAXMLX_CPU_FUSION=1 (fused) and =0 (MLX's own
primitives), and asserts
  (a) the two results are bit for bit the same (floats compared as uint32 patterns, so NaN
      payloads and -0.0 count), and
  (b) the fused result matches jax's CPU backend within tests/ops/tolerances.py (ints and bools
      exactly).
The environment is read when a program is compiled, so each call jits a fresh function (jit
caches per function). The inputs hold NaN, +-inf, -0.0, denormals and values near f32's max
whose sums and products overflow; (a) sees them all. (b) runs on the same inputs less what jax's
CPU backend computes differently from MLX with or without fusion: it flushes f32 denormals to
zero, and its FMAs (tests/ops/test_fma.py) keep a near-max product from overflowing, so there
denormals become signed zeros and near-max values 1e36.

Programs are traced with x64 off (as users run jax): fusion covers float32, int32, uint32 and
bool. A child process (as in tests/test_graph_stats.py) counts the primitives of an adam update:
with fusion no Add/Multiply/Sqrt/Divide is left, without it no FusedElementwise appears. The
counts are checked only on MLX's CPU device: fusion is a CPU rewrite; the differential cases run
on any device.
"""

from __future__ import annotations

import collections
import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from tests.ops.edge_values import rand, values
from tests.ops.harness import assert_same, run_on
from tests.stats_log import last_run_counts

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _enable_x64():
  # Overrides tests/ops/conftest.py's: jax's default types, the 32-bit ones fusion covers.
  with jax.enable_x64(False):
    yield


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------

FUSED_DTYPES = {np.dtype(t) for t in (np.float32, np.int32, np.uint32, np.bool_)}

# Placed at a few positions of float inputs: NaN, infinities, signed zeros, denormals (f32's
# smallest normal is 1.2e-38), values near f32's max (their sums and squares overflow).
SPECIAL_F32 = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-40, -3e-39, 3e38, -3e38, 1e30,
                        -1e20, 1.0, -1.0, 0.5], np.float32)


def floats(shape, seed, scale=3.0, special=True):
  """Seeded f32 values in [-scale, scale] with SPECIAL_F32 at random positions."""
  x = np.array(rand(np.float32, shape, seed, scale=scale), np.float32)
  if special and x.size:
    flat = x.reshape(-1)
    k = min(len(SPECIAL_F32), flat.size)
    where = np.random.default_rng(seed + 1000).permutation(flat.size)[:k]
    flat[where] = np.roll(SPECIAL_F32, -seed)[:k]
  return x


def ints(dtype, shape, seed):
  """The integer type's edge values (min, max, ...) cycled, then shuffled."""
  v = values(dtype, shape, seed).reshape(-1)
  return np.random.default_rng(seed).permutation(v).reshape(shape)


def bools(shape, seed):
  return np.asarray(rand(np.bool_, shape, seed))


def for_cpu(a):
  """`a` with what jax's CPU backend computes differently from MLX by design taken out:
  denormals (it flushes them to signed zeros) and finite values near f32's max (it contracts
  a*b+c into FMAs, tests/ops/test_fma.py, whose products never overflow where MLX's do)."""
  if a.dtype != np.float32:
    return a
  tiny = np.finfo(np.float32).tiny
  a = np.where((np.abs(a) < tiny) & (a != 0), np.copysign(np.float32(0), a), a)
  return np.where(np.isfinite(a) & (np.abs(a) > 1e36), np.copysign(np.float32(1e36), a), a)


def as_bits(a):
  a = np.asarray(a)
  return a.reshape(-1).view(f"u{a.dtype.itemsize}")


# Set by `make asan`: the plugin is a sanitizer build (-O1). An op of two NaNs (NaN + NaN) gives
# whichever operand's NaN the C++ compiler put first in the instruction, and C++ lets it commute
# the operands: the release builds of ours and of MLX's kernels agree (the second's), the
# sanitizer build's fused kernels may take the first's. There a NaN matches any NaN.
ANY_NAN_OPERAND = os.environ.get("JAXMLX_TEST_SANITIZER_BUILD") == "1"


def assert_bit_identical(fused, unfused):
  f_leaves, f_tree = jax.tree_util.tree_flatten(fused)
  u_leaves, u_tree = jax.tree_util.tree_flatten(unfused)
  assert f_tree == u_tree
  for i, (f, u) in enumerate(zip(f_leaves, u_leaves)):
    assert f.dtype == u.dtype and f.shape == u.shape, (i, f.dtype, u.dtype, f.shape, u.shape)
    if ANY_NAN_OPERAND and np.issubdtype(f.dtype, np.floating):
      both = np.isnan(f) & np.isnan(u)
      f, u = np.where(both, np.nan, f), np.where(both, np.nan, u)
    np.testing.assert_array_equal(as_bits(f), as_bits(u),
                                  err_msg=f"output {i}: fused != unfused ({f.dtype})")


def on_mlx(monkeypatch, fusion: str, fn, *args):
  monkeypatch.setenv("JAXMLX_CPU_FUSION", fusion)
  # A fresh function: jit would hand back the program compiled under the other setting.
  return run_on(jax.devices("mlx")[0], lambda *a: fn(*a), *args)


def check_fusion(monkeypatch, fn, *args, rtol=None, atol=None):
  """fn on mlx fused and unfused (bit-identical), and fused against jax's CPU backend."""
  args = tuple(np.asarray(a) for a in args)
  fused = on_mlx(monkeypatch, "1", fn, *args)
  unfused = on_mlx(monkeypatch, "0", fn, *args)
  for leaf in jax.tree_util.tree_leaves(fused):  # the types fusion covers: no f64 crept in
    assert leaf.dtype in FUSED_DTYPES, leaf.dtype
  assert_bit_identical(fused, unfused)

  tame = tuple(for_cpu(a) for a in args)
  if any(not np.array_equal(as_bits(a), as_bits(t)) for a, t in zip(args, tame)):
    fused = on_mlx(monkeypatch, "1", fn, *tame)
  want = run_on(jax.devices("cpu")[0], fn, *tame)
  assert_same(fused, want, rtol=rtol, atol=atol, err_msg="fused vs jax's CPU:")


# --------------------------------------------------------------------------------------------
# The programs
# --------------------------------------------------------------------------------------------

B1, B2, LR, EPS = 0.9, 0.999, 1e-3, 1e-8


def adam(p, mu, nu, g, t=3):
  """optax's adam update, step t: the new params and moments."""
  mu = B1 * mu + (1 - B1) * g
  nu = B2 * nu + (1 - B2) * g * g
  mu_hat = mu / (1 - B1**t)
  nu_hat = nu / (1 - B2**t)
  return p - LR * mu_hat / (jnp.sqrt(nu_hat) + EPS), mu, nu


def adam_args(shape, seed=0):
  p, mu, g = (floats(shape, seed + i) for i in range(3))
  nu = np.abs(floats(shape, seed + 3))
  return p, mu, nu, g


def adam_counted(p, mu, nu, g, count):  # the step count an array, as optax keeps it
  t = count + 1
  mu = B1 * mu + (1 - B1) * g
  nu = B2 * nu + (1 - B2) * g * g
  return p - LR * (mu / (1 - B1**t)) / (jnp.sqrt(nu / (1 - B2**t)) + EPS), mu, nu


def layer_norm(x, g, b):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) * lax.rsqrt(var + 1e-5) * g + b


def relu_grad(x, w):
  return jax.grad(lambda x: jnp.sum(jax.nn.relu(x) * w))(x)


def where_every_direction(x, y):
  ops = [jnp.less, jnp.less_equal, jnp.greater, jnp.greater_equal, jnp.equal, jnp.not_equal]
  return tuple(jnp.where(op(x, y), x * 2.0, y - 1.0) for op in ops)


def logical_chain(a, b, x):
  m = jnp.logical_and(a, x > 0) | jnp.logical_not(b)
  n = jnp.logical_or(m, x != x)  # NaN positions
  return jnp.logical_not(n & a), jnp.where(n, x, -x)


def int_chain(a, b, c, d):
  return ((a + b) * c - d,
          jnp.maximum(a, b) - jnp.minimum(c, d),
          jnp.where(a > b, a * c, d - b),
          jnp.where((a <= c) & (b != d), -a, a * a))


def uint_chain(a, b):
  h = a * np.uint32(2654435761) + b  # a Python int this large overflows jax's weak int32
  h = h ^ (h >> 16)
  return (h & 0xFFFF) | (b << 3), jnp.where(h > b, h - b, jnp.maximum(b, a) - h)


def f32_to_i32(x, i):  # x in range: truncation toward zero
  return (x * 3.0).astype(jnp.int32) + i * 2 - 1


def bool_to_f32(x, a):
  # Not convert(b) * x: XLA makes it select(b, x, 0), which has no NaN for 0 * inf.
  return (x > 0).astype(jnp.float32) - jnp.logical_not(a).astype(jnp.float32) * 0.5 + x


def int_to_f32(x, i, u):
  return (i.astype(jnp.float32) * 0.5 + x, u.astype(jnp.float32) * 2.0 - x,
          i.astype(jnp.uint32) * 3 + u, jnp.where(x.astype(bool), x, 7.0))


def transposed(x, y):
  return (x.T + y) * 2.0 - y


def broadcasts(r, c, x, v):
  return r * c + 3.0, (r - c) * (r + c), (r * x - c) / 2.0, x * v - v * 0.5


def transcendental(x, y):
  return (jnp.exp(x) * jnp.tanh(y) - jnp.log(jnp.abs(x) + 1e-3),
          jnp.log(jnp.exp(-x * x) + y * y),
          jnp.tanh(jnp.exp(x) - jnp.log(y)),
          lax.rsqrt(jnp.abs(x)) + jnp.sqrt(y) * jnp.square(x))


def intermediate_returned(x, y):
  h = x * y + 1.0
  k = jnp.tanh(h) - h * 2.0  # not exp: XLA clamps exp(inf) to a finite value in a fused loop
  m = x > y
  return h, k, k * y, m, jnp.where(m, x, y) * 2.0


def fori_adam(p, mu, nu, g):
  def body(i, c):
    return adam(*c, g * (i + 1).astype(jnp.float32))
  return lax.fori_loop(0, 3, body, (p, mu, nu))


def scan_adam(p, mu, nu, gs):
  def step(c, g):
    new = adam(*c, g)
    return new, c[0] * 2.0 - g * new[1]
  return lax.scan(step, (p, mu, nu), gs)


# id -> (function, its arguments, rtol, atol); None: tolerances.py's.
S = (4, 33)
CASES = {
    "adam": (adam, lambda: adam_args(S), None, None),
    "adam_3d": (adam, lambda: adam_args((2, 3, 17), 10), None, None),
    "adam_scalar": (adam, lambda: adam_args((), 20), None, None),
    "adam_empty": (adam, lambda: adam_args((0, 5), 30), None, None),
    "adam_count": (adam_counted, lambda: (*adam_args(S, 40), np.int32(4)), None, None),
    # A mean's sum order differs from XLA's (tests/ops/test_norms.py's tolerances).
    "layer_norm": (layer_norm, lambda: (floats((6, 33), 50), floats((33,), 51, special=False),
                                        floats((33,), 52, special=False)), 1e-5, 3e-5),
    "gelu_tanh": (lambda x: jax.nn.gelu(x, approximate=True), lambda: (floats(S, 60),),
                  None, None),
    "relu": (jax.nn.relu, lambda: (floats(S, 61),), None, None),
    "relu_grad": (relu_grad, lambda: (floats(S, 62), floats(S, 63)), None, None),
    "where_compare": (where_every_direction, lambda: _with_ties(floats(S, 70), floats(S, 71)),
                      None, None),
    "logical": (logical_chain, lambda: (bools(S, 72), bools(S, 73), floats(S, 74)), None, None),
    "int32": (int_chain, lambda: tuple(ints(np.int32, S, 80 + i) for i in range(4)), None, None),
    "uint32": (uint_chain, lambda: (ints(np.uint32, S, 90), ints(np.uint32, S, 91)), None, None),
    "f32_to_i32": (f32_to_i32, lambda: (floats(S, 100, scale=1e6, special=False),
                                        rand(np.int32, S, 101, lo=-1000, hi=1000)), None, None),
    "bool_to_f32": (bool_to_f32, lambda: (floats(S, 102), bools(S, 103)), None, None),
    "int_to_f32": (int_to_f32, lambda: (floats(S, 104), ints(np.int32, S, 105),
                                        ints(np.uint32, S, 106)), None, None),
    "transposed": (transposed, lambda: (floats((33, 4), 110), floats(S, 111)), None, None),
    "broadcasts": (broadcasts, lambda: (floats((1, 33), 112), floats((4, 1), 113), floats(S, 114),
                                        floats((33,), 115)), None, None),
    "transcendental": (transcendental, lambda: (floats(S, 120), floats(S, 121)), None, None),
    "intermediate_returned": (intermediate_returned, lambda: (floats(S, 130), floats(S, 131)),
                              None, None),
    "fori_loop": (fori_adam, lambda: adam_args(S, 140), None, None),
    "scan": (scan_adam, lambda: (*adam_args(S, 150)[:3], floats((5, *S), 154)), None, None),
}


def _with_ties(x, y):
  x, y = x.copy(), y.copy()
  y[:, ::3] = x[:, ::3]  # equal pairs: NaN with NaN, inf with inf, -0.0 with itself
  x[0, 1], y[0, 1] = 0.0, -0.0  # equal, of different signs
  return x, y


@pytest.mark.parametrize("case", CASES)
def test_fused_is_unfused_bit_for_bit(monkeypatch, case):
  fn, make_args, rtol, atol = CASES[case]
  check_fusion(monkeypatch, fn, *make_args(), rtol=rtol, atol=atol)


def test_signed_zeros_through_a_chain(monkeypatch):
  # -0.0 survives (or not) each op as MLX's functors say: x * -1 + 0.0, -x - 0.0, max/min.
  x = np.array([0.0, -0.0, 1e-40, -1e-40, 1.0, -1.0, np.nan, -np.inf], np.float32)
  check_fusion(monkeypatch, lambda x: (x * -1.0 + 0.0, -x - 0.0, jnp.maximum(-x, x) * 1.0,
                                       jnp.minimum(x, -x) - 0.0, jnp.abs(x) * -2.0), x)


# --------------------------------------------------------------------------------------------
# Primitive counts (child process)
# --------------------------------------------------------------------------------------------

CHILD = r"""
import jax, numpy as np
from tests.ops.test_cpu_fusion import adam, adam_args
mlx = jax.devices("mlx")[0]
args = jax.device_put(adam_args((4, 33)), mlx)
f = jax.jit(adam)
for _ in range(2):  # the first call traces, the second replays
  jax.block_until_ready(f(*args))
"""


def graph_stats(tmp_path, fusion: str) -> dict[str, collections.Counter]:
  """Program name -> primitive counts of its last run, from a child process."""
  log = tmp_path / f"stats-{fusion}.log"
  env = dict(os.environ, JAXMLX_GRAPH_STATS=str(log), JAXMLX_CPU_FUSION=fusion)
  env.pop("JAXMLX_COMPILE", None)  # the default: graph replay on MLX's CPU
  r = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env,
                     cwd=REPO, timeout=300)
  assert r.returncode == 0, r.stderr[-3000:]
  return last_run_counts(log)


@pytest.fixture
def cpu_only(mlx_device):
  if mlx_device.device_kind != "MLX cpu":
    pytest.skip(f"CPU fusion is a rewrite for MLX's CPU only; this is {mlx_device.device_kind}")


def test_adam_is_one_fused_chain_per_output(cpu_only, tmp_path):
  c = graph_stats(tmp_path, "1")["jit_adam"]
  assert c["FusedElementwise"] >= 1, c
  for name in ("Add", "Multiply", "Sqrt", "Divide"):
    assert c[name] == 0, (name, c)


def test_fusion_off_leaves_mlx_primitives(cpu_only, tmp_path):
  c = graph_stats(tmp_path, "0")["jit_adam"]
  assert c["FusedElementwise"] == 0, c
  assert c["Multiply"] > 0 and c["Sqrt"] > 0, c
