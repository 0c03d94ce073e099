"""Runs completed by a thread that waits for their kernels: MLX's CUDA backend's path.

On CUDA, the thread that runs a program (the caller, or the device worker) only issues its
kernels; the plugin's completion thread (`jaxmlx-gpu-done`) waits for them, through a marker
array evaluated with the run, and then signals the outputs (src/runtime/executable.cc,
finish_async). JAXMLX_COMPLETION_THREAD=1 takes that path on MLX's CPU too, so that it is tested
where there is no GPU: this runs the suites of runs on the calling thread, injected failures,
buffers, execution and concurrency (donation, deletion, chained calls without waiting, several
threads, host callbacks beside runs, errors after a failed kernel) in a child process with it
set, and checks that a run of a few primitives made on the calling thread is waited for there
(kCallerWaitPrimitives) while a larger one is not. tests/test_gpu_fusion.py and the rest of the
suite run it for real on a CUDA machine.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
SUITES = ["test_caller_runs.py", "test_faults.py", "test_buffers.py", "test_execute.py",
          "test_concurrency.py"]


def test_suites_pass_with_the_completion_thread(on_mlx_cpu):
  env = dict(os.environ, JAXMLX_COMPLETION_THREAD="1")
  env.pop("PYTEST_XDIST_WORKER", None)
  proc = subprocess.run(
      [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
       *[str(HERE / s) for s in SUITES]],
      env=env, cwd=HERE.parent, capture_output=True, text=True, timeout=900)
  tail = (proc.stdout + proc.stderr)[-4000:]
  assert proc.returncode == 0, tail
  assert " passed" in proc.stdout and "failed" not in proc.stdout, tail


SNIPPET = """
import pathlib, jax, jax.numpy as jnp, numpy as np
dev = jax.devices("mlx")[0]
x = jax.device_put(np.arange(1024, dtype=np.float32), dev)
y = jax.jit(lambda v: jnp.tanh(v) * 2 + 1)(x)
np.testing.assert_allclose(np.asarray(y), np.tanh(np.arange(1024, dtype=np.float32)) * 2 + 1,
                           rtol=1e-6)
names = {p.read_text().strip() for p in pathlib.Path("/proc/self/task").glob("*/comm")}
print("jaxmlx-gpu-done" in names)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/task")
@pytest.mark.parametrize("forced", ["1", "0"])
def test_the_completion_thread_is_what_completes_runs(on_mlx_cpu, forced):
  # The suites above would pass without the thread too: check that the setting engages it (and
  # that MLX's CPU does without it by default).
  env = dict(os.environ, JAXMLX_COMPLETION_THREAD=forced)
  proc = subprocess.run([sys.executable, "-c", SNIPPET], env=env, capture_output=True,
                        text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.strip().splitlines()[-1] == ("True" if forced == "1" else "False")


READY_SNIPPET = """
import time, jax, jax.numpy as jnp, numpy as np
dev = jax.devices("mlx")[0]
f = jax.jit(lambda v: jnp.exp(v) * 2 + 1)
for n in (1 << 15, 1 << 19):  # 128 KiB: within the caller's wait; 2 MiB: over it
  x_np = np.random.default_rng(0).standard_normal(n).astype(np.float32)
  x = jax.device_put(x_np, dev)
  f(x).block_until_ready()  # the first run is the worker's
  ready = []
  for _ in range(8):
    time.sleep(0.01)  # the worker idle, MLX's stream settled: the caller runs it
    y = f(x)
    ready.append(y.is_ready())
    np.testing.assert_allclose(np.asarray(y), np.exp(x_np) * 2 + 1, rtol=1e-6)
  print(n, sum(ready))
"""


def test_a_small_run_on_the_caller_is_waited_for_there(on_mlx_cpu):
  # On CUDA a run of a few primitives (a jitted `x + 1`) made on the calling thread is waited for
  # by that thread: its outputs are ready when Execute returns, with no hand-off to the
  # completion thread (kCallerWaitPrimitives). A larger run returns before its kernels are done.
  env = dict(os.environ, JAXMLX_COMPLETION_THREAD="1")
  proc = subprocess.run([sys.executable, "-c", READY_SNIPPET], env=env, capture_output=True,
                        text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  ready = dict(map(int, line.split()) for line in proc.stdout.strip().splitlines()[-2:])
  assert ready[1 << 15] == 8, ready
  assert ready[1 << 19] < 8, ready
