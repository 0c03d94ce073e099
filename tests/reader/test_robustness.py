"""Hostile input through the dump tool: truncated and corrupted artifacts end in a clean error.

jaxmlx-dump exits 0 (read and verified) or 1 with a "CODE: message" first line on stderr; anything
else (a signal, a sanitizer report, exit 2) is a reader bug. A sample only, to stay fast: the C++
test fuzz/reader_robustness_test.cc covers thousands of cases in-process, and the libFuzzer
targets (scripts/fuzz_reader.sh) search further.
"""

from __future__ import annotations

import os
import pathlib
import random
import re
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

compare = pytest.importorskip("compare", reason="tests/reader/compare.py not present")

TESTDATA = pathlib.Path(os.environ.get(
    "JAXMLX_TESTDATA", pathlib.Path(__file__).resolve().parents[3] / "shared" / "testdata"))
SEED_FILES = ["jax-0.11.2/mlp_current.mlirbc", "jax-0.11.2/mlp_minimum.mlirbc",
              "vhlo/stablehlo_legalize_to_vhlo.0_9_0.mlir.bc",
              "vhlo/stablehlo_legalize_to_vhlo.1_16_0.mlir.bc"]
_CLEAN = re.compile(r"^(INVALID_ARGUMENT|UNIMPLEMENTED|OUT_OF_RANGE|DATA_LOSS|FAILED_PRECONDITION"
                    r"|RESOURCE_EXHAUSTED|NOT_FOUND): \S")


@pytest.fixture(scope="module")
def tool():
  path = compare.dump_tool()
  if not path.exists():
    pytest.skip(f"jaxmlx-dump not built at {path} (set JAXMLX_DUMP)")
  return path


def _seeds() -> list[tuple[str, bytes]]:
  out = [(f, (TESTDATA / f).read_bytes()) for f in SEED_FILES if (TESTDATA / f).exists()]
  if not out:
    pytest.skip(f"no testdata under {TESTDATA}")
  return out


def _cases():
  """(id, bytes): sampled prefixes and seeded corruptions of each seed file."""
  rng = random.Random(20261130)
  for name, data in _seeds():
    short = pathlib.Path(name).name
    step = max(1, len(data) // 12)
    for n in range(0, len(data), step):
      yield f"{short}[:{n}]", data[:n]
    for trial in range(25):
      buf = bytearray(data)
      for _ in range(rng.randint(1, 4)):
        pos = rng.randrange(len(buf))
        buf[pos] = rng.choice([buf[pos] ^ (1 << rng.randrange(8)), rng.randrange(256), 0, 0xFF])
      yield f"{short}~{trial}", bytes(buf)
    # Structural edits: a chunk duplicated, a chunk removed, a huge varint spliced in.
    mid = len(data) // 2
    yield f"{short}+dup", data[:mid] + data[mid - 64:]
    yield f"{short}-cut", data[:mid] + data[mid + 64:]
    yield f"{short}+varint", data[:mid] + b"\x00" + b"\xff" * 8 + data[mid:]


def test_corrupted_artifacts_fail_cleanly(tool, tmp_path):
  failures = []
  results = {"ok": 0, "error": 0}
  for case_id, data in _cases():
    path = tmp_path / "case.mlirbc"
    path.write_bytes(data)
    try:
      proc = subprocess.run([str(tool), str(path), "--locations"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, timeout=30)
    except subprocess.TimeoutExpired:
      failures.append(f"{case_id}: timeout")
      (tmp_path / f"timeout-{len(failures)}.mlirbc").write_bytes(data)
      continue
    if proc.returncode == 0:
      results["ok"] += 1
      continue
    err = proc.stderr.decode("utf-8", "replace").strip()
    first = err.splitlines()[0] if err else ""
    if proc.returncode == 1 and _CLEAN.match(first):
      results["error"] += 1
      continue
    keep = tmp_path / f"bad-{len(failures)}.mlirbc"
    keep.write_bytes(data)
    failures.append(f"{case_id}: exit {proc.returncode}: {err[-300:]} (saved {keep})")
  assert not failures, "\n".join(failures)
  assert results["error"] > results["ok"], results


def test_empty_and_tiny_inputs(tool, tmp_path):
  for i, data in enumerate([b"", b"ML", b"ML\xefR", b"ML\xefR\x00", b"ML\xefR\x0d", b"\x00" * 64,
                            b"ML\xefR\x0dStableHLO_v1.0.0\x00", b"ML\xefR\x0d" + b"\xff" * 32]):
    path = tmp_path / f"tiny{i}.mlirbc"
    path.write_bytes(data)
    proc = subprocess.run([str(tool), str(path)], capture_output=True, timeout=30)
    err = proc.stderr.decode("utf-8", "replace").strip()
    assert proc.returncode == 1, (data, proc.returncode, err)
    assert _CLEAN.match(err.splitlines()[0]), (data, err)
