"""MLX's CUDA graphs per unit of work, ours beside native MLX: how many graphs MLX commits per
call, and the kernels and child graphs (cuBLAS products) in them, by kernel name. MLX writes each
committed graph as a Graphviz file when MLX_SAVE_CUDA_GRAPHS_DOT_FILE is set (read once per
process): each column runs in a child process of its own, warm-up calls first, then `--calls`
counted calls. The kernel count is what the GPU launches per step, which the host pays for
(bench/README.md, eighteenth stop). Needs MLX's CUDA backend (nothing is written on the CPU).

  python3 bench/cuda_graphs.py --only mlp_train [--calls 3] [--top 40]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

BENCH = pathlib.Path(__file__).resolve().parent

# One node of cudaGraphDebugDotPrint's output: its graph, its index, and the first line of its
# label (a kernel's mangled name, or "graph_N" for a child graph).
_NODE = re.compile(r'"graph_(\d+)_node_\d+"\[[^\]]*label="\d+\n([^\n]*)\n', re.S)


def column(name: str, which: str, calls: int, warmup: int) -> None:
  """Child process: runs `which` of case `name` and prints the counted calls' graphs as JSON."""
  out = pathlib.Path(tempfile.mkdtemp())
  os.environ["MLX_SAVE_CUDA_GRAPHS_DOT_FILE"] = str(out / "g")
  os.environ.setdefault("JAX_PLATFORMS", "cpu,mlx")
  sys.path.insert(0, str(BENCH))
  import common
  case = next(common.selected_cases([name], common.Size("default")))
  if which == "ours":
    import jax
    prog = case.make_jax(jax.devices("mlx")[0])
  else:
    prog = case.make_mlx()
  for _ in range(warmup):
    prog.sync(prog.call())
  before = len(list(out.glob("g_*.dot")))
  for _ in range(calls):
    prog.sync(prog.call())
  files = sorted(out.glob("g_*.dot"), key=lambda p: int(p.stem.split("_")[1]))[before:]
  total = {"commits": len(files), "children": 0, "child_kernels": 0,
           "kernels": collections.Counter(), "units": calls * case.per_call}
  for f in files:
    graph = count_graph(f.read_text())
    total["children"] += graph["children"]
    total["child_kernels"] += graph["child_kernels"]
    total["kernels"].update(graph["kernels"])
  print(json.dumps(total))


def count_graph(dot: str) -> dict:
  """One committed graph: its own kernels by name, its child graphs (cuBLAS's products), and the
  kernels inside those."""
  nodes = _NODE.findall(dot)
  top = min((int(g) for g, _ in nodes), default=0)
  out = {"kernels": collections.Counter(), "children": 0, "child_kernels": 0}
  for g, label in nodes:
    if re.fullmatch(r"graph_\d+", label):
      out["children"] += 1
    elif int(g) == top:
      out["kernels"][label] += 1
    else:
      out["child_kernels"] += 1
  return out


def short(name: str) -> str:
  """MLX's fused kernels: the op chain between `cu<N>` and the variant; others: the head."""
  m = re.search(r"cu\d+(\w+?)_\d{6,}_(contiguous|strided)", name)
  if m:
    return f"fused {m.group(1)[:60]} ({m.group(2)})"
  m = re.search(r"cu\d+([a-z_]\w*?)I", name)
  if not m:
    return name[:80]
  op = re.search(r"NS1_\d+([A-Z]\w*?)E", name[m.end():])
  return m.group(1) + (f" {op.group(1)}" if op else "")


def by_short_name(kernels: dict[str, int]) -> collections.Counter:
  """Kernel counts keyed by short(name): kernels that differ only past it are summed."""
  out: collections.Counter = collections.Counter()
  for k, v in kernels.items():
    out[short(k)] += v
  return out


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  ap.add_argument("--only", action="append", default=[], help="case name (repeatable)")
  ap.add_argument("--calls", type=int, default=3)
  ap.add_argument("--warmup", type=int, default=10)
  ap.add_argument("--top", type=int, default=40)
  ap.add_argument("--column", nargs=2, help=argparse.SUPPRESS)  # child: case, ours|native
  args = ap.parse_args()
  if args.column:
    column(*args.column, args.calls, args.warmup)
    return 0
  for name in args.only or ["mlp_train"]:
    res = {}
    for which in ("ours", "native"):
      proc = subprocess.run([sys.executable, __file__, "--column", name, which, "--calls",
                             str(args.calls), "--warmup", str(args.warmup)],
                            capture_output=True, text=True)
      if proc.returncode != 0:
        print(f"{name} {which}: failed\n{proc.stderr[-2000:]}")
        return 1
      res[which] = json.loads(proc.stdout.strip().splitlines()[-1])
    if res["ours"]["commits"] == 0 and res["native"]["commits"] == 0:
      print(f"## {name}: MLX wrote no CUDA graph (not MLX's CUDA backend?)")
      continue
    print(f"## {name}, per unit of work (ours / native)")
    for key in ("commits", "children", "child_kernels"):
      print(f"- {key}: {res['ours'][key] / res['ours']['units']:.1f} / "
            f"{res['native'][key] / res['native']['units']:.1f}")
    o, n = by_short_name(res["ours"]["kernels"]), by_short_name(res["native"]["kernels"])
    uo, un = res["ours"]["units"], res["native"]["units"]
    print(f"- kernels of MLX's own: {sum(o.values()) / uo:.1f} / {sum(n.values()) / un:.1f}")
    print("| kernel | ours | native |\n|---|---:|---:|")
    for k in sorted(set(o) | set(n), key=lambda k: -(o[k] / uo - n[k] / un))[:args.top]:
      print(f"| {k} | {o[k] / uo:.1f} | {n[k] / un:.1f} |")
  return 0


if __name__ == "__main__":
  sys.exit(main())
