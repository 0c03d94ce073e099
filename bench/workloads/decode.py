"""decode: greedy autoregressive generation with the transformer workload's model and a KV cache.

Two rows: decode_prefill (one jitted call over a 128-token prompt that fills the cache) and
decode_token (ms per token over 128 new tokens; each token is one jitted step that writes the
cache at `pos` with dynamic_update_slice, attends over the whole cache under a `<= pos` mask and
returns argmax). Each token is waited for before the next, as a generation loop that streams
tokens would. Native MLX: the same functions with mx.compile, mx.slice_update and
mx.fast.scaled_dot_product_attention. Batch 1.

The cache is updated in place on both sides from the second token on: MLX's slice_update writes
into its input once nothing else holds it (the loop drops the old cache), and the JAX step
donates its cache argument (`donate_argnums`, as JAX decoders do). The first token of each
generation reads the prompt's cache, which is kept for the next repetition: a copy on both sides.
"""

from __future__ import annotations

import functools

import numpy as np

import training
from common import Case, JaxProgram, MlxProgram, Size
from workloads import transformer as tf

NAME = "decode"


# ---- JAX ------------------------------------------------------------------------------------

def jax_prefill(params, prompt, cfg: tf.Config):
  """-> (next token (B,), last logits (B,V), cache [(K, V)] of (B,H,seq,Dh) per layer)."""
  import jax.numpy as jnp
  b, s = prompt.shape
  x = params["embed"][prompt] + params["pos"][:s]
  causal = jnp.tril(jnp.ones((s, s), bool))
  cache = []
  for p in params["layers"]:
    q, k, v = (tf.split_heads(t, cfg) for t in
               jnp.split(tf.layer_norm(x, p["ln1"]) @ p["wqkv"] + p["bqkv"], 3, axis=-1))
    pad = ((0, 0), (0, 0), (0, cfg.seq - s), (0, 0))
    cache.append((jnp.pad(k, pad), jnp.pad(v, pad)))
    x = x + tf.merge_heads(tf.attend(q, k, v, causal)) @ p["wo"] + p["bo"]
    x = x + tf.mlp(tf.layer_norm(x, p["ln2"]), p)
  logits = tf.layer_norm(x[:, -1], params["ln_f"]) @ params["embed"].T
  return jnp.argmax(logits, -1).astype(jnp.int32), logits, cache


def jax_step(params, cache, token, pos, cfg: tf.Config):
  """One token: token (B,), pos () -> (next token, logits, cache, pos + 1)."""
  import jax
  import jax.numpy as jnp
  x = params["embed"][token][:, None] + jax.lax.dynamic_slice_in_dim(params["pos"], pos, 1)
  visible = jnp.arange(cfg.seq) <= pos
  new_cache = []
  for p, (kc, vc) in zip(params["layers"], cache):
    q, k, v = (tf.split_heads(t, cfg) for t in
               jnp.split(tf.layer_norm(x, p["ln1"]) @ p["wqkv"] + p["bqkv"], 3, axis=-1))
    kc = jax.lax.dynamic_update_slice_in_dim(kc, k, pos, axis=2)
    vc = jax.lax.dynamic_update_slice_in_dim(vc, v, pos, axis=2)
    new_cache.append((kc, vc))
    x = x + tf.merge_heads(tf.attend(q, kc, vc, visible)) @ p["wo"] + p["bo"]
    x = x + tf.mlp(tf.layer_norm(x, p["ln2"]), p)
  logits = tf.layer_norm(x[:, 0], params["ln_f"]) @ params["embed"].T
  return jnp.argmax(logits, -1).astype(jnp.int32), logits, new_cache, pos + 1


def jax_programs(device, params_np, prompt_np, new_tokens, cfg):
  import jax
  import jax.numpy as jnp
  params = jax.device_put(params_np, device)
  prompt = jax.device_put(prompt_np, device)
  prefill = jax.jit(functools.partial(jax_prefill, cfg=cfg))
  step = jax.jit(functools.partial(jax_step, cfg=cfg))
  step_in_place = jax.jit(functools.partial(jax_step, cfg=cfg), donate_argnums=(1,))
  start = {}

  def do_prefill():
    return prefill(params, prompt)

  def generate():
    if not start:  # the prompt's cache, made once per program (not timed after the first call)
      tok, _, cache = prefill(params, prompt)
      start.update(tok=tok, cache=cache, pos=jax.device_put(jnp.int32(prompt_np.shape[1]), device))
    tok, cache, pos = start["tok"], start["cache"], start["pos"]
    toks = []
    for i in range(new_tokens):
      tok, logits, cache, pos = (step_in_place if i else step)(params, cache, tok, pos)
      tok.block_until_ready()
      toks.append(tok)
    return toks, logits

  return (JaxProgram(do_prefill, lambda out: (out[0], out[1])),
          JaxProgram(generate, lambda out: (np.stack([np.asarray(t) for t in out[0]]), out[1])))


# ---- native MLX -----------------------------------------------------------------------------

def mlx_programs(params_np, prompt_np, new_tokens, cfg):
  import mlx.core as mx
  model = tf.mlx_model(params_np, cfg)
  model.eval()
  prompt = mx.array(prompt_np)
  scale = cfg.head_dim ** -0.5

  @functools.partial(mx.compile, inputs=model.state)
  def prefill(prompt):
    s = prompt.shape[1]
    x = model.embed(prompt) + model.pos[:s]
    cache = []
    for blk in model.blocks:
      q, k, v = blk.qkv_heads(x)
      pad = [(0, 0), (0, 0), (0, cfg.seq - s), (0, 0)]
      cache += [mx.pad(k, pad), mx.pad(v, pad)]
      x = blk.finish(x, mx.fast.scaled_dot_product_attention(q, k, v, scale=scale,
                                                             mask="causal"))
    logits = model.embed.as_linear(model.ln_f(x[:, -1]))
    return mx.argmax(logits, -1).astype(mx.int32), logits, cache

  @functools.partial(mx.compile, inputs=model.state)
  def step(cache, tok, pos):
    x = model.embed(tok)[:, None] + mx.take(model.pos, pos, axis=0)[None]
    visible = mx.arange(cfg.seq) <= pos
    new_cache = []
    for i, blk in enumerate(model.blocks):
      q, k, v = blk.qkv_heads(x)
      kc = mx.slice_update(cache[2 * i], k, pos, axes=(2,))
      vc = mx.slice_update(cache[2 * i + 1], v, pos, axes=(2,))
      new_cache += [kc, vc]
      x = blk.finish(x, mx.fast.scaled_dot_product_attention(q, kc, vc, scale=scale,
                                                             mask=visible))
    logits = model.embed.as_linear(model.ln_f(x[:, 0]))
    return mx.argmax(logits, -1).astype(mx.int32), logits, new_cache, pos + 1

  start = {}

  def generate():
    if not start:
      tok, _, cache = prefill(prompt)
      start.update(tok=tok, cache=cache, pos=mx.array([prompt_np.shape[1]], mx.int32))
      mx.eval(start)
    tok, cache, pos = start["tok"], start["cache"], start["pos"]
    toks = []
    for _ in range(new_tokens):
      tok, logits, cache, pos = step(cache, tok, pos)
      mx.eval(tok, cache, pos)
      toks.append(tok)
    return toks, logits

  return (MlxProgram(lambda: prefill(prompt), lambda out: (out[0], out[1])),
          MlxProgram(generate, lambda out: (np.stack([np.array(t) for t in out[0]]), out[1])))


def cases(size: Size) -> list[Case]:
  cfg = size.pick(tf.QUICK, tf.DEFAULT, tf.FULL)
  prompt_len = cfg.seq // 2
  new_tokens = cfg.seq - prompt_len
  batch = size.batch(1, 1, 1)
  rng = np.random.default_rng(3)
  prompt = rng.integers(0, cfg.vocab, (batch, prompt_len)).astype(np.int32)
  params = training.init_on_cpu(tf.init_params, cfg)
  desc = (f"{tf.NAME} model ({cfg.layers} layers, d {cfg.d}), batch {batch}, "
          f"{prompt_len}-token prompt")
  return [
      Case(name="decode_prefill", what="prompt",
           make_jax=lambda dev: jax_programs(dev, params, prompt, new_tokens, cfg)[0],
           make_mlx=lambda: mlx_programs(params, prompt, new_tokens, cfg)[0],
           inner=size.pick(2, 3, 3), check_calls=1, description=desc),
      Case(name="decode_token", what="token", per_call=new_tokens,
           make_jax=lambda dev: jax_programs(dev, params, prompt, new_tokens, cfg)[1],
           make_mlx=lambda: mlx_programs(params, prompt, new_tokens, cfg)[1],
           inner=1, check_calls=1,
           description=desc + f", {new_tokens} greedy tokens, KV cache of {cfg.seq}"),
  ]
