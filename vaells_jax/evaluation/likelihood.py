"""Importance-sampled log-likelihood and ELBO of a trained VAELLS model.

Paper appendix D (after Burda et al. 2016): for each test point draw ``K``
samples from the variational posterior, ``w_k = T_psi(c_k) f(x) + gamma eps_k``
with ``c_k ~ Laplace(0, b)``, and estimate

``log p(x) ~= logmeanexp_k [log p(x | w_k) + log p(w_k) - log q(w_k | x)]``

with every constant included:

* ``log p(x | w) = -1/2 zeta1 ||x - g(w)||^2 + C1``, ``C1 = -D/2 log 2 pi - D
  log sigma`` with ``sigma = zeta1^(-1/2)`` (``zeta1`` as in training);
* ``log q(w | x) = -1/2 gamma^-2 ||w - T(c_q) f(x)||^2 - ||c_q||_1 / b + C2``;
* ``log p(w) = logsumexp_i [-1/2 gamma^-2 ||w - T(c_i) a_i||^2 - ||c_i||_1 / b]
  - log N_a + C2`` over all the sample's anchors (the proper mixture density,
  also for models trained with the closest-anchor approximation);
* ``C2 = -d/2 log 2 pi - d log gamma + M log(1 / 2b)``.

The sampling parameters set the weights (``zeta2 = zeta4 = 1/gamma^2``,
``zeta3 = zeta5 = 1/b`` in the ``1/2`` convention, ``b = 1/zeta3`` of
training), and the coefficients ``c_q``, ``c_i`` are inferred with unit data
weight and the training sparsity weights ``zeta_q``, ``zeta_p``. The mean of
the same log weights is the ELBO. Latent points live on the inference scale
``f(x) / latent_scale``; the scale's Jacobian cancels between ``log p(w)`` and
``log q(w | x)``.
"""

from __future__ import annotations

import math

import jax
import numpy as np

from vaells_jax.core.laplace import sample_laplace
from vaells_jax.core.objective import (
  LogWeights,
  gaussian_log_norm,
  iwae_bound,
  laplace_log_norm,
  posterior_log_density,
  prior_log_density,
  reconstruction_error,
)
from vaells_jax.models.vaells import (
  Model,
  Noise,
  infer_step_coefficients,
  sample_posterior_latents,
)

__all__ = [
  "LogWeights",
  "chunk_log_weights",
  "importance_log_likelihood",
  "iwae_bound",
  "log_weights",
  "padded_chunks",
  "posterior_samples",
  "solve_pairs",
]


def log_weights(model: Model, params, batch, key, num_samples: int) -> LogWeights:
  """The importance-weight terms of ``num_samples`` posterior samples per point.

  Args:
    model: the model (config and networks).
    params: ``{"encoder", "decoder", "anchors", "psi"}``.
    batch: ``{"x": [P, D]`` inputs as presented, ``"source": {"x": [P, D],
      "label": [P]}}`` what the anchors are made from (see
      :meth:`~vaells_jax.models.vaells.Model.encode_anchors`).
    key: ``jax.random`` key for the samples and the inference starts.
    num_samples: ``K``.

  Returns:
    A :class:`LogWeights` of ``[P, K]`` arrays.

  Raises:
    ValueError: if ``gamma`` is 0 (the posterior then has no density).
  """
  samples = _samples(model, params, batch, key, num_samples)
  inferred = infer_step_coefficients(model, params["psi"], *samples)
  return _terms(model, params, batch, samples, inferred)


def _samples(model: Model, params, batch, key, num_samples: int):
  """``(mu [P, d], anchors [P, A, d], z [P, K, d], key)``: the encodings, the
  anchors, the posterior samples and the key for the inference starts."""
  cfg = model.config
  if cfg.gamma <= 0:
    raise ValueError(
      "The log-likelihood needs config.gamma > 0 (the posterior "
      "noise); gamma = 0 gives q no density."
    )
  b, gamma, psi = 1.0 / cfg.zeta3, cfg.gamma, params["psi"]
  x = batch["x"]
  k_c, k_e, k_inf = jax.random.split(key, 3)
  shape = (x.shape[0], num_samples)
  mu = model.encode(params, x)
  anchors = model.encode_anchors(params, batch["source"])
  coeffs = sample_laplace(k_c, shape + (cfg.num_ops,), b)
  eps = jax.random.normal(k_e, shape + (cfg.latent_dim,))
  z = sample_posterior_latents(psi, mu, Noise(coeffs, eps, gamma))
  return mu, anchors, z, k_inf


def _terms(model: Model, params, batch, samples, inferred) -> LogWeights:
  """The :class:`LogWeights` of ``samples`` given their inferred coefficients."""
  cfg = model.config
  b, gamma, psi = 1.0 / cfg.zeta3, cfg.gamma, params["psi"]
  mu, anchors, z, _ = samples
  x = batch["x"]
  c2 = gaussian_log_norm(cfg.latent_dim, gamma) + laplace_log_norm(cfg.num_ops, b)
  log_q = (
    posterior_log_density(
      psi, inferred.posterior.coeffs, mu[:, None], z, 1.0 / gamma**2, 1.0 / b
    )
    + c2
  )
  log_prior = (
    prior_log_density(
      psi, inferred.prior.coeffs, anchors[:, None], z, 1.0 / gamma**2, 1.0 / b
    )
    + c2
  )
  x_hat = model.decode(params, z)
  c1 = gaussian_log_norm(x.shape[-1], 1.0 / math.sqrt(cfg.zeta1))
  log_px = -cfg.zeta1 * reconstruction_error(x[:, None], x_hat) + c1
  return LogWeights(log_px, log_prior, log_q, z)


# (mu, anchors, z, key) of _samples, one jitted program: the samples the
# likelihood weighs (studies/mnist/ll_terms.py splits their weights apart).
posterior_samples = jax.jit(_samples, static_argnums=(0, 4))
_jit_iwae_bound = jax.jit(iwae_bound)  # one program, not a dozen eager ones
_jit_total = jax.jit(lambda *args: _terms(*args).total, static_argnums=0)


def chunk_log_weights(model, params, batch, key, num_samples):
  """``(log_weights(...).total, the inference)`` as two jitted programs around
  the inference, which compiles apart (``infer_coefficients``'s own jit), so
  that other solves of the same number of pairs (:func:`solve_pairs`) reuse
  its program."""
  # On the host: jit compiles apart for arguments committed to a device (a
  # jitted function's outputs) and uncommitted ones (the report's solves).
  samples = jax.tree_util.tree_map(
    np.asarray, posterior_samples(model, params, batch, key, num_samples)
  )
  inferred = infer_step_coefficients(model, params["psi"], *samples)
  return _jit_total(model, params, batch, samples, inferred), inferred


def padded_chunks(batch, chunk_size: int):
  """``(index, chunk)`` of ``batch`` in chunks of ``chunk_size`` points, the
  last padded by repeating its last point."""
  num = batch["x"].shape[0]
  pad = -num % chunk_size
  padded = jax.tree_util.tree_map(
    lambda a: np.concatenate([a, np.repeat(a[-1:], pad, axis=0)]), batch
  )
  for i, start in enumerate(range(0, num + pad, chunk_size)):
    yield (
      i,
      jax.tree_util.tree_map(
        lambda a, start=start: a[start : start + chunk_size], padded
      ),
    )


def solve_pairs(model: Model, num_anchors: int, num_samples: int, chunk_size: int):
  """The solves of :func:`importance_log_likelihood`, ``{restarts: pairs}``.

  As :func:`~vaells_jax.models.vaells.infer_step_coefficients` makes them for
  ``chunk_size`` points of ``num_samples`` samples with ``num_anchors``
  anchors each: one solve of all pairs when both solvers have the same
  restarts, else a posterior and a prior solve.
  """
  post, prior = model.solvers
  samples = chunk_size * num_samples
  if post.num_restarts == prior.num_restarts:
    return {prior.num_restarts: samples * (1 + num_anchors)}
  return {post.num_restarts: samples, prior.num_restarts: samples * num_anchors}


def importance_log_likelihood(
  model: Model, params, batch, key, num_samples: int, chunk_size: int = 25
):
  """Per-point log-likelihood and ELBO estimates, in jitted chunks of points.

  Args:
    model, params, batch, key, num_samples: as :func:`log_weights`.
    chunk_size: points per jitted call (the last chunk is padded), bounding
      memory at ``chunk_size * num_samples * (1 + A)`` inference pairs.

  Returns:
    ``(log_likelihood [P], elbo [P])`` as float64 NumPy arrays.
  """
  out = []
  for i, chunk in padded_chunks(batch, chunk_size):
    total, _ = chunk_log_weights(
      model, params, chunk, jax.random.fold_in(key, i), num_samples
    )
    out.append(np.asarray(total, np.float64))
  log_w = np.concatenate(out)[: batch["x"].shape[0]]
  return np.asarray(_jit_iwae_bound(log_w)), log_w.mean(axis=-1)
