"""How much of native MLX's speed in the benchmark is a hot loop: the host time native MLX takes
to issue one step (its compiled call and `mx.async_eval`) when steps follow each other, and when
the same step comes right after other work in the same process, as our steps always do (jax's
dispatch runs between two of our issues):
  alone         native steps back to back (what bench/run.py's native column times)
  after jax     each native step after one step of the same JAX program on jax's CPU backend
  after ours    each native step after one waited step of the same program on our platform
  after sleep   each native step after a 1 ms sleep (nothing else runs: the core idles)
and our waited step alone, for scale. Medians of µs over --steps steps, --rounds times.

  python3 bench/cold_issue.py --only mlp_train [--steps 300] [--rounds 2]

On the H200 (2026-12-03) native's issue took 305-320 µs alone and 460-620 µs in every other
way, sleep included (bench/README.md, "A hot loop is half of native's lead").
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu,mlx")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  ap.add_argument("--only", default="mlp_train", help="case name")
  ap.add_argument("--size", default="default", choices=["quick", "default", "full"])
  ap.add_argument("--steps", type=int, default=300, help="timed steps per way and round")
  ap.add_argument("--rounds", type=int, default=2)
  ap.add_argument("--warmup", type=int, default=20)
  args = ap.parse_args()
  import jax
  import mlx.core as mx
  import common

  case = next(common.selected_cases([args.only], common.Size(args.size)), None)
  if case is None:
    raise SystemExit(f"no case {args.only!r}")
  native = case.make_mlx()
  on_cpu = case.make_jax(jax.devices("cpu")[0])
  ours = case.make_jax(jax.devices("mlx")[0])
  for _ in range(args.warmup):
    for p in (native, on_cpu, ours):
      p.sync(p.call())

  def native_steps(before) -> tuple[float, float]:
    issue, step = [], []
    for _ in range(args.steps):
      before()
      t0 = time.perf_counter()
      out = native.call()
      mx.async_eval(out)
      t1 = time.perf_counter()
      mx.eval(out)
      issue.append(t1 - t0)
      step.append(time.perf_counter() - t0)
    return statistics.median(issue) * 1e6, statistics.median(step) * 1e6

  def our_steps() -> float:
    step = []
    for _ in range(args.steps):
      t0 = time.perf_counter()
      ours.sync(ours.call())
      step.append(time.perf_counter() - t0)
    return statistics.median(step) * 1e6

  ways = {
      "alone": lambda: None,
      "after jax": lambda: on_cpu.sync(on_cpu.call()),
      "after ours": lambda: ours.sync(ours.call()),
      "after sleep": lambda: time.sleep(1e-3),
  }
  print(f"{case.name}: {case.description}; MLX device {mx.default_device()}")
  for r in range(args.rounds):
    for name, before in ways.items():
      issue, step = native_steps(before)
      print(f"round {r}  native {name:12s} issue {issue:7.0f} µs   step {step:7.0f} µs",
            flush=True)
    print(f"round {r}  ours   waited step {our_steps():7.0f} µs", flush=True)


if __name__ == "__main__":
  main()
