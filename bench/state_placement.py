"""Whether where a training step's state lives slows its kernels: the same JAX training step on
our platform with its parameters as `jax.device_put` uploaded them (an array MLX made from host
data: on CUDA its unified memory, which a donated state keeps for good) and with them passed once
through a kernel first (memory MLX's allocator gives a kernel's output), beside native MLX,
timed in alternating rounds in one process. On CUDA it first prints the device's memory
attributes (managed memory, pageable access).

  python3 bench/state_placement.py --only transformer_train [--size full] [--rounds 4]
  python3 bench/state_placement.py --norm      # MLX's layer norm alone, weightless or not

--norm times MLX's own `mx.fast.layer_norm` (and its gradient), 16 in a row per evaluation, over
[2048, 384] with weight and bias None, as our lowering calls it (MLX then reads a scalar 1 and 0
from its pool of small buffers, unified memory that MLX lets the GPU read where it lies), and
with vectors of ones and zeros (the same values, bits and grid); and a product by a scalar from
that pool against one by an element of a 16-byte array (memory of its own).

Why: on the H200 the same MLX layer-norm kernel, same grid, ran 17.5 µs per call in our
full-size transformer step and 5.0 in native's, with no other kernel beside it
(bench/README.md, "The issue's sizes on the H200 again").
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
import statistics
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu,mlx")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# cudaDeviceAttr values (CUDA runtime API).
CUDA_ATTRS = [("pageableMemoryAccess", 88), ("concurrentManagedAccess", 89),
              ("pageableMemoryAccessUsesHostPageTables", 100),
              ("directManagedMemAccessFromHost", 101)]


def print_cuda_attributes() -> None:
  dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
  for path in [p for d in dirs for p in glob.glob(d + "/libcudart.so*")] + ["libcudart.so"]:
    try:
      rt = ctypes.CDLL(path)
    except OSError:
      continue
    for name, attr in CUDA_ATTRS:
      v = ctypes.c_int(-1)
      err = rt.cudaDeviceGetAttribute(ctypes.byref(v), attr, 0)
      print(f"{name}: {v.value}" + (f" (cudaError {err})" if err else ""))
    return
  print("no CUDA runtime found: no device attributes")


def time_norms(rounds: int, steps: int) -> None:
  import mlx.core as mx
  x = mx.random.normal((2048, 384))
  ct = mx.random.normal((2048, 384))
  ones, zeros = mx.ones((384,)), mx.zeros((384,))
  mx.eval(x, ct, ones, zeros)

  chain = 16  # norms per evaluation: kernel time, not one launch and wait per norm

  def norms(w, b):
    def f(y):
      for _ in range(chain):
        y = mx.fast.layer_norm(y, w, b, 1e-5)
      return y
    return f

  def forward(w, b):
    return lambda: norms(w, b)(x)

  def backward(w, b):
    return lambda: mx.vjp(norms(w, b), [x], [ct])[1][0]

  # A scalar operand of a product: a 4-byte array of its own (MLX's pool of small buffers) or an
  # element of a 16-byte one (memory of its own, which the GPU migrates to itself on first use).
  pooled, element, read_back = mx.array(1.0), mx.ones((4,))[0], mx.ones((4,))[0]
  mx.eval(pooled, element, read_back)
  # A read on the host moves a GPU buffer to managed memory (MLX's Buffer::raw_ptr on CUDA),
  # which migrates to the GPU at its first use there.
  import numpy as np
  np.asarray(read_back)
  # Where managed buffers of 16 bytes made from host data lie: whether they share pages.
  small = [mx.array([1.0, 2.0, 3.0, float(i)]) for i in range(4)]
  addresses = [np.asarray(a).__array_interface__["data"][0] for a in small]
  print("16-byte arrays from host data at offsets " +
        ", ".join(str(a - addresses[0]) for a in addresses))

  def products(s):
    def f():
      y = x
      for _ in range(chain):
        y = y * s
      return y
    return f

  ways = {"forward, weightless": forward(None, None), "forward, vectors": forward(ones, zeros),
          "gradient, weightless": backward(None, None), "gradient, vectors": backward(ones, zeros),
          "x * pooled scalar": products(pooled), "x * element scalar": products(element),
          "x * element, host-read": products(read_back)}
  results = {k: [] for k in ways}
  for _ in range(rounds):
    for k, f in ways.items():
      for _ in range(5):
        mx.eval(f())
      t = time.perf_counter()
      for _ in range(steps):
        mx.eval(f())  # each call waited for: launch and kernel
      results[k].append((time.perf_counter() - t) / steps / chain * 1e6)
  for k, v in results.items():
    print(f"[2048, 384] {k:23s} us per op: " + ", ".join(f"{t:.1f}" for t in v))


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  ap.add_argument("--only", default="transformer_train", help="a training case")
  ap.add_argument("--size", default="default", choices=["quick", "default", "full"])
  ap.add_argument("--steps", type=int, default=15, help="timed steps per column and round")
  ap.add_argument("--rounds", type=int, default=4)
  ap.add_argument("--norm", action="store_true", help="MLX's layer norm alone (see above)")
  args = ap.parse_args()
  if args.norm:
    time_norms(args.rounds, max(args.steps, 50))
    return
  import jax
  import jax.numpy as jnp
  import mlx.core as mx
  import common

  if "gpu" in str(mx.default_device()):
    print_cuda_attributes()
  dev = jax.devices("mlx")[0]
  case = next(common.selected_cases([args.only], common.Size(level=args.size)))
  # -(-x) is a kernel the lowering keeps (no algebra folds it): its output is new memory.
  through_kernel = jax.jit(lambda t: jax.tree_util.tree_map(
      lambda x: -(-x) if jnp.issubdtype(x.dtype, jnp.floating) else x, t))
  uploaded_put = jax.device_put

  def put_through_kernel(x, device=None, **kw):
    y = uploaded_put(x, device, **kw)
    return through_kernel(y) if device is dev else y

  programs = {"as uploaded": case.make_jax(dev)}
  jax.device_put = put_through_kernel  # the workload's own set-up, with its uploads moved
  try:
    programs["through a kernel"] = case.make_jax(dev)
  finally:
    jax.device_put = uploaded_put
  programs["native mlx"] = case.make_mlx()
  for p in programs.values():
    for _ in range(5):
      p.sync(p.call())
  rounds = {k: [] for k in programs}
  for _ in range(args.rounds):
    for k, p in programs.items():
      times = []
      for _ in range(args.steps):
        t = time.perf_counter()
        p.sync(p.call())
        times.append((time.perf_counter() - t) / case.per_call)
      rounds[k].append(statistics.median(times) * 1e3)
  for k, v in rounds.items():
    print(f"{case.name} {k:17s} ms per {case.what}, median of each round: " +
          ", ".join(f"{x:.3f}" for x in v))


if __name__ == "__main__":
  main()
