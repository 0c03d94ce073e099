"""Training-step programs shared by the training workloads: optax adam in JAX, mlx.optimizers.Adam
(with bias correction, as optax does) under mx.compile in native MLX. Same lr, betas, eps."""

from __future__ import annotations

import functools
from typing import Any, Callable

from common import JaxProgram, MlxProgram

LR, B1, B2, EPS = 1e-3, 0.9, 0.999, 1e-8


def jax_train(device, loss_fn: Callable, params_np: Any, batch_np: tuple) -> JaxProgram:
  """loss_fn(params, *batch) -> scalar. One call = one adam step; check value = the loss."""
  import jax
  import optax

  opt = optax.adam(LR, b1=B1, b2=B2, eps=EPS)
  params = jax.device_put(params_np, device)
  batch = jax.device_put(batch_np, device)
  # Committed to the device like the step's outputs: jit(opt.init)'s are not (their sharding is
  # unspecified), and jax would compile the step a second time on its second call.
  opt_state = jax.device_put(jax.jit(opt.init)(params), device)

  # Parameters and optimizer state are donated, as JAX training loops do (and as MLX's compiled
  # step replaces its state): the old ones are not kept alive beside the new.
  @functools.partial(jax.jit, donate_argnums=(0, 1))
  def step(params, opt_state, batch):
    loss, grads = jax.value_and_grad(loss_fn)(params, *batch)
    updates, opt_state = opt.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  state = [params, opt_state]

  def call():
    state[0], state[1], loss = step(state[0], state[1], batch)
    return state[0], state[1], loss

  # One execution makes every output: waiting for the loss waits for the step (common.py).
  return JaxProgram(call, lambda out: out[2], wait=lambda out: out[2])


def mlx_train(model, loss_fn: Callable, batch: tuple) -> MlxProgram:
  """loss_fn(model, *batch) -> scalar; the compiled step captures model and optimizer state, as
  in MLX's examples. One call = one step; check value = the loss."""
  import mlx.core as mx
  import mlx.nn as nn
  import mlx.optimizers as optim

  opt = optim.Adam(LR, betas=[B1, B2], eps=EPS, bias_correction=True)
  opt.init(model.trainable_parameters())
  loss_and_grad = nn.value_and_grad(model, loss_fn)
  state = [model.state, opt.state]

  @functools.partial(mx.compile, inputs=state, outputs=state)
  def step(*batch):
    loss, grads = loss_and_grad(model, *batch)
    opt.update(model, grads)
    return loss

  mx.eval(state, batch)

  def call():
    return step(*batch), state

  return MlxProgram(call, lambda out: out[0])


def to_mx(tree):
  """numpy pytree (dicts/lists) -> the same tree of mx arrays."""
  import mlx.core as mx
  import mlx.utils
  return mlx.utils.tree_map(lambda a: mx.array(a), tree)


def init_on_cpu(init_fn: Callable, *args):
  """Runs a jax init function on jax's CPU device and returns its output as numpy (the weights
  every column starts from)."""
  import jax
  import numpy as np
  with jax.default_device(jax.devices("cpu")[0]):
    out = init_fn(*args)
  return jax.tree_util.tree_map(np.asarray, out)
