"""Same-process A/B of the plugin's compile-time settings: each variant of a workload is compiled
under its own environment (the JAXMLX_* variables read at each compile: JAXMLX_COMPILE,
JAXMLX_RECOGNIZE, JAXMLX_FAST_KERNELS, ...), then all of them and native MLX are timed in
alternating windows of waited steps. On a shared machine whose speed drifts by tens of percent
within minutes, two processes run one after the other compare the drift; windows interleaved in
one process compare the settings.

  .venv/bin/python bench/env_ab.py --only transformer_train \\
      --variant fused:JAXMLX_COMPILE=1 --variant fused-plain:JAXMLX_COMPILE=1,JAXMLX_RECOGNIZE=0

Prints, per variant: the median over windows of each window's median step, and the fastest
window's median (µs per step). Default variants: JAXMLX_RECOGNIZE on and off, with and without
JAXMLX_COMPILE.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import time

BENCH = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

DEFAULT_VARIANTS = [
    "fused:JAXMLX_COMPILE=1,JAXMLX_RECOGNIZE=1",
    "fused-recognize=0:JAXMLX_COMPILE=1,JAXMLX_RECOGNIZE=0",
    "replay:JAXMLX_COMPILE=0,JAXMLX_RECOGNIZE=1",
    "replay-recognize=0:JAXMLX_COMPILE=0,JAXMLX_RECOGNIZE=0",
]


def parse_variant(text: str) -> tuple[str, dict[str, str]]:
  """'name:K=V,K=V' -> (name, {K: V})."""
  name, _, assignments = text.partition(":")
  env = {}
  for a in filter(None, assignments.split(",")):
    key, eq, value = a.partition("=")
    if not eq:
      raise SystemExit(f"--variant {text!r}: expected NAME:KEY=VALUE[,KEY=VALUE...]")
    env[key] = value
  return name, env


def time_windows(programs, window: int, rounds: int) -> dict[str, list[float]]:
  """Each program's median step (s) in each of `rounds` windows of `window` waited steps, the
  programs taking turns window by window."""
  medians: dict[str, list[float]] = {name: [] for name, _ in programs}
  for _ in range(rounds):
    for name, prog in programs:
      steps = []
      for _ in range(window):
        t = time.perf_counter()
        prog.sync(prog.call())
        steps.append(time.perf_counter() - t)
      medians[name].append(statistics.median(steps))
  return medians


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument("--only", action="append", default=[], help="workload or case (repeatable)")
  p.add_argument("--variant", action="append", default=[],
                 help="NAME:KEY=VALUE[,KEY=VALUE...] (repeatable; default: recognizers on/off, "
                      "fused and replayed)")
  p.add_argument("--quick", action="store_true", help="tiny sizes (--size quick)")
  p.add_argument("--size", default="default", choices=["quick", "default", "full"],
                 help="full: the sizes of issue #6, for a GPU")
  p.add_argument("--window", type=int, default=60, help="waited steps per window")
  p.add_argument("--rounds", type=int, default=15, help="windows per program")
  p.add_argument("--warmup", type=int, default=30, help="steps before timing, per program")
  p.add_argument("--no-native", action="store_true", help="leave native MLX out")
  args = p.parse_args(argv)

  os.environ.setdefault("JAX_PLATFORMS", "cpu,mlx")  # the workloads initialize on the CPU
  import common
  import jax

  variants = [parse_variant(v) for v in (args.variant or DEFAULT_VARIANTS)]
  size = common.Size(level="quick" if args.quick else args.size)
  device = jax.devices("mlx")[0]
  for case in common.selected_cases(args.only, size):
    programs = []
    for name, env in variants:
      saved = {k: os.environ.get(k) for k in env}
      os.environ.update(env)
      try:
        prog = case.make_jax(device)
        for _ in range(args.warmup):  # the first call compiles, under this environment
          prog.sync(prog.call())
      finally:
        for k, v in saved.items():
          if v is None:
            os.environ.pop(k, None)
          else:
            os.environ[k] = v
      programs.append((name, prog))
    if not args.no_native and case.make_mlx is not None:
      prog = case.make_mlx()
      for _ in range(args.warmup):
        prog.sync(prog.call())
      programs.append(("native mlx", prog))
    medians = time_windows(programs, args.window, args.rounds)
    print(f"## {case.name}: {args.rounds} windows of {args.window} waited steps, interleaved")
    print("| variant | median of window medians | fastest window |")
    print("|---|---:|---:|")
    for name, m in medians.items():
      print(f"| {name} | {statistics.median(m) * 1e6:,.0f} µs | {min(m) * 1e6:,.0f} µs |")
    print()
  return 0


if __name__ == "__main__":
  sys.exit(main())
