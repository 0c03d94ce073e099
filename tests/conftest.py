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
