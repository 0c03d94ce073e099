"""`make bench`: every workload, timed in one process as
  ours     the JAX program on the jax-mlx platform (jax.devices('mlx')[0]),
  jax cpu  the same JAX program on jax's CPU backend,
  mlx      the same model written against MLX's Python API (mx.compile), same weights and data,
  jax gpu  (--device-columns, when jax has a GPU backend) the JAX program on jax's own GPU.

Before a column is timed its first calls are compared with jax cpu's (the reference); a mismatch
is marked in the table. Results: bench/results/<host>-<date>.json (or --json), a PNG chart beside
it, the table on stdout, and BENCHMARKS.md + bench/benchmarks.png for a full default run.

  .venv/bin/python bench/run.py --quick            # smoke test, tiny sizes
  .venv/bin/python bench/run.py --only mlp --reps 9
"""

from __future__ import annotations

import argparse
import datetime
import gc
import importlib
import json
import os
import pathlib
import platform
import socket
import subprocess
import sys
import time

BENCH = pathlib.Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

import common  # noqa: E402
from common import JAX_CPU, JAX_GPU, MLX, OURS, OURS_COMPILED, log  # noqa: E402


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  size = p.add_mutually_exclusive_group()
  size.add_argument("--quick", action="store_true", help="tiny sizes, few repetitions (smoke test)")
  size.add_argument("--full", action="store_true",
                    help="the issue's full sizes (for a GPU; hours on a small CPU)")
  p.add_argument("--scale", type=float, default=1.0,
                 help="multiply every workload's batch size (dispatch: element count)")
  p.add_argument("--only", action="append", default=[],
                 help="run only this workload or case (repeatable; prefix match)")
  p.add_argument("--reps", type=int, default=None,
                 help="timed repetitions per column (default 5, --quick 3)")
  p.add_argument("--json", type=pathlib.Path, default=None,
                 help="result file (default bench/results/<host>-<date>.json)")
  p.add_argument("--markdown", type=pathlib.Path, default=None,
                 help="write the table here (default: BENCHMARKS.md on a full default run only)")
  p.add_argument("--from-json", type=pathlib.Path, action="append", default=None,
                 help="run nothing: re-render the table and chart of an earlier result file; "
                      "repeated, one table of the files' cases (runs split by --only, e.g. "
                      "across a device's per-call time limit; --json names the merged file)")
  p.add_argument("--device-columns", action="store_true",
                 help="add jax's own GPU backend as a column when jax has one")
  p.add_argument("--compile-column", action="store_true",
                 help="add a column: ours with JAXMLX_COMPILE=1 (graph replay through mx.compile,"
                      " the plugin's default on GPUs only)")
  p.add_argument("--skip", action="append", default=[], choices=[OURS, MLX],
                 help="leave a column out (repeatable; jax cpu is the reference, always run)")
  return p.parse_args(argv)


def column_devices(args) -> dict:
  """Column -> the jax device it runs on (None for native MLX)."""
  import jax
  cols = {JAX_CPU: jax.devices("cpu")[0], OURS: jax.devices("mlx")[0], MLX: None}
  if args.compile_column:
    cols[OURS_COMPILED] = cols[OURS]
  if args.device_columns:
    for name in ("cuda", "gpu", "rocm"):
      try:
        cols[JAX_GPU] = jax.devices(name)[0]
        break
      except RuntimeError:
        continue
    else:
      log("--device-columns: jax has no GPU backend here; no jax gpu column")
  for c in args.skip:
    cols.pop(c, None)
  return cols


def error_status(e: BaseException) -> str:
  msg = f"{type(e).__name__}: {e}".strip()
  if "UNIMPLEMENTED" in msg or "no MLX lowering" in msg:
    # The plugin lists one op per line after a header: keep the ops, drop the source locations.
    ops = [ln.strip().split(" at ")[0].split("  ")[0] for ln in msg.splitlines()[1:] if ln.strip()]
    return "unsupported: " + (", ".join(dict.fromkeys(ops)) or msg.splitlines()[0])
  return "error: " + msg.splitlines()[0]


def prepare_column(case: common.Case, col: str, device, reference) -> tuple[dict, object]:
  """Builds one column's program and makes its first calls: the check against jax cpu, the
  first call's time (compile), a warm-up, the peak memory of those calls and, for MLX columns,
  the largest of three more calls' own peaks (warm_peak_bytes). Returns its record
  and the program (None when it failed: the failure is the record's status). Never raises."""
  gc.collect()
  uses_mlx = col in (OURS, OURS_COMPILED, MLX)
  saved_env = os.environ.get("JAXMLX_COMPILE")
  if col == OURS_COMPILED:  # read by the plugin when it compiles each executable
    import jax
    jax.clear_caches()
    os.environ["JAXMLX_COMPILE"] = "1"
  if uses_mlx:
    common.mlx_peak_reset()
  rss_ok = col == JAX_CPU and common.rss_peak_reset()
  rss0 = common.rss_now()
  rec: dict = {"status": "ok"}
  prog = None
  try:
    prog = case.make_mlx() if col == MLX else case.make_jax(device)
    values, first_s = [], None
    for i in range(max(1, case.check_calls)):
      out, dt = common.timed_call(prog)
      if i == 0:
        first_s = dt
      values.extend(prog.check_values(out))
    rec["check_values"] = values
    if reference is not None:
      tol = case.native_rtol if col == MLX else case.rtol
      ok, worst, note = common.compare(values, reference, tol)
      rec["check"] = {"ok": ok, "worst_rel": worst, "rtol": tol, "note": note}
      log(f"    check vs jax cpu: {'ok' if ok else 'MISMATCH'} (worst {worst:.2e}) {note}")
    common.timed_call(prog)  # warm-up
    rec["first_call_s"] = first_s
    if uses_mlx:
      # The first calls' peak holds the build (tracing, constants, MLX's kernel compiles); the
      # later calls' own peaks are what every later step needs.
      rec["peak_bytes"] = common.mlx_peak()
      rec["warm_peak_bytes"] = common.warm_mlx_peak(prog)
  except Exception as e:  # noqa: BLE001 - a failing column is reported, not fatal
    rec["status"] = error_status(e)
    log(f"    {rec['status']}")
    prog = None
  finally:
    if col == OURS_COMPILED:
      if saved_env is None:
        os.environ.pop("JAXMLX_COMPILE", None)
      else:
        os.environ["JAXMLX_COMPILE"] = saved_env
  if uses_mlx:
    rec.setdefault("peak_bytes", common.mlx_peak())
    rec["peak_what"] = "mx.get_peak_memory"
  elif col == JAX_CPU and rss_ok and rss0 is not None:
    rec["peak_bytes"] = max(0, (common.rss_peak() or 0) - rss0)
    rec["peak_what"] = "peak RSS growth"
  elif device is not None and hasattr(device, "memory_stats"):
    stats = device.memory_stats() or {}
    rec["peak_bytes"] = stats.get("peak_bytes_in_use")
    rec["peak_what"] = "device peak_bytes_in_use (not reset between cases)"
  return rec, prog


def time_columns(case: common.Case, progs: dict, reps: int) -> dict:
  """Per-unit time samples of each column, repetitions interleaved across the columns (in
  `progs`' order: jax cpu, ours, native, ..., reps times): a machine that slows down mid-run slows every
  column alike, so the ratios hold. Each repetition starts with one untimed call of its column:
  the first call after another column's work runs on cold caches (on the H200 a full-size
  transformer step of either MLX column took ~3 ms longer right after a jax cpu step, which
  always came just before ours), and a loop in progress is what is timed. Returns
  {column: samples}, or the error a column raised."""
  samples: dict = {col: [] for col in progs}
  failed: dict = {}
  for _ in range(reps):
    for col, prog in progs.items():
      if col in failed:
        continue
      try:
        prog.sync(prog.call())  # untimed: back into this column's loop
        t = time.perf_counter()
        for _ in range(case.inner):
          prog.sync(prog.call())
        samples[col].append((time.perf_counter() - t) / case.inner)
      except Exception as e:  # noqa: BLE001 - a failing column is reported, not fatal
        failed[col] = error_status(e)
  return {col: failed.get(col, samples[col]) for col in progs}


def run_case(case: common.Case, devices: dict, reps: int) -> dict:
  log(f"{case.name}: {case.description}")
  res = {"name": case.name, "what": case.what, "unit": case.unit, "per_call": case.per_call,
         "description": case.description, "columns": {}}
  order = [JAX_CPU, OURS, OURS_COMPILED, MLX, JAX_GPU]
  reference = None
  progs: dict = {}
  for col in order:
    if col not in devices:
      continue
    log(f"  {col}")
    rec, prog = prepare_column(case, col, devices[col], reference if col != JAX_CPU else None)
    if col == JAX_CPU:
      reference = rec.get("check_values")
    rec.pop("check_values", None)
    res["columns"][col] = rec
    if prog is not None:
      progs[col] = prog
  log(f"  timing {', '.join(progs)}: {reps} repetitions, interleaved")
  scale = common.unit_scale(case.unit) / case.per_call
  for col, samples in time_columns(case, progs, reps).items():
    rec = res["columns"][col]
    if isinstance(samples, str):
      rec["status"] = samples
      log(f"    {col}: {samples}")
      continue
    stats = common.summarize([x * scale for x in samples])
    rec["time"] = stats
    rec["compile_s"] = max(0.0, rec["first_call_s"] - stats["median"] / scale)
    log(f"    {col}: {common.fmt_time(stats, case.unit)}/{case.what}"
        f"  compile {rec['compile_s']:.2f} s  peak {common.fmt_bytes(rec.get('peak_bytes'))}")
  progs.clear()
  gc.collect()
  return res


def selected(name: str, only: list) -> bool:
  return not only or any(name.startswith(o) for o in only)


def environment(devices: dict) -> dict:
  import jax
  import jaxlib
  import mlx.core as mx
  from jax_plugins import mlx as plugin
  try:
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, timeout=10).stdout.strip()
  except (OSError, subprocess.SubprocessError):
    commit = ""
  return {
      "host": socket.gethostname(), "platform": platform.platform(),
      "machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
      "jax": jax.__version__, "jaxlib": jaxlib.__version__, "mlx": mx.__version__,
      "mlx_default_device": str(mx.default_device()), "commit": commit,
      "plugin_library": str(plugin.library_path()),
      "devices": {c: (str(d) if d is not None else str(mx.default_device()))
                  for c, d in devices.items()},
      "env": {k: v for k, v in os.environ.items() if k.startswith(("JAXMLX_", "JAX_", "XLA_"))},
  }


def main(argv=None) -> int:
  args = parse_args(argv)
  if not args.device_columns:
    os.environ.setdefault("JAX_PLATFORMS", "cpu,mlx")
  reps = args.reps or (3 if args.quick else 5)
  size = common.Size(level="quick" if args.quick else ("full" if args.full else "default"),
                     scale=args.scale)

  if args.from_json:
    report = merged_reports([json.loads(p.read_text()) for p in args.from_json])
    path = args.from_json[0]
    if len(args.from_json) > 1:
      path = args.json or path.with_name(path.stem + "-merged.json")
      path.write_text(json.dumps(report, indent=1) + "\n")
    return write_outputs(report, path, args.markdown)

  import workloads
  devices = column_devices(args)
  results, t0 = [], time.perf_counter()
  for name in workloads.ALL:
    mod = importlib.import_module(f"workloads.{name}")
    try:
      cases = mod.cases(size)
    except Exception as e:  # noqa: BLE001
      log(f"{name}: cannot build its cases: {error_status(e)}")
      results.append({"name": name, "what": "-", "unit": "ms", "per_call": 1,
                      "description": "", "columns": {OURS: {"status": error_status(e)}}})
      continue
    for case in cases:
      if selected(name, args.only) or selected(case.name, args.only):
        results.append(run_case(case, devices, reps))

  stamp = datetime.datetime.now(datetime.timezone.utc)
  report = {"created": stamp.isoformat(timespec="seconds"), "size": size.level,
            "args": {k: (str(v) if isinstance(v, pathlib.Path) else v)
                     for k, v in vars(args).items()},
            "reps": reps, "wall_s": round(time.perf_counter() - t0, 1),
            "columns": [c for c in (OURS, OURS_COMPILED, MLX, JAX_CPU, JAX_GPU) if c in devices],
            "environment": environment(devices), "results": results}

  path = args.json or BENCH / "results" / \
      f"{socket.gethostname()}-{stamp.strftime('%Y%m%d-%H%M%S')}-{size.level}.json"
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps(report, indent=1) + "\n")
  md = args.markdown
  if md is None and size.level != "quick" and not args.only and args.scale == 1.0:
    md = ROOT / "BENCHMARKS.md"
  return write_outputs(report, path, md)


def merged_reports(reports: list[dict]) -> dict:
  """One report of several runs' cases (in the workloads' order, a later run's case replacing an
  earlier one of the same name); the first run's settings and environment, the runs' summed
  wall time. Runs with other columns or sizes are refused: their rows would not compare."""
  first = reports[0]
  for r in reports[1:]:
    if r["columns"] != first["columns"] or r["size"] != first["size"] or r["reps"] != first["reps"]:
      raise SystemExit("--from-json: the runs differ in columns, size or repetitions")
  import workloads
  order = {name: i for i, name in enumerate(workloads.ALL)}
  by_name: dict[str, dict] = {}
  for r in reports:
    for res in r["results"]:
      by_name[res["name"]] = res
  workload = lambda name: next((w for w in workloads.ALL if name.startswith(w)), name)  # noqa: E731
  merged = dict(first)
  merged["results"] = sorted(by_name.values(),
                             key=lambda res: order.get(workload(res["name"]), len(order)))
  merged["wall_s"] = round(sum(r["wall_s"] for r in reports), 1)
  if len(reports) > 1:
    merged["args"] = dict(first["args"], only=None)
  return merged


def write_outputs(report: dict, path: pathlib.Path, md: pathlib.Path | None) -> int:
  """The table on stdout, a chart beside the JSON, and the markdown page when asked."""
  import plot
  table = common.markdown(report)
  print(table)
  png = path.with_suffix(".png")
  try:
    plot.write_chart(report, png)
    log(f"results: {path}\nchart: {png}")
  except OSError as e:  # e.g. re-rendering a read-only result file
    log(f"chart not written: {e}")
  if md is not None:
    chart = md.parent / "bench" / "benchmarks.png" if md.name == "BENCHMARKS.md" else \
        md.with_suffix(".png")
    plot.write_chart(report, chart)
    md.write_text(common.benchmarks_md(report, table, chart.relative_to(md.parent)))
    log(f"table: {md}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
