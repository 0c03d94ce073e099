"""Soak benchmark (issue #7; not a test): does a long-running process on the jax-mlx platform stay
flat? Two phases in one process:

  steps     N executions of one jitted training step (a small MLP, optax adam) on jax.devices('mlx')
  compiles  M jit compilations of distinct programs (x * k + i, a distinct constant k and i and
            one of 35 input shapes each), every one executed once, checked and then dropped

Every `--every` iterations it samples the resident set size (/proc/self/statm), the thread count
(/proc/self/task), the open file descriptors (/proc/self/fd) and MLX's allocator (active and
cached bytes: the plugin and mlx.core share one libmlx in this process). Writes
bench/results/soak-<host>-<date>.json and a PNG of RSS / threads / fds vs iteration beside it, and
prints a summary per phase: first / last / max RSS after the warm-up, growth, threads and fds at
the start and end.

  .venv/bin/python bench/soak.py                 # 100,000 steps + 10,000 compilations
  .venv/bin/python bench/soak.py --quick         # 2,000 steps + 200 compilations (smoke test)
  JAX_MLX_LIBRARY_PATH=build-x/src/pjrt/libjax_mlx_pjrt.so .venv/bin/python bench/soak.py
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import os
import pathlib
import socket
import sys
import time

BENCH = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import common  # noqa: E402
import plot  # noqa: E402
from common import log  # noqa: E402

MLP_DIMS = [32, 64, 64, 10]  # small: the step is dominated by dispatch, as a soak wants
BATCH = 32
POOL = 16                    # distinct batches the training steps cycle through
SAMPLES = 500                # samples per phase when --every is not given
PAGE = os.sysconf("SC_PAGE_SIZE")


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument("--steps", type=int, default=None, help="training steps (default 100000)")
  p.add_argument("--compiles", type=int, default=None,
                 help="distinct programs compiled (default 10000)")
  p.add_argument("--quick", action="store_true", help="2000 steps, 200 compilations")
  p.add_argument("--every", type=int, default=None,
                 help=f"sample every N iterations (default: ~{SAMPLES} samples per phase)")
  p.add_argument("--warmup", type=float, default=0.1,
                 help="fraction of each phase left out of the RSS summary (default 0.1)")
  p.add_argument("--json", type=pathlib.Path, default=None, help="result file")
  args = p.parse_args(argv)
  if args.steps is None:
    args.steps = 2000 if args.quick else 100_000
  if args.compiles is None:
    args.compiles = 200 if args.quick else 10_000
  return args


# ---- what is sampled -------------------------------------------------------------------------

def sample(phase: str, i: int, t0: float) -> dict:
  import mlx.core as mx
  with open("/proc/self/statm") as f:
    rss = int(f.read().split()[1]) * PAGE
  return {"phase": phase, "i": i, "t": round(time.perf_counter() - t0, 3), "rss": rss,
          "threads": len(os.listdir("/proc/self/task")), "fds": len(os.listdir("/proc/self/fd")),
          "mlx_active": int(mx.get_active_memory()), "mlx_cache": int(mx.get_cache_memory())}


def every(n: int, override: int | None) -> int:
  return override or max(1, n // SAMPLES)


# ---- phase 1: one training step, executed n times ----------------------------------------------

from workloads.mlp import jax_loss as mlp_loss  # the bench MLP's loss, same layers


def run_steps(n: int, interval: int, device, t0: float) -> tuple[list[dict], dict]:
  import jax
  import numpy as np
  import optax

  rng = np.random.default_rng(0)
  params = [{"w": (rng.standard_normal((i, o)) / math.sqrt(i)).astype(np.float32),
             "b": np.zeros((o,), np.float32)} for i, o in zip(MLP_DIMS[:-1], MLP_DIMS[1:])]
  # A pool of batches with random labels, cycled: the loss stays well above 0 (a single batch is
  # memorized until the loss and every gradient are exactly 0, a degenerate program to soak).
  batches = jax.device_put(
      [(rng.standard_normal((BATCH, MLP_DIMS[0])).astype(np.float32),
        rng.integers(0, MLP_DIMS[-1], (BATCH,)).astype(np.int32)) for _ in range(POOL)], device)
  opt = optax.adam(1e-3)
  params = jax.device_put(params, device)
  opt_state = jax.jit(opt.init)(params)

  @jax.jit
  def step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(mlp_loss)(params, x, y)
    updates, opt_state = opt.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  samples, losses = [sample("steps", 0, t0)], []
  start = time.perf_counter()
  for i in range(1, n + 1):
    params, opt_state, loss = step(params, opt_state, *batches[i % POOL])
    loss.block_until_ready()  # one step in flight at a time, as a training loop that logs
    if i == 1 or i % interval == 0 or i == n:
      losses.append(float(loss))
      samples.append(sample("steps", i, t0))
      if i % (interval * 50) == 0:
        log(f"  step {i}/{n}: loss {losses[-1]:.4f}, rss {samples[-1]['rss'] / 2**20:.1f} MiB")
  wall = time.perf_counter() - start
  ok = all(math.isfinite(v) for v in losses) and losses[-1] < losses[0]
  return samples, {"wall_s": round(wall, 1), "us_per_step": round(wall / n * 1e6, 1),
                   "first_loss": losses[0], "last_loss": losses[-1], "loss_decreased": ok}


# ---- phase 2: n distinct programs, each compiled, run once and dropped --------------------------

def run_compiles(n: int, interval: int, device, t0: float) -> tuple[list[dict], dict]:
  import jax
  import numpy as np

  shapes = [(1 + a, 3 + b) for a in range(7) for b in range(5)]
  inputs = {s: np.arange(s[0] * s[1], dtype=np.float32).reshape(s) for s in shapes}
  samples, wrong = [sample("compiles", 0, t0)], 0
  start = time.perf_counter()
  for i in range(1, n + 1):
    k, s = 1.0 + i * 1e-4, shapes[i % len(shapes)]
    f = jax.jit(lambda x, k=k, i=i: x * np.float32(k) + np.float32(i))  # constants baked in
    got = np.asarray(f(jax.device_put(inputs[s], device)))
    want = inputs[s] * np.float32(k) + np.float32(i)
    wrong += not np.allclose(got, want, rtol=1e-6)
    del f, got  # the executable dies with its jit wrapper
    if i % interval == 0 or i == n:
      samples.append(sample("compiles", i, t0))
      if i % (interval * 50) == 0:
        log(f"  compile {i}/{n}: rss {samples[-1]['rss'] / 2**20:.1f} MiB")
  wall = time.perf_counter() - start
  return samples, {"wall_s": round(wall, 1), "ms_per_compile": round(wall / n * 1e3, 2),
                   "wrong_results": int(wrong)}


# ---- summary ------------------------------------------------------------------------------------

def summarize(samples: list[dict], n: int, warmup: float) -> dict:
  """RSS after the warm-up (first/last/max, growth and a least-squares slope per 1000
  iterations), threads and fds at the start and the end of the phase."""
  after = [s for s in samples if s["i"] >= warmup * n] or samples[-1:]
  rss = [s["rss"] for s in after]
  xs = [s["i"] for s in after]
  mx_, my = sum(xs) / len(xs), sum(rss) / len(rss)
  var = sum((x - mx_) ** 2 for x in xs)
  slope = sum((x - mx_) * (y - my) for x, y in zip(xs, rss)) / var if var else 0.0
  return {"rss_first": rss[0], "rss_last": rss[-1], "rss_max": max(rss),
          "rss_growth_pct": round(100.0 * (rss[-1] - rss[0]) / rss[0], 2),
          "rss_slope_bytes_per_1000": round(slope * 1000),
          "threads_start": samples[0]["threads"], "threads_warm": after[0]["threads"],
          "threads_end": samples[-1]["threads"], "threads_max": max(s["threads"] for s in samples),
          "fds_start": samples[0]["fds"], "fds_warm": after[0]["fds"], "fds_end": samples[-1]["fds"],
          "fds_max": max(s["fds"] for s in samples),
          "mlx_active_last": after[-1]["mlx_active"], "mlx_cache_last": after[-1]["mlx_cache"]}


def summary_text(name: str, n: int, s: dict, extra: dict) -> str:
  mib = lambda b: f"{b / 2**20:.1f} MiB"  # noqa: E731
  return (f"{name} ({n} iterations; {json.dumps(extra)}):\n"
          f"  RSS after warm-up: first {mib(s['rss_first'])}, last {mib(s['rss_last'])}, "
          f"max {mib(s['rss_max'])}, growth {s['rss_growth_pct']:+.2f} %, "
          f"slope {s['rss_slope_bytes_per_1000'] / 1024:+.1f} KiB per 1000\n"
          f"  threads {s['threads_start']} -> {s['threads_warm']} (warm) -> {s['threads_end']} "
          f"(max {s['threads_max']}), fds {s['fds_start']} -> {s['fds_warm']} (warm) -> "
          f"{s['fds_end']} (max {s['fds_max']}), MLX active "
          f"{mib(s['mlx_active_last'])}, MLX cache {mib(s['mlx_cache_last'])}")


# ---- the plot: one column per phase, rows RSS / threads / fds (bench/plot.py's canvas) -----------

SERIES = [("rss", "RSS (MiB)", 2**20, plot.COLORS[common.MLX]),
          ("threads", "threads", 1, plot.COLORS[common.JAX_CPU]),
          ("fds", "open fds", 1, plot.COLORS[common.JAX_GPU])]


def draw_panel(cv, x0: int, y0: int, w: int, h: int, pts: list[tuple[int, float]], title: str,
               color) -> None:
  xs, ys = [p[0] for p in pts], [p[1] for p in pts]
  # The y axis starts at 0, so a flat curve looks flat; the labels give the data's min and max.
  dmin, dmax = min(ys), max(ys)
  lo, hi = 0.0, max(dmax * 1.15, 1.0)
  xmax = max(xs) or 1
  cv.rect(x0, y0, x0 + 1, y0 + h, plot.GREY)
  cv.rect(x0, y0 + h, x0 + w, y0 + h + 1, plot.GREY)
  cv.text(x0, y0 - 20, title, plot.BLACK)
  marks = [dmax] + ([dmin] if (dmax - dmin) / (hi - lo) * h > 12 else [])
  for v in marks:  # the data's max and min (the min only where the labels do not overlap)
    y = y0 + h - round((v - lo) / (hi - lo) * h)
    cv.rect(x0 + 1, y, x0 + w, y + 1, plot.LIGHT)
    cv.text(x0 - 6 - 6 * len(f"{v:.1f}"), y - 3, f"{v:.1f}", plot.GREY, k=1)
  cv.text(x0, y0 + h + 6, "0", plot.GREY, k=1)
  cv.text(x0 + w - 6 * len(str(xmax)), y0 + h + 6, str(xmax), plot.GREY, k=1)
  prev = None
  for x, v in pts:
    px, py = x0 + round(x / xmax * w), y0 + h - round((v - lo) / (hi - lo) * h)
    if prev:  # a line as a run of 2x2 dots
      steps = max(abs(px - prev[0]), abs(py - prev[1]), 1)
      for t in range(steps + 1):
        qx = prev[0] + round((px - prev[0]) * t / steps)
        qy = prev[1] + round((py - prev[1]) * t / steps)
        cv.rect(qx - 1, qy - 1, qx + 1, qy + 1, color)
    prev = (px, py)


def write_plot(report: dict, path: pathlib.Path) -> None:
  phases = [p for p in ("steps", "compiles") if p in report["phases"]]
  left, top, pw, ph, gap = 90, 70, 420, 150, 60
  cv = plot.Canvas(left + len(phases) * (pw + left) + 20, top + len(SERIES) * (ph + gap) + 20)
  cv.text(10, 10, "jax-mlx soak: resident memory, threads and open fds vs iteration")
  for c, phase in enumerate(phases):
    samples = report["phases"][phase]["samples"]
    x0 = left + c * (pw + left)
    for r, (key, label, scale, color) in enumerate(SERIES):
      pts = [(s["i"], s[key] / scale) for s in samples]
      draw_panel(cv, x0, top + r * (ph + gap) + 20, pw, ph, pts, f"{phase}: {label}", color)
  path.write_bytes(cv.png())


# ---- main -----------------------------------------------------------------------------------------

def main(argv=None) -> int:
  args = parse_args(argv)
  os.environ.setdefault("JAX_PLATFORMS", "cpu,mlx")
  import jax
  device = jax.devices("mlx")[0]
  t0 = time.perf_counter()
  report = {"created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "args": {k: (str(v) if isinstance(v, pathlib.Path) else v)
                     for k, v in vars(args).items()},
            "host": socket.gethostname(), "device": str(device), "mlp": MLP_DIMS, "batch": BATCH,
            "env": {k: v for k, v in os.environ.items() if k.startswith(("JAXMLX_", "JAX_"))},
            "phases": {}}
  runs = [("steps", args.steps, run_steps), ("compiles", args.compiles, run_compiles)]
  for name, n, fn in runs:
    if n <= 0:
      continue
    log(f"{name}: {n} iterations")
    samples, extra = fn(n, every(n, args.every), device, t0)
    gc.collect()
    report["phases"][name] = {"n": n, "extra": extra, "summary": summarize(samples, n, args.warmup),
                              "samples": samples}
  report["wall_s"] = round(time.perf_counter() - t0, 1)

  stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
  path = args.json or BENCH / "results" / f"soak-{socket.gethostname()}-{stamp}.json"
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps(report, indent=1) + "\n")
  write_plot(report, path.with_suffix(".png"))
  for name, ph in report["phases"].items():
    print(summary_text(name, ph["n"], ph["summary"], ph["extra"]))
  print(f"whole run {report['wall_s']} s; {path} and {path.with_suffix('.png')}")
  bad = any(ph["extra"].get("wrong_results") for ph in report["phases"].values()) or \
      not report["phases"].get("steps", {}).get("extra", {}).get("loss_decreased", True)
  return 1 if bad else 0


if __name__ == "__main__":
  sys.exit(main())
