"""Our reader against jaxlib's own deserializer, on real JAX programs at several StableHLO targets.

Every program of programs.PROGRAMS is lowered once, serialized for each target of
programs.TARGETS the way jaxlib does before PJRT compile, and handed to compare.compare(data),
which parses it with our reader and with jaxlib and raises on any difference. A program that
jaxlib itself cannot express at a target (e.g. f8 types before they existed) is skipped there.

Matrix (env JAXMLX_READER_MATRIX): default: every program at the minimum and current targets
(bytecode v0 and v6) plus one middle target in rotation, and every 4th program once more through
the plain StableHLO serializer; "full": every program at every target; "quick": every 4th program
at the minimum and current targets.
Run: JAXMLX_DUMP=build-g/tools/jaxmlx-dump .venv/bin/python -m pytest tests/reader/test_jax_programs.py -q
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import programs  # noqa: E402

compare_mod = pytest.importorskip("compare", reason="tests/reader/compare.py not present")


@pytest.fixture(autouse=True, scope="module")
def _require_dump_tool():
  if not compare_mod.dump_tool().exists():
    pytest.skip(f"jaxmlx-dump not built at {compare_mod.dump_tool()} (set JAXMLX_DUMP)")


MATRIX = os.environ.get("JAXMLX_READER_MATRIX", "default")
_ENDS = (programs.MIN_VERSION, programs.CURRENT_VERSION)
_MIDDLE = [t for t in programs.TARGETS if t not in _ENDS]


def _targets(index: int) -> tuple[str, ...]:
  if MATRIX == "full":
    return programs.TARGETS
  if MATRIX == "quick" or not _MIDDLE:
    return _ENDS
  return _ENDS + (_MIDDLE[index % len(_MIDDLE)],)


def _names() -> list[str]:
  names = list(programs.PROGRAMS)
  return names[::4] if MATRIX == "quick" else names


def _cases():
  for i, name in enumerate(_names()):
    for target in _targets(i):
      yield pytest.param(name, target, "pjrt", id=f"{name}@{target}")
  # The plain StableHLO serializer keeps FileLineColRange locations, which the PJRT path drops
  # below 1.9.0: one more flavor of location encoding at a v6 bytecode target.
  if MATRIX != "quick":
    for name in _names()[::4]:
      yield pytest.param(name, "1.0.0", "stablehlo", id=f"{name}@1.0.0-stablehlo")


def _artifact(name: str, target: str, flavor: str) -> bytes:
  try:
    return programs.artifact(name, target, flavor)
  except Exception as e:  # noqa: BLE001 - jaxlib refuses; not a reader question
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    pytest.skip(f"jaxlib cannot serialize {name} for {target}: {first[:160]}")


@pytest.mark.parametrize("name,target,flavor", list(_cases()))
def test_program_matches_jaxlib(name, target, flavor):
  compare_mod.compare(_artifact(name, target, flavor))


def test_artifact_count():
  """The matrix really holds 200+ artifacts that jaxlib can produce."""
  ok = 0
  for i, name in enumerate(_names()):
    for target in _targets(i):
      try:
        programs.artifact(name, target)
        ok += 1
      except Exception:  # noqa: BLE001
        pass
  assert ok >= (50 if MATRIX == "quick" else 200), ok


def _walk(ops):
  for op in ops:
    yield op
    for region in op.get("regions", []):
      for block in region:
        yield from _walk(block["ops"])


@pytest.mark.parametrize("target,flavor", [(programs.MIN_VERSION, "pjrt"),
                                           (programs.CURRENT_VERSION, "pjrt"),
                                           ("1.0.0", "stablehlo")])
def test_source_location_names_this_line(target, flavor):
  """The cosine of programs.location_marker_program points at its line in programs.py."""
  data = programs.artifact("location_marker", target, flavor)
  assert b"programs.py" in data  # jax kept the traceback and the serializer kept it
  ours = compare_mod.normalized_from_ours(data)
  main = next(f for f in ours["funcs"] if f["name"] == "main")
  ops = [op for block in main["body"] for op in _walk(block["ops"])]
  cosines = [op for op in ops if op["name"] == "stablehlo.cosine"]
  assert len(cosines) == 1, [op["name"] for op in ops]
  loc = cosines[0]["loc"]
  file, line, _col = loc.rsplit(":", 2)
  assert file.endswith("tests/reader/programs.py"), loc
  assert int(line) == programs.marker_line(), (loc, programs.marker_line())
