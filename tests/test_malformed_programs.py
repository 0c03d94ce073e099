"""Malformed programs past the reader end in an error, never a crash.

jaxlib verifies what it sends, but PJRT_Client_Compile takes bytes from anyone: a program whose
bytecode reads may still use a value before defining it, as another type than it was defined
with, or carry attributes that make no sense for its operands. The reader's fuzzers (fuzz/) stop
at reading; here fuzz/mutate_compile.cc (build/tools/jaxmlx-mutate-compile) changes real jax
programs (tests/reader/programs.py) in random places, compiles each as PJRT_Client_Compile does
and runs those that compile. The tool's process must live to print its summary: a crash, an
abort or a hang in the verifier, the passes, a lowering rule or MLX fails the test, and its last
lines name the case (`--seed S --only-iteration I FILE` reproduces it).
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent


def _tool() -> pathlib.Path:
  env = os.environ.get("JAXMLX_MUTATE_TOOL")
  return pathlib.Path(env) if env else REPO / "build" / "tools" / "jaxmlx-mutate-compile"


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> pathlib.Path:
  """Every program of tests/reader/programs.py as a portable artifact of one StableHLO version."""
  out = tmp_path_factory.mktemp("programs")
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  subprocess.run([sys.executable, str(REPO / "tests" / "reader" / "programs.py"), str(out),
                  "--targets", "1.0.0"], check=True, env=env, capture_output=True, timeout=600)
  files = list(out.glob("*.mlirbc"))
  assert len(files) > 100, f"programs.py wrote {len(files)} artifacts"
  return out


def _mutate_compile(*args: str) -> tuple[int, int, int, int]:
  """Runs the tool; asserts it lived and every refusal is a coded Status. Returns its counts:
  (cases, refused at compile time, compiled, run)."""
  tool = _tool()
  assert tool.exists(), f"{tool} is not built (make build)"
  env = dict(os.environ, JAXMLX_MEMORY_LIMIT="2GiB")  # a changed dim may ask for terabytes
  proc = subprocess.run([str(tool), *args], capture_output=True, text=True, timeout=1200, env=env)
  tail = "\n".join(proc.stderr.splitlines()[-6:])
  assert proc.returncode == 0, f"exit {proc.returncode}; the last cases:\n{tail}"
  summary = re.search(r"(\d+) cases: (\d+) refused at compile time, (\d+) compiled, (\d+) run",
                      proc.stdout)
  assert summary, proc.stdout
  cases, refused, compiled, ran = map(int, summary.groups())
  # Every refusal is a Status with a code, as PJRT returns it.
  refusals = [ln for ln in proc.stderr.splitlines() if ln.startswith("  refused: ")]
  assert len(refusals) == refused
  assert all(re.match(r"  refused: [A-Z_]+: ", ln) for ln in refusals), refusals[:3]
  return cases, refused, compiled, ran


def test_changed_programs_are_refused_or_run_never_crash(programs):
  # Eight change sets per program (~2,500 cases, seconds); the tool takes more iterations and
  # other seeds for a longer search.
  cases, refused, compiled, ran = _mutate_compile("--iterations", "8", "--seed", "1",
                                                  str(programs))
  # The changes must reach every stage: some programs refused, some compiled and run.
  assert cases > 1000 and refused > 0 and compiled > 0 and ran > 0


# Cases longer searches found crashing (`jaxmlx-mutate-compile --seed S /tmp/progs`), each
# its own reproducer: (artifact, seed, iteration) and what it did before its fix.
FOUND = [
    # operand 1 of a sort replaced by a value of another shape: the sorting network padded a
    # rank-0 array along its "last" dim (segfault).
    ("sort_argsort_bf16.1_0_0.pjrt.mlirbc", 1194, 1),
    # a convolution's padding typed tensor<2^40x2xi64>: the cost analysis, counted before the
    # verifier, expanded it (out of memory).
    ("conv2d_rhs_dilation.1_0_0.pjrt.mlirbc", 1125, 2),
]


@pytest.mark.parametrize("name, seed, iteration", FOUND, ids=[f[0].split(".")[0] for f in FOUND])
def test_cases_found_by_longer_searches(programs, name, seed, iteration):
  cases, refused, _, _ = _mutate_compile("--iterations", str(iteration + 1), "--seed", str(seed),
                                         "--only-iteration", str(iteration),
                                         str(programs / name))
  assert cases == 1 and refused == 1


# StableHLO's own test module, one func per op form (../shared/testdata beside the checkout, or
# $JAXMLX_TESTDATA): every public func compiled as the program, as it is and changed.
TESTDATA = pathlib.Path(os.environ.get("JAXMLX_TESTDATA", REPO.parent / "shared" / "testdata"))


def test_every_stablehlo_op_form_as_it_is_and_changed_is_refused_or_runs():
  def version(path):  # stablehlo_legalize_to_vhlo.1_20_0.mlir.bc -> (1, 20, 0)
    return tuple(int(n) for n in path.name.split(".")[1].split("_"))
  files = sorted((TESTDATA / "vhlo").glob("stablehlo_legalize_to_vhlo.*.mlir.bc"), key=version)
  if not files:
    pytest.skip(f"no StableHLO test modules under {TESTDATA / 'vhlo'}")
  cases, refused, compiled, ran = _mutate_compile("--each-func", "--iterations", "3", "--seed",
                                                  "1", str(files[-1]))
  assert cases > 500 and refused > 0 and compiled > 100 and ran > 100
