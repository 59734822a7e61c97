"""VAELLS training: the state, the schedule and the one jitted training step.

One step (paper Algorithm 1) encodes the batch and the anchors of each sample's
class, samples ``z = T_psi(c_hat) f(x) + gamma eps`` on the latent scale,
infers the posterior and prior coefficients (constants), and takes

* an Adam step on the networks and anchors (optax ``multi_transform``), and/or
* an accept/reject gradient step on ``Psi``: accepted when the
  transport-operator part of the objective (posterior + prior + Frobenius
  terms), re-evaluated at the new ``Psi`` with the same samples ``z`` and
  coefficients, is finite and not larger; the rate then grows by ``1/0.99``
  (capped), otherwise ``Psi`` is kept and the rate shrinks by ``0.99``.

Which groups move, and the term weights, depend on the phase (warm-up, network
steps, ``Psi`` steps), computed from ``state.step`` inside the jitted function,
so the schedule never triggers a recompilation.

Numerical faults do not crash the step: when the loss or a gradient is not
finite the network step is skipped (``net_skipped`` counts it) and the ``Psi``
step is rejected; ``bad_streak`` counts consecutive such steps so that the
training loop can stop a run that does not recover.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import flax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding, PartitionSpec

from vaells_jax.config import Config
from vaells_jax.data.mnist import rotate_images, rotated_copies
from vaells_jax.inference import infer_coefficients
from vaells_jax.laplace import sample_laplace
from vaells_jax.models import ConvDecoder, ConvEncoder, MLPDecoder, MLPEncoder
from vaells_jax.objective import (
  frobenius_penalty,
  posterior_log_density,
  prior_log_density,
  reconstruction_error,
)
from vaells_jax.transport import transport

__all__ = [
    "Phase", "TrainState", "data_parallel_mesh", "init_state", "make_train_step",
    "phase_of"
]

PSI_RATE_FACTOR = 0.99
PSI_LATE_DECAY = 0.9992
WARMUP_LAPLACE_SCALE = 0.01


@flax.struct.dataclass
class TrainState:
  """Everything that changes during training.

  Attributes:
    step: steps taken, scalar int.
    params: ``{"encoder", "decoder", "anchors"}``; anchors ``[C, A, D]`` in
      input space, per class.
    opt_state: optax state of the network/anchor optimiser.
    psi: transport operators ``[M, d, d]``.
    lr_psi: current rate of the ``Psi`` step.
    psi_rejected: rejected ``Psi`` steps so far.
    psi_attempted: ``Psi`` steps tried so far.
    net_skipped: network steps skipped for a non-finite loss or gradient.
    bad_streak: consecutive steps (up to this one) with a non-finite loss or
      gradient; 0 after a good step.
  """

  step: jax.Array
  params: Any
  opt_state: Any
  psi: jax.Array
  lr_psi: jax.Array
  psi_rejected: jax.Array
  psi_attempted: jax.Array
  net_skipped: jax.Array
  bad_streak: jax.Array


class Phase(NamedTuple):
  """The schedule at one step (all scalars, traced inside the step)."""

  warmup: jax.Array
  update_net: jax.Array
  update_psi: jax.Array
  recon_factor: jax.Array
  prior_factor: jax.Array


def phase_of(step, config: Config) -> Phase:
  """Schedule at ``step``: warm-up, then network and/or ``Psi`` updates.

  Without ``alternate`` every step after warm-up updates both groups (with the
  prior weights times ``prior_weight_net``, as the original code does). With
  it, ``net_steps`` network steps (prior terms times ``prior_weight_net``)
  alternate with ``psi_steps`` ``Psi`` steps (reconstruction times
  ``recon_weight_psi``).
  """
  step = jnp.asarray(step)
  warmup = step < config.warmup_steps
  one = jnp.ones((), jnp.float32)
  if config.alternate:
    cycle = (step - config.warmup_steps) % (config.net_steps + config.psi_steps)
    net_phase = cycle < config.net_steps
  else:
    net_phase = jnp.ones((), bool)
  update_psi = ~warmup & (~net_phase | (not config.alternate))
  psi_only = ~warmup & ~net_phase
  return Phase(
      warmup=warmup,
      update_net=warmup | net_phase,
      update_psi=update_psi,
      recon_factor=jnp.where(psi_only, config.recon_weight_psi, one),
      prior_factor=jnp.where(psi_only, one, config.prior_weight_net * one),
  )


def _networks(config: Config, data_dim: int):
  if config.network == "conv":
    return ConvEncoder(config.latent_dim), ConvDecoder(data_dim)
  return (MLPEncoder(config.latent_dim, config.hidden),
          MLPDecoder(data_dim, config.hidden))


def make_optimizer(config: Config) -> optax.GradientTransformation:
  """Adam (b1=0.5, b2=0.999) for networks and anchors; ``Psi`` is stepped apart."""
  anchor_opt = (optax.adam(config.lr_anchor, b1=0.5, b2=0.999)
                if config.learn_anchors else optax.set_to_zero())
  return optax.multi_transform(
      {"net": optax.adam(config.lr_net, b1=0.5, b2=0.999), "anchor": anchor_opt},
      {"encoder": "net", "decoder": "net", "anchors": "anchor"})


def init_state(key, config: Config, anchors, data_dim: int) -> TrainState:
  """Initial state: random networks, ``Psi ~ N(0, psi_init_std^2)``, given anchors.

  ``Psi`` is drawn from ``key`` too unless ``config.psi_seed >= 0``.

  Args:
    key: ``jax.random`` key.
    config: the run's configuration.
    anchors: initial anchors in input space, ``[C, A, D]``.
    data_dim: ``D``.
  """
  k_enc, k_dec, k_psi = jax.random.split(key, 3)
  if config.psi_seed >= 0:
    k_psi = jax.random.PRNGKey(config.psi_seed)
  encoder, decoder = _networks(config, data_dim)
  params = {
      "encoder": encoder.init(k_enc, jnp.zeros((1, data_dim)))["params"],
      "decoder": decoder.init(k_dec, jnp.zeros((1, config.latent_dim)))["params"],
      "anchors": jnp.asarray(anchors, jnp.float32),
  }
  d, m = config.latent_dim, config.num_ops
  psi = config.psi_init_std * jax.random.normal(k_psi, (m, d, d))
  return TrainState(
      step=jnp.zeros((), jnp.int32), params=params,
      opt_state=make_optimizer(config).init(params), psi=psi,
      lr_psi=jnp.asarray(config.lr_psi, jnp.float32),
      psi_rejected=jnp.zeros((), jnp.int32),
      psi_attempted=jnp.zeros((), jnp.int32),
      net_skipped=jnp.zeros((), jnp.int32),
      bad_streak=jnp.zeros((), jnp.int32))


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
  """The networks and settings a step needs (static under ``jit``)."""

  config: Config
  encoder: Any
  decoder: Any

  @classmethod
  def create(cls, config: Config, data_dim: int) -> "Model":
    return cls(config, *_networks(config, data_dim))

  def encode(self, params, x):
    """Latent codes on the inference scale, ``f(x) / latent_scale``."""
    code = self.encoder.apply({"params": params["encoder"]}, x)
    return code / self.config.latent_scale

  def decode(self, params, w):
    """Decodes points on the inference scale: ``g(latent_scale * w)``."""
    return self.decoder.apply({"params": params["decoder"]},
                              w * self.config.latent_scale)

  def present(self, x, key):
    """The inputs as the step sees them: ``x`` itself, or each input rotated
    to a random angle in ``[0, input_rotation]`` degrees (rotated MNIST)."""
    if not self.config.input_rotation:
      return x
    angles = jax.random.uniform(key, x.shape[:1], maxval=self.config.input_rotation)
    return rotate_images(x, angles)

  def encode_anchors(self, params, batch):
    """Encoded anchors of each sample, ``[B, A, d]`` on the inference scale.

    The anchors of the sample's class (``params["anchors"][label]``; all
    ``C * A`` anchors are encoded once), or with ``rotation_anchors = A > 0``
    the sample's own unrotated input ``batch["x"]`` rotated by ``360 k / A``
    degrees.
    """
    if self.config.rotation_anchors:
      return self.encode(params, rotated_copies(batch["x"],
                                                self.config.rotation_anchors))
    anchors = params["anchors"]
    codes = self.encode(params, anchors.reshape(-1, anchors.shape[-1]))
    return codes.reshape(anchors.shape[:2] + codes.shape[-1:])[batch["label"]]


def sample_posterior_latents(psi, mu, noise: Noise):
  """``z = T_psi(c_hat) mu + gamma eps``: ``mu [B, d] -> [B, S, d]``."""
  return transport(psi, noise.coeffs, mu[:, None, :]) + noise.gamma * noise.eps


class StepInference(NamedTuple):
  """Inferred coefficients of one step (constants for the gradient)."""

  posterior: Any  # InferenceResult over [B, S]: f(x) -> z
  prior: Any  # InferenceResult over [B, S, A]: anchor_i -> z


def infer_step_coefficients(model: Model, psi, mu, anchors, z, key):
  """Posterior (``mu -> z``) and prior (``anchor_i -> z``) inference, one solve.

  As in the reference code, posterior pairs start from
  ``U[posterior_init_range]`` and anchor pairs from ``U[init_range]``, each with
  its own sparsity weight (``zeta_q``, ``zeta_p``). All pairs share one vmapped
  solve, so the posterior pairs also get ``num_restarts`` starts (shifted by
  the range width), which can only lower their objective.

  Args:
    model: the model (for its config).
    psi: ``[M, d, d]``.
    mu: encodings ``[B, d]``.
    anchors: encoded anchors of each sample's class, ``[B, A, d]``.
    z: samples ``[B, S, d]``.
    key: random key for the starts.

  Returns:
    A :class:`StepInference`.
  """
  cfg = model.config
  batch, samples, dim = z.shape
  num_anchors = anchors.shape[1]
  z0 = jnp.concatenate([
      jnp.broadcast_to(mu[:, None, None, :], (batch, samples, 1, dim)),
      jnp.broadcast_to(anchors[:, None], (batch, samples, num_anchors, dim)),
  ], axis=2)

  def per_pair(posterior_value, prior_value):
    return jnp.asarray([posterior_value] + [prior_value] * num_anchors, z.dtype)

  result = infer_coefficients(
      psi, z0, z[:, :, None, :], l1_weight=per_pair(cfg.zeta_q, cfg.zeta_p),
      key=key, num_restarts=cfg.num_restarts,
      init_range=(per_pair(cfg.posterior_init_range[0], cfg.init_range[0]),
                  per_pair(cfg.posterior_init_range[1], cfg.init_range[1])),
      max_iter=cfg.inference_max_iter, tol=cfg.inference_tol,
      method=cfg.inference_method)
  return StepInference(
      posterior=jax.tree_util.tree_map(lambda a: a[:, :, 0], result),
      prior=jax.tree_util.tree_map(lambda a: a[:, :, 1:], result))


def transport_terms(config: Config, psi, mu, anchors, z, inferred,
                    phase: Phase):
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
  log_q = posterior_log_density(psi, inferred.posterior.coeffs, mu[:, None, :],
                                z, config.zeta2, config.zeta3)
  log_p = prior_log_density(
      psi, inferred.prior.coeffs, anchors[:, None], z,
      config.zeta4 * phase.prior_factor, config.zeta5 * phase.prior_factor,
      closest=config.closest_anchor, inference_objective=inferred.prior.objective)
  return jnp.mean(log_q), jnp.mean(log_p), frobenius_penalty(psi, config.eta)


def objective_terms(model: Model, params, psi, batch, noise: Noise,
                    inferred, phase: Phase) -> Terms:
  """Weighted batch means of the loss terms at fixed noise and coefficients.

  ``batch["x"]`` are the inputs as presented (rotated, for rotated MNIST) and
  ``batch["source"]`` what the anchors are made from (see
  :meth:`Model.encode_anchors`). During warm-up only the reconstruction term
  is computed; the others are 0.
  """
  cfg = model.config
  mu = model.encode(params, batch["x"])
  z = sample_posterior_latents(psi, mu, noise)
  x_hat = model.decode(params, z)
  recon = reconstruction_error(batch["x"][:, None, :], x_hat)

  def transport_part():
    anchors = model.encode_anchors(params, batch["source"])
    return transport_terms(cfg, psi, mu, anchors, z, inferred, phase)

  zero = jnp.zeros((), recon.dtype)
  log_q, log_p, frobenius = jax.lax.cond(
      phase.warmup, lambda: (zero, zero, zero), transport_part)
  return Terms(recon=cfg.zeta1 * phase.recon_factor * jnp.mean(recon),
               log_q=log_q, log_p=log_p, frobenius=frobenius)


def _draw_noise(key, config: Config, phase: Phase, batch_size: int) -> Noise:
  k_c, k_e = jax.random.split(key)
  shape = (batch_size, config.num_samples)
  scale = jnp.where(phase.warmup, WARMUP_LAPLACE_SCALE, 1.0 / config.zeta3)
  return Noise(
      coeffs=sample_laplace(k_c, shape + (config.num_ops,), scale),
      eps=jax.random.normal(k_e, shape + (config.latent_dim,)),
      gamma=jnp.where(phase.warmup, 0.0, config.gamma))


def select_tree(flag, new, old):
  """``new`` where the scalar ``flag`` holds, else ``old`` (pytrees alike)."""
  return jax.tree_util.tree_map(lambda a, b: jnp.where(flag, a, b), new, old)


def all_finite(tree):
  """Whether every leaf of ``tree`` is finite everywhere (a scalar bool)."""
  leaves = jax.tree_util.tree_leaves(tree)
  return jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in leaves]))


def _psi_update(state: TrainState, psi_new, accept, update, config: Config):
  """Accept/reject bookkeeping of the ``Psi`` step."""
  grow = jnp.minimum(state.lr_psi / PSI_RATE_FACTOR, config.max_lr_psi)
  lr = jnp.where(update, jnp.where(accept, grow, state.lr_psi * PSI_RATE_FACTOR),
                 state.lr_psi)
  if config.psi_lr_decay_start >= 0:
    lr = jnp.where(state.step >= config.psi_lr_decay_start, lr * PSI_LATE_DECAY, lr)
  return (jnp.where(update & accept, psi_new, state.psi), lr,
          state.psi_rejected + (update & ~accept).astype(jnp.int32),
          state.psi_attempted + update.astype(jnp.int32))


def data_parallel_mesh(devices=None) -> jax.sharding.Mesh:
  """A 1-D mesh, axis ``"data"``, over ``devices`` (default: all devices)."""
  devices = jax.devices() if devices is None else devices
  return jax.sharding.Mesh(np.asarray(devices), ("data",))


def make_train_step(model: Model, mesh: jax.sharding.Mesh | None = None):
  """Builds the jitted ``train_step(state, batch, key) -> (state, metrics)``.

  ``batch`` is ``{"x": [B, D], "label": [B] int}``; labels pick each sample's
  anchors from ``params["anchors"][label]``.

  With a ``mesh`` (see :func:`data_parallel_mesh`) the step is data-parallel:
  the batch is split over the mesh's ``"data"`` axis, the state and the
  metrics are replicated, and XLA inserts the cross-device reductions. The
  step computes the same function as without a mesh (up to the order of
  floating-point sums); ``B`` must be a multiple of the number of devices.
  """
  cfg = model.config
  optimizer = make_optimizer(cfg)

  def train_step(state: TrainState, batch, key):
    phase = phase_of(state.step, cfg)
    k_noise, k_inf = jax.random.split(key)
    batch = {"x": model.present(batch["x"], jax.random.fold_in(key, 7)),
             "source": batch}
    noise = _draw_noise(k_noise, cfg, phase, batch["x"].shape[0])
    mu = model.encode(state.params, batch["x"])
    z = sample_posterior_latents(state.psi, mu, noise)

    def infer():
      anchors = model.encode_anchors(state.params, batch["source"])
      args = jax.lax.stop_gradient((state.psi, mu, anchors, z))
      return anchors, infer_step_coefficients(model, *args, k_inf)

    # Warm-up trains the reconstruction alone: no anchors, no inference.
    anchors, inferred = jax.lax.cond(
        phase.warmup,
        lambda: jax.tree_util.tree_map(jnp.zeros_like, jax.eval_shape(infer)),
        infer)

    def loss(params, psi):
      terms = objective_terms(model, params, psi, batch, noise, inferred, phase)
      return terms.total, terms

    (_, terms), (g_params, g_psi) = jax.value_and_grad(
        loss, argnums=(0, 1), has_aux=True)(state.params, state.psi)
    finite = jnp.isfinite(terms.total) & all_finite((g_params, g_psi))
    update_net = phase.update_net & finite
    updates, opt_state = optimizer.update(g_params, state.opt_state, state.params)
    params = select_tree(update_net, optax.apply_updates(state.params, updates),
                     state.params)
    opt_state = select_tree(update_net, opt_state, state.opt_state)

    psi_new = state.psi - state.lr_psi * g_psi
    def transport_part_at(psi):
      log_q, log_p, frobenius = transport_terms(
          cfg, psi, *jax.lax.stop_gradient((mu, anchors, z)), inferred, phase)
      return log_q - log_p + frobenius

    new_part = jax.lax.cond(phase.update_psi, lambda: transport_part_at(psi_new),
                            lambda: terms.transport_part)
    # Same samples z as the current objective (paper Algorithm 1), new Psi.
    accept = finite & jnp.isfinite(new_part) & (new_part <= terms.transport_part)
    psi, lr_psi, rejected, attempted = _psi_update(
        state, psi_new, accept, phase.update_psi, cfg)
    new_state = state.replace(
        step=state.step + 1, params=params, opt_state=opt_state, psi=psi,
        lr_psi=lr_psi, psi_rejected=rejected, psi_attempted=attempted,
        net_skipped=state.net_skipped + (phase.update_net & ~finite).astype(
            jnp.int32),
        bad_streak=jnp.where(finite, 0, state.bad_streak + 1))
    metrics = {
        "loss": terms.total, "recon": terms.recon, "log_q": terms.log_q,
        "log_p": terms.log_p, "frobenius": terms.frobenius, "lr_psi": lr_psi,
        "psi_rejected": rejected, "psi_accepted": phase.update_psi & accept,
        "net_skipped": new_state.net_skipped,
        "inference_iters": jnp.mean(inferred.prior.num_iter.astype(jnp.float32)),
        "inference_converged": jnp.mean(
            inferred.prior.converged.astype(jnp.float32)),
    }
    return new_state, metrics

  return jit_step(train_step, mesh)


def jit_step(step, mesh: jax.sharding.Mesh | None = None):
  """Jits ``step(state, batch, key) -> (state, metrics)``; with a ``mesh``, the
  batch is split over its ``"data"`` axis and the rest replicated."""
  if mesh is None:
    return jax.jit(step)
  replicated = NamedSharding(mesh, PartitionSpec())
  split = NamedSharding(mesh, PartitionSpec("data"))
  return jax.jit(step, in_shardings=(replicated, split, replicated),
                 out_shardings=(replicated, replicated))
