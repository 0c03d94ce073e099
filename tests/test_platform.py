"""The plugin registers as platform `mlx`, at low priority, with one device and one memory."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
  full_env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
  full_env.update(env)
  return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        env=full_env, timeout=300)


def test_jax_platforms_mlx_lists_our_device():
  r = _run("import jax; d = jax.devices(); print(d[0].platform); print(d[0].device_kind)",
           JAX_PLATFORMS="mlx")
  assert r.returncode == 0, r.stderr
  platform, kind = r.stdout.strip().splitlines()[-2:]
  assert platform == "mlx"
  # device_kind says what it really is: MLX's CPU, or the GPU's own name (an H200 on MLX's CUDA
  # backend, an Apple chip on Metal), as jax's own GPU plugins report it.
  import mlx.core as mx
  if mx.is_available(mx.gpu):
    assert kind and kind != "MLX cpu", r.stdout
  else:
    assert kind == "MLX cpu", r.stdout


def test_cpu_stays_default_without_jax_platforms():
  # Priority -1: jax's own default (cpu here; cuda where jax's CUDA plugin is installed) wins.
  r = _run("import jax; print(jax.devices()[0].platform); print(jax.devices('mlx')[0].platform)")
  assert r.returncode == 0, r.stderr
  default, ours = r.stdout.split()
  assert default != "mlx" and ours == "mlx"
  assert default in ("cpu", "cuda", "gpu", "rocm", "tpu")


def test_one_device_with_one_device_memory(mlx_device):
  import jax

  assert len(jax.devices("mlx")) == 1
  assert mlx_device.id == 0
  assert mlx_device.process_index == 0
  memories = mlx_device.addressable_memories()
  assert [m.kind for m in memories] == ["device"]
  assert mlx_device.default_memory().kind == "device"
  assert "mlx" in repr(mlx_device).lower()  # MlxDevice(...); kind is the GPU's name on GPUs


def test_buffer_reports_its_memory_and_device(mlx_device):
  import jax
  import numpy as np

  x = jax.device_put(np.arange(6, dtype=np.float32), mlx_device)
  assert x.devices() == {mlx_device}
  assert x.sharding.memory_kind == "device"
  assert x.addressable_shards[0].data.shape == (6,)


def test_stablehlo_version_attribute():
  from jax._src import xla_bridge

  backend = xla_bridge.get_backend("mlx")
  # jaxlib reads the plugin attribute into the backend; jax targets min(ours, its own).
  assert tuple(getattr(backend, "stablehlo_current_version")) == (1, 20, 0)
