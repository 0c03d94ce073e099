"""Shared pieces of the benchmark suite: programs, timing, memory, the correctness check, output.

A workload (bench/workloads/<name>.py) describes one or more `Case`s. A case knows how to build a
`Program` for each column: the JAX program on a given jax device (our platform, jax's CPU, jax's
GPU) and the same model written against MLX's Python API. bench/run.py drives every column of a
case the same way: first call (compile), check calls, warm-up, timed repetitions.

Every timed call is synchronous: the harness waits for the call's outputs (block_until_ready /
mx.eval) before the next call, so no column gains from pipelining calls. A JAX training step
waits for its loss: every output of one jax execution becomes ready with the others (one
completion event, on our platform as in XLA's PJRT clients), and jax's wait on a whole pytree
costs 1.5-4 µs per leaf on any backend (0.3-0.6 ms per step for a transformer's parameters and
adam state), which a training loop reading its loss never pays and native MLX's mx.eval of its
state does not either.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

# Column keys, in table order. "ours" is jax on the jax-mlx platform.
OURS, OURS_COMPILED, JAX_CPU, MLX, JAX_GPU = "ours", "ours_compiled", "jax_cpu", "mlx", "jax_gpu"
COLUMN_TITLES = {
    OURS: "ours (jax on mlx)",
    OURS_COMPILED: "ours, JAXMLX_COMPILE=1",
    JAX_CPU: "jax cpu",
    MLX: "native mlx",
    JAX_GPU: "jax gpu",
}


@dataclasses.dataclass
class Size:
  """What the command line asks for. level: "quick" (smoke test), "default" (sized so the whole
  run fits ~15 minutes on a 2-core CPU, where MLX's CPU matmuls reach ~1 GFLOP/s) or "full" (the
  sizes of issue #6, for a GPU). scale multiplies every workload's batch."""
  level: str = "default"
  scale: float = 1.0

  def pick(self, quick, default, full):
    return {"quick": quick, "default": default, "full": full}[self.level]

  def batch(self, quick: int, default: int, full: int) -> int:
    return max(1, round(self.pick(quick, default, full) * self.scale))


def plugin_log(env_var: str, name: str) -> "pathlib.Path":
  """A fresh file the plugin appends to (JAXMLX_GRAPH_STATS, JAXMLX_PROFILE): set in `env_var`,
  with our platform beside jax's CPU. Call before jax starts the plugin, which reads it once."""
  import os
  import pathlib
  import tempfile
  path = pathlib.Path(tempfile.mkdtemp()) / name
  os.environ[env_var] = str(path)
  os.environ.setdefault("JAX_PLATFORMS", "cpu,mlx")
  return path


def selected_cases(only: list[str], size: Size):
  """The cases of every workload (bench/workloads) that `only` names by workload or case name
  (all when empty), built at `size`: what the diagnostic scripts (graph_count.py, profile.py)
  run."""
  import importlib
  import workloads
  for wname in workloads.ALL:
    for case in importlib.import_module(f"workloads.{wname}").cases(size):
      if not only or wname in only or case.name in only:
        yield case


class Program:
  """One column's instance of a case. `call()` does one unit of work and returns its outputs
  (without waiting); `sync(out)` waits for them; `check_values(out)` turns them into a list of
  numpy arrays for the correctness check."""

  def call(self) -> Any:
    raise NotImplementedError

  def sync(self, out: Any) -> None:
    raise NotImplementedError

  def check_values(self, out: Any) -> list[np.ndarray]:
    raise NotImplementedError


class JaxProgram(Program):
  """A program whose outputs are jax arrays (pytrees); `fn()` performs one call, `value(out)`
  picks what the check compares (an array or a tuple of arrays), `wait(out)` what `sync` waits
  for (all of it by default; outputs of one execution: any one of them)."""

  def __init__(self, fn: Callable[[], Any], value: Callable[[Any], Any],
               wait: Callable[[Any], Any] = lambda out: out):
    self._fn, self._value, self._wait = fn, value, wait

  def call(self):
    return self._fn()

  def sync(self, out):
    import jax
    jax.block_until_ready(self._wait(out))

  def check_values(self, out):
    v = self._value(out)
    return [np.asarray(a) for a in (v if isinstance(v, tuple) else (v,))]


class MlxProgram(Program):
  """A program whose outputs are mx arrays (pytrees); `fn()` performs one call."""

  def __init__(self, fn: Callable[[], Any], value: Callable[[Any], Any]):
    self._fn, self._value = fn, value

  def call(self):
    return self._fn()

  def sync(self, out):
    import mlx.core as mx
    mx.eval(out)

  def check_values(self, out):
    v = self._value(out)
    return [np.array(a) for a in (v if isinstance(v, tuple) else (v,))]


@dataclasses.dataclass
class Case:
  """One row of the table.

  make_jax(device) and make_mlx() build fresh programs from the same initial numpy weights and
  data. A call does `per_call` units of work (e.g. 128 generated tokens), so the reported time is
  call time / per_call in `unit` ("us" or "ms") per `what` ("call", "step", "token", ...).
  check_calls: how many calls the correctness check compares (losses of the first steps);
  integer outputs are compared exactly, floats to `rtol` relative to the largest magnitude.
  """
  name: str
  what: str
  make_jax: Callable[[Any], Program]
  make_mlx: Callable[[], Program]
  unit: str = "ms"
  per_call: int = 1
  inner: int = 1          # calls per timed repetition
  check_calls: int = 3
  rtol: float = 1e-4
  native_rtol: float = 1e-3  # the MLX port is a different program: looser, and only reported
  description: str = ""


# ---- timing ----------------------------------------------------------------------------------

def summarize(samples: list[float]) -> dict:
  """median, min, max and the inter-quartile range of per-unit times (in the case's unit)."""
  s = sorted(samples)
  q = statistics.quantiles(s, n=4, method="inclusive") if len(s) > 1 else [s[0]] * 3
  return {"median": statistics.median(s), "min": s[0], "max": s[-1], "q1": q[0], "q3": q[2],
          "n": len(s)}


def unit_scale(unit: str) -> float:
  return {"us": 1e6, "ms": 1e3, "s": 1.0}[unit]


def timed_call(prog: Program) -> tuple[Any, float]:
  t = time.perf_counter()
  out = prog.call()
  prog.sync(out)
  return out, time.perf_counter() - t


# ---- memory ----------------------------------------------------------------------------------

_mlx_base = 0


def mlx_peak_reset() -> None:
  """Starts a column's MLX peak: from what is allocated now (other columns' live programs, which
  stay alive until the interleaved timing is done), so that mlx_peak() is this column's own."""
  global _mlx_base
  import mlx.core as mx
  mx.clear_cache()
  mx.reset_peak_memory()
  _mlx_base = int(mx.get_active_memory())


def mlx_peak_restart() -> None:
  """Starts measuring the column's peak anew from now, from the same base (its own arrays
  count)."""
  import mlx.core as mx
  mx.reset_peak_memory()


def mlx_peak() -> int:
  import mlx.core as mx
  return max(0, int(mx.get_peak_memory()) - _mlx_base)


def warm_mlx_peak(prog, calls: int = 3) -> int:
  """The largest MLX peak of `calls` more calls of `prog`, each measured from once the previous
  call's memory is released (`mx.synchronize()`: on a GPU, MLX frees a batch of kernels'
  temporaries when the GPU has run them, after the call returned). One call's peak depends on
  how far the GPU got while the host issued the rest: on the H200 a native transformer step
  peaked at 62 or 80 MiB from one step to the next (bench/README.md, thirty-third stop)."""
  import mlx.core as mx
  peak = 0
  for _ in range(calls):
    mx.synchronize()
    mlx_peak_restart()
    timed_call(prog)
    peak = max(peak, mlx_peak())
  return peak


def rss_peak_reset() -> bool:
  """Resets the process's peak RSS (Linux: writing 5 to clear_refs resets VmHWM)."""
  try:
    with open("/proc/self/clear_refs", "w") as f:
      f.write("5")
    return True
  except OSError:
    return False


def _status_kb(key: str) -> int | None:
  try:
    with open("/proc/self/status") as f:
      for line in f:
        if line.startswith(key + ":"):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  return None


def rss_now() -> int | None:
  return _status_kb("VmRSS")


def rss_peak() -> int | None:
  return _status_kb("VmHWM")


# ---- the correctness check -------------------------------------------------------------------

def compare(got: list[np.ndarray], want: list[np.ndarray], rtol: float) -> tuple[bool, float, str]:
  """Compares check values (a flat list over the check calls): ints/bools exactly, floats by max|a-b| / max|b|.

  Returns (ok, worst relative difference, a note naming the first mismatch)."""
  worst, note = 0.0, ""
  for i, (g, w) in enumerate(zip(got, want)):
    g, w = np.asarray(g), np.asarray(w)
    if g.shape != w.shape:
      return False, math.inf, f"value {i}: shape {g.shape} vs {w.shape}"
    if w.dtype.kind in "biu":
      bad = int(np.sum(g != w))
      if bad:
        return False, math.inf, f"value {i}: {bad} of {w.size} integers differ"
      continue
    g64, w64 = g.astype(np.float64), w.astype(np.float64)
    if not np.all(np.isfinite(g64)) or not np.all(np.isfinite(w64)):
      if not np.array_equal(g64, w64, equal_nan=True):
        return False, math.inf, f"value {i}: non-finite values differ"
      continue
    denom = max(float(np.max(np.abs(w64))) if w64.size else 0.0, 1e-30)
    rel = float(np.max(np.abs(g64 - w64))) / denom if w64.size else 0.0
    if rel > worst:
      worst = rel
    if rel > rtol and not note:
      note = f"value {i}: relative difference {rel:.2e} > {rtol:g}"
  return not note, worst, note


# ---- output ----------------------------------------------------------------------------------

def fmt_time(stats: dict | None, unit: str) -> str:
  if not stats:
    return "—"
  m = stats["median"]
  digits = 0 if m >= 100 else (1 if m >= 10 else 2)
  return f"{m:.{digits}f} {unit} ({stats['min']:.{digits}f}–{stats['max']:.{digits}f})"


def fmt_bytes(n: int | None) -> str:
  if n is None:
    return "n/a"
  for u in ("B", "KiB", "MiB", "GiB"):
    if n < 1024 or u == "GiB":
      return f"{n:.0f} {u}" if u == "B" else f"{n:.1f} {u}"
    n /= 1024
  return str(n)


def ratio(result: dict, a: str, b: str) -> float | None:
  ca, cb = result["columns"].get(a), result["columns"].get(b)
  if not ca or not cb or not ca.get("time") or not cb.get("time"):
    return None
  return ca["time"]["median"] / cb["time"]["median"]


def cell(col: dict | None, unit: str) -> str:
  if col is None:
    return "—"
  if col.get("status") != "ok":
    return col.get("status", "?").split("\n")[0][:80]
  s = fmt_time(col.get("time"), unit)
  if col.get("check") and not col["check"]["ok"]:
    s += " **MISMATCH**"
  return s


def markdown(report: dict) -> str:
  cols = report["columns"]
  lines = []
  head = ["case"] + [COLUMN_TITLES[c] for c in cols] + ["ours / mlx", "ours / jax cpu"]
  if JAX_GPU in cols:
    head.append("ours / jax gpu")
  head.append("check ours vs cpu")
  lines.append("| " + " | ".join(head) + " |")
  lines.append("|" + "---|" * len(head))
  for r in report["results"]:
    unit = f"{r['unit']}/{r['what']}"
    row = [f"`{r['name']}`"] + [cell(r["columns"].get(c), unit) for c in cols]
    for other in [MLX, JAX_CPU] + ([JAX_GPU] if JAX_GPU in cols else []):
      x = ratio(r, OURS, other)
      row.append("—" if x is None else f"{x:.2f}×")
    ck = (r["columns"].get(OURS) or {}).get("check")
    row.append("—" if not ck else ("ok" if ck["ok"] else "MISMATCH: " + ck["note"])
               + (f" ({ck['worst_rel']:.1e})" if ck and ck["ok"] else ""))
    lines.append("| " + " | ".join(row) + " |")
  lines.append("")
  lines.append("Compile time (first call minus the steady-state median) and peak memory "
               "(ours, native mlx: MLX allocator peak of the first calls, build included, and "
               "after the slash the largest of three warmed calls; jax cpu: peak RSS growth of "
               "the process):")
  lines.append("")
  head2 = ["case"] + [f"{COLUMN_TITLES[c]} compile" for c in cols] + \
      [f"{COLUMN_TITLES[c]} peak mem" for c in cols]
  lines.append("| " + " | ".join(head2) + " |")
  lines.append("|" + "---|" * len(head2))
  for r in report["results"]:
    row = [f"`{r['name']}`"]
    for c in cols:
      col = r["columns"].get(c) or {}
      ct = col.get("compile_s")
      row.append("—" if ct is None else f"{ct:.2f} s")
    for c in cols:
      col = r["columns"].get(c) or {}
      peak = "—"
      if col.get("status") == "ok":
        peak = fmt_bytes(col.get("peak_bytes"))
        if col.get("warm_peak_bytes") is not None:
          peak += " / " + fmt_bytes(col["warm_peak_bytes"])
      row.append(peak)
    lines.append("| " + " | ".join(row) + " |")
  return "\n".join(lines) + "\n"


def log(msg: str) -> None:
  print(msg, file=sys.stderr, flush=True)


def benchmarks_md(report: dict, table: str, chart: "object") -> str:
  """BENCHMARKS.md: how the numbers were made, the table, the chart."""
  env = report["environment"]
  cases = "\n".join(f"- `{r['name']}`: {r['description']}" for r in report["results"])
  return f"""# Benchmarks

Generated by `make bench` (bench/run.py) on {report['created']}, sizes: {report.get('size', '?')}
(flags: {' '.join(f'--{k.replace("_", "-")}' for k, v in report['args'].items() if v is True) or 'none'});
do not edit by hand.
Machine: {env['platform']}, {env['cpus']} CPUs; jax {env['jax']}, mlx {env['mlx']}
(MLX device: {env['mlx_default_device']}); commit {env['commit']}; {report['reps']} timed
repetitions per column; whole run {report['wall_s']:.0f} s.

Columns: **ours** is the JAX program on the jax-mlx platform; **jax cpu** the same JAX program
on jax's CPU backend; **native mlx** the same model written against MLX's Python API with
`mx.compile`, from the same initial weights and data. Times are medians (min–max) per unit of
work; every call is waited for before the next (block_until_ready / mx.eval), warm-up excluded.
Ratios are ours / other: below 1 means ours is faster. The check column compares ours with jax
cpu on the first calls (losses of the first 3 steps, generated tokens, logits) before timing.

{cases}

{table}
![ratios]({chart})

See bench/README.md for the flags, the workloads and how each number is measured.
"""
