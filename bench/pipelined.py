"""Where a training step's time goes between the caller and the device: ms per step for ours and
native MLX, each measured three ways in one process:
  sync       every call waited for (what bench/run.py reports)
  pipelined  20 calls chained, one wait at the end (the step's throughput when calls overlap)
  launch     the time a call takes to return, without waiting (jax's dispatch + our enqueue;
             native: building the compiled graph)
When sync ~ pipelined and launch is small, the device worker's own work per step (graph replay,
MLX's per-primitive cost, the kernels) is the step's time (bench/README.md, "`JAXMLX_GPU_FUSION`
on the H200").

  .venv/bin/python bench/pipelined.py [--only mlp] [--reps 3]
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
  ap.add_argument("--only", action="append", default=[], help="workload name prefix (repeatable)")
  ap.add_argument("--reps", type=int, default=3)
  ap.add_argument("--calls", type=int, default=20)
  args = ap.parse_args()
  import jax
  import common
  from workloads import mlp, resnet, transformer

  size = common.Size(level="default")
  mlx_device = jax.devices("mlx")[0]
  for mod in (mlp, transformer, resnet):
    for case in mod.cases(size):
      if args.only and not any(case.name.startswith(o) for o in args.only):
        continue
      for col, make in (("ours", lambda: case.make_jax(mlx_device)), ("mlx", case.make_mlx)):
        p = make()
        for _ in range(5):
          p.sync(p.call())

        def sync_run(n=args.calls):
          t = time.perf_counter()
          for _ in range(n):
            p.sync(p.call())
          return (time.perf_counter() - t) / n * 1e3

        def pipe_run(n=args.calls):
          t = time.perf_counter()
          for _ in range(n - 1):
            p.call()
          p.sync(p.call())
          return (time.perf_counter() - t) / n * 1e3

        def launch_run(n=args.calls):
          ts = []
          for _ in range(n):
            t = time.perf_counter()
            out = p.call()
            ts.append(time.perf_counter() - t)
            p.sync(out)
          return statistics.median(ts) * 1e3

        s = statistics.median(sync_run() for _ in range(args.reps))
        q = statistics.median(pipe_run() for _ in range(args.reps))
        print(f"{case.name:18s} {col:5s} sync {s:7.3f} ms  pipelined {q:7.3f} ms  "
              f"launch {launch_run():7.3f} ms", flush=True)


if __name__ == "__main__":
  main()
