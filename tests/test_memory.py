"""The memory governor (docs/memory.md): work that does not fit is refused with RESOURCE_EXHAUSTED
naming the numbers, nothing is allocated first, and the process stays usable afterwards.

The limit is read when the plugin starts, so every scenario runs in its own interpreter with its
own environment. No scenario allocates more than ~150 MB: every oversized request must be refused
before MLX allocates it (the 1 TB one would otherwise take the machine down).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

_PRELUDE = """
import json
import numpy as np
import jax
import jax.numpy as jnp
mlx = jax.devices("mlx")[0]
results = {}

def refusal(fn):
  try:
    out = fn()
    jax.block_until_ready(out)
  except Exception as e:  # the plugin's error surfaces as jax's runtime error
    return str(e)
  return None

def small_program_works():
  a = np.arange(12, dtype=np.float32).reshape(3, 4)
  b = np.full((3, 4), 2.5, dtype=np.float32)
  got = jax.jit(lambda x, y: x * y + 1.0)(jax.device_put(a, mlx), jax.device_put(b, mlx))
  assert got.devices() == {mlx}, got.devices()
  return bool(np.array_equal(np.asarray(got), a * b + 1.0))
"""


def _run(code: str, limit: str | None) -> dict:
  env = {k: v for k, v in os.environ.items() if k not in ("JAXMLX_MEMORY_LIMIT", "JAXMLX_CACHE_LIMIT")}
  env["JAX_PLATFORMS"] = "cpu,mlx"
  if limit is not None:
    env["JAXMLX_MEMORY_LIMIT"] = limit
  script = _PRELUDE + textwrap.dedent(code) + "\nprint('RESULTS=' + json.dumps(results))\n"
  r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                     timeout=300)
  assert r.returncode == 0, f"the process died (rc {r.returncode}):\n{r.stdout}\n{r.stderr}"
  line = [l for l in r.stdout.splitlines() if l.startswith("RESULTS=")]
  assert line, r.stdout + r.stderr
  return json.loads(line[-1][len("RESULTS="):])


def _assert_names_numbers(msg: str | None, requested: str, limit: str) -> None:
  assert msg is not None, "the request was not refused"
  assert "RESOURCE_EXHAUSTED" in msg, msg
  assert f"requested {requested}" in msg, msg
  assert f"limit {limit}" in msg, msg


def test_device_put_over_the_limit_is_refused_then_work_continues():
  res = _run("""
    big = np.ones((25 * 2**20,), np.float32)  # 100 MiB on the host
    results["put"] = refusal(lambda: jax.device_put(big, mlx))
    results["small"] = small_program_works()
    # A transfer that fits still works after the refusal.
    fits = np.arange(4 * 2**20, dtype=np.int32)  # 16 MiB
    results["fits"] = bool(np.array_equal(np.asarray(jax.device_put(fits, mlx)), fits))
  """, limit="64M")
  msg = res["put"]
  _assert_names_numbers(msg, "100.00 MiB (104857600 bytes)", "64.00 MiB (67108864 bytes)")
  assert "JAXMLX_MEMORY_LIMIT" in msg, msg  # says what to do
  assert res["small"] is True
  assert res["fits"] is True


def test_transfer_that_does_not_fit_beside_live_arrays_fails_its_buffer_then_work_continues():
  # Each 40 MiB transfer fits the 64 MiB limit alone, not beside the other: the second is refused
  # on the device worker (in queue order), and its array raises when used.
  res = _run("""
    held = jax.device_put(np.ones((10 * 2**20,), np.float32), mlx)  # 40 MiB
    second = np.full((10 * 2**20,), 2.0, np.float32)
    results["busy"] = refusal(lambda: np.asarray(jax.device_put(second, mlx)))
    results["held"] = bool(np.all(np.asarray(held) == 1.0))  # earlier arrays are intact
    held.delete()
    results["after"] = bool(np.array_equal(np.asarray(jax.device_put(second, mlx)), second))
    results["small"] = small_program_works()
  """, limit="64M")
  msg = res["busy"]
  _assert_names_numbers(msg, "40.00 MiB (41943040 bytes)", "64.00 MiB (67108864 bytes)")
  assert re.search(r"live arrays 4\d\.\d\d MiB", msg) and "cache" in msg, msg
  assert res["held"] is True
  assert res["after"] is True
  assert res["small"] is True


def test_program_whose_outputs_exceed_the_limit_is_refused_then_work_continues():
  res = _run("""
    with jax.default_device(mlx):
      results["zeros"] = refusal(jax.jit(lambda: jnp.zeros((2**27,), jnp.float32)))
    results["small"] = small_program_works()
  """, limit="64M")
  _assert_names_numbers(res["zeros"], "512.00 MiB (536870912 bytes)", "64.00 MiB (67108864 bytes)")
  assert res["small"] is True


def test_program_refused_while_live_arrays_fill_the_limit_runs_once_they_are_freed():
  # 40 MiB live + 40 MiB of outputs > 64 MiB: refused at run time; deleting the live array (and
  # MLX's cache being emptied by the governor) lets the same program run.
  res = _run("""
    held = jax.device_put(np.ones((10 * 2**20,), np.float32), mlx)  # 40 MiB
    make = jax.jit(lambda: jnp.full((10 * 2**20,), 3.0, jnp.float32))
    with jax.default_device(mlx):
      results["busy"] = refusal(make)
      held.delete()
      out = make()
    results["after"] = bool(np.all(np.asarray(out) == 3.0)) and out.shape == (10 * 2**20,)
    results["small"] = small_program_works()
  """, limit="64M")
  _assert_names_numbers(res["busy"], "40.00 MiB (41943040 bytes)", "64.00 MiB (67108864 bytes)")
  assert re.search(r"live arrays 4\d\.\d\d MiB", res["busy"]), res["busy"]  # the held array
  assert res["after"] is True
  assert res["small"] is True


def test_one_terabyte_request_is_refused_under_the_default_limit():
  res = _run("""
    with jax.default_device(mlx):
      results["tb"] = refusal(jax.jit(lambda: jnp.zeros((2**40,), jnp.uint8)))
    results["small"] = small_program_works()
  """, limit=None)
  _assert_names_numbers(res["tb"], "1.00 TiB (1099511627776 bytes)", "")
  assert res["small"] is True


@pytest.mark.parametrize("value", ["lots", "-3G", "1.5"])
def test_unparsable_limit_warns_and_falls_back_to_the_default(value):
  env = {k: v for k, v in os.environ.items() if k != "JAXMLX_MEMORY_LIMIT"}
  env.update(JAX_PLATFORMS="cpu,mlx", JAXMLX_MEMORY_LIMIT=value)
  code = _PRELUDE + "print('SMALL', small_program_works())\n"
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                     timeout=300)
  assert r.returncode == 0, r.stderr
  assert "SMALL True" in r.stdout
  assert "JAXMLX_MEMORY_LIMIT ignored" in r.stderr and f'"{value}"' in r.stderr, r.stderr


def test_memory_stats_report_the_limit_and_transferred_arrays():
  res = _run("""
    before = mlx.memory_stats()
    held = jax.device_put(np.ones((4 * 2**20,), np.float32), mlx)  # 16 MiB
    held.block_until_ready()
    after = mlx.memory_stats()
    results["limit"] = after["bytes_limit"]
    results["grew"] = after["bytes_in_use"] - before["bytes_in_use"]
  """, limit="64M")
  assert res["limit"] == 64 * 2**20
  assert res["grew"] >= 16 * 2**20, res


@pytest.mark.parametrize("donate", [True, False], ids=["donated", "kept"])
def test_a_donated_argument_lends_its_memory_to_the_result(donate):
  # x = f(x) over a 32 MiB array: donated, each step's result takes the memory of its argument
  # (as MLX's compiled optimizer steps do), so the peak stays near one array; kept, the argument,
  # the temporary and the result coexist. Each step is waited for: a step queued behind the
  # previous one finds its argument still held by the kernels that write it, and allocates.
  res = _run(f"""
    f = jax.jit(lambda x: x * 2.0 + 1.0, donate_argnums=(0,) if {donate} else ())
    x = jax.device_put(np.ones((8 * 2**20,), np.float32), mlx)
    x.block_until_ready()
    base = mlx.memory_stats()["peak_bytes_in_use"]
    for _ in range(4):
      x = f(x)
      x.block_until_ready()
    results["ok"] = bool(np.all(np.asarray(x) == 31.0))
    results["peak_growth"] = mlx.memory_stats()["peak_bytes_in_use"] - base
  """, limit=None)
  assert res["ok"]
  mib = res["peak_growth"] / 2**20
  if donate:
    assert mib < 16, res  # no second 32 MiB array ever
  else:
    assert mib >= 32, res  # the test can tell: without donation a new array each step
