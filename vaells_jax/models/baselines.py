"""Baselines of the paper's comparison: VAE, VampPrior VAE and hyperspherical VAE.

* ``"vae"`` (Kingma & Welling 2014): ``q(z | x) = N(mean(x), diag exp
  log_var(x))``, ``p(z) = N(0, I)``, closed-form KL in the ELBO.
* ``"vampprior"`` (Tomczak & Welling 2018): the same posterior, and the prior
  ``p(z) = 1/K sum_k q(z | u_k)``, the uniform mixture of the encoder's
  posteriors of ``K`` learned pseudo-inputs ``u_k`` (``params["pseudo_inputs"]
  [K, D]``). Its KL has no closed form, so the ELBO uses the single-sample
  estimate ``log q(z | x) - log p(z)``.
* ``"svae"`` (Davidson et al. 2018): ``q(z | x) = vMF(mu(x), kappa(x))`` on the
  sphere ``S^{d-1}`` in ``R^d`` (``d = latent_dim``), ``p(z)`` uniform on it,
  closed-form KL (:func:`vaells_jax.models.vmf.vmf_kl_to_uniform`). Densities on the
  sphere are w.r.t. its surface measure.

The observation model is VAELLS's (:mod:`vaells_jax.evaluation.likelihood`):
``log p(x | z) = -1/2 zeta1 ||x - g(z)||^2 - D/2 log 2 pi - D log sigma`` with
``sigma = zeta1^(-1/2)``, so log-likelihoods are comparable when ``zeta1`` is
the VAELLS run's. The networks are those of :mod:`vaells_jax.models.networks`; the
encoder's last layer is widened to give the posterior's parameters.

A :class:`Baseline` is a static description (hashable, like
:class:`vaells_jax.training.step.Model`); parameters are a separate pytree and every
method is a pure, jittable function of ``params``, arrays and a key::

  baseline, params = init(key, "vae", input_dim=784, latent_dim=10)
  loss_and_grad = jax.jit(jax.value_and_grad(baseline.loss))
  ll = jax.jit(baseline.log_likelihood, static_argnums=3)(params, x, key, 500)
"""

from __future__ import annotations

import math
import numbers
import operator
from typing import Any, NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from vaells_jax.config import Config
from vaells_jax.core.objective import (
  LogWeights,
  iwae_bound,
)
from vaells_jax.models.densities import (
  gaussian_kl_to_standard_normal,
  gaussian_log_prob,
  observation_log_prob,
  standard_normal_log_prob,
  vampprior_log_prob,
)
from vaells_jax.models.networks import ConvDecoder, ConvEncoder, MLPDecoder, MLPEncoder
from vaells_jax.models.vmf import (
  log_sphere_area,
  sample_vmf,
  vmf_kl_to_uniform,
  vmf_log_prob,
)

__all__ = [
  "BASELINES",
  "Baseline",
  "BaselineEncoder",
  "ElboTerms",
  "GaussianPosterior",
  "VmfPosterior",
  "gaussian_kl_to_standard_normal",
  "gaussian_log_prob",
  "init",
  "observation_log_prob",
  "standard_normal_log_prob",
  "vampprior_log_prob",
]

_NETWORKS = ("mlp", "conv")  # the baselines' (not config.network's "image")

BASELINES = ("vae", "vampprior", "svae")
_LOG_2PI = math.log(2.0 * math.pi)
_CONV_INPUT_DIM = 784


# ----------------------------------------------------------------------------
# Networks.


class GaussianPosterior(NamedTuple):
  """A diagonal Gaussian: ``mean [..., d]``, ``log_var [..., d]``."""

  mean: jax.Array
  log_var: jax.Array


class VmfPosterior(NamedTuple):
  """A vMF: ``mean_direction [..., d]`` (unit norm), ``kappa [...]`` (``> 1``)."""

  mean_direction: jax.Array
  kappa: jax.Array


class BaselineEncoder(nn.Module):
  """The posterior's parameters from an ``MLPEncoder`` / ``ConvEncoder`` body.

  The body (submodule ``"body"``) has ``2 d`` outputs for a Gaussian (mean,
  log-variance) or ``d + 1`` for a vMF (a direction normalised to the unit
  sphere and ``kappa = softplus(.) + 1``).

  Attributes:
    latent_dim: ``d``.
    family: ``"gaussian"`` or ``"vmf"``.
    network: ``"mlp"`` or ``"conv"`` (784-pixel images).
    hidden: the MLP's hidden widths (unused by ``"conv"``).
    channels: the convolutions' channels (unused by ``"mlp"``).
  """

  latent_dim: int
  family: str = "gaussian"
  network: str = "mlp"
  hidden: Sequence[int] = (512,)
  channels: int = Config.conv_channels

  @nn.compact
  def __call__(self, x):
    """``[..., D]`` inputs -> a :class:`GaussianPosterior` or :class:`VmfPosterior`."""
    d = self.latent_dim
    out = 2 * d if self.family == "gaussian" else d + 1
    if self.network == "conv":
      raw = ConvEncoder(out, self.channels, name="body")(x)
    else:
      raw = MLPEncoder(out, tuple(self.hidden), name="body")(x)
    if self.family == "gaussian":
      return GaussianPosterior(raw[..., :d], raw[..., d:])
    direction = raw[..., :d]
    sq_norm = jnp.sum(jnp.square(direction), axis=-1, keepdims=True)
    direction = direction * jax.lax.rsqrt(
      jnp.maximum(sq_norm, jnp.finfo(raw.dtype).tiny)
    )
    return VmfPosterior(direction, nn.softplus(raw[..., d]) + 1.0)


# ----------------------------------------------------------------------------
# Models.


class ElboTerms(NamedTuple):
  """Single-sample ELBO terms of a batch, each ``[B]`` (``z`` is ``[B, d]``).

  ``kl`` is the closed-form KL (``"vae"``, ``"svae"``) or the estimate
  ``log q(z | x) - log p(z)`` at ``z`` (``"vampprior"``).
  """

  log_px: jax.Array
  kl: jax.Array
  elbo: jax.Array
  z: jax.Array


class Baseline(NamedTuple):
  """A baseline model (static; build it with :meth:`create` or :func:`init`).

  ``params`` is ``{"encoder", "decoder"}`` plus ``"pseudo_inputs" [K, D]``
  for ``"vampprior"``.
  """

  model: str
  encoder: BaselineEncoder
  decoder: Any
  input_dim: int
  latent_dim: int
  zeta1: float

  @classmethod
  def create(
    cls,
    model: str,
    input_dim: int,
    latent_dim: int,
    hidden: Sequence[int] = (512,),
    network: str = "mlp",
    zeta1: float = Config.zeta1,
    conv_channels: int = Config.conv_channels,
  ) -> Baseline:
    """Validates the settings and builds the networks (see :func:`init`)."""
    if model not in BASELINES:
      raise ValueError(f"model must be one of {BASELINES}, got {model!r}.")
    if network not in _NETWORKS:
      raise ValueError(f"network must be one of {_NETWORKS}, got {network!r}.")
    input_dim = _positive_int("input_dim", input_dim)
    latent_dim = _positive_int("latent_dim", latent_dim)
    if model == "svae" and latent_dim < 2:
      raise ValueError(
        f"svae needs latent_dim >= 2 (the sphere S^(d-1) in R^d),"
        f" got latent_dim={latent_dim}."
      )
    if network == "conv" and input_dim != _CONV_INPUT_DIM:
      raise ValueError(
        f"network='conv' is for 28 x 28 images: input_dim must be "
        f"784, got {input_dim}; use network='mlp'."
      )
    hidden = _check_hidden(hidden)
    if (
      not isinstance(zeta1, numbers.Real)
      or isinstance(zeta1, bool)
      or not 0 < zeta1 < math.inf
    ):
      raise ValueError(
        f"zeta1 (the observation precision) must be a finite number > 0, got {zeta1!r}."
      )
    family = "vmf" if model == "svae" else "gaussian"
    conv_channels = _positive_int("conv_channels", conv_channels)
    encoder = BaselineEncoder(latent_dim, family, network, hidden, conv_channels)
    decoder = (
      ConvDecoder(input_dim, conv_channels)
      if network == "conv"
      else MLPDecoder(input_dim, hidden)
    )
    return cls(model, encoder, decoder, input_dim, latent_dim, float(zeta1))

  def encode(self, params, x):
    """``x [..., D]`` -> the posterior ``q(z | x)``'s parameters ``[..., d]``."""
    _check_last_axis(x, self.input_dim, "x")
    return self.encoder.apply({"params": params["encoder"]}, x)

  def decode(self, params, z):
    """``z [..., d]`` -> decoded means ``g(z) [..., D]``."""
    _check_last_axis(z, self.latent_dim, "z")
    return self.decoder.apply({"params": params["decoder"]}, z)

  def prior_components(self, params) -> GaussianPosterior:
    """The VampPrior's components, the posteriors of the pseudo-inputs ``[K, d]``."""
    if self.model != "vampprior":
      raise ValueError(f"only 'vampprior' has prior components, not {self.model!r}.")
    return self.encode(params, params["pseudo_inputs"])

  def prior_log_prob(self, params, z):
    """``log p(z)``: ``[..., d] -> [...]``."""
    _check_last_axis(z, self.latent_dim, "z")
    if self.model == "vae":
      return standard_normal_log_prob(z)
    if self.model == "vampprior":
      return vampprior_log_prob(z, *self.prior_components(params))
    return jnp.full(z.shape[:-1], -log_sphere_area(self.latent_dim), z.dtype)

  def posterior_log_prob(self, posterior, z):
    """``log q(z | x)``: ``z [..., n, d]``, ``posterior [..., d]`` -> ``[..., n]``."""
    if self.model == "svae":
      return vmf_log_prob(
        z, posterior.mean_direction[..., None, :], posterior.kappa[..., None]
      )
    return gaussian_log_prob(
      z, posterior.mean[..., None, :], posterior.log_var[..., None, :]
    )

  def sample_posterior(self, params, key, x, n: int):
    """Reparameterised samples of ``q(z | x)``.

    Args:
      params: the model's parameters.
      key: ``jax.random`` key.
      x: inputs ``[..., D]``.
      n: samples per input (static).

    Returns:
      ``[..., n, d]`` (unit vectors for ``"svae"``).
    """
    return _sample(self.encode(params, x), key, _positive_int("n", n))

  def sample_prior(self, params, key, n: int):
    """Samples of ``p(z)``: ``N(0, I)``; a uniformly picked pseudo-input's
    posterior (VampPrior); ``g / |g|``, ``g ~ N(0, I)`` (uniform on the sphere).

    Args:
      params: the model's parameters.
      key: ``jax.random`` key.
      n: the number of samples (static).

    Returns:
      ``[n, d]``.
    """
    n = _positive_int("n", n)
    if self.model == "vampprior":
      comps = self.prior_components(params)
      k_pick, k_sample = jax.random.split(key)
      pick = jax.random.randint(k_pick, (n,), 0, comps.mean.shape[0])
      return _sample(
        GaussianPosterior(comps.mean[pick], comps.log_var[pick]), k_sample, 1
      )[:, 0]
    dtype = jax.tree_util.tree_leaves(params["decoder"])[0].dtype
    g = jax.random.normal(key, (n, self.latent_dim), dtype)
    if self.model == "svae":
      return g / jnp.linalg.norm(g, axis=-1, keepdims=True)
    return g

  def elbo_terms(self, params, x, key) -> ElboTerms:
    """Single-sample ELBO of each point, ``log p(x | z) - KL``, ``z ~ q(. | x)``.

    Args:
      params: the model's parameters.
      x: inputs ``[B, D]``.
      key: ``jax.random`` key for the posterior sample.

    Returns:
      :class:`ElboTerms` of ``[B]`` arrays (and ``z [B, d]``).
    """
    posterior = self.encode(params, x)
    z = _sample(posterior, key, 1)  # [B, 1, d]
    log_px = observation_log_prob(x, self.decode(params, z[..., 0, :]), self.zeta1)
    if self.model == "vae":
      kl = gaussian_kl_to_standard_normal(*posterior)
    elif self.model == "svae":
      kl = vmf_kl_to_uniform(posterior.kappa, self.latent_dim)
    else:
      kl = (self.posterior_log_prob(posterior, z) - self.prior_log_prob(params, z))[
        ..., 0
      ]
    return ElboTerms(log_px, kl, log_px - kl, z[..., 0, :])

  def loss_and_terms(self, params, x, key) -> tuple[jax.Array, ElboTerms]:
    """The training loss and its :class:`ElboTerms` (for ``has_aux=True``)."""
    terms = self.elbo_terms(params, x, key)
    return -jnp.mean(terms.elbo), terms

  def loss(self, params, x, key):
    """The training loss, ``-mean_b ELBO(x_b)`` over ``x [B, D]`` (a scalar)."""
    return self.loss_and_terms(params, x, key)[0]

  def log_weights(self, params, x, key, num_samples: int) -> LogWeights:
    """Importance-weight terms of ``K`` posterior samples per point.

    Args:
      params: the model's parameters.
      x: inputs ``[B, D]``.
      key: ``jax.random`` key for the samples.
      num_samples: ``K`` (static).

    Returns:
      A :class:`vaells_jax.evaluation.likelihood.LogWeights` of ``[B, K]`` terms, every
      constant included (``samples`` is ``[B, K, d]``), as VAELLS's.
    """
    posterior = self.encode(params, x)
    z = _sample(posterior, key, _positive_int("num_samples", num_samples))
    log_px = observation_log_prob(x[..., None, :], self.decode(params, z), self.zeta1)
    return LogWeights(
      log_px, self.prior_log_prob(params, z), self.posterior_log_prob(posterior, z), z
    )

  def log_likelihood(self, params, x, key, num_samples: int):
    """Importance-sampled ``log p(x)`` (Burda et al. 2016).

    ``logmeanexp_k [log p(x | z_k) + log p(z_k) - log q(z_k | x)]``, ``z_k ~
    q(. | x)``; a lower bound in expectation, tight as ``num_samples`` grows.
    Memory grows as ``B K D`` (and ``B K num_pseudo d`` for the VampPrior),
    so evaluate large sets in batches.

    Args:
      params, x, key, num_samples: as :meth:`log_weights` (``num_samples``
        static under ``jit``).

    Returns:
      ``[B]`` estimates (nats).
    """
    return iwae_bound(self.log_weights(params, x, key, num_samples).total)


def _sample(posterior, key, n: int):
  """``n`` reparameterised samples of ``posterior [..., d]`` -> ``[..., n, d]``."""
  if isinstance(posterior, VmfPosterior):
    mu, kappa = posterior
    mu = jnp.broadcast_to(mu[..., None, :], mu.shape[:-1] + (n, mu.shape[-1]))
    return sample_vmf(key, mu, jnp.broadcast_to(kappa[..., None], mu.shape[:-1]))
  mean, log_var = posterior
  shape = mean.shape[:-1] + (n, mean.shape[-1])
  eps = jax.random.normal(key, shape, mean.dtype)
  return mean[..., None, :] + jnp.exp(0.5 * log_var)[..., None, :] * eps


def init(
  key,
  model: str,
  input_dim: int,
  latent_dim: int,
  hidden: Sequence[int] = (512,),
  num_pseudo: int = 100,
  pseudo_init=None,
  *,
  network: str = "mlp",
  zeta1: float = Config.zeta1,
) -> tuple[Baseline, dict]:
  """Builds a baseline and initialises its parameters.

  Args:
    key: ``jax.random`` key.
    model: one of :data:`BASELINES`.
    input_dim: ``D``, the data dimension.
    latent_dim: ``d`` (for ``"svae"`` the sphere ``S^{d-1}``, so ``d >= 2``).
    hidden: the MLP hidden widths, shared by encoder and decoder.
    num_pseudo: ``K``, the VampPrior's pseudo-inputs (``"vampprior"`` only).
    pseudo_init: ``[K, D]`` starting pseudo-inputs (e.g. training points);
      ``None`` draws them ``N(0, 1)``. ``"vampprior"`` only.
    network: ``"mlp"`` (paper table 2) or ``"conv"`` (table 5, ``D = 784``).
    zeta1: the observation precision, as the VAELLS run compared with.

  Returns:
    ``(baseline, params)``.

  Raises:
    ValueError: for an unknown model or network, non-positive sizes, ``"svae"``
      with ``latent_dim < 2``, pseudo-inputs of the wrong shape or for another
      model, or ``zeta1 <= 0``.
  """
  baseline = Baseline.create(model, input_dim, latent_dim, hidden, network, zeta1)
  if model != "vampprior" and pseudo_init is not None:
    raise ValueError(
      f"pseudo_init is only used by 'vampprior', not {model!r}; leave it None."
    )
  if model == "vampprior":
    num_pseudo = _positive_int("num_pseudo", num_pseudo)
    pseudo_init = _check_pseudo_init(pseudo_init, num_pseudo, baseline.input_dim)
  k_enc, k_dec, k_pseudo = jax.random.split(key, 3)
  params = {
    "encoder": baseline.encoder.init(k_enc, jnp.zeros((1, baseline.input_dim)))[
      "params"
    ],
    "decoder": baseline.decoder.init(k_dec, jnp.zeros((1, baseline.latent_dim)))[
      "params"
    ],
  }
  if model == "vampprior":
    params["pseudo_inputs"] = (
      jax.random.normal(k_pseudo, (num_pseudo, baseline.input_dim))
      if pseudo_init is None
      else jnp.asarray(pseudo_init)
    )
  return baseline, params


def _check_pseudo_init(pseudo_init, num_pseudo, input_dim):
  """``pseudo_init`` as a float32 ``[K, D]`` NumPy array (or None), checked."""
  if pseudo_init is None:
    return None
  pseudo = np.asarray(pseudo_init, np.float32)
  if pseudo.shape != (num_pseudo, input_dim):
    raise ValueError(
      f"pseudo_init must have shape [num_pseudo, input_dim] = "
      f"[{num_pseudo}, {input_dim}], got {pseudo.shape}; pass "
      "num_pseudo=len(pseudo_init)."
    )
  if not np.all(np.isfinite(pseudo)):
    raise ValueError("pseudo_init must be finite.")
  return pseudo


def _positive_int(name, value) -> int:
  try:
    if isinstance(value, bool):
      raise TypeError
    value = operator.index(value)
  except TypeError:
    raise ValueError(f"{name} must be an int >= 1, got {value!r}.") from None
  if value < 1:
    raise ValueError(f"{name} must be an int >= 1, got {value}.")
  return value


def _check_hidden(hidden) -> tuple[int, ...]:
  try:
    widths = tuple(_positive_int("hidden width", h) for h in hidden)
  except (TypeError, ValueError):
    widths = ()
  if not widths:
    raise ValueError(
      f"hidden must be a non-empty sequence of layer widths >= 1, got {hidden!r}."
    )
  return widths


def _check_last_axis(a, size, name):
  if jnp.ndim(a) < 1 or jnp.shape(a)[-1] != size:
    raise ValueError(f"{name} must be [..., {size}], got shape {jnp.shape(a)}.")
