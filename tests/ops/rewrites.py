"""Which rewrites a compile makes, seen on jax's own program: jit(fn) serialized as jaxlib hands it
to a plugin, read and rewritten by `jaxmlx-dump --passes=gpu` (passes/pipeline.h), printed as our
IR. Tests that need the tool skip where it is not built (set JAXMLX_DUMP to point at one)."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile

import jax
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def dump_tool() -> str:
  return os.environ.get("JAXMLX_DUMP") or os.path.join(REPO, "build", "tools", "jaxmlx-dump")


def rewritten(fn, *args) -> str:
  """Our IR of jit(fn) after a GPU compile's rewrites, read from jax's own serialized program."""
  if not os.path.exists(dump_tool()):
    pytest.skip(f"jaxmlx-dump not built at {dump_tool()} (set JAXMLX_DUMP)")
  from jax._src.interpreters import mlir as mlir_interp
  from jax._src.lib import _jax
  from jaxlib.mlir.dialects import stablehlo
  module = jax.jit(fn).trace(*args).lower().compiler_ir("stablehlo")
  data = _jax.mlir.serialize_portable_artifact(mlir_interp.module_to_bytecode(module),
                                               stablehlo.get_current_version())
  with tempfile.NamedTemporaryFile(suffix=".mlirbc", delete=False) as f:
    f.write(data)
  try:
    proc = subprocess.run([dump_tool(), f.name, "--passes=gpu"], capture_output=True, text=True,
                          env={**os.environ, "JAXMLX_RECOGNIZE": "1", "JAXMLX_FAST_KERNELS": ""})
  finally:
    os.unlink(f.name)
  assert proc.returncode == 0, proc.stderr
  return proc.stdout


def calls(text: str) -> dict[str, int]:
  """How many custom calls of each of our own targets (jaxmlx.*) the printed IR holds."""
  found: dict[str, int] = {}
  for name in re.findall(r'call_target_name = "(jaxmlx\.[a-z_]+)"', text):
    found[name] = found.get(name, 0) + 1
  return found
