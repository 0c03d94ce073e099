"""Host callbacks on the mlx platform: jax.debug.print, jax.debug.callback, jax.pure_callback,
jax.experimental.io_callback, and checkify's check left in a jitted program.

jax lowers these through `emit_python_callback`, which supports only cpu, cuda, rocm and tpu.
`register()` adds lowering rules for our platform that emit

    stablehlo.custom_call @jaxmlx.host_callback(%token?, %args...) {backend_config = "<id>"}

where <id> names a `_Callback` in this module's registry. The plugin (src/lower/host_callback.cc)
runs that custom call by handing the operands' bytes to `_trampoline` (installed once through
the library's `jaxmlx_set_host_callback_handler`), which calls the Python function and writes its
results into buffers the plugin preallocated. Ordered effects (io_callback(ordered=True), ordered
debug callbacks) thread a token through the custom call, as jax does for CPU.

Lifetime: the lowering's keepalive list, i.e. the compiled executable, holds an `_Owner` of each
`_Callback`; the registry holds the callbacks. When the executable is freed its callbacks leave
the registry once no run that may call one is queued or running (the plugin's
`jaxmlx_host_callbacks_running`): a run queued before the free still finds its function
(`jax.jit(jax.jit(f))(x)` frees the outer executable as soon as the call returns, before its
queued run has printed).
The trampoline runs on the plugin's device worker thread and takes the GIL only while it runs;
a callback must not wait for results computed on the mlx device (that worker is running it).
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import itertools
import threading
import time
import weakref

import numpy as np

from jax._src import config
from jax._src import core
from jax._src import dtypes
from jax._src.interpreters import mlir
from jax._src.lib.mlir.dialects import hlo

TARGET = "jaxmlx.host_callback"

_library_path: str | None = None
_handler_installed = False
_install_lock = threading.Lock()
_ids = itertools.count(1)
_registry: dict[int, "_Callback"] = {}
_orphans: set[int] = set()  # ids whose executable was freed, dropped at the next quiet moment
_running = None  # the plugin's jaxmlx_host_callbacks_running, once the handler is installed


class _HostBuffer(ctypes.Structure):
  # Mirrors JaxmlxHostBuffer in src/lower/host_callback.h.
  _fields_ = [("data", ctypes.c_void_p), ("nbytes", ctypes.c_int64),
              ("dtype", ctypes.c_char_p), ("dims", ctypes.POINTER(ctypes.c_int64)),
              ("rank", ctypes.c_int64)]


_HANDLER = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_uint64, ctypes.POINTER(_HostBuffer),
                            ctypes.c_int64, ctypes.POINTER(_HostBuffer), ctypes.c_int64,
                            ctypes.c_void_p, ctypes.c_int64)


class _Spec:
  """What one operand or result of a callback is: shape, numpy dtype, IR element type name."""
  __slots__ = ("shape", "dtype", "ir_name")

  def __init__(self, ctx, aval):
    if not core.is_constant_shape(aval.shape):
      raise NotImplementedError("jax-mlx: host callbacks with dynamic shapes are not supported")
    self.shape = tuple(aval.shape)
    self.dtype = np.dtype(aval.dtype)
    self.ir_name = str(mlir.aval_to_ir_type(ctx.module_context, aval).element_type)


class _Callback:
  """One callback site: the function to call and the types it takes and returns."""
  __slots__ = ("id", "fn", "what", "args", "results", "x64")

  def __init__(self, fn, what, args, results):
    self.id = next(_ids)
    self.fn, self.what, self.args, self.results = fn, what, args, results
    # jax_enable_x64 may be a thread-local setting of the lowering thread; the callback runs on
    # the plugin's worker thread, under the setting its types were lowered with.
    self.x64 = bool(config.enable_x64.value)
    _prune()
    _registry[self.id] = self


class _Owner:
  """What the compiled executable keeps alive for one `_Callback` (see Lifetime above)."""
  __slots__ = ("entry", "__weakref__")

  def __init__(self, entry):
    self.entry = entry
    weakref.finalize(self, _orphan, entry.id).atexit = False  # nothing to drop at exit


def _orphan(callback_id):
  _orphans.add(callback_id)
  _prune()


def _prune():
  """Drops the callbacks of freed executables when no run that may call them is pending."""
  if not _orphans or (_running is not None and _running() > 0):
    return
  for i in list(_orphans):
    _registry.pop(i, None)
    _orphans.discard(i)


def _check_buffer(buf, spec, which):
  dims = tuple(buf.dims[i] for i in range(buf.rank))
  if buf.dtype.decode() != spec.ir_name or dims != spec.shape:
    raise RuntimeError(f"{which} is {buf.dtype.decode()}{list(dims)}, expected "
                       f"{spec.ir_name}{list(spec.shape)}")
  if buf.nbytes != int(np.prod(spec.shape, dtype=np.int64)) * spec.dtype.itemsize:
    raise RuntimeError(f"{which} has {buf.nbytes} bytes for {spec.dtype}{list(spec.shape)}")


def _read(buf, spec):
  raw = ctypes.string_at(buf.data, buf.nbytes) if buf.nbytes else b""
  return np.frombuffer(raw, dtype=spec.dtype).reshape(spec.shape).copy()


def _run(entry, args, num_args, results, num_results):
  if num_args != len(entry.args) or num_results != len(entry.results):
    raise RuntimeError(f"the program passes {num_args} operands and {num_results} results; "
                       f"the callback takes {len(entry.args)} and returns {len(entry.results)}")
  values = []
  for i, spec in enumerate(entry.args):
    _check_buffer(args[i], spec, f"operand #{i}")
    values.append(_read(args[i], spec))
  outs = entry.fn(*values)
  outs = () if outs is None else tuple(outs)
  if len(outs) != len(entry.results):
    raise RuntimeError(f"Mismatched number of outputs from callback. Expected: "
                       f"{len(entry.results)}, Actual: {len(outs)}")
  for i, (out, spec) in enumerate(zip(outs, entry.results)):
    out = dtypes.canonicalize_value(np.asarray(out))
    if out.shape != spec.shape:
      raise RuntimeError(f"Incorrect output shape for return value #{i}: "
                         f"Expected: {spec.shape}, Actual: {out.shape}")
    if out.dtype != spec.dtype:
      raise RuntimeError(f"Incorrect output dtype for return value #{i}: "
                         f"Expected: {spec.dtype}, Actual: {out.dtype}")
    _check_buffer(results[i], spec, f"result #{i}")
    out = np.ascontiguousarray(out)
    if out.nbytes:
      ctypes.memmove(results[i].data, out.ctypes.data, out.nbytes)


def _trampoline(callback_id, args, num_args, results, num_results, error, capacity):
  # Runs on the plugin's worker thread; ctypes holds the GIL for us. Nothing may escape: an
  # exception leaving a ctypes callback would be printed and read as success.
  what = f"host callback #{callback_id}"
  try:
    entry = _registry.get(callback_id)
    if entry is None:
      raise RuntimeError("its Python function is no longer alive (the executable that "
                         "called it was freed)")
    what = entry.what
    with config.enable_x64(entry.x64):
      _run(entry, args, num_args, results, num_results)
    return 0
  except BaseException as e:  # noqa: BLE001 (reported to the plugin, which fails the run)
    try:
      message = f"{what} failed: {type(e).__name__}: {e}".encode("utf-8", "replace")
      message = message[:max(capacity - 1, 0)]
      ctypes.memmove(error, message, len(message))
      ctypes.memset(error + len(message), 0, 1)
    except BaseException:  # noqa: BLE001
      pass
    return 1


_trampoline_fn = _HANDLER(_trampoline)  # lives as long as the process: the plugin keeps it


def _install_handler():
  global _handler_installed, _running
  with _install_lock:
    if _handler_installed:
      return
    # dlopen of the loaded plugin's path returns the library jaxlib already loaded.
    lib = ctypes.CDLL(_library_path)
    try:
      setter = lib.jaxmlx_set_host_callback_handler
    except AttributeError as e:
      raise NotImplementedError(
          f"jax-mlx: the plugin library {_library_path} has no host-callback support") from e
    setter.argtypes = [_HANDLER]
    setter.restype = None
    setter(_trampoline_fn)
    _handler_installed = True
    running = getattr(lib, "jaxmlx_host_callbacks_running", None)
    if running is not None:
      running.restype = ctypes.c_int32
      _running = running
      atexit.register(_drain_at_exit, running)


def _drain_at_exit(running, timeout_s=30.0):
  # A callback still in flight when Python finalizes would be cut off inside the plugin's worker
  # (an abort): give those calls the GIL until they return.
  deadline = time.monotonic() + timeout_s
  while running() > 0 and time.monotonic() < deadline:
    time.sleep(0.001)


def _function_name(fn):
  # jax wraps the user's function (debug.callback's _flat_callback closure, pure_callback's
  # _FlatCallback); find it so that errors name it.
  for _ in range(4):
    inner = getattr(fn, "callback_func", None)
    code, cells = getattr(fn, "__code__", None), getattr(fn, "__closure__", None)
    if inner is None and code is not None and cells and "callback" in code.co_freevars:
      inner = cells[code.co_freevars.index("callback")].cell_contents
    if inner is None or not callable(inner):
      break
    fn = inner
  while isinstance(fn, functools.partial):
    fn = fn.func
  return getattr(fn, "__qualname__", None) or repr(fn)


def _emit(ctx, fn, what, token, operands, *, has_side_effect):
  """Emits the custom call; returns (results, token out or None)."""
  if len(ctx.module_context.platforms) > 1:
    raise NotImplementedError("jax-mlx: host callbacks in a multi-platform lowering")
  _install_handler()
  entry = _Callback(fn, what, [_Spec(ctx, a) for a in ctx.avals_in],
                    [_Spec(ctx, a) for a in ctx.avals_out])
  ctx.module_context.add_keepalive(_Owner(entry))
  result_types = [mlir.aval_to_ir_type(ctx.module_context, a) for a in ctx.avals_out]
  operands = list(operands)
  if token is not None:
    result_types, operands = [hlo.TokenType.get(), *result_types], [token, *operands]
  op = mlir.custom_call(TARGET, result_types=result_types, operands=operands,
                        backend_config=str(entry.id), has_side_effect=has_side_effect)
  results = list(op.results)
  if token is not None:
    token, *results = results
  return results, token


def _emit_effect(ctx, fn, what, operands, effect, ordered):
  """A callback with a side effect; ordered ones thread the effect's token."""
  if not ordered:
    return _emit(ctx, fn, what, None, operands, has_side_effect=True)[0]
  results, token = _emit(ctx, fn, what, ctx.tokens_in.get(effect), operands,
                         has_side_effect=True)
  ctx.set_tokens_out(ctx.tokens_in.update_tokens(mlir.TokenSet({effect: token})))
  return results


def _pure_callback_rule(ctx, *args, callback, sharding, **params):
  from jax._src import callback as cb
  del sharding  # one device
  fn = lambda *a: cb.pure_callback_impl(*a, callback=callback, sharding=None, **params)
  what = f"jax.pure_callback {_function_name(callback)!r}"
  return _emit(ctx, fn, what, None, args, has_side_effect=False)[0]


def _io_callback_rule(ctx, *args, callback, sharding, ordered, **params):
  from jax._src import callback as cb
  del sharding
  fn = lambda *a: cb.io_callback_impl(*a, callback=callback, sharding=None, ordered=ordered,
                                      **params)
  effect = cb._OrderedIOEffect if ordered else cb._IOEffect
  what = f"jax.experimental.io_callback {_function_name(callback)!r}"
  return _emit_effect(ctx, fn, what, args, effect, ordered)


def _debug_callback_rule(ctx, *args, callback, effect, partitioned, **params):
  from jax._src import debugging, effects
  fn = lambda *a: debugging.debug_callback_p.impl(*a, callback=callback, effect=effect,
                                                  partitioned=partitioned, **params) or ()
  what = f"jax.debug.callback {_function_name(callback)!r}"
  return _emit_effect(ctx, fn, what, args, effect, effects.ordered_effects.contains(effect))


def _check_rule(ctx, *args, err_tree, debug):
  # jax.experimental.checkify's check left in a jitted program (not functionalized by
  # checkify.checkify): debug_check is a no-op, and with jax_experimental_unsafe_xla_runtime_errors
  # a failed check raises from a host callback and fails the run, as on jax's CPU and GPU
  # backends (their rule is jax's Python callback, which a plugin cannot take).
  from jax._src import checkify, config
  if debug:
    return []
  if not config.xla_runtime_errors.value:
    raise checkify.functionalization_error
  fn = lambda *a: checkify.python_err(err_tree, *a) or ()
  return _emit(ctx, fn, "jax.experimental.checkify.check", None, args, has_side_effect=True)[0]


def _debug_print_rule(ctx, *args, **params):
  from jax._src import debugging
  fn = lambda *a: debugging.debug_print_p.impl(*a, **params) or ()
  ordered = params["ordered"]
  effect = debugging.ordered_debug_effect if ordered else debugging.debug_effect
  what = f"jax.debug.print({params.get('fmt')!r})"
  return _emit_effect(ctx, fn, what, args, effect, ordered)


def register(platform: str, library_path: str) -> None:
  """Registers the callback lowering rules for `platform`, served by the plugin at the path."""
  global _library_path
  _library_path = library_path
  from jax._src import callback as cb
  from jax._src import debugging
  rules = [(getattr(cb, "pure_callback_p", None), _pure_callback_rule),
           (getattr(cb, "io_callback_p", None), _io_callback_rule),
           (getattr(debugging, "debug_callback_p", None), _debug_callback_rule),
           (getattr(debugging, "debug_print_p", None), _debug_print_rule)]
  try:
    from jax._src import checkify
    rules.append((getattr(checkify, "check_p", None), _check_rule))
  except ImportError:  # a jax without checkify
    pass
  for prim, rule in rules:
    if prim is not None:  # debug_print_p is newer than jax 0.4
      mlir.register_lowering(prim, rule, platform=platform, cacheable=False)
