"""Log densities of the baselines (pure): Gaussian, VampPrior mixture, observation."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from vaells_jax.core.objective import gaussian_log_norm, reconstruction_error

__all__ = [
  "gaussian_kl_to_standard_normal",
  "gaussian_log_prob",
  "observation_log_prob",
  "standard_normal_log_prob",
  "vampprior_log_prob",
]

_LOG_2PI = math.log(2.0 * math.pi)


def gaussian_log_prob(z, mean, log_var):
  """``log N(z; mean, diag exp(log_var))``, constants included.

  Args:
    z: points ``[..., d]``.
    mean: means ``[..., d]``, broadcasting with ``z``.
    log_var: log-variances ``[..., d]``, broadcasting with ``z``.

  Returns:
    ``[...]``, the broadcast batch shape.
  """
  return -0.5 * jnp.sum(
    _LOG_2PI + log_var + jnp.square(z - mean) * jnp.exp(-log_var), axis=-1
  )


def standard_normal_log_prob(z):
  """``log N(z; 0, I)``: ``[..., d] -> [...]``."""
  return -0.5 * jnp.sum(_LOG_2PI + jnp.square(z), axis=-1)


def gaussian_kl_to_standard_normal(mean, log_var):
  """``KL(N(mean, diag exp(log_var)) || N(0, I))`` in closed form.

  Args:
    mean: ``[..., d]``.
    log_var: ``[..., d]``.

  Returns:
    ``1/2 sum(exp(log_var) + mean^2 - 1 - log_var)``, ``[...]`` (nats).
  """
  return 0.5 * jnp.sum(jnp.exp(log_var) + jnp.square(mean) - 1.0 - log_var, axis=-1)


def vampprior_log_prob(z, pseudo_means, pseudo_log_vars):
  """Log density of the uniform mixture of ``K`` diagonal Gaussians.

  ``log 1/K sum_k N(z; m_k, diag exp(v_k))``, by ``logsumexp`` over ``k``.

  Args:
    z: points ``[..., d]``.
    pseudo_means: component means ``[K, d]``.
    pseudo_log_vars: component log-variances ``[K, d]``.

  Returns:
    ``[...]``.

  Raises:
    ValueError: if the shapes are not ``[..., d]``, ``[K, d]``, ``[K, d]``.
  """
  means, log_vars = jnp.asarray(pseudo_means), jnp.asarray(pseudo_log_vars)
  if (
    means.ndim != 2
    or means.shape != log_vars.shape
    or jnp.ndim(z) < 1
    or jnp.shape(z)[-1] != means.shape[-1]
  ):
    raise ValueError(
      "vampprior_log_prob expects z [..., d] and pseudo_means, "
      f"pseudo_log_vars [K, d]; got {jnp.shape(z)}, {means.shape}, "
      f"{log_vars.shape}."
    )
  per_component = gaussian_log_prob(jnp.expand_dims(z, -2), means, log_vars)
  return jax.nn.logsumexp(per_component, axis=-1) - math.log(means.shape[0])


def observation_log_prob(x, x_hat, zeta1):
  """``log N(x; x_hat, I / zeta1)``, VAELLS's ``log p(x | z)`` with ``x_hat = g(z)``.

  Args:
    x: data ``[..., D]``.
    x_hat: decoded means ``[..., D]``, broadcasting with ``x``.
    zeta1: the observation precision ``> 0``.

  Returns:
    ``-zeta1/2 ||x - x_hat||^2 + C1``, ``[...]``.
  """
  c1 = gaussian_log_norm(jnp.shape(x)[-1], 1.0 / math.sqrt(zeta1))
  return -zeta1 * reconstruction_error(x, x_hat) + c1
