"""The VAELLS objective as pure functions (paper appendix A, SPEC section 2).

All squared norms use the ``1/2 ||.||^2`` convention of the reference code:
``zeta * 1/2 ||.||^2`` where the paper writes ``zeta ||.||^2``. Additive
constants (``C1``, ``C2``) are left out of the training loss; see
:func:`gaussian_log_norm` and :func:`laplace_log_norm` for them. Coefficients
come from :func:`vaells_jax.infer_coefficients` and enter as constants.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from vaells_jax.core.transport import transport

__all__ = [
  "LogWeights",
  "frobenius_penalty",
  "gaussian_log_norm",
  "iwae_bound",
  "laplace_log_norm",
  "posterior_log_density",
  "prior_log_density",
  "reconstruction_error",
]


def reconstruction_error(x, x_hat):
  """``1/2 ||x - x_hat||^2`` over the last axis: ``[..., D] -> [...]``."""
  return 0.5 * jnp.sum((x - x_hat) ** 2, axis=-1)


def posterior_log_density(psi, coeffs, start, z, data_weight, l1_weight):
  """``log q(z | start)`` up to ``C2`` at inferred coefficients ``coeffs``.

  ``-1/2 data_weight ||z - T_psi(c) start||^2 - l1_weight ||c||_1``.

  Args:
    psi: operators ``[M, d, d]``.
    coeffs: inferred coefficients ``[..., M]`` (constants).
    start: encodings the path starts from, ``[..., d]``.
    z: latent samples, ``[..., d]``.
    data_weight: ``zeta2`` (posterior) or ``zeta4`` (prior).
    l1_weight: ``zeta3`` (posterior) or ``zeta5`` (prior).

  Returns:
    ``[...]``.
  """
  coeffs = jax.lax.stop_gradient(coeffs)
  residual = z - transport(psi, coeffs, start)
  return -0.5 * data_weight * jnp.sum(residual**2, axis=-1) - l1_weight * jnp.sum(
    jnp.abs(coeffs), axis=-1
  )


def prior_log_density(
  psi,
  coeffs,
  anchors,
  z,
  data_weight,
  l1_weight,
  *,
  closest=False,
  inference_objective=None,
):
  """``log p(z)`` up to ``C2``: the mixture over the sample's anchors.

  ``logsumexp_i [-1/2 zeta4 ||z - T(c_i) a_i||^2 - zeta5 ||c_i||_1] - log N_a``,
  or, with ``closest=True``, only the term of the anchor whose inference
  objective is lowest (paper appendix B).

  Args:
    psi: operators ``[M, d, d]``.
    coeffs: coefficients from each anchor to ``z``, ``[..., A, M]``.
    anchors: encoded anchors of each sample's class, ``[..., A, d]``.
    z: latent samples, ``[..., d]``.
    data_weight: ``zeta4``.
    l1_weight: ``zeta5``.
    closest: use only the closest anchor.
    inference_objective: ``[..., A]`` objective of each anchor's inference;
      required when ``closest``.

  Returns:
    ``[...]``.

  Raises:
    ValueError: if ``closest`` and no ``inference_objective`` is given.
  """
  per_anchor = posterior_log_density(
    psi, coeffs, anchors, z[..., None, :], data_weight, l1_weight
  )
  if closest:
    if inference_objective is None:
      raise ValueError("closest=True needs the inference_objective of each anchor.")
    best = jnp.argmin(jax.lax.stop_gradient(inference_objective), axis=-1)
    return jnp.take_along_axis(per_anchor, best[..., None], axis=-1)[..., 0]
  return jax.nn.logsumexp(per_anchor, axis=-1) - math.log(anchors.shape[-2])


def frobenius_penalty(psi, eta):
  """``eta / 2 * sum_m ||psi_m||_F^2``."""
  return 0.5 * eta * jnp.sum(psi**2)


def gaussian_log_norm(dim, std):
  """``-dim/2 log(2 pi) - dim log(std)``: the normaliser of ``N(., std^2 I)``."""
  return -0.5 * dim * math.log(2 * math.pi) - dim * jnp.log(std)


def laplace_log_norm(num_ops, scale):
  """``M log(1 / (2 b))``: the normaliser of the factorial Laplace(0, b)."""
  return -num_ops * jnp.log(2.0 * scale)


class LogWeights(NamedTuple):
  """Terms of the importance weights, each ``[P, K]`` (constants included)."""

  log_px: jax.Array  # log p(x | w_k)
  log_prior: jax.Array  # log p(w_k)
  log_q: jax.Array  # log q(w_k | x)
  samples: jax.Array  # w_k, [P, K, d] on the inference scale

  @property
  def total(self):
    return self.log_px + self.log_prior - self.log_q


def iwae_bound(log_w):
  """``logmeanexp`` over the last axis: ``[..., K] -> [...]`` (Burda et al.)."""
  log_w = jnp.asarray(log_w)
  return jax.nn.logsumexp(log_w, axis=-1) - math.log(log_w.shape[-1])
