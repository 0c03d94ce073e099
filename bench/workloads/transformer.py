"""transformer: one adam training step of a GPT-style LM in plain JAX (no flax).

Pre-LN blocks: x + attn(ln1(x)), x + mlp(ln2(x)); causal multi-head attention with one fused qkv
projection; GELU (tanh approximation) MLP of width 4*d; learned positions; tied embedding.
Native MLX: the same model with mlx.nn layers and mx.fast.scaled_dot_product_attention (what MLX's
own examples use), loaded with the same weights. decode.py reuses this model.
"""

from __future__ import annotations

import dataclasses

import numpy as np

import training
from common import Case, Size

NAME = "transformer"


@dataclasses.dataclass(frozen=True)
class Config:
  layers: int = 6
  d: int = 384
  heads: int = 6
  seq: int = 256
  vocab: int = 1024

  @property
  def head_dim(self) -> int:
    return self.d // self.heads


FULL = Config()
# Default: what fits the ~15-minute CPU run (MLX's CPU matmuls are ~1 GFLOP/s here).
DEFAULT = Config(layers=2, d=128, heads=4, seq=128, vocab=1024)
QUICK = Config(layers=2, d=64, heads=2, seq=32, vocab=128)


def init_params(cfg: Config, seed: int = 0):
  import jax
  import jax.numpy as jnp
  keys = iter(jax.random.split(jax.random.key(seed), 2 + 4 * cfg.layers))
  std, d = 0.02, cfg.d
  out_std = std / np.sqrt(2 * cfg.layers)

  def normal(shape, s):
    return jax.random.normal(next(keys), shape, jnp.float32) * s

  def ln():
    return {"g": jnp.ones((d,), jnp.float32), "b": jnp.zeros((d,), jnp.float32)}

  layers = [{"ln1": ln(), "wqkv": normal((d, 3 * d), std), "bqkv": jnp.zeros((3 * d,)),
             "wo": normal((d, d), out_std), "bo": jnp.zeros((d,)), "ln2": ln(),
             "w1": normal((d, 4 * d), std), "b1": jnp.zeros((4 * d,)),
             "w2": normal((4 * d, d), out_std), "b2": jnp.zeros((d,))}
            for _ in range(cfg.layers)]
  return {"embed": normal((cfg.vocab, d), std), "pos": normal((cfg.seq, d), std),
          "layers": layers, "ln_f": ln()}


# ---- JAX ------------------------------------------------------------------------------------

def layer_norm(x, p):
  import jax
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) * jax.lax.rsqrt(var + 1e-5) * p["g"] + p["b"]


def split_heads(t, cfg: Config):
  b, s, _ = t.shape
  return t.reshape(b, s, cfg.heads, cfg.head_dim).transpose(0, 2, 1, 3)


def merge_heads(t):
  b, h, s, dh = t.shape
  return t.transpose(0, 2, 1, 3).reshape(b, s, h * dh)


def attend(q, k, v, mask):
  """q: (B,H,Sq,Dh), k/v: (B,H,Sk,Dh), mask broadcastable to (B,H,Sq,Sk), True = attend."""
  import jax
  import jax.numpy as jnp
  s = (q @ k.transpose(0, 1, 3, 2)) * (q.shape[-1] ** -0.5)
  s = jnp.where(mask, s, jnp.finfo(s.dtype).min)
  return jax.nn.softmax(s, axis=-1) @ v


def mlp(x, p):
  import jax
  return jax.nn.gelu(x @ p["w1"] + p["b1"], approximate=True) @ p["w2"] + p["b2"]


def forward(params, tokens, cfg: Config):
  import jax.numpy as jnp
  s = tokens.shape[1]
  x = params["embed"][tokens] + params["pos"][:s]
  causal = jnp.tril(jnp.ones((s, s), bool))
  for p in params["layers"]:
    q, k, v = jnp.split(layer_norm(x, p["ln1"]) @ p["wqkv"] + p["bqkv"], 3, axis=-1)
    o = attend(split_heads(q, cfg), split_heads(k, cfg), split_heads(v, cfg), causal)
    x = x + merge_heads(o) @ p["wo"] + p["bo"]
    x = x + mlp(layer_norm(x, p["ln2"]), p)
  return layer_norm(x, params["ln_f"]) @ params["embed"].T


def jax_loss(params, tokens, targets, cfg: Config):
  import optax
  logits = forward(params, tokens, cfg)
  return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()


# ---- native MLX -----------------------------------------------------------------------------

def mlx_model(params_np, cfg: Config):
  import mlx.core as mx
  import mlx.nn as nn

  class Block(nn.Module):
    def __init__(self):
      super().__init__()
      d = cfg.d
      self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-5), nn.LayerNorm(d, eps=1e-5)
      self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
      self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def heads(self, t):
      b, s, _ = t.shape
      return t.reshape(b, s, cfg.heads, cfg.head_dim).transpose(0, 2, 1, 3)

    def qkv_heads(self, x):
      q, k, v = mx.split(self.qkv(self.ln1(x)), 3, axis=-1)
      return self.heads(q), self.heads(k), self.heads(v)

    def finish(self, x, o):
      b, h, s, dh = o.shape
      x = x + self.out(o.transpose(0, 2, 1, 3).reshape(b, s, h * dh))
      return x + self.fc2(nn.gelu_approx(self.fc1(self.ln2(x))))

    def __call__(self, x):
      q, k, v = self.qkv_heads(x)
      o = mx.fast.scaled_dot_product_attention(q, k, v, scale=cfg.head_dim ** -0.5,
                                               mask="causal")
      return self.finish(x, o)

  class LM(nn.Module):
    def __init__(self):
      super().__init__()
      self.embed = nn.Embedding(cfg.vocab, cfg.d)
      self.pos = mx.zeros((cfg.seq, cfg.d))
      self.blocks = [Block() for _ in range(cfg.layers)]
      self.ln_f = nn.LayerNorm(cfg.d, eps=1e-5)

    def __call__(self, tokens):
      x = self.embed(tokens) + self.pos[:tokens.shape[1]]
      for b in self.blocks:
        x = b(x)
      return self.embed.as_linear(self.ln_f(x))

  def ln(p):
    return {"weight": mx.array(p["g"]), "bias": mx.array(p["b"])}

  def lin(w, b):
    return {"weight": mx.array(w.T), "bias": mx.array(b)}

  model = LM()
  model.update({
      "embed": {"weight": mx.array(params_np["embed"])}, "pos": mx.array(params_np["pos"]),
      "ln_f": ln(params_np["ln_f"]),
      "blocks": [{"ln1": ln(p["ln1"]), "ln2": ln(p["ln2"]), "qkv": lin(p["wqkv"], p["bqkv"]),
                  "out": lin(p["wo"], p["bo"]), "fc1": lin(p["w1"], p["b1"]),
                  "fc2": lin(p["w2"], p["b2"])} for p in params_np["layers"]]})
  return model


def mlx_loss(model, tokens, targets):
  import mlx.nn as nn
  return nn.losses.cross_entropy(model(tokens), targets, reduction="mean")


def cases(size: Size) -> list[Case]:
  cfg = size.pick(QUICK, DEFAULT, FULL)
  batch = size.batch(2, 4, 8)
  rng = np.random.default_rng(2)
  data = rng.integers(0, cfg.vocab, (batch, cfg.seq + 1)).astype(np.int32)
  tokens, targets = data[:, :-1], data[:, 1:]
  params = training.init_on_cpu(init_params, cfg)

  def jl(p, x, y):
    return jax_loss(p, x, y, cfg)

  return [Case(
      name="transformer_train", what="step",
      make_jax=lambda dev: training.jax_train(dev, jl, params, (tokens, targets)),
      make_mlx=lambda: training.mlx_train(mlx_model(params, cfg), mlx_loss,
                                          training.to_mx((tokens, targets))),
      inner=1,
      description=f"LM {cfg.layers} layers, d {cfg.d}, {cfg.heads} heads, seq {cfg.seq}, "
                  f"vocab {cfg.vocab}, batch {batch}, adam")]
