"""resnet: one adam training step of a ResNet-18-style CNN on 32x32 RGB images (NHWC).

A 3x3 stem, four stages of two basic blocks (widths w, 2w, 4w, 8w; stride 2 entering stages 2-4,
1x1 strided projection shortcuts), global average pool, a dense 10-way head. Normalization-free:
the second conv of each block starts small (x0.2) so activations stay bounded without batch
norm. Convolutions pad symmetrically by 1 (MLX's padding), written explicitly in JAX.
"""

from __future__ import annotations

import numpy as np

import training
from common import Case, Size

NAME = "resnet"
STAGES = 4
BLOCKS = 2


def block_specs(width: int):
  """(in channels, out channels, stride) of every basic block."""
  specs, cin = [], width
  for s in range(STAGES):
    cout = width * 2 ** s
    for b in range(BLOCKS):
      specs.append((cin, cout, 2 if (b == 0 and s > 0) else 1))
      cin = cout
  return specs


def init_params(width: int, seed: int = 0):
  import jax
  import jax.numpy as jnp
  specs = block_specs(width)
  keys = iter(jax.random.split(jax.random.key(seed), 3 + 3 * len(specs)))

  def conv(k, cin, cout, gain=1.0):  # HWIO, He init
    return jax.random.normal(next(keys), (k, k, cin, cout), jnp.float32) * \
        (gain * np.sqrt(2.0 / (k * k * cin)))

  blocks = []
  for cin, cout, stride in specs:
    b = {"c1": conv(3, cin, cout), "c2": conv(3, cout, cout, 0.2)}
    if stride != 1 or cin != cout:
      b["proj"] = conv(1, cin, cout)
    blocks.append(b)
  cout = specs[-1][1]
  return {"stem": conv(3, 3, width), "blocks": blocks,
          "head_w": jax.random.normal(next(keys), (cout, 10), jnp.float32) / np.sqrt(cout),
          "head_b": jnp.zeros((10,), jnp.float32)}


# ---- JAX ------------------------------------------------------------------------------------

def conv(x, w, stride):
  import jax
  pad = (w.shape[0] - 1) // 2
  return jax.lax.conv_general_dilated(x, w, (stride, stride), ((pad, pad), (pad, pad)),
                                      dimension_numbers=("NHWC", "HWIO", "NHWC"))


def jax_loss(params, x, y, specs):
  import jax
  import optax
  h = jax.nn.relu(conv(x, params["stem"], 1))
  for (_, _, stride), b in zip(specs, params["blocks"]):
    r = conv(jax.nn.relu(conv(h, b["c1"], stride)), b["c2"], 1)
    short = conv(h, b["proj"], stride) if "proj" in b else h
    h = jax.nn.relu(short + r)
  logits = h.mean(axis=(1, 2)) @ params["head_w"] + params["head_b"]
  return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


# ---- native MLX -----------------------------------------------------------------------------

def mlx_model(params_np, specs, width):
  import mlx.core as mx
  import mlx.nn as nn

  class Block(nn.Module):
    def __init__(self, cin, cout, stride):
      super().__init__()
      self.c1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
      self.c2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
      if stride != 1 or cin != cout:
        self.proj = nn.Conv2d(cin, cout, 1, stride=stride, bias=False)

    def __call__(self, x):
      short = self.proj(x) if "proj" in self else x
      return nn.relu(short + self.c2(nn.relu(self.c1(x))))

  class ResNet(nn.Module):
    def __init__(self):
      super().__init__()
      self.stem = nn.Conv2d(3, width, 3, padding=1, bias=False)
      self.blocks = [Block(*s) for s in specs]
      self.head = nn.Linear(specs[-1][1], 10)

    def __call__(self, x):
      h = nn.relu(self.stem(x))
      for b in self.blocks:
        h = b(h)
      return self.head(h.mean(axis=(1, 2)))

  def w(a):  # HWIO -> MLX's OHWI
    return {"weight": mx.array(np.ascontiguousarray(a.transpose(3, 0, 1, 2)))}

  model = ResNet()
  model.update({"stem": w(params_np["stem"]),
                "blocks": [{k: w(v) for k, v in b.items()} for b in params_np["blocks"]],
                "head": {"weight": mx.array(params_np["head_w"].T),
                         "bias": mx.array(params_np["head_b"])}})
  return model


def mlx_loss(model, x, y):
  import mlx.nn as nn
  return nn.losses.cross_entropy(model(x), y, reduction="mean")


def cases(size: Size) -> list[Case]:
  width = size.pick(4, 8, 64)
  batch = size.batch(4, 16, 32)
  hw = size.pick(16, 32, 32)
  specs = block_specs(width)
  rng = np.random.default_rng(4)
  x = rng.standard_normal((batch, hw, hw, 3)).astype(np.float32)
  y = rng.integers(0, 10, (batch,)).astype(np.int32)
  params = training.init_on_cpu(init_params, width)

  def jl(p, x, y):
    return jax_loss(p, x, y, specs)

  return [Case(
      name="resnet_train", what="step",
      make_jax=lambda dev: training.jax_train(dev, jl, params, (x, y)),
      make_mlx=lambda: training.mlx_train(mlx_model(params, specs, width), mlx_loss,
                                          training.to_mx((x, y))),
      inner=1,
      description=f"ResNet-18-style (widths {width}-{8 * width}, no norm), "
                  f"{hw}x{hw}x3, batch {batch}, adam")]
