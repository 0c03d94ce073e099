"""A fused kernel's scalar inputs against scalars written into it, on MLX's CUDA backend.

  python3 bench/scalar_inputs.py   (native MLX only: no jax, no plugin)

µs per call (launch and wait), medians of 5 windows, for 16 and 2^20 f32 elements: an
mx.compile'd `a * 0.9 + 0.1` (Python scalars: MLX writes them into the kernel) against `a * c + d`
with c, d rank-0 mx.arrays (kernel inputs: MLX's CUDA allocator puts every buffer of at most 8
bytes in its pool of managed memory, which each thread block then reads over the bus; see
src/runtime/device_scalars.h), then six of each, then ten such kernels in one evaluation.
"""

from __future__ import annotations

import statistics
import time

import mlx.core as mx


def per_call(fn, n: int = 4000) -> float:
  """Median µs per call over 5 windows of n calls, after 300 warm-up calls."""
  for _ in range(300):
    fn()
  windows = []
  for _ in range(5):
    t = time.perf_counter()
    for _ in range(n):
      fn()
    windows.append((time.perf_counter() - t) / n * 1e6)
  return round(statistics.median(windows), 1)


def main() -> None:
  for size in (16, 1 << 20):
    a = mx.ones(size)
    scalars = [mx.array(0.5 + i) for i in range(6)]
    mx.eval(a, scalars)
    const1 = mx.compile(lambda a: a * 0.9 + 0.1)
    in1 = mx.compile(lambda a, c, d: a * c + d)
    const6 = mx.compile(lambda a: ((a * 0.9 + 0.1) * 0.8 + 0.2) * 0.7 + 0.3)
    in6 = mx.compile(lambda a, c0, c1, c2, c3, c4, c5: ((a * c0 + c1) * c2 + c3) * c4 + c5)
    print(size, "a*0.9+0.1 constants", per_call(lambda: mx.eval(const1(a))),
          "| a*c+d scalar inputs", per_call(lambda: mx.eval(in1(a, scalars[0], scalars[1]))),
          "| 6 constants", per_call(lambda: mx.eval(const6(a))),
          "| 6 scalar inputs", per_call(lambda: mx.eval(in6(a, *scalars))))
    ten_const = lambda: mx.eval([const6(a + i) for i in range(10)])  # noqa: E731
    ten_inputs = lambda: mx.eval([in6(a + i, *scalars) for i in range(10)])  # noqa: E731
    print(size, "ten kernels: constants", per_call(ten_const, 1000),
          "| scalar inputs", per_call(ten_inputs, 1000))


if __name__ == "__main__":
  main()
