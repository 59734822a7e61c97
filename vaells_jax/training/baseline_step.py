"""Training state and step of the baselines (VAE, VampPrior, hyperspherical VAE).

The runner (:mod:`vaells_jax.runs.runner`) trains a baseline with the same loop,
checkpoints, batches and logs as VAELLS when ``config.model`` names one. The
baseline shares VAELLS's networks (``config.network``, ``config.hidden``),
data, batch size, step budget and network optimiser (Adam, ``lr_net``,
b1 = 0.5); ``config.baseline_zeta1`` is its observation precision and
``config.num_pseudo`` the VampPrior's pseudo-inputs, initialised as that many
distinct training points (the ``use_training_data_init`` option of the
VampPrior authors' code).
"""

from __future__ import annotations

from typing import Any

import flax
import jax
import jax.numpy as jnp
import numpy as np
import optax

from vaells_jax.config import Config
from vaells_jax.data.augment import randomly_rotated
from vaells_jax.models.baselines import Baseline
from vaells_jax.training.optim import SkippedSteps, cooldown, skip_if_not_finite
from vaells_jax.training.step import jit_step, poison_if_not_finite

__all__ = [
  "BaselineState",
  "describe_baseline",
  "create_baseline",
  "init_baseline_state",
  "make_baseline_step",
]


@flax.struct.dataclass
class BaselineState(SkippedSteps):
  """Everything that changes while a baseline trains.

  Attributes:
    step: steps taken, scalar int.
    params: the baseline's parameters (:func:`vaells_jax.models.baselines.init`).
    opt_state: optax state (Adam inside
      :func:`~vaells_jax.training.optim.skip_if_not_finite`; its counters read
      through ``net_skipped`` and ``bad_streak``).
  """

  step: jax.Array
  params: Any
  opt_state: Any


def describe_baseline(metrics: dict) -> str:
  """A baseline's log line metrics (:func:`vaells_jax.training.loop.train_loop`)."""
  return (
    f"loss {metrics['loss']:+.4f}  log_px {metrics['log_px']:+.4f}"
    f"  kl {metrics['kl']:.4f}  net_skipped {int(metrics['net_skipped'])}"
  )


def create_baseline(config: Config, data_dim: int) -> Baseline:
  """The baseline ``config.model`` for ``data_dim``-dimensional inputs."""
  return Baseline.create(
    config.model,
    data_dim,
    config.latent_dim,
    config.hidden,
    config.network,
    config.baseline_zeta1,
    config.conv_channels,
  )


def _optimizer(config: Config) -> optax.GradientTransformation:
  factor = cooldown(config)  # Adam's count is the step: a baseline never alternates
  rate = config.lr_net if factor is None else lambda n: config.lr_net * factor(n)
  return skip_if_not_finite(optax.adam(rate, b1=0.5, b2=0.999))


def init_baseline_state(key, config: Config, x_train) -> BaselineState:
  """Initial state: random networks; VampPrior pseudo-inputs = training points.

  Args:
    key: ``jax.random`` key.
    config: the run's configuration (``config.model`` a baseline).
    x_train: ``[N, D]`` training inputs.

  Raises:
    ValueError: for a VampPrior with more pseudo-inputs than training points.
  """
  x_train = np.asarray(x_train, np.float32)
  baseline = create_baseline(config, x_train.shape[1])
  k_enc, k_dec = jax.random.split(key)
  params = {
    "encoder": baseline.encoder.init(k_enc, jnp.zeros((1, baseline.input_dim)))[
      "params"
    ],
    "decoder": baseline.decoder.init(k_dec, jnp.zeros((1, baseline.latent_dim)))[
      "params"
    ],
  }
  if config.model == "vampprior":
    if config.num_pseudo > x_train.shape[0]:
      raise ValueError(
        f"config.num_pseudo={config.num_pseudo} is more than the "
        f"{x_train.shape[0]} training points that initialise "
        "the VampPrior's pseudo-inputs."
      )
    rng = np.random.default_rng([config.seed, 7])
    params["pseudo_inputs"] = jnp.asarray(
      x_train[rng.choice(x_train.shape[0], config.num_pseudo, replace=False)]
    )
  return BaselineState(
    step=jnp.zeros((), jnp.int32),
    params=params,
    opt_state=_optimizer(config).init(params),
  )


def make_baseline_step(
  config: Config, data_dim: int, mesh: jax.sharding.Mesh | None = None
):
  """Builds the jitted ``step(state, batch, key) -> (state, metrics)``.

  ``batch`` is ``{"x": [B, D], "label": [B]}`` (labels unused). With
  ``config.input_rotation`` each input is first rotated to a random angle,
  as VAELLS's rotated-MNIST step does. A step with a non-finite loss or
  gradient leaves the parameters unchanged and is counted. With a ``mesh``
  the batch is split over its ``"data"`` axis (as
  :func:`vaells_jax.training.step.make_train_step`).
  """
  baseline = create_baseline(config, data_dim)
  optimizer = _optimizer(config)

  def step(state: BaselineState, batch, key):
    k_rot, k_elbo = jax.random.split(key)
    x = batch["x"]
    if config.input_rotation:
      x = randomly_rotated(k_rot, x, config.input_rotation)
    (loss, terms), grads = jax.value_and_grad(baseline.loss_and_terms, has_aux=True)(
      state.params, x, k_elbo
    )
    grads = poison_if_not_finite(loss, grads)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    new_state = state.replace(
      step=state.step + 1,
      params=optax.apply_updates(state.params, updates),
      opt_state=opt_state,
    )
    metrics = {
      "loss": loss,
      "log_px": jnp.mean(terms.log_px),
      "kl": jnp.mean(terms.kl),
      "net_skipped": new_state.net_skipped,
    }
    return new_state, metrics

  return jit_step(step, mesh)
