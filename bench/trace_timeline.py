"""A step's timeline and its GPU time by kernel family, from the chrome traces that
`bench/cuda_profile.py --traces DIR` keeps (one per column: ours, native MLX). Runs anywhere: the
traces are JSON files.

  python3 bench/trace_timeline.py DIR/transformer_train-ours-default.json \\
      DIR/transformer_train-mlx-default.json

For the last traced step of each trace: when the host made its first CUDA call and when the first
kernel ran (µs into the step), each CUDA graph launch with the span of its kernels, the share of
each millisecond the GPU was busy; then, over all traced steps, each kernel family's GPU time per
step, every kernel's time split equally among the kernels running at the same instant (kernels of
one CUDA graph overlap, so plain durations add up to more than the GPU's busy time), traces side
by side, largest difference first. A family is a kernel's name without its template arguments;
MLX's fused kernels are one family per variant (`fused contiguous`, `fused strided<NDIM>`).
"""

from __future__ import annotations

import argparse
import collections
import json
import re

from cuda_profile import API_CATEGORIES, GPU_CATEGORIES, union


def family(name: str) -> str:
  name = re.sub(r"\s+", " ", name)
  m = re.search(r"mlx::core::cu::\w+_(contiguous|strided)<(\d+)?", name)
  if m:  # MLX's fused kernels: <lib name>_contiguous<...> / _strided<NDIM, ...>
    return f"fused {m.group(1)}{m.group(2) or ''}"
  if "gemm" in name:
    return "gemm (cuBLAS, CUTLASS)"
  m = re.match(r"(?:void )?([\w:]+)", name)
  return (m.group(1) if m else name[:40]).replace("mlx::core::cu::", "")


def load(path: str) -> tuple[list[dict], list[dict], list[dict], dict]:
  """Steps, CUDA API calls, GPU activities (kernels, copies) and the API call by correlation id."""
  with open(path) as f:
    events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
  steps = sorted((e for e in events if e.get("name") == "step" and e.get("cat") == "user_annotation"),
                 key=lambda e: float(e["ts"]))
  api = [e for e in events if e.get("cat") in API_CATEGORIES]
  gpu = [e for e in events if e.get("cat") in GPU_CATEGORIES]
  by_corr = {e.get("args", {}).get("correlation"): e for e in api}
  return steps, api, gpu, by_corr


def in_step(gpu: list[dict], by_corr: dict, t0: float, t1: float) -> list[dict]:
  """GPU activities launched by an API call inside [t0, t1]."""
  out = []
  for g in gpu:
    call = by_corr.get(g.get("args", {}).get("correlation"))
    if call is not None and t0 <= float(call["ts"]) <= t1:
      out.append(g)
  return out


def timeline(path: str) -> None:
  steps, api, gpu, by_corr = load(path)
  s = steps[-1]
  t0, t1 = float(s["ts"]), float(s["ts"]) + float(s["dur"])
  calls = sorted((a for a in api if t0 <= float(a["ts"]) <= t1), key=lambda a: float(a["ts"]))
  mine = in_step(gpu, by_corr, t0, t1)
  kernels = [g for g in mine if g["cat"] == "kernel"]
  if not calls or not kernels:
    print(f"== {path}: no CUDA calls or kernels in the last step")
    return
  end = lambda g: float(g["ts"]) + float(g["dur"])  # noqa: E731
  print(f"== {path}: last step {float(s['dur']):.0f} us; first CUDA call at "
        f"{float(calls[0]['ts']) - t0:.0f}, first kernel at {min(float(k['ts']) for k in kernels) - t0:.0f}, "
        f"last kernel ends at {max(end(k) for k in kernels) - t0:.0f}; {len(kernels)} kernels")
  launched = collections.defaultdict(list)
  for g in mine:
    launched[g["args"]["correlation"]].append(g)
  for a in calls:
    if a["name"] in ("cudaGraphLaunch", "cudaEventSynchronize", "cudaStreamSynchronize"):
      ks = launched.get(a.get("args", {}).get("correlation"), [])
      span = (f", {len(ks)} kernels at {min(float(k['ts']) for k in ks) - t0:.0f}.."
              f"{max(end(k) for k in ks) - t0:.0f}") if ks else ""
      print(f"   {float(a['ts']) - t0:7.0f} {a['name']} ({float(a['dur']):.0f} us){span}")
  busy = collections.defaultdict(float)
  for a, b in union([(float(g["ts"]) - t0, end(g) - t0) for g in mine]):
    while a < b:
      ms = int(a // 1000)
      stop = min(b, (ms + 1) * 1000.0)
      busy[ms] += stop - a
      a = stop
  print("   GPU busy per ms of the step: " + " ".join(f"{ms}:{busy[ms] / 10:.0f}%" for ms in sorted(busy)))


def shares(path: str) -> tuple[dict[str, float], dict[str, float]]:
  """Per step: each family's fair share of GPU time (µs) and its kernel count."""
  steps, _, gpu, by_corr = load(path)
  share: collections.Counter = collections.Counter()
  count: collections.Counter = collections.Counter()
  for s in steps:
    t0, t1 = float(s["ts"]), float(s["ts"]) + float(s["dur"])
    ks = [(float(g["ts"]), float(g["ts"]) + float(g["dur"]), family(g["name"]))
          for g in in_step(gpu, by_corr, t0, t1) if g["cat"] == "kernel"]
    for _, _, f in ks:
      count[f] += 1
    # Sweep the kernels' starts and ends: each interval's length split among those running.
    edges = sorted([(a, 1, i) for i, (a, _, _) in enumerate(ks)] +
                   [(b, -1, i) for i, (_, b, _) in enumerate(ks)])
    running: set[int] = set()
    last = None
    for t, kind, i in edges:
      if running and last is not None and t > last:
        for j in running:
          share[ks[j][2]] += (t - last) / len(running)
      last = t
      if kind > 0:
        running.add(i)
      else:
        running.discard(i)
  n = max(len(steps), 1)
  return {k: v / n for k, v in share.items()}, {k: v / n for k, v in count.items()}


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  ap.add_argument("traces", nargs="+", help="chrome traces of cuda_profile.py --traces")
  ap.add_argument("--top", type=int, default=25, help="families listed")
  args = ap.parse_args()
  for path in args.traces:
    timeline(path)
  results = [shares(p) for p in args.traces]
  families = set().union(*(r[0] for r in results))
  first = results[0][0]
  rest = results[1][0] if len(results) > 1 else {}
  order = sorted(families, key=lambda f: -abs(first.get(f, 0.0) - rest.get(f, 0.0)))
  print("\nGPU time per step by kernel family (µs, shared among concurrent kernels; kernels):")
  print(f"{'family':40s}" + "".join(f" {i + 1:>14d}" for i in range(len(results))))
  for f in order[: args.top]:
    print(f"{f[:40]:40s}" + "".join(f" {r[0].get(f, 0.0):8.0f} ({r[1].get(f, 0.0):3.0f})"
                                     for r in results))
  print(f"{'total':40s}" + "".join(f" {sum(r[0].values()):8.0f} ({sum(r[1].values()):3.0f})"
                                   for r in results))


if __name__ == "__main__":
  main()
