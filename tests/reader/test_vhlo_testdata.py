"""Our VHLO reader against jaxlib on the shared portable-artifact corpus.

For every ../shared/testdata/vhlo/*.mlir.bc (one big module per StableHLO version 0.9.0..1.20.0)
and the jax-0.11.2 .mlirbc files:
  * our reader parses it and the IR verifies (jaxmlx-dump exits 0);
  * where jaxlib's StableHLO can read the version, compare.compare() finds no difference;
    newer artifacts are marked xfail-free skips naming the jaxlib needed (run this file with
    jaxlib 0.11.2, StableHLO 1.20.0, to compare them too);
  * invalid_vhlo_future.mlir.bc is refused with the version message.

Run: JAXMLX_DUMP=build-r2/tools/jaxmlx-dump .venv/bin/python -m pytest tests/reader -q
"""

from __future__ import annotations

import os
import pathlib

import pytest

import compare

# ../shared/testdata beside the checkout, or $JAXMLX_TESTDATA (e.g. a copy on another machine).
TESTDATA = pathlib.Path(os.environ.get(
    "JAXMLX_TESTDATA", pathlib.Path(__file__).resolve().parents[2].parent / "shared" / "testdata"))
VHLO_DIR = TESTDATA / "vhlo"
JAX_DIR = TESTDATA / "jax-0.11.2"
FUTURE = "invalid_vhlo_future.mlir.bc"


def _files() -> list[pathlib.Path]:
    if not TESTDATA.is_dir():
        return []
    files = sorted(VHLO_DIR.glob("*.mlir.bc")) + sorted(JAX_DIR.glob("*.mlirbc"))
    return [f for f in files if f.name != FUTURE]


@pytest.fixture(autouse=True, scope="module")
def _require_inputs():
    if not TESTDATA.is_dir():
        pytest.skip(f"shared testdata not found at {TESTDATA}")
    if not compare.dump_tool().exists():
        pytest.skip(f"jaxmlx-dump not built at {compare.dump_tool()} (set JAXMLX_DUMP)")


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.name)
def test_reads_and_verifies(path: pathlib.Path):
    proc = compare.run_dump(path)
    assert proc.returncode == 0, proc.stderr
    assert "func.func" in proc.stdout


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.name)
def test_matches_jaxlib(path: pathlib.Path):
    data = path.read_bytes()
    if not compare.jaxlib_can_read(data):
        version = ".".join(map(str, compare.artifact_version(data) or ()))
        pytest.skip(f"artifact targets StableHLO {version}; this jaxlib reads up to "
                    f"{'.'.join(map(str, compare.jaxlib_version()))}: compare with jaxlib 0.11.2")
    compare.compare(data)


def test_future_version_refused():
    path = VHLO_DIR / FUTURE
    if not path.exists():
        pytest.skip(f"{path} not found")
    proc = compare.run_dump(path)
    assert proc.returncode == 1
    assert proc.stderr.strip() == ("INVALID_ARGUMENT: portable artifact targets StableHLO 2.0.0; "
                                   "this plugin reads up to 1.20.0")


def test_compare_detects_a_difference():
    """compare() must fail when the two readings differ (guards against a vacuous comparison)."""
    path = VHLO_DIR / "stablehlo_legalize_to_vhlo.1_0_0.mlir.bc"
    if not path.exists():
        pytest.skip(f"{path} not found")
    data = path.read_bytes()
    ours = compare.normalized_from_ours(data)
    theirs = compare.normalized_from_jaxlib(data)
    assert ours == theirs
    op = next(o for f in ours["funcs"] for b in f["body"] for o in b["ops"] if o["attrs"])
    name = next(iter(op["attrs"]))
    op["attrs"][name] = ["str", "tampered"]
    assert ours != theirs
    assert "tampered" in "\n".join(compare._describe_paths(ours, theirs))


_SDY_MODULE = """
sdy.mesh @mesh = <["x"=1]>
func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %arg0, %arg0 : tensor<4xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{"x"}]> : tensor<4xf32>
  return %1 : tensor<4xf32>
}
"""


def test_other_dialect_ops_kept_generic():
    """sdy ops in a VHLO artifact become generic ops; identity casts around them fold away."""
    jax_mlir = pytest.importorskip("jax._src.interpreters.mlir")
    ir, stablehlo = compare._mlir()
    with jax_mlir.make_ir_context():
        module = ir.Module.parse(_SDY_MODULE)
        data = stablehlo.serialize_portable_artifact(module, "1.17.0", True)
    ours = compare.normalized_from_ours(data)
    ops = [o["name"] for o in ours["funcs"][0]["body"][0]["ops"]]
    assert ops == ["stablehlo.add", "sdy.sharding_constraint", "func.return"]
    assert ours["other_ops"][0]["name"] == "sdy.mesh"
    assert ours["other_ops"][0]["attrs"]["sym_name"] == ["str", "mesh"]
    compare.compare(data)
