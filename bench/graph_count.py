"""MLX primitives per call: ours (the plugin's graph as it is about to be evaluated,
JAXMLX_GRAPH_STATS) beside native MLX (its graph at each mx.eval, from mx.export_to_dot), per
workload and by primitive name. On a GPU each primitive is a kernel launch; on MLX's CPU one
scheduler task of a few µs however small: the count is the run's cost beyond its arithmetic.

  .venv/bin/python bench/graph_count.py --only decode_token
  JAXMLX_COMPILE=1 .venv/bin/python bench/graph_count.py   # ours fused, as on Metal

Native MLX is counted as it runs in the benchmark (mx.compile, fused kernels: `Compiled...`
names); MLX_DISABLE_COMPILE=1 shows its unfused graph. Ours follows JAXMLX_COMPILE (default:
replay on the CPU, no fused kernels). Loop bodies run inside a program (the GRU's scan) are not
in our count. Warm-up calls first; the third call is counted.
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import re
import sys
import tempfile

BENCH = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

_RECT = re.compile(r'\[label ="([^"]*)", shape=rectangle\]')


def native_counter():
  """Wraps mx.eval so that every graph it is given is counted first. Returns (counts, runs)."""
  import mlx.core as mx
  import mlx.utils
  counts: collections.Counter = collections.Counter()
  runs = [0]
  real_eval = mx.eval
  dot = pathlib.Path(tempfile.mkdtemp()) / "g.dot"

  def counting_eval(*args):
    arrays = [a for _, a in mlx.utils.tree_flatten(list(args)) if isinstance(a, mx.array)]
    if arrays:
      mx.export_to_dot(str(dot), *arrays)
      counts.update(_RECT.findall(dot.read_text()))
      runs[0] += 1
    return real_eval(*args)

  mx.eval = counting_eval
  return counts, runs


def our_lines(path: pathlib.Path, start: int) -> list[str]:
  text = path.read_text() if path.exists() else ""
  return text[start:].splitlines()


def parse_ours(lines: list[str]) -> tuple[collections.Counter, int]:
  counts: collections.Counter = collections.Counter()
  runs = [ln for ln in lines if ln.startswith("run ")]  # not the "region ..." lines
  for ln in runs:
    for kv in ln.split()[3:]:
      k, v = kv.rsplit("=", 1)
      counts[k] += int(v)
  return counts, len(runs)


def table(name: str, per_call: int, ours: collections.Counter, ours_runs: int,
          native: collections.Counter, native_runs: int, top: int) -> str:
  o, n = sum(ours.values()), sum(native.values())
  out = [f"## {name}: ours {o / per_call:.0f} primitives per {'unit' if per_call > 1 else 'call'}"
         f" ({ours_runs} runs), native {n / per_call:.0f} ({native_runs} evals)"]
  out.append(f"| primitive | ours | native | ours − native |")
  out.append("|---|---:|---:|---:|")
  names = sorted(set(ours) | set(native), key=lambda k: -(ours[k] - native[k]))
  for k in names[:top]:
    out.append(f"| {k} | {ours[k] / per_call:.1f} | {native[k] / per_call:.1f} | "
               f"{(ours[k] - native[k]) / per_call:+.1f} |")
  return "\n".join(out)


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument("--only", action="append", default=[], help="workload or case name (repeatable)")
  p.add_argument("--quick", action="store_true", help="tiny sizes")
  p.add_argument("--top", type=int, default=25, help="rows per table (largest differences first)")
  args = p.parse_args(argv)

  import common
  stats = common.plugin_log("JAXMLX_GRAPH_STATS", "graph_stats.log")
  import jax
  device = jax.devices("mlx")[0]
  counts, runs = native_counter()
  size = common.Size(level="quick" if args.quick else "default")
  for case in common.selected_cases(args.only, size):
    ours_prog = case.make_jax(device)
    for _ in range(2):
      ours_prog.sync(ours_prog.call())
    start = len(stats.read_text()) if stats.exists() else 0
    ours_prog.sync(ours_prog.call())
    ours, ours_runs = parse_ours(our_lines(stats, start))
    del ours_prog

    native_prog = case.make_mlx()
    for _ in range(2):
      native_prog.sync(native_prog.call())
    counts.clear()
    runs[0] = 0
    native_prog.sync(native_prog.call())
    native, native_runs = collections.Counter(counts), runs[0]
    del native_prog
    print(table(case.name, case.per_call, ours, ours_runs, native, native_runs, args.top))
    print(flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
