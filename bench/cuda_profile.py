"""Where a step's time goes on MLX's CUDA backend, kernel by kernel: ours beside native MLX, each
call waited for, traced with PyTorch's profiler (CUPTI sees every kernel of the process,
whichever library launched it, CUDA-graph nodes included).

  python3 bench/cuda_profile.py --only mlp_train --only transformer_train [--steps 10]
  python3 bench/cuda_profile.py --full --only transformer_train   # at the issue's sizes
  JAXMLX_COMPILE=1 python3 bench/cuda_profile.py ...   # ours with MLX's own fusion (Metal's default)

Per case and column, per unit of work: wall time (untraced, then traced), kernels launched, their
summed time, the time the GPU was busy (union of kernel and copy intervals) and the rest (the GPU
idle: host work between kernels), then the kernels carrying the most time. Needs a PyTorch built
for the same CUDA major version as the mlx-cuda wheel (the H200 image's torch 2.11+cu130 and
mlx-cuda-13). Not for the CPU: there is nothing to trace.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import re
import statistics
import sys
import tempfile
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu,mlx")
BENCH = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
API_CATEGORIES = ("cuda_runtime", "cuda_driver")


def short(name: str, width: int = 110) -> str:
  """The head and the tail of a kernel's name (MLX's fused kernels end in their variant:
  _contiguous, _strided<ndim>)."""
  name = re.sub(r"\s+", " ", name)
  half = (width - 1) // 2
  return name if len(name) <= width else name[:half] + "…" + name[-half:]


def union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
  """The union of [start, end) intervals, as disjoint intervals in order."""
  merged: list[tuple[float, float]] = []
  for s, e in sorted(intervals):
    if merged and s <= merged[-1][1]:
      merged[-1] = (merged[-1][0], max(merged[-1][1], e))
    else:
      merged.append((s, e))
  return merged


def busy_us(intervals: list[tuple[float, float]]) -> float:
  """Length of the union of [start, end) intervals."""
  return sum(e - s for s, e in union(intervals))


def trace(prog, steps: int, keep: pathlib.Path | None) -> tuple[list[dict], float]:
  """Chrome-trace events of `steps` waited calls, each inside a "step" annotation."""
  from torch.profiler import ProfilerActivity, profile, record_function
  with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    t = time.perf_counter()
    for _ in range(steps):
      with record_function("step"):
        prog.sync(prog.call())
    wall = time.perf_counter() - t
  path = keep or pathlib.Path(tempfile.mkdtemp()) / "trace.json"
  prof.export_chrome_trace(str(path))
  return json.loads(path.read_text()).get("traceEvents", []), wall


def host_phases(events: list[dict]) -> dict:
  """Per step, in µs (medians over the steps): `before`, from the step's start to its first
  CUDA API call (jax's dispatch, PJRT, handing the run over, building the graph); `issuing`, from
  there to the last API call's end (MLX evaluating: launches, graph building, the waits);
  `after`, the rest (completion back to Python); `in_api`, host time inside CUDA API calls;
  `waits`, the part of it in synchronize calls."""
  steps = sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events
                 if e.get("ph") == "X" and e.get("name") == "step"
                 and e.get("cat") == "user_annotation")
  api = sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), e["name"])
               for e in events if e.get("ph") == "X" and e.get("cat") in API_CATEGORIES)
  rows = collections.defaultdict(list)
  for s, e in steps:
    inside = [a for a in api if s <= a[0] and a[1] <= e]
    if not inside:
      continue
    rows["before"].append(inside[0][0] - s)
    rows["issuing"].append(max(a[1] for a in inside) - inside[0][0])
    rows["after"].append(e - max(a[1] for a in inside))
    rows["in_api"].append(sum(a[1] - a[0] for a in inside))
    rows["waits"].append(sum(a[1] - a[0] for a in inside if "ynchronize" in a[2]))
  return {k: statistics.median(v) for k, v in rows.items()}


def summarize(events: list[dict], units: float) -> dict:
  gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES]
  kernels = [e for e in gpu if e["cat"] == "kernel"]
  api: collections.Counter = collections.Counter()
  for e in events:
    if e.get("ph") == "X" and e.get("cat") in API_CATEGORIES:
      api[e["name"]] += float(e.get("dur", 0))
  by_name: dict[str, list[float]] = collections.defaultdict(list)
  for e in kernels:
    by_name[e["name"]].append(float(e.get("dur", 0)))
  top = sorted(by_name.items(), key=lambda kv: -sum(kv[1]))
  return {
      "host": host_phases(events),
      "categories": dict(collections.Counter(e.get("cat") for e in events if e.get("ph") == "X")),
      "kernels": len(kernels) / units,
      "kernel_us": sum(float(e.get("dur", 0)) for e in kernels) / units,
      "copies": (len(gpu) - len(kernels)) / units,
      "busy_us": busy_us([(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
                          for e in gpu]) / units,
      "api_us": {k: v / units for k, v in api.most_common(8)},
      "top": [{"name": short(n), "count": len(d) / units, "us": sum(d) / units,
               "median_us": statistics.median(d)} for n, d in top],
  }


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  ap.add_argument("--only", action="append", default=[], help="workload or case name (repeatable)")
  ap.add_argument("--full", action="store_true", help="the issue's sizes (bench/run.py --full)")
  ap.add_argument("--steps", type=int, default=10, help="traced calls per column")
  ap.add_argument("--top", type=int, default=15, help="kernels listed per column")
  ap.add_argument("--skip", action="append", default=[], choices=["ours", "mlx"])
  ap.add_argument("--json", type=pathlib.Path, help="write the summaries here")
  ap.add_argument("--traces", type=pathlib.Path, help="keep each column's chrome trace in this folder")
  args = ap.parse_args()
  import jax
  import torch
  import common
  if not torch.cuda.is_available():
    sys.exit("cuda_profile.py: PyTorch sees no CUDA device")
  torch.cuda.init()  # the profiler's CUPTI needs the runtime up
  mlx_device = jax.devices("mlx")[0]
  report = {"compile": os.environ.get("JAXMLX_COMPILE", ""), "cases": {}}
  size = common.Size(level="full" if args.full else "default")
  for case in common.selected_cases(args.only, size):
    row = report["cases"].setdefault(case.name, {})
    units = args.steps * case.per_call
    for col, make in (("ours", lambda: case.make_jax(mlx_device)), ("mlx", case.make_mlx)):
      if col in args.skip:
        continue
      prog = make()
      for _ in range(5):
        prog.sync(prog.call())
      t = time.perf_counter()
      for _ in range(args.steps):
        prog.sync(prog.call())
      untraced = (time.perf_counter() - t) / units * 1e6
      keep = None
      if args.traces:
        args.traces.mkdir(parents=True, exist_ok=True)
        keep = args.traces / f"{case.name}-{col}-{report['compile'] or 'default'}.json"
      events, wall = trace(prog, args.steps, keep)
      s = summarize(events, units)
      s["wall_us"] = untraced
      s["traced_wall_us"] = wall / units * 1e6
      row[col] = s
      print(f"## {case.name} {col}: wall {untraced:.0f} us/{case.what} (traced "
            f"{s['traced_wall_us']:.0f}); {s['kernels']:.1f} kernels, {s['kernel_us']:.0f} us of "
            f"kernels, GPU busy {s['busy_us']:.0f} us, idle {s['traced_wall_us'] - s['busy_us']:.0f}"
            f" us; {s['copies']:.1f} copies/memsets", flush=True)
      print(f"   host per {case.what} (us): " + ", ".join(f"{k} {v:.0f}" for k, v in s["host"].items()))
      print(f"   CUDA API us per {case.what}: " +
            ", ".join(f"{k} {v:.0f}" for k, v in s["api_us"].items()))
      if not s["kernels"]:
        print(f"   no kernel records; event categories: {s['categories']}")
      for k in s["top"][: args.top]:
        print(f"   {k['us']:8.1f} us {k['count']:6.1f}x {k['median_us']:7.1f} us  {k['name']}")
      del prog
  if args.json:
    args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
  main()
