"""mlp: one adam training step of a 784-512-512-10 ReLU MLP, batch 128, softmax cross-entropy."""

from __future__ import annotations

import numpy as np

import training
from common import Case, Size

NAME = "mlp"
DIMS = [784, 512, 512, 10]


def init_params(seed: int):
  import jax
  import jax.numpy as jnp
  keys = jax.random.split(jax.random.key(seed), len(DIMS) - 1)
  return [{"w": jax.random.normal(k, (i, o), jnp.float32) / np.sqrt(i),
           "b": jnp.zeros((o,), jnp.float32)}
          for k, i, o in zip(keys, DIMS[:-1], DIMS[1:])]


def jax_loss(params, x, y):
  import jax
  import optax
  h = x
  for layer in params[:-1]:
    h = jax.nn.relu(h @ layer["w"] + layer["b"])
  logits = h @ params[-1]["w"] + params[-1]["b"]
  return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def mlx_model(params_np):
  import mlx.core as mx
  import mlx.nn as nn

  class MLP(nn.Module):
    def __init__(self):
      super().__init__()
      self.layers = [nn.Linear(i, o) for i, o in zip(DIMS[:-1], DIMS[1:])]

    def __call__(self, x):
      for layer in self.layers[:-1]:
        x = nn.relu(layer(x))
      return self.layers[-1](x)

  model = MLP()
  model.update({"layers": [{"weight": mx.array(p["w"].T), "bias": mx.array(p["b"])}
                           for p in params_np]})
  return model


def mlx_loss(model, x, y):
  import mlx.nn as nn
  return nn.losses.cross_entropy(model(x), y, reduction="mean")


def cases(size: Size) -> list[Case]:
  batch = size.batch(16, 128, 128)
  rng = np.random.default_rng(1)
  x = rng.standard_normal((batch, DIMS[0])).astype(np.float32)
  y = rng.integers(0, DIMS[-1], (batch,)).astype(np.int32)
  params = training.init_on_cpu(init_params, 0)
  return [Case(
      name="mlp_train", what="step",
      make_jax=lambda dev: training.jax_train(dev, jax_loss, params, (x, y)),
      make_mlx=lambda: training.mlx_train(mlx_model(params), mlx_loss, training.to_mx((x, y))),
      inner=size.pick(2, 2, 5),
      description=f"MLP {'-'.join(map(str, DIMS))}, batch {batch}, adam")]
