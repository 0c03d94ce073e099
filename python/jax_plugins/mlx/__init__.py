"""jax-mlx: a PJRT plugin that runs JAX programs on MLX.

jax imports this module (it lives in the `jax_plugins` namespace package) and calls
`initialize()`, which registers the platform: `metal` on macOS, `mlx` elsewhere. Priority -1 keeps
jax's CPU backend the default when JAX_PLATFORMS is unset.
"""

from __future__ import annotations

import os
import pathlib
import sys

PLATFORM_NAME = "metal" if sys.platform == "darwin" else "mlx"
_LIBRARY_NAME = "libjax_mlx_pjrt.so"


def library_path() -> pathlib.Path:
  """The plugin's shared library: $JAX_MLX_LIBRARY_PATH, else the one beside this file."""
  override = os.environ.get("JAX_MLX_LIBRARY_PATH")
  if override:
    return pathlib.Path(override)
  return pathlib.Path(__file__).resolve().parent / _LIBRARY_NAME


def initialize() -> None:
  path = library_path()
  if not path.exists():
    raise FileNotFoundError(
        f"jax-mlx: plugin library not found at {path}; build it with `make build` "
        "or set JAX_MLX_LIBRARY_PATH")
  # Must be set before jaxlib creates the client: lets jaxlib accept our PJRT minor version.
  os.environ.setdefault("ENABLE_PJRT_COMPATIBILITY", "1")
  # The XLA:CPU whose results the plugin reproduces where versions differ (see
  # src/passes/xla_cpu_version.h): the installed jaxlib's.
  try:
    import jaxlib.version
    os.environ.setdefault("JAXMLX_XLA_CPU_VERSION", jaxlib.version.__version__)
  except ImportError:
    pass
  from jax._src import xla_bridge

  xla_bridge.register_plugin(PLATFORM_NAME, priority=-1, library_path=str(path))
  _register_donation()
  from jax_plugins.mlx import callbacks  # debug.print, pure/io_callback: our custom call
  callbacks.register(PLATFORM_NAME, str(path))
  from jax_plugins.mlx import linalg_rules  # eigh, svd, eig, lu: our own custom calls
  linalg_rules.register(PLATFORM_NAME)


def _register_donation() -> None:
  # jax only honours donate_argnums on platforms in this list.
  try:
    from jax._src.interpreters import mlir
  except ImportError:
    return
  platforms = getattr(mlir, "_platforms_with_donation", None)
  if platforms is not None and PLATFORM_NAME not in platforms:
    platforms.append(PLATFORM_NAME)
