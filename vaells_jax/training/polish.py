"""Decoder polish: after training, the decoder alone learns to decode the codes.

During training the decoder reconstructs ``x`` from posterior samples
``z = T_psi(c) mu + gamma eps``, ``c`` Laplace: codes carried along the
operators' orbits by random amounts. It therefore learns the mean of the
data along a stretch of the orbit, which on a curved manifold lies inside
the curve, and the more so the stronger the operators and the sharper the
curve (docs/studies/fit-levers.md, "Wobbly curves in 100-D"). The polish fits the
decoder to the encoder's codes themselves (the posterior's centre), with
the encoder, anchors and operators fixed, so the codes, the orbits and the
prior stay where training put them.

The polish runs after the last training step (``config.decoder_polish_steps``
steps of Adam at ``config.decoder_polish_lr``, falling to 0 along a
cosine) and counts as steps: the polished state is checkpointed at step
``num_steps + decoder_polish_steps``, so a resumed run finds it done.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vaells_jax.config import Config
from vaells_jax.core.objective import reconstruction_error
from vaells_jax.models.vaells import Model

BATCH = 1024  # points a polish step fits (all of them when fewer)


def polish_decoder(config: Config, params: dict, x) -> tuple[dict, dict]:
  """``params`` with the decoder fitted to ``x``'s codes, and a summary.

  Args:
    config: the run's configuration (``decoder_polish_steps``,
      ``decoder_polish_lr``, ``seed``; the networks' shapes).
    params: the trained ``{"encoder", "decoder", "anchors", "psi"}``.
    x: the training inputs ``[N, D]`` (as the model sees them).

  Returns:
    ``(params, {"steps", "recon_before", "recon_after"})``: the mean
    ``1/2 ||x - g(f(x))||^2`` before and after, over all of ``x``.
  """
  x = jnp.asarray(np.asarray(x, np.float32))
  model = Model.create(config, x.shape[-1])
  codes = jax.lax.stop_gradient(model.encode(params, x))
  steps = config.decoder_polish_steps
  batch = min(BATCH, x.shape[0])
  optimizer = optax.adam(optax.cosine_decay_schedule(config.decoder_polish_lr, steps))

  def error(decoder, idx):
    x_hat = model.decode({**params, "decoder": decoder}, codes[idx])
    return jnp.mean(reconstruction_error(x[idx], x_hat))

  def step(carry, key):
    decoder, opt_state = carry
    idx = (
      jnp.arange(batch)
      if batch == x.shape[0]
      else jax.random.randint(key, (batch,), 0, x.shape[0])
    )
    grads = jax.grad(error)(decoder, idx)
    updates, opt_state = optimizer.update(grads, opt_state, decoder)
    return (optax.apply_updates(decoder, updates), opt_state), None

  @jax.jit
  def run(decoder):
    keys = jax.random.split(jax.random.PRNGKey(config.seed + 3), steps)
    (decoder, _), _ = jax.lax.scan(step, (decoder, optimizer.init(decoder)), keys)
    return decoder

  everything = jnp.arange(x.shape[0])
  before = float(error(params["decoder"], everything))
  decoder = run(params["decoder"])
  after = float(error(decoder, everything))
  info = {"steps": steps, "recon_before": before, "recon_after": after}
  return {**params, "decoder": decoder}, info
