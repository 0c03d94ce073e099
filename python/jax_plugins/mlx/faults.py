"""Fault injection for tests: make a chosen program run, device allocation or host callback fail.

The spec grammar (docs/errors.md, src/base/fault_injection.h) is the one of JAXMLX_FAULT:
comma-separated entries `point:N` (the N-th event at that point, counted from when the spec was
set, fails) or `point:N+` (it and every later one), point being `execute`, `alloc`, `callback`
or `kernel`.

    from jax_plugins.mlx import faults
    with faults.injected("execute:1"):
      y = f(x)              # returns at once; the run then fails on the device
    y.block_until_ready()   # raises the run's error

JAXMLX_FAULT itself is read when the client starts; `set_fault` replaces it at run time.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools

from jax_plugins.mlx import library_path


@functools.lru_cache(maxsize=1)
def _setter():
  # dlopen of the path jaxlib loaded returns that same library (and its fault state).
  lib = ctypes.CDLL(str(library_path()))
  try:
    fn = lib.jaxmlx_set_fault
  except AttributeError as e:
    raise NotImplementedError(
        f"jax-mlx: the plugin library {library_path()} has no fault injection") from e
  fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64]
  fn.restype = ctypes.c_int32
  return fn


def set_fault(spec: str | None) -> None:
  """Installs `spec`, restarting its counts; None or "" turns injection off.

  Raises ValueError, naming the text, when the spec does not parse (the previous one stays).
  """
  error = ctypes.create_string_buffer(512)
  if _setter()((spec or "").encode(), error, len(error)) != 0:
    raise ValueError(error.value.decode("utf-8", "replace"))


@contextlib.contextmanager
def injected(spec: str):
  """Installs `spec` for the duration of the block, then turns injection off."""
  set_fault(spec)
  try:
    yield
  finally:
    set_fault(None)
