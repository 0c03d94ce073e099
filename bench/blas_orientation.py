"""How MLX's CPU matmul times the four operand orientations (bench/README "BLAS orientation").

  .venv/bin/python bench/blas_orientation.py [--reps N]

MLX passes a transposed operand to BLAS as it is. The reference BLAS of MLX's Linux wheels runs
`a @ b.T` 2.2-2.6x slower than `a @ b` (a transposed lhs costs nothing), which is why our
lowering makes a float matmul's rhs row-major on the CPU (src/lower/util.h: row_major_rhs_pays)
and takes convolutions as patch matmuls there (src/lower/convolution.cc). Each line: the shapes,
then ms per product (median of N `mx.eval`s) for each orientation, and `copy + a @ b` (the rhs
made row-major with mx.contiguous first, as the lowering does).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

SHAPES = [  # (batch, M, K, N)
    (1, 1, 384, 1152),      # decode: one token's attention scores / projection
    (1, 4, 384, 1152),
    (1, 128, 784, 512),     # mlp layer
    (48, 256, 64, 256),     # attention scores, 8 x 6 heads
    (1, 576, 16384, 64),    # a weight gradient as patches
]


def main() -> None:
  import mlx.core as mx
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  ap.add_argument("--reps", type=int, default=20)
  args = ap.parse_args()
  rng = np.random.default_rng(0)

  def timed(f) -> float:
    for _ in range(3):
      mx.eval(f())
    ts = []
    for _ in range(args.reps):
      t = time.perf_counter()
      mx.eval(f())
      ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)

  print(f"{'batch x M x K x N':>24}  {'a@b':>9} {'a@b.T':>9} {'a.T@b':>9} {'a.T@b.T':>9} "
        f"{'copy+a@b':>9}  (ms, MLX {mx.__version__}, {mx.default_device()})")
  for b, m, k, n in SHAPES:
    def arr(*shape):
      return mx.array(rng.standard_normal((b, *shape)).astype(np.float32))
    a, at, bb, bt = arr(m, k), arr(k, m), arr(k, n), arr(n, k)
    mx.eval(a, at, bb, bt)
    t = lambda x: mx.swapaxes(x, -1, -2)
    cols = [timed(lambda: a @ bb), timed(lambda: a @ t(bt)), timed(lambda: t(at) @ bb),
            timed(lambda: t(at) @ t(bt)), timed(lambda: a @ mx.contiguous(t(bt)))]
    print(f"{f'{b} x {m} x {k} x {n}':>24}  " + " ".join(f"{c:9.3f}" for c in cols))


if __name__ == "__main__":
  main()
