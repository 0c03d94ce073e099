"""Where a workload's run goes, by MLX primitive (JAXMLX_PROFILE, src/runtime/graph_stats.h).

  .venv/bin/python bench/profile.py --only transformer [--full] [--top 20]

Each of our runs is evaluated one primitive at a time, each waited for: per primitive name, how
many per call and the µs they took (host work, kernel and the wait). One wait per primitive
serializes what MLX would overlap and stops fusion, so the total exceeds a normal call; the
shares say which primitives carry the time. Warm-up calls first; the third call is reported.
Loop bodies run inside a program (the GRU's scan) are one primitive each here.
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import sys

BENCH = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))


def parse(lines: list[str]) -> tuple[collections.Counter, collections.Counter, float]:
  counts: collections.Counter = collections.Counter()
  micros: collections.Counter = collections.Counter()
  total = 0.0
  for ln in lines:
    parts = ln.split()
    if not parts or parts[0] != "profile":
      continue
    total += float(parts[2])
    for kv in parts[3:]:
      name, rest = kv.rsplit("=", 1)
      n, us = rest.split(":")
      counts[name] += int(n)
      micros[name] += float(us)
  return counts, micros, total


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument("--only", action="append", default=[], help="workload or case name (repeatable)")
  p.add_argument("--quick", action="store_true", help="tiny sizes")
  p.add_argument("--full", action="store_true", help="the issue's sizes")
  p.add_argument("--top", type=int, default=20, help="rows per table (most time first)")
  args = p.parse_args(argv)

  import common
  log = common.plugin_log("JAXMLX_PROFILE", "profile.log")
  import jax
  device = jax.devices("mlx")[0]
  level = "quick" if args.quick else "full" if args.full else "default"
  for case in common.selected_cases(args.only, common.Size(level=level)):
    prog = case.make_jax(device)
    for _ in range(2):
      prog.sync(prog.call())
    start = len(log.read_text()) if log.exists() else 0
    prog.sync(prog.call())
    counts, micros, total = parse(log.read_text()[start:].splitlines())
    del prog
    unit = "unit" if case.per_call > 1 else "call"
    print(f"## {case.name}: {total / case.per_call / 1e3:.2f} ms per {unit} profiled, "
          f"{sum(counts.values()) / case.per_call:.0f} primitives")
    print("| primitive | per call | µs | share |")
    print("|---|---:|---:|---:|")
    for name, us in micros.most_common(args.top):
      print(f"| {name} | {counts[name] / case.per_call:.1f} | {us / case.per_call:.1f} | "
            f"{100 * us / max(total, 1e-9):.1f} % |")
    print(flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
