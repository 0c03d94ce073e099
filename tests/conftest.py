"""Shared pytest set-up: the mlx platform next to jax's CPU backend, in one process."""

from __future__ import annotations

import os
import pathlib

# Both backends in one process: tests compare our platform against jax's CPU backend.
os.environ.setdefault("JAX_PLATFORMS", "cpu,mlx")

import pytest  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def pytest_collection_modifyitems(config, items):
  from tests.known_gaps import reason_for

  for item in items:
    reason = reason_for(item.nodeid)
    if reason:
      item.add_marker(pytest.mark.xfail(reason=reason, strict=True))


@pytest.fixture(scope="session")
def mlx_device():
  import jax

  return jax.devices("mlx")[0]


@pytest.fixture(scope="session")
def cpu_device():
  import jax

  return jax.devices("cpu")[0]


# Coverage report (scripts/op_coverage.py): with JAXMLX_OP_LOG=<dir>, the plugin appends each
# compiled program's ops to <dir>/ops-<pid>.log; these hooks put the test id before them and the
# test's outcome after, in the same file, so every op is attributed to the tests that ran it.
_OP_LOG = os.environ.get("JAXMLX_OP_LOG")


def _op_log(line: str) -> None:
  with open(os.path.join(_OP_LOG, f"ops-{os.getpid()}.log"), "a") as f:
    f.write(line + "\n")


def pytest_runtest_setup(item):
  if _OP_LOG:
    _op_log(f"test {item.nodeid}")


def pytest_runtest_logreport(report):
  if not _OP_LOG:
    return
  if report.when == "call" or (report.when == "setup" and not report.passed):
    outcome = "xfailed" if getattr(report, "wasxfail", None) is not None else report.outcome
    _op_log(f"outcome {report.nodeid} {outcome}")


@pytest.fixture
def on_mlx_cpu(mlx_device):
  if mlx_device.device_kind != "MLX cpu":
    pytest.skip(f"a route for MLX's CPU; this is {mlx_device.device_kind}")


@pytest.fixture
def on_mlx_cuda(mlx_device):
  import mlx.core as mx
  if mlx_device.device_kind == "MLX cpu" or not mx.cuda.is_available():
    pytest.skip(f"a route for MLX's CUDA backend; this is {mlx_device.device_kind}")
