"""gru: one adam training step of a byte-level GRU language model, the recurrence as lax.scan.

embedding -> GRU (hidden H, the cell of mlx.nn.GRU: r, z gates and bhn inside the reset product)
-> dense to the vocabulary, next-token cross-entropy. The scan becomes a while loop on our
platform. Native MLX: mlx.nn.GRU (a Python loop over time, traced once by mx.compile).
"""

from __future__ import annotations

import dataclasses

import numpy as np

import training
from common import Case, Size

NAME = "gru"


@dataclasses.dataclass(frozen=True)
class Config:
  seq: int = 128
  hidden: int = 256
  vocab: int = 256


FULL = Config()
DEFAULT = Config(seq=64, hidden=128, vocab=256)
QUICK = Config(seq=16, hidden=32, vocab=64)


def init_params(cfg: Config, seed: int = 0):
  import jax
  import jax.numpy as jnp
  k = iter(jax.random.split(jax.random.key(seed), 6))
  h, s = cfg.hidden, 1.0 / np.sqrt(cfg.hidden)

  def uniform(shape):
    return jax.random.uniform(next(k), shape, jnp.float32, -s, s)

  return {"embed": jax.random.normal(next(k), (cfg.vocab, h), jnp.float32) * 0.1,
          "wx": uniform((h, 3 * h)), "wh": uniform((h, 3 * h)), "b": uniform((3 * h,)),
          "bhn": uniform((h,)), "head_w": uniform((h, cfg.vocab)),
          "head_b": jnp.zeros((cfg.vocab,), jnp.float32)}


def jax_loss(params, tokens, targets, cfg: Config):
  import jax
  import jax.numpy as jnp
  import optax
  h = cfg.hidden
  xp = params["embed"][tokens] @ params["wx"] + params["b"]  # (B, S, 3H)

  def cell(hid, x_t):
    hp = hid @ params["wh"]
    r, z = jnp.split(jax.nn.sigmoid(x_t[:, :2 * h] + hp[:, :2 * h]), 2, axis=-1)
    n = jnp.tanh(x_t[:, 2 * h:] + r * (hp[:, 2 * h:] + params["bhn"]))
    hid = (1 - z) * n + z * hid
    return hid, hid

  h0 = jnp.zeros((tokens.shape[0], h), jnp.float32)
  _, hs = jax.lax.scan(cell, h0, xp.transpose(1, 0, 2))
  logits = hs.transpose(1, 0, 2) @ params["head_w"] + params["head_b"]
  return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()


def mlx_model(params_np, cfg: Config):
  import mlx.core as mx
  import mlx.nn as nn

  class GRULM(nn.Module):
    def __init__(self):
      super().__init__()
      self.embed = nn.Embedding(cfg.vocab, cfg.hidden)
      self.gru = nn.GRU(cfg.hidden, cfg.hidden)
      self.head = nn.Linear(cfg.hidden, cfg.vocab)

    def __call__(self, tokens):
      return self.head(self.gru(self.embed(tokens)))

  model = GRULM()
  p = params_np
  model.update({"embed": {"weight": mx.array(p["embed"])},
                "gru": {"Wx": mx.array(p["wx"].T), "Wh": mx.array(p["wh"].T),
                        "b": mx.array(p["b"]), "bhn": mx.array(p["bhn"])},
                "head": {"weight": mx.array(p["head_w"].T), "bias": mx.array(p["head_b"])}})
  return model


def mlx_loss(model, tokens, targets):
  import mlx.nn as nn
  return nn.losses.cross_entropy(model(tokens), targets, reduction="mean")


def cases(size: Size) -> list[Case]:
  cfg = size.pick(QUICK, DEFAULT, FULL)
  batch = size.batch(4, 16, 32)
  rng = np.random.default_rng(5)
  data = rng.integers(0, cfg.vocab, (batch, cfg.seq + 1)).astype(np.int32)
  tokens, targets = data[:, :-1], data[:, 1:]
  params = training.init_on_cpu(init_params, cfg)

  def jl(p, x, y):
    return jax_loss(p, x, y, cfg)

  return [Case(
      name="gru_train", what="step",
      make_jax=lambda dev: training.jax_train(dev, jl, params, (tokens, targets)),
      make_mlx=lambda: training.mlx_train(mlx_model(params, cfg), mlx_loss,
                                          training.to_mx((tokens, targets))),
      inner=size.pick(1, 2, 2),
      description=f"GRU LM, hidden {cfg.hidden}, vocab {cfg.vocab}, seq {cfg.seq} (lax.scan), "
                  f"batch {batch}, adam")]
