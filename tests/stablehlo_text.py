"""Run a StableHLO program written as text on a backend, for ops jax.lax cannot emit."""

from __future__ import annotations

import jax
import numpy as np


def run_stablehlo(text, platform, *args):
  """Compiles StableHLO text for `platform` through jax's backend client and runs it once.

  For a plugin, jaxlib serializes the parsed module into a portable artifact (VHLO bytecode), so
  the plugin reads exactly what it would read from jax.
  """
  from jax._src import compiler, xla_bridge
  from jax._src.interpreters import mlir
  from jax._src.lib import xla_client as xc
  from jax._src.lib.mlir import ir
  backend = xla_bridge.get_backend(platform)
  with mlir.make_ir_context():
    module = ir.Module.parse(text)
    exe = backend.compile_and_load(module, xc.DeviceList(tuple(backend.devices()[:1])),
                                   compiler.get_compile_options(num_replicas=1, num_partitions=1))
  bufs = [jax.device_put(a, backend.devices()[0]) for a in args]
  return [np.asarray(o) for o in exe.execute(bufs)]


def mlir_type(a) -> str:
  """The MLIR tensor type of a numpy array: tensor<2x3xf32>."""
  names = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64",
           "int32": "i32", "int64": "i64", "int8": "i8", "int16": "i16", "uint8": "ui8",
           "uint32": "ui32", "uint64": "ui64", "uint16": "ui16", "bool": "i1"}
  a = np.asarray(a)
  return "tensor<" + "".join(f"{d}x" for d in a.shape) + names[a.dtype.name] + ">"
