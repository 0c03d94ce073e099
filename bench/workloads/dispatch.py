"""dispatch: the cost of one tiny call, a jitted `x + 1` on 16 floats, waited for each call.

This is all overhead: the work is 16 additions. Native MLX: an mx.compile'd `x + 1` and mx.eval.
"""

from __future__ import annotations

import numpy as np

from common import Case, JaxProgram, MlxProgram, Size

NAME = "dispatch"


def cases(size: Size) -> list[Case]:
  n = size.batch(16, 16, 16)
  x0 = np.arange(n, dtype=np.float32)

  def make_jax(device):
    import jax
    f = jax.jit(lambda x: x + 1)
    x = jax.device_put(x0, device)
    return JaxProgram(lambda: f(x), lambda out: out)

  def make_mlx():
    import mlx.core as mx
    f = mx.compile(lambda x: x + 1)
    x = mx.array(x0)
    mx.eval(x)
    return MlxProgram(lambda: f(x), lambda out: out)

  return [Case(name="dispatch", what="call", unit="us", make_jax=make_jax, make_mlx=make_mlx,
               inner=size.pick(50, 500, 1000), check_calls=1, rtol=0.0, native_rtol=0.0,
               description=f"jit(x + 1), x: f32[{n}]")]
