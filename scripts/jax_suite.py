#!/usr/bin/env python3
"""Runs jax's own test suite with our platform as the default device and tabulates the results.

    scripts/jax_suite.py --jax-src PATH [--files lax_test.py ...] [--jobs N] [--out docs/jax_suite.md]
    scripts/jax_suite.py --jax-src PATH --rerun RESULTS.json   # re-run only earlier failures

PATH is a checkout of github.com/jax-ml/jax at the installed jax's release tag (for example
`git archive jax-v0.10.2 tests conftest.py`), kept outside this repository. Each test file runs
in its own pytest process with JAX_PLATFORMS=<ours>,cpu, so our platform is jax's default backend
and jax's test_util sees it as the device under test; the CPU backend stays available for the
tests that ask for it by name.

Writes a Markdown table of pass/fail/skip per file and every failure grouped by cause. Causes
come from scripts/jax_suite_causes.py (error-message patterns → a stated cause); a failure no
pattern explains is listed as "unclassified", which is a to-do, not an explanation.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from jax_suite_causes import CAUSES, TEST_CAUSES  # noqa: E402

# The files issue #5 measures coverage on.
DEFAULT_FILES = [
    "lax_test.py", "lax_numpy_test.py", "lax_numpy_reducers_test.py",
    "lax_numpy_indexing_test.py", "lax_control_flow_test.py", "lax_autodiff_test.py",
    "random_test.py", "linalg_test.py", "fft_test.py", "api_test.py", "export_test.py",
    "debugging_primitives_test.py",
]


def platform_name() -> str:
  return "metal" if sys.platform == "darwin" else "mlx"


def has_xdist(python: str) -> bool:
  return subprocess.run([python, "-c", "import xdist"], capture_output=True).returncode == 0


def run_file(python: str, src: pathlib.Path, name: str, jobs: int, timeout: float,
             extra: list[str], xml_path: pathlib.Path,
             node_ids: bool = False) -> tuple[float, str | None]:
  env = dict(os.environ)
  env["JAX_PLATFORMS"] = f"{platform_name()},cpu"
  env.setdefault("JAX_NUM_GENERATED_CASES", "10")
  env["PYTHONPATH"] = os.pathsep.join(
      p for p in [str(REPO / "python"), env.get("PYTHONPATH", "")] if p)
  cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml_path}",
         "-o", "junit_family=xunit1", *([] if node_ids else [f"tests/{name}"]), *extra]
  if jobs > 1:
    cmd += ["-n", str(jobs)]
  start = time.monotonic()
  try:
    proc = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True, timeout=timeout)
  except subprocess.TimeoutExpired:
    return time.monotonic() - start, f"timed out after {timeout:.0f} s"
  elapsed = time.monotonic() - start
  if not xml_path.exists():
    tail = (proc.stdout + proc.stderr)[-2000:]
    return elapsed, f"pytest exited {proc.returncode} without a report (a crash?):\n{tail}"
  return elapsed, None


def parse_junit(xml_path: pathlib.Path):
  """Yields (test id, outcome, message) for every test case in a junit report."""
  root = ET.parse(xml_path).getroot()
  for case in root.iter("testcase"):
    test_id = f"{case.get('classname', '')}::{case.get('name', '')}"
    outcome, message = "passed", ""
    for child in case:
      if child.tag in ("failure", "error"):
        outcome = "failed"
        message = child.get("message") or (child.text or "")
        break
      if child.tag == "skipped":
        outcome = "skipped"
        message = child.get("message") or ""
    yield test_id, outcome, message


def cause_of(message: str, file: str = "", test: str = "") -> str:
  """The cause of a failure: by its test ("file::id", TEST_CAUSES), else by its message."""
  for pattern, cause in TEST_CAUSES:
    if file and re.search(pattern, f"{file}::{test}"):
      return cause
  for pattern, cause in CAUSES:
    if re.search(pattern, message, re.S):
      return cause
  return "unclassified"


def signature(message: str) -> str:
  """The first informative line of a failure, with numbers masked, for grouping."""
  for line in message.splitlines():
    line = line.strip()
    if line:
      return re.sub(r"\d+", "N", line)[:160]
  return "(no message)"


def node_id(name: str, test_id: str) -> str:
  """junit "tests.api_test.APITest::test_x" -> pytest "tests/api_test.py::APITest::test_x"
  (module-level tests have no class part)."""
  classname, test = test_id.split("::", 1)
  cls = classname.rsplit(".", 1)[-1]
  return f"tests/{name}::{test}" if cls == name[:-3] else f"tests/{name}::{cls}::{test}"


def rerun_failures(args, jobs):
  """Re-runs the failures recorded in args.rerun; returns its rows and failures, updated."""
  old = json.loads(args.rerun.read_text())
  rows = {r["file"]: dict(r) for r in old["rows"]}
  by_file = collections.defaultdict(list)
  for f in old["failures"]:
    by_file[f["file"]].append(f)
  failures = []
  with tempfile.TemporaryDirectory() as tmp:
    for name, items in by_file.items():
      # junit classname "tests.api_test.APITest" + name -> node id "tests/api_test.py::APITest::t"
      ids = [node_id(name, f["test"]) for f in items]
      xml_path = pathlib.Path(tmp, name + ".xml")
      run_file(args.python, args.jax_src, name, jobs, args.timeout, ids, xml_path, node_ids=True)
      still = {}
      if xml_path.exists():
        for test_id, outcome, message in parse_junit(xml_path):
          still[test_id] = (outcome, message)
      elif len(ids) > 1:
        # The process died (a test that crashes it, such as numpy's pinv): one test at a time,
        # so that one crash does not leave the others unknown.
        for i, one in enumerate(ids):
          one_xml = pathlib.Path(tmp, f"{name}.{i}.xml")
          run_file(args.python, args.jax_src, name, 1, args.timeout, [one], one_xml,
                   node_ids=True)
          if one_xml.exists():
            for test_id, outcome, message in parse_junit(one_xml):
              still[test_id] = (outcome, message)
      for f in items:
        outcome, message = still.get(f["test"], ("failed", f["signature"]))
        if outcome == "failed":
          failures.append(dict(f, cause=cause_of(message, f["file"], f["test"]),
                               signature=signature(message)))
        else:
          rows[name]["failed"] -= 1
          rows[name]["passed" if outcome == "passed" else "skipped"] += 1
      print(f"{name}: re-ran {len(items)}, {sum(1 for f in failures if f['file'] == name)} "
            "still fail", flush=True)
  return list(rows.values()), failures, old.get("problems", {})


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  ap.add_argument("--jax-src", required=True, type=pathlib.Path)
  ap.add_argument("--files", nargs="*", default=DEFAULT_FILES)
  ap.add_argument("--jobs", type=int, default=1, help="pytest-xdist workers (if installed)")
  ap.add_argument("--timeout", type=float, default=3600, help="seconds per file")
  ap.add_argument("--python", default=sys.executable)
  ap.add_argument("--out", type=pathlib.Path, default=REPO / "docs" / "jax_suite.md")
  ap.add_argument("--json", type=pathlib.Path, help="also write the raw results here")
  ap.add_argument("--title", default=None, help="the document's heading (default: the platform's)")
  ap.add_argument("--render", type=pathlib.Path,
                  help="results (--json) to write as Markdown again, running nothing")
  ap.add_argument("--rerun", type=pathlib.Path,
                  help="results (--json) of an earlier full run: re-run only its failures and "
                       "update its counts (after a fix, without the whole suite's hours on a CPU)")
  ap.add_argument("pytest_args", nargs=argparse.REMAINDER,
                  help="after --: extra pytest arguments (e.g. -- -k Sort)")
  args = ap.parse_args()
  extra = [a for a in args.pytest_args if a != "--"]
  jobs = args.jobs if args.jobs > 1 and has_xdist(args.python) else 1

  import jax  # the version the table is for
  rows, failures, problems = [], [], {}
  if args.render:
    old = json.loads(args.render.read_text())
    rows, failures, problems = old["rows"], old["failures"], old.get("problems", {})
  elif args.rerun:
    rows, failures, problems = rerun_failures(args, jobs)
  with tempfile.TemporaryDirectory() as tmp:
    for name in ([] if args.rerun or args.render else args.files):
      xml_path = pathlib.Path(tmp, name + ".xml")
      elapsed, problem = run_file(args.python, args.jax_src, name, jobs, args.timeout, extra,
                                  xml_path)
      counts = collections.Counter()
      if xml_path.exists():
        for test_id, outcome, message in parse_junit(xml_path):
          counts[outcome] += 1
          if outcome == "failed":
            failures.append({"file": name, "test": test_id,
                             "cause": cause_of(message, name, test_id),
                             "signature": signature(message)})
      if problem:
        problems[name] = problem
      rows.append({"file": name, "passed": counts["passed"], "failed": counts["failed"],
                   "skipped": counts["skipped"], "seconds": round(elapsed, 1)})
      print(f"{name}: {dict(counts)} in {elapsed:.0f} s" + (f" — {problem[:200]}" if problem else ""),
            flush=True)

  total_pass = sum(r["passed"] for r in rows)
  total_fail = sum(r["failed"] for r in rows)
  lines = [
      args.title or f"# jax's test suite on the `{platform_name()}` platform",
      "",
      f"Generated by `scripts/jax_suite.py` on {datetime.date.today()} with jax {jax.__version__}, "
      f"JAX_NUM_GENERATED_CASES={os.environ.get('JAX_NUM_GENERATED_CASES', '10')}"
      + (f", pytest args `{' '.join(extra)}`" if extra else "") + ".",
      "Pass rate is passed / (passed + failed); skipped tests are those jax itself skips for this",
      "device (or for missing optional dependencies).",
      "",
      "| file | passed | failed | skipped | pass rate | seconds |",
      "|---|---:|---:|---:|---:|---:|",
  ]
  for r in rows:
    executed = r["passed"] + r["failed"]
    rate = f"{100 * r['passed'] / executed:.1f} %" if executed else "–"
    lines.append(f"| {r['file']} | {r['passed']} | {r['failed']} | {r['skipped']} | {rate} | "
                 f"{r['seconds']} |")
  executed = total_pass + total_fail
  if executed:
    lines.append(f"| **all** | {total_pass} | {total_fail} | "
                 f"{sum(r['skipped'] for r in rows)} | {100 * total_pass / executed:.1f} % | |")
  if problems:
    lines += ["", "## Files that did not finish", ""]
    lines += [f"- `{name}`: {text.splitlines()[0] if text else ''}" for name, text in problems.items()]
  by_cause = collections.defaultdict(list)
  for f in failures:  # causes from today's patterns, also for failures carried over by --rerun
    by_signature = cause_of(f["signature"], f["file"], f["test"])
    by_cause[f["cause"] if by_signature == "unclassified" else by_signature].append(f)
  lines += ["", "## Failures by cause", ""]
  for cause, items in sorted(by_cause.items(), key=lambda kv: -len(kv[1])):
    lines.append(f"### {cause} ({len(items)})")
    lines.append("")
    for f in sorted(items, key=lambda f: (f["file"], f["test"])):
      lines.append(f"- `{f['file']}` `{f['test'].split('::', 1)[-1]}` — {f['signature']}")
    lines.append("")
  args.out.parent.mkdir(parents=True, exist_ok=True)
  args.out.write_text("\n".join(lines) + "\n")
  if args.json:
    args.json.write_text(json.dumps({"jax": jax.__version__, "rows": rows, "failures": failures,
                                     "problems": problems}, indent=1))
  print(f"wrote {args.out}: {total_pass} passed, {total_fail} failed")
  return 0


if __name__ == "__main__":
  sys.exit(main())
