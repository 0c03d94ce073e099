"""Convolutions of a dilated input: transposed convolutions (a decoder's upsampling) and the input
gradient of a strided convolution, ms per call: ours by output phases (JAXMLX_CONV_PHASES=1, the
CPU's and CUDA's default) and with the input dilated (=0), jax's CPU, and native MLX
(`mx.conv_transpose2d`, `mx.grad` of `mx.conv2d`). bench/README, "Convolutions of a dilated
input by output phases".

  .venv/bin/python bench/conv_transpose.py [--reps N] [--calls N] [--batch N]

Both of ours are compiled in one process (the variable is read at each compile) and every column
is timed in interleaved rounds; the table has each column's median over the rounds (each round's
time is the mean of --calls waited calls). Inputs NHWC, float32. Ours is checked against jax's
CPU; native MLX computes the same shapes from the same arrays (its kernel layout [O, H, W, I]),
its values are not compared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

# name: (input shape, kernel size, output features, stride); "grad" cases take the input gradient
# of a SAME convolution of that stride whose output has the input's shape.
CASES = {
    "conv_transpose 4x4 s2, 8x32x32x64 -> 64": ((8, 32, 32, 64), 4, 64, 2, "transpose"),
    "conv_transpose 3x3 s2, 8x32x32x64 -> 32": ((8, 32, 32, 64), 3, 32, 2, "transpose"),
    "input grad of 3x3 s2 conv, 8x64x64x32 -> 64": ((8, 64, 64, 32), 3, 64, 2, "grad"),
}


def jax_fn(kind, k, stride):
  import jax
  import jax.numpy as jnp
  from jax import lax
  dn = ("NHWC", "HWIO", "NHWC")
  if kind == "transpose":
    return lambda x, w: lax.conv_transpose(x, w, (stride, stride), "SAME", dimension_numbers=dn)
  pad = ((k - 1) // 2, (k - 1) // 2)

  def loss(x, w, ct):
    return jnp.sum(lax.conv_general_dilated(x, w, (stride, stride), (pad, pad),
                                            dimension_numbers=dn) * ct)
  return jax.grad(loss)


def native_fn(kind, k, stride):
  import mlx.core as mx
  pad = (k - 1) // 2
  if kind == "transpose":  # at stride 2, the padding that gives jax SAME's output size
    return mx.compile(lambda x, w: mx.conv_transpose2d(x, w, stride=stride, padding=pad,
                                                      output_padding=k % 2))
  return mx.compile(mx.grad(lambda x, w, ct: mx.sum(mx.conv2d(x, w, stride=stride,
                                                              padding=pad) * ct)))


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  ap.add_argument("--reps", type=int, default=5, help="interleaved rounds")
  ap.add_argument("--calls", type=int, default=3, help="waited calls per round and column")
  ap.add_argument("--batch", type=int, default=8, help="the inputs' batch size")
  args = ap.parse_args()
  os.environ.setdefault("JAX_PLATFORMS", "cpu,mlx")
  import jax
  import mlx.core as mx
  mlx_dev, cpu = jax.devices("mlx")[0], jax.devices("cpu")[0]
  rng = np.random.default_rng(0)
  print("| case | ours, phases | ours, dilated | jax cpu | native mlx | phases / native |")
  print("|---|---:|---:|---:|---:|---:|")
  for name, (shape, k, o, stride, kind) in CASES.items():
    shape = (args.batch,) + shape[1:]
    name = name.replace("8x", f"{args.batch}x", 1)
    n, h, w_, c = shape
    x = rng.standard_normal(shape).astype(np.float32)
    w = (rng.standard_normal((k, k, c, o)) / np.sqrt(k * k * c)).astype(np.float32)
    args_np = (x, w)
    if kind == "grad":  # the cotangent of the strided convolution's output
      args_np += (rng.standard_normal((n, h // stride, w_ // stride, o)).astype(np.float32),)
    # MLX's kernel layout [O, KH, KW, I]
    native_args = tuple(mx.array(np.ascontiguousarray(w.transpose(3, 0, 1, 2))) if a is w
                        else mx.array(a) for a in args_np)
    columns = {}
    for label, phases in (("phases", "1"), ("dilated", "0")):
      os.environ["JAXMLX_CONV_PHASES"] = phases
      f = jax.jit(jax_fn(kind, k, stride))  # a new function: compiled under this setting
      placed = jax.device_put(args_np, mlx_dev)
      f(*placed).block_until_ready()
      columns[label] = (lambda f=f, a=placed: f(*a).block_until_ready())
    os.environ.pop("JAXMLX_CONV_PHASES")
    want = np.asarray(jax.jit(jax_fn(kind, k, stride))(*jax.device_put(args_np, cpu)))
    got = np.asarray(columns["phases"]())
    assert got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-4), name
    fc, placed_cpu = jax.jit(jax_fn(kind, k, stride)), jax.device_put(args_np, cpu)
    columns["jax cpu"] = lambda: fc(*placed_cpu).block_until_ready()
    fn = native_fn(kind, k, stride)
    y = fn(*native_args)
    mx.eval(y)
    assert tuple(y.shape) == want.shape, (name, y.shape, want.shape)
    columns["native"] = lambda: mx.eval(fn(*native_args))
    times = {c: [] for c in columns}
    for _ in range(args.reps):
      for col, call in columns.items():
        t = time.perf_counter()
        for _ in range(args.calls):
          call()
        times[col].append((time.perf_counter() - t) / args.calls * 1e3)
    med = {c: statistics.median(v) for c, v in times.items()}
    print(f"| {name} | {med['phases']:.2f} ms | {med['dilated']:.2f} ms | {med['jax cpu']:.2f} ms"
          f" | {med['native']:.2f} ms | {med['phases'] / med['native']:.2f}x |", flush=True)


if __name__ == "__main__":
  main()
