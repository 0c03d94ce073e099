"""Two or more builds of the plugin library against each other, in alternating processes: each
child process runs one case with one library (JAX_MLX_LIBRARY_PATH) and native MLX in
alternating windows of waited steps, and reports both medians, so each library's figure comes
with native MLX's from the same process. Rounds repeat the round robin of (case, library), so a
machine drifting by tens of percent over minutes spreads over every library alike. What
bench/env_ab.py does for settings read at compile time, for changes that need another build.

  python3 bench/library_ab.py --library old.so --library new.so --only mlp_train \\
      --only transformer_train [--rounds 2] [--windows 6] [--steps 15] [--size default]

Prints one line per child (µs per step, ours and native, and their ratio), then per case and
library the medians over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

BENCH = pathlib.Path(__file__).resolve().parent


def child(name: str, size: str, windows: int, steps: int) -> None:
  """Runs case `name` ours and native in alternating windows; prints their medians as JSON."""
  sys.path.insert(0, str(BENCH))
  os.environ.setdefault("JAX_PLATFORMS", "cpu,mlx")
  import common
  import jax
  from env_ab import time_windows
  case = next(common.selected_cases([name], common.Size(size)))
  progs = [("ours", case.make_jax(jax.devices("mlx")[0])), ("native", case.make_mlx())]
  for _, prog in progs:
    for _ in range(8):
      prog.sync(prog.call())
  medians = time_windows(progs, steps, windows)
  print(json.dumps({k: statistics.median(v) * 1e6 / case.per_call for k, v in medians.items()}),
        flush=True)


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--library", action="append", required=True, help="a plugin build (repeatable)")
  ap.add_argument("--only", action="append", required=True, help="case name (repeatable)")
  ap.add_argument("--rounds", type=int, default=2)
  ap.add_argument("--windows", type=int, default=6)
  ap.add_argument("--steps", type=int, default=15, help="waited steps per window")
  ap.add_argument("--size", default="default", choices=["quick", "default", "full"])
  ap.add_argument("--child", help=argparse.SUPPRESS)
  a = ap.parse_args()
  if a.child:
    child(a.child, a.size, a.windows, a.steps)
    return
  results: dict[tuple[str, str], list[dict[str, float]]] = {}
  for r in range(a.rounds):
    for name in a.only:
      for lib in a.library:
        env = dict(os.environ, JAX_MLX_LIBRARY_PATH=os.path.abspath(lib))
        cmd = [sys.executable, __file__, "--library", lib, "--only", name, "--child", name,
               "--size", a.size, "--windows", str(a.windows), "--steps", str(a.steps)]
        t0 = time.time()
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
        label = os.path.basename(lib)
        if not lines:
          print(f"round {r} {name} {label}: failed (rc {p.returncode}) {p.stderr[-800:]}",
                flush=True)
          continue
        d = json.loads(lines[-1])
        results.setdefault((name, label), []).append(d)
        print(f"round {r} {name} {label}: ours {d['ours']:.0f} native {d['native']:.0f} "
              f"ratio {d['ours'] / d['native']:.2f} ({time.time() - t0:.0f} s)", flush=True)
  print("| case | library | ours µs | native µs | ours / native |")
  print("|---|---|---:|---:|---:|")
  for (name, label), ds in results.items():
    ours = statistics.median(d["ours"] for d in ds)
    native = statistics.median(d["native"] for d in ds)
    ratio = statistics.median(d["ours"] / d["native"] for d in ds)
    print(f"| {name} | {label} | {ours:.0f} | {native:.0f} | {ratio:.2f} |")


if __name__ == "__main__":
  main()
