"""pytest setup for the op tests: 64-bit types need jax_enable_x64.

Enabled per test (autouse fixture), not with jax.config.update at import: conftest files are
imported while collecting the whole suite, so a global update would switch every other test
(programs whose jnp defaults would become float64) to x64 too.
"""

import jax
import pytest


@pytest.fixture(autouse=True)
def _enable_x64():
  with jax.enable_x64(True):
    yield
