"""The VAELLS model: networks, posterior samples, step inference and loss terms.

Everything here is a pure function of the parameters
``{"encoder", "decoder", "anchors", "psi"}`` (anchors ``[C, A, D]`` in input
space, per class; ``psi`` the transport operators ``[M, d, d]``), a batch and
the step's noise. The training step (:mod:`vaells_jax.training.step`) and the
evaluation (log-likelihood, reports) both use it.

Latent coordinates: the model works on one scale, ``w = f(x) / latent_scale``
(the paper's latent space scale), where the operators act and coefficients
are inferred. :meth:`Model.encode` returns it and :meth:`Model.decode` takes
it; so do the trained model's methods (:class:`vaells_jax.TrainedVAELLS`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from vaells_jax.config import Config
from vaells_jax.core.inference import InferenceResult, Solver, infer_coefficients
from vaells_jax.core.laplace import sample_laplace
from vaells_jax.core.objective import (
  frobenius_penalty,
  posterior_log_density,
  prior_log_density,
  reconstruction_error,
)
from vaells_jax.core.solvers import resolve
from vaells_jax.core.transport import transport
from vaells_jax.data.augment import randomly_rotated, rotated_copies
from vaells_jax.models import saved_networks
from vaells_jax.models.networks import (
  ConvDecoder,
  ConvEncoder,
  ImageDecoder,
  ImageEncoder,
  MLPDecoder,
  MLPEncoder,
)

__all__ = [
  "Model",
  "Noise",
  "Phase",
  "StepInference",
  "Terms",
  "draw_noise",
  "if_warmup",
  "infer_step_coefficients",
  "init_params",
  "objective_terms",
  "sample_posterior_latents",
  "solvers",
  "transport_terms",
]

WARMUP_LAPLACE_SCALE = 0.01


class Phase(NamedTuple):
  """The schedule at one step (scalars, traced inside the step; ``warmup`` may
  be a Python bool, fixed when the step is built: :func:`if_warmup`).

  ``warmup``: reconstruction only; ``update_net`` / ``update_psi``: which
  groups move; ``recon_factor`` / ``prior_factor``: factors on the
  reconstruction weight and on the prior weights. Made by
  :func:`vaells_jax.training.step.phase_of`.
  """

  warmup: jax.Array
  update_net: jax.Array
  update_psi: jax.Array
  recon_factor: jax.Array
  prior_factor: jax.Array


class StepSolvers(NamedTuple):
  """The coefficient solvers of the posterior (``mu -> z``) and prior pairs."""

  posterior: Solver
  prior: Solver


def solvers(config: Config) -> StepSolvers:
  """The posterior and prior :class:`~vaells_jax.core.inference.Solver` of ``config``.

  Both share the method, iterations and tolerance; they differ in their starts
  (``posterior_restarts`` from ``posterior_init_range``, ``num_restarts`` from
  ``init_range``); ``"auto"`` is resolved for the config's shape, so
  ``method`` names the solver that runs.
  """
  shared = dict(
    method=resolve(config.inference_method, config.num_ops, config.latent_dim),
    max_iter=config.inference_max_iter,
    tol=config.inference_tol,
  )
  return StepSolvers(
    posterior=Solver(
      init_range=config.posterior_init_range,
      num_restarts=config.posterior_restarts,
      **shared,
    ),
    prior=Solver(
      init_range=config.init_range, num_restarts=config.num_restarts, **shared
    ),
  )


def _networks(config: Config, data_dim: int):
  if config.network == "conv":
    c = config.conv_channels
    return ConvEncoder(config.latent_dim, c), ConvDecoder(data_dim, c)
  if config.network == "image":
    shape, c = config.image_shape, config.conv_channels
    return ImageEncoder(config.latent_dim, shape, c), ImageDecoder(shape, c)
  return (
    MLPEncoder(config.latent_dim, config.hidden),
    MLPDecoder(data_dim, config.hidden),
  )


def init_params(key, config: Config, anchors, data_dim: int, member: int = 0) -> dict:
  """Random networks, ``Psi ~ N(0, psi_init_std^2)`` and the given anchors.

  ``Psi`` is drawn from ``key`` too unless ``config.psi_seed >= 0``.
  Population ``member > 0`` draws its own dictionary (and, with
  ``config.population_init == "all"``, its own networks); member 0 is the
  single run's initialisation.

  Args:
    key: ``jax.random`` key.
    config: the run's configuration.
    anchors: initial anchors in input space, ``[C, A, D]``.
    data_dim: ``D``.
    member: index in a population (:mod:`vaells_jax.training.population`).

  Returns:
    ``{"encoder", "decoder", "anchors", "psi"}``.
  """
  if member and config.population_init == "all":
    key = jax.random.fold_in(key, member)
  k_enc, k_dec, k_psi = jax.random.split(key, 3)
  if config.psi_seed >= 0:
    k_psi = jax.random.PRNGKey(config.psi_seed)
  if member:
    k_psi = jax.random.fold_in(k_psi, member)
  encoder, decoder = _networks(config, data_dim)
  d, m = config.latent_dim, config.num_ops
  networks = {
    "encoder": encoder.init(k_enc, jnp.zeros((1, data_dim)))["params"],
    "decoder": decoder.init(k_dec, jnp.zeros((1, d)))["params"],
  }
  psi = config.psi_init_std * jax.random.normal(k_psi, (m, d, d))
  if config.start_networks:  # the networks, and operators the draw is added to
    start = saved_networks.read(config.start_networks, {**networks, "psi": psi})
    networks = {k: start[k] for k in networks}
    psi = psi + start["psi"]
  return {**networks, "anchors": jnp.asarray(anchors, jnp.float32), "psi": psi}


class Noise(NamedTuple):
  coeffs: jax.Array  # c_hat [B, S, M]
  eps: jax.Array  # [B, S, d]
  gamma: jax.Array


class Terms(NamedTuple):
  """Batch means of each objective term (weights applied)."""

  recon: jax.Array
  log_q: jax.Array
  log_p: jax.Array
  frobenius: jax.Array

  @property
  def transport_part(self):
    return self.log_q - self.log_p + self.frobenius

  @property
  def total(self):
    return self.recon + self.transport_part


class Model(NamedTuple):
  """The networks, solvers and settings a step needs (static under ``jit``)."""

  config: Config
  encoder: Any
  decoder: Any
  solvers: StepSolvers

  @classmethod
  def create(cls, config: Config, data_dim: int) -> "Model":
    return cls(config, *_networks(config, data_dim), solvers(config))

  def encode(self, params, x):
    """Latent codes ``f(x) / latent_scale``: ``[..., D] -> [..., d]``."""
    code = self.encoder.apply({"params": params["encoder"]}, x)
    return code / self.config.latent_scale

  def decode(self, params, w):
    """Decodes latent codes: ``g(latent_scale * w)``, ``[..., d] -> [..., D]``."""
    return self.decoder.apply(
      {"params": params["decoder"]}, w * self.config.latent_scale
    )

  def present(self, x, key):
    """The inputs as the step sees them: ``x`` itself, or each input rotated
    to a random angle in ``[0, input_rotation]`` degrees (rotated MNIST)."""
    if not self.config.input_rotation:
      return x
    return randomly_rotated(key, x, self.config.input_rotation)

  def encode_anchors(self, params, batch):
    """Encoded anchors of each sample, ``[B, A, d]``.

    The anchors of the sample's class (``params["anchors"][label]``; all
    ``C * A`` anchors are encoded once), or with ``rotation_anchors = A > 0``
    the sample's own unrotated input ``batch["x"]`` rotated by ``360 k / A``
    degrees.
    """
    if self.config.rotation_anchors:
      return self.encode(
        params, rotated_copies(batch["x"], self.config.rotation_anchors)
      )
    anchors = params["anchors"]
    codes = self.encode(params, anchors.reshape(-1, anchors.shape[-1]))
    return codes.reshape(anchors.shape[:2] + codes.shape[-1:])[batch["label"]]


def if_warmup(phase: Phase, warmup_fn, train_fn):
  """``warmup_fn()`` during warm-up, else ``train_fn()``.

  A Python-bool ``phase.warmup`` picks the branch while tracing; a traced one
  makes a ``jax.lax.cond``. XLA's CPU backend leaves the gradient of a
  convolution inside a conditional in a slow generic form
  (docs/studies/benchmarks-training.md#convolutions-inside-a-conditional), so the
  training step is built once per value of ``warmup``
  (:class:`vaells_jax.training.step.PhasedStep`).
  """
  if isinstance(phase.warmup, bool):
    return warmup_fn() if phase.warmup else train_fn()
  return jax.lax.cond(phase.warmup, warmup_fn, train_fn)


def sample_posterior_latents(psi, mu, noise: Noise):
  """``z = T_psi(c_hat) mu + gamma eps``: ``mu [B, d] -> [B, S, d]``."""
  return transport(psi, noise.coeffs, mu[:, None, :]) + noise.gamma * noise.eps


def draw_noise(key, config: Config, phase: Phase, batch_size: int) -> Noise:
  """The step's Laplace coefficients and Gaussian noise (warm-up: ``b = 0.01``,
  ``gamma = 0``)."""
  k_c, k_e = jax.random.split(key)
  shape = (batch_size, config.num_samples)
  scale = jnp.where(phase.warmup, WARMUP_LAPLACE_SCALE, 1.0 / config.zeta3)
  return Noise(
    coeffs=sample_laplace(k_c, shape + (config.num_ops,), scale),
    eps=jax.random.normal(k_e, shape + (config.latent_dim,)),
    gamma=jnp.where(phase.warmup, 0.0, config.gamma),
  )


class StepInference(NamedTuple):
  """Inferred coefficients of one step (constants for the gradient)."""

  posterior: InferenceResult  # over [B, S]: f(x) -> z
  prior: InferenceResult  # over [B, S, A]: anchor_i -> z


def infer_step_coefficients(model: Model, psi, mu, anchors, z, key) -> StepInference:
  """Posterior (``mu -> z``) and prior (``anchor_i -> z``) inference.

  As in the reference code, posterior pairs use the posterior solver's starts
  and anchor pairs the prior solver's, each with its own sparsity weight
  (``zeta_q``, ``zeta_p``). When both solvers have the same number of restarts
  all pairs share one vmapped solve; otherwise (the original's one posterior
  start against two anchor restarts) the two groups are solved apart.

  Args:
    model: the model (its config and solvers).
    psi: ``[M, d, d]``.
    mu: encodings ``[B, d]``.
    anchors: encoded anchors of each sample's class, ``[B, A, d]``.
    z: samples ``[B, S, d]``.
    key: random key for the starts.

  Returns:
    A :class:`StepInference`.
  """
  cfg, post, prior = model.config, *model.solvers
  batch, samples, dim = z.shape
  num_anchors = anchors.shape[1]
  mu = jnp.broadcast_to(mu[:, None, None, :], (batch, samples, 1, dim))
  anchors = jnp.broadcast_to(anchors[:, None], (batch, samples, num_anchors, dim))
  z1 = z[:, :, None, :]
  if post.num_restarts != prior.num_restarts:
    post_key, prior_key = jax.random.split(key)
    return StepInference(
      posterior=post(psi, mu[:, :, 0], z, l1_weight=cfg.zeta_q, key=post_key),
      prior=prior(psi, anchors, z1, l1_weight=cfg.zeta_p, key=prior_key),
    )

  def per_pair(posterior_value, prior_value):
    return jnp.asarray([posterior_value] + [prior_value] * num_anchors, z.dtype)

  result = infer_coefficients(
    psi,
    jnp.concatenate([mu, anchors], axis=2),
    z1,
    l1_weight=per_pair(cfg.zeta_q, cfg.zeta_p),
    key=key,
    num_restarts=prior.num_restarts,
    init_range=(
      per_pair(post.init_range[0], prior.init_range[0]),
      per_pair(post.init_range[1], prior.init_range[1]),
    ),
    max_iter=prior.max_iter,
    tol=prior.tol,
    method=prior.method,
  )
  return StepInference(
    posterior=jax.tree_util.tree_map(lambda a: a[:, :, 0], result),
    prior=jax.tree_util.tree_map(lambda a: a[:, :, 1:], result),
  )


def transport_terms(
  config: Config, psi, mu, anchors, z, inferred: StepInference, phase: Phase
):
  """``(log_q, log_p, frobenius)``: the transport-operator part of the loss.

  Args:
    config: the run's configuration (weights, closest-anchor flag).
    psi: ``[M, d, d]``.
    mu: encodings ``[B, d]``.
    anchors: encoded anchors of each sample, ``[B, A, d]``.
    z: samples ``[B, S, d]``.
    inferred: the step's :class:`StepInference`.
    phase: the schedule (its prior factor weights the prior terms).

  Returns:
    Batch means, weights applied.
  """
  log_q = posterior_log_density(
    psi, inferred.posterior.coeffs, mu[:, None, :], z, config.zeta2, config.zeta3
  )
  log_p = prior_log_density(
    psi,
    inferred.prior.coeffs,
    anchors[:, None],
    z,
    config.zeta4 * phase.prior_factor,
    config.zeta5 * phase.prior_factor,
    closest=config.closest_anchor,
    inference_objective=inferred.prior.objective,
  )
  return jnp.mean(log_q), jnp.mean(log_p), frobenius_penalty(psi, config.eta)


def objective_terms(
  model: Model, params, batch, noise: Noise, inferred: StepInference, phase: Phase
) -> Terms:
  """Weighted batch means of the loss terms at fixed noise and coefficients.

  ``batch["x"]`` are the inputs as presented (rotated, for rotated MNIST) and
  ``batch["source"]`` what the anchors are made from (see
  :meth:`Model.encode_anchors`). During warm-up only the reconstruction term
  is computed; the others are 0.
  """
  cfg, psi = model.config, params["psi"]
  mu = model.encode(params, batch["x"])
  z = sample_posterior_latents(psi, mu, noise)
  x_hat = model.decode(params, z)
  recon = reconstruction_error(batch["x"][:, None, :], x_hat)

  def transport_part():
    anchors = model.encode_anchors(params, batch["source"])
    return transport_terms(cfg, psi, mu, anchors, z, inferred, phase)

  zero = jnp.zeros((), recon.dtype)
  log_q, log_p, frobenius = if_warmup(phase, lambda: (zero, zero, zero), transport_part)
  return Terms(
    recon=cfg.zeta1 * phase.recon_factor * jnp.mean(recon),
    log_q=log_q,
    log_p=log_p,
    frobenius=frobenius,
  )
