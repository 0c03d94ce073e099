"""Parse time and memory of our reader vs artifact size (a benchmark, not a test).

Generates portable artifacts of growing size from two families, then runs the C++ timer
`reader_parse_bench` (bench/reader/parse_bench.cc) on each:
  const_N : jit of `x + C` where C is a captured numpy f32 array of N elements, embedded as one
            dense constant (the 25M case is a ~100 MB artifact). Parse time and memory should not
            grow with N beyond touching the bytes once, since dense payloads are viewed in place.
  ops_K   : a chain of K elementwise ops (about 2K ops); parse time should grow linearly in K.

  cmake -S bench/reader -B build-bench -DCMAKE_BUILD_TYPE=Release && cmake --build build-bench -j2
  .venv/bin/python bench/reader/parse_bench.py [--build build-bench] [--out results.md] [--quick]

Columns: artifact bytes, ops in the module, parse time (median of repeats), throughput,
bytes allocated by operator new during one parse, and the peak-RSS growth during that parse.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
os.environ.setdefault("JAX_PLATFORMS", "cpu")  # lowering only; never initialize other plugins
sys.path.insert(0, str(ROOT / "tests" / "reader"))


def _make_artifacts(out: pathlib.Path, quick: bool) -> list[tuple[str, pathlib.Path]]:
  import jax
  import jax.numpy as jnp

  import programs

  target = programs.CURRENT_VERSION
  made = []
  const_sizes = [1_000, 100_000, 1_000_000, 10_000_000] + ([] if quick else [25_000_000])
  rng = np.random.default_rng(0)
  for n in const_sizes:
    c = rng.standard_normal(n).astype(np.float32)
    module = jax.jit(lambda x, c=c: x + c).lower(jax.ShapeDtypeStruct((n,), jnp.float32))
    data = programs.serialize(module.compiler_ir("stablehlo"), target)
    # The constant must really be in the artifact, in one piece.
    assert data.find(c[: min(n, 16)].tobytes()) >= 0 and len(data) >= c.nbytes, n
    path = out / f"const_{n}.mlirbc"
    path.write_bytes(data)
    made.append((f"const_{n}", path))
    del c, data, module
  for k in [10, 100, 1_000, 2_000] + ([] if quick else [5_000]):
    def chain(x, k=k):
      for i in range(k):
        x = jnp.sin(x) * np.float32(1.0 + i * 1e-6)
      return x
    module = jax.jit(chain).lower(jax.ShapeDtypeStruct((4,), jnp.float32))
    path = out / f"ops_{k}.mlirbc"
    path.write_bytes(programs.serialize(module.compiler_ir("stablehlo"), target))
    made.append((f"ops_{k}", path))
  return made


def _find_bench(build: pathlib.Path) -> pathlib.Path:
  for p in [build / "bench" / "reader" / "reader_parse_bench",  # top-level build tree
            build / "reader_parse_bench"]:  # standalone: cmake -S bench/reader -B build-bench
    if p.exists():
      return p
  sys.exit(f"reader_parse_bench not built in {build}; build it with\n"
           "  cmake -S bench/reader -B build-bench -DCMAKE_BUILD_TYPE=Release && "
           "cmake --build build-bench -j2")


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description="reader parse time vs artifact size")
  ap.add_argument("--build", default=str(ROOT / "build-bench"))
  ap.add_argument("--out", default="", help="also write the markdown table here")
  ap.add_argument("--quick", action="store_true", help="skip the 100 MB and 5000-op cases")
  ap.add_argument("--keep", default="", help="folder to keep the generated artifacts in")
  a = ap.parse_args(argv)
  bench = _find_bench(pathlib.Path(a.build))
  tmp = pathlib.Path(a.keep) if a.keep else pathlib.Path(tempfile.mkdtemp(prefix="parse_bench_"))
  tmp.mkdir(parents=True, exist_ok=True)
  rows = []
  for name, path in _make_artifacts(tmp, a.quick):
    size = path.stat().st_size
    repeats = "3" if size > 20_000_000 else "11"
    r = subprocess.run([str(bench), str(path), repeats], capture_output=True, text=True)
    if r.returncode != 0:
      rows.append((name, size, None, r.stderr.strip().splitlines()[-1:] or ["failed"]))
      continue
    rows.append((name, size, json.loads(r.stdout.strip().splitlines()[-1]), None))
    if not a.keep:
      path.unlink()
  lines = ["| artifact | bytes | ops | parse ms (median) | MB/s | new'd bytes in parse | "
           "peak RSS growth in parse |",
           "|---|---:|---:|---:|---:|---:|---:|"]
  for name, size, res, err in rows:
    if res is None:
      lines.append(f"| {name} | {size} | error: {err[0]} | | | | |")
      continue
    ms = res["parse_ms_median"]
    mbps = size / 1e6 / (ms / 1e3) if ms > 0 else float("inf")
    lines.append(f"| {name} | {size:,} | {res['ops']:,} | {ms:.3f} | {mbps:,.0f} | "
                 f"{res['alloc_bytes']:,} | {res['rss_growth_kb']:,} KiB |")
  table = "\n".join(lines)
  print(table)
  if a.out:
    pathlib.Path(a.out).write_text(table + "\n")
  if not a.keep:
    try:
      os.rmdir(tmp)
    except OSError:
      pass
  return 0


if __name__ == "__main__":
  sys.exit(main())
