"""What a first call builds at run time on MLX's CUDA backend, ours beside native MLX: the modules
MLX compiles with NVRTC (its fused kernels, and the gather, scatter, dynamic-offset... kernels it
instantiates per dtype), each with the time it took. MLX keeps them in a disk cache
(MLX_PTX_CACHE_DIR, by default /tmp/mlx/<version>/ptx): a fresh machine pays them once, in the
first process that needs them. Each (case, column) runs in a child process with a cache of its
own, so that neither column finds what the other built: the compile time of the benchmark table
on a fresh machine, split by module. Needs MLX's CUDA backend (MLX's CPU writes nothing).

  python3 bench/cuda_jit.py --only gru_train [--size full] [--jobs 4] [--keep DIR]

A module's time is from the end of the step before it (the previous module written, or the
first call's start) to when it was written: NVRTC's build and whatever ran in between.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

BENCH = pathlib.Path(__file__).resolve().parent


def column(name: str, which: str, size: str, cache: str) -> None:
  """Child process: the first and second calls of `which` for case `name`, timed; prints JSON."""
  os.environ["MLX_PTX_CACHE_DIR"] = cache
  os.environ.setdefault("JAX_PLATFORMS", "cpu,mlx")
  sys.path.insert(0, str(BENCH))
  import common
  case = next(common.selected_cases([name], common.Size(size)))
  if which == "ours":
    import jax
    prog = case.make_jax(jax.devices("mlx")[0])
  else:
    prog = case.make_mlx()
  t0 = time.time()
  prog.sync(prog.call())
  t1 = time.time()
  prog.sync(prog.call())
  t2 = time.time()
  print(json.dumps({"start": t0, "first": t1 - t0, "second": t2 - t1}))


def modules(cache: pathlib.Path) -> list[tuple[float, str]]:
  """(mtime, module name) of each module in an MLX PTX cache; a long name is split into
  directories of 245 characters."""
  out = []
  for p in cache.rglob("*.ptx"):
    out.append((p.stat().st_mtime, "".join(p.relative_to(cache).with_suffix("").parts)))
  return sorted(out)


def family(module: str) -> str:
  """A fused kernel's op chain (MLX names it by its ops, operand kinds and dtypes, then a decimal
  hash at the end); other modules whole."""
  m = re.fullmatch(r"(.*)_\d{6,}", module)
  return f"fused {m.group(1)[:70]}" if m else module


def run_one(name: str, which: str, size: str, keep: pathlib.Path | None,
            timeout: float) -> dict:
  cache = pathlib.Path(tempfile.mkdtemp(prefix=f"ptx_{name}_{which}_", dir=keep))
  try:
    proc = subprocess.run([sys.executable, __file__, "--column", name, which, size, str(cache)],
                          capture_output=True, text=True, timeout=timeout)
  except subprocess.TimeoutExpired:
    return {"error": f"no first call within {timeout} s; modules built by then: "
                     f"{len(modules(cache))}"}
  if proc.returncode != 0:
    return {"error": proc.stderr[-2000:]}
  res = json.loads(proc.stdout.strip().splitlines()[-1])
  last = res["start"]
  res["modules"] = []
  for mtime, mod in modules(cache):
    res["modules"].append({"name": mod, "at": mtime - res["start"], "took": mtime - last})
    last = max(last, mtime)
  return res


def report(name: str, res: dict[str, dict], top: int) -> None:
  print(f"## {name}")
  for which, r in res.items():
    if "error" in r:
      print(f"- {which}: failed\n```\n{r['error']}\n```")
      continue
    in_first = [m for m in r["modules"] if m["at"] >= 0]
    print(f"- {which}: first call {r['first']:.2f} s, second {r['second'] * 1e3:.1f} ms; "
          f"{len(r['modules'])} modules built ({len(in_first)} in the first call, "
          f"{sum(m['took'] for m in in_first):.1f} s up to the last one)")
  if any("error" in r for r in res.values()):
    return
  fam = {w: collections.Counter() for w in res}
  num = {w: collections.Counter() for w in res}
  for w, r in res.items():
    for m in r["modules"]:
      fam[w][family(m["name"])] += m["took"]
      num[w][family(m["name"])] += 1
  keys = sorted(set().union(*fam.values()), key=lambda k: -max(f[k] for f in fam.values()))
  print("| module | " + " | ".join(f"{w}: n, s" for w in res) + " |")
  print("|---|" + "---:|" * len(res))
  for k in keys[:top]:
    print(f"| {k} | " + " | ".join(f"{num[w][k]}, {fam[w][k]:.1f}" for w in res) + " |")
  print()


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  ap.add_argument("--only", action="append", default=[], help="case name (repeatable)")
  ap.add_argument("--size", default="default", choices=["quick", "default", "full"])
  ap.add_argument("--jobs", type=int, default=4, help="child processes at once")
  ap.add_argument("--top", type=int, default=30, help="module rows per case")
  ap.add_argument("--keep", type=pathlib.Path, help="make the caches here and keep them")
  ap.add_argument("--json", type=pathlib.Path, help="write every result here")
  ap.add_argument("--columns", default="ours,native", help="which columns (ours, native)")
  ap.add_argument("--timeout", type=float, default=900, help="seconds per child process")
  ap.add_argument("--column", nargs=4, help=argparse.SUPPRESS)  # child: case, which, size, cache
  args = ap.parse_args()
  if args.column:
    column(*args.column)
    return 0
  names = args.only or [c.name for c in _all_cases(args.size)]
  if args.keep:
    args.keep.mkdir(parents=True, exist_ok=True)
  columns = args.columns.split(",")
  results = {}
  with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
    futures = {(n, w): pool.submit(run_one, n, w, args.size, args.keep, args.timeout)
               for n in names for w in columns}
    for n in names:  # each case as soon as its columns are done
      results[n] = {w: futures[(n, w)].result() for w in columns}
      report(n, results[n], args.top)
      sys.stdout.flush()
      if args.json:
        args.json.write_text(json.dumps(results, indent=1))
  return 0


def _all_cases(size: str):
  sys.path.insert(0, str(BENCH))
  import common
  return list(common.selected_cases([], common.Size(size)))


if __name__ == "__main__":
  sys.exit(main())
