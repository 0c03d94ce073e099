"""Float tolerances (rtol, atol) per dtype for results compared against jax's CPU backend.

One place for all of them; a test that needs a looser bound passes rtol/atol explicitly and says
why. Integers, bools and bit patterns are always compared exactly.
"""

from __future__ import annotations

import numpy as np

_BY_NAME = {
    "float32": (2e-6, 1e-6),    # a few ULP: MLX and XLA use different transcendental kernels
    "complex64": (2e-6, 1e-6),
    "float16": (2e-3, 1e-3),    # ~2 ULP
    "bfloat16": (1.6e-2, 1e-2),  # ~2 ULP
    "float64": (1e-12, 1e-12),
}


def tolerance_for(dtype) -> tuple[float, float]:
  return _BY_NAME.get(np.dtype(dtype).name, (2e-6, 1e-6))
