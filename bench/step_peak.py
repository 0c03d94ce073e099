"""MLX's memory peak of each step of one workload, ours or native MLX (one column per process, so
that process-wide MLX settings such as MLX_MAX_OPS_PER_BUFFER apply to that column alone).
After each step and its wait, mx.synchronize() also waits for MLX's completion handlers: on CUDA
those free a graph's temporaries after mx.eval has returned, and a step's peak would otherwise
include what the previous step still held.

  python3 bench/step_peak.py --only transformer_train --size full [--native] [--steps 6]
  MLX_MAX_OPS_PER_BUFFER=2000 python3 bench/step_peak.py ...   # one CUDA graph per step

Prints per step: wall time (ms), the allocator peak above the memory active before the step
(MiB), and the memory active after it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu,mlx")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--only", required=True, help="case name")
  ap.add_argument("--size", default="default", choices=["quick", "default", "full"])
  ap.add_argument("--native", action="store_true", help="the native MLX program, not ours")
  ap.add_argument("--steps", type=int, default=6)
  args = ap.parse_args()

  import common
  import mlx.core as mx
  case = next(common.selected_cases([args.only], common.Size(args.size)))
  if args.native:
    prog = case.make_mlx()
  else:
    import jax
    prog = case.make_jax(jax.devices("mlx")[0])
  which = "native" if args.native else "ours"
  mib = 1 << 20
  mx.synchronize()
  for step in range(args.steps):
    base = mx.get_active_memory()
    mx.reset_peak_memory()
    t = time.perf_counter()
    prog.sync(prog.call())
    wall = time.perf_counter() - t
    mx.synchronize()
    peak = mx.get_peak_memory()
    print(f"{args.only} {which} step {step}: {wall * 1e3:9.2f} ms, peak {(peak - base) / mib:9.1f} "
          f"MiB above {base / mib:.1f}, active after {mx.get_active_memory() / mib:.1f}",
          flush=True)


if __name__ == "__main__":
  main()
