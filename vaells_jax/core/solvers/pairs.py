"""The pairwise objective ``f(c) = 1/2 ||z1 - expm(sum_m c_m psi_m) z0||^2``
of many pairs at once, with its gradient, for the per-pair solvers.

Coefficients are ``[M, P]`` and points ``[d, P]``: the pairs on the minor
axis. For ``d = 2`` the matrix exponential is the closed form of
:mod:`vaells_jax.core.expm` written on the four entries (one fused pass for
value and gradient); for ``d > 2`` values come from
:func:`~vaells_jax.core.expm.expm_pairs_shift` and the gradient from one JVP
of :func:`~vaells_jax.core.expm.expm_pairs`. Either way the residual is
``(expm(A) - I) z0 - (z1 - z0)``, so its rounding is relative to the shift,
not to ``z0``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from vaells_jax.core.expm import (
  MAX_SQUARINGS,
  _cosh_sinhc,
  cosh_minus_one,
  cosh_sinhc_slope,
  expm_pairs,
  expm_pairs_shift,
)
from vaells_jax.core.solvers.columns import materialize

__all__ = [
  "Forward2x2",
  "combine",
  "data_2x2",
  "data_general",
  "data_term",
  "forward_2x2",
  "general_pairs",
  "parts_2x2",
  "residual_general",
  "value_and_grad",
  "value_and_grad_general",
]


def combine(weights, coeffs):
  """``sum_m weights[m] coeffs[m]``: ``weights [M, ...]`` against ``M`` rows
  ``[P]`` (``[M]`` scalars, or operators ``[M, d, d, 1]`` for ``[d, d, P]``
  generators)."""
  return sum(weights[m] * coeffs[m] for m in range(weights.shape[0]))


def parts_2x2(psi):
  """Per operator: ``tr / 2``, ``(psi_00 - psi_11) / 2``, ``psi_01``, ``psi_10``."""
  return (
    0.5 * (psi[:, 0, 0] + psi[:, 1, 1]),
    0.5 * (psi[:, 0, 0] - psi[:, 1, 1]),
    psi[:, 0, 1],
    psi[:, 1, 0],
  )


class Forward2x2(NamedTuple):
  """The closed form at ``c`` for ``d = 2`` (:func:`forward_2x2`), each ``[P]``
  (``parts``: ``[M]`` rows of :func:`parts_2x2`)."""

  parts: tuple
  mu: jax.Array
  h: jax.Array
  a01: jax.Array
  a10: jax.Array
  scale: jax.Array  # e^mu
  sinhc: jax.Array  # S(delta)
  slope: list  # [S'(delta)] with with_slope, else []
  v0: jax.Array  # B z0
  v1: jax.Array
  w0: jax.Array  # expm(A) z0
  w1: jax.Array
  r0: jax.Array  # residual w - z1
  r1: jax.Array


def forward_2x2(index, coeffs, psi, z0, z1, *, with_slope):
  """``w = expm(A) z0`` and the residual ``w - z1`` of each pair for ``d = 2``.

  With ``A = mu I + B``, ``B = [[h, a01], [a10, -h]]``, ``delta = h^2 + a01
  a10``: ``w = e^mu (C(delta) z0 + S(delta) B z0)``, the residual computed as
  ``(w - z0) - (z1 - z0)``. ``with_slope`` adds ``S'`` for derivatives.
  """
  parts = parts_2x2(psi)
  mu, h, a01, a10 = (combine(p, coeffs) for p in parts)

  def transcendental(mu, delta):
    functions = cosh_sinhc_slope(delta) if with_slope else _cosh_sinhc(delta)
    return (jnp.expm1(mu), cosh_minus_one(delta, functions[0])) + tuple(functions)

  scale_m1, cosh_m1, cosh, sinhc, *slope = materialize(
    index, transcendental, mu, h * h + a01 * a10
  )
  scale = 1.0 + scale_m1
  v0 = h * z0[0] + a01 * z0[1]  # B z0
  v1 = a10 * z0[0] - h * z0[1]
  # The shift w - z0 = (e^mu C - 1) z0 + e^mu S B z0, with e^mu C - 1 =
  # (e^mu - 1) C + (C - 1): rounding relative to the shift, not to z0.
  shift = scale_m1 * cosh + cosh_m1
  s0 = shift * z0[0] + scale * sinhc * v0
  s1 = shift * z0[1] + scale * sinhc * v1
  return Forward2x2(
    parts,
    mu,
    h,
    a01,
    a10,
    scale,
    sinhc,
    slope,
    v0,
    v1,
    z0[0] + s0,
    z0[1] + s1,
    s0 - (z1[0] - z0[0]),
    s1 - (z1[1] - z0[1]),
  )


def data_2x2(index, coeffs, psi, z0, z1, *, with_grad):
  """``f`` of each pair for ``d = 2`` and, with ``with_grad``, its gradient.

  ``f`` from :func:`forward_2x2`; the gradient is the chain rule through
  ``mu, h, a01, a10`` (each linear in ``c``), written out so that it costs a
  few dozen elementwise operations.

  Returns:
    ``f [P]`` and, with ``with_grad``, ``grad [M, P]``.
  """
  fwd = forward_2x2(index, coeffs, psi, z0, z1, with_slope=with_grad)
  parts, mu, h, a01, a10 = fwd.parts, fwd.mu, fwd.h, fwd.a01, fwd.a10
  scale, sinhc, slope, v0, v1 = fwd.scale, fwd.sinhc, fwd.slope, fwd.v0, fwd.v1
  w0, w1, g0, g1 = fwd.w0, fwd.w1, fwd.r0, fwd.r1  # g = df / dw
  value = 0.5 * (g0 * g0 + g1 * g1)
  # The NaN beyond expm_small's range, as the other solvers see it.
  a00, a11 = mu + h, mu - h
  norm = jnp.maximum(jnp.abs(a00) + jnp.abs(a10), jnp.abs(a01) + jnp.abs(a11))
  value = jnp.where(norm > 0.5 * 2.0**MAX_SQUARINGS, jnp.nan, value)
  if not with_grad:
    return value
  d_mu = g0 * w0 + g1 * w1
  d_delta = scale * (
    0.5 * sinhc * (g0 * z0[0] + g1 * z0[1]) + slope[0] * (g0 * v0 + g1 * v1)
  )
  q0, q1 = scale * sinhc * g0, scale * sinhc * g1  # df / dv
  d_h = 2.0 * h * d_delta + q0 * z0[0] - q1 * z0[1]
  d_a01 = a10 * d_delta + q0 * z0[1]
  d_a10 = a01 * d_delta + q1 * z0[0]
  grad = jnp.stack(
    [
      parts[0][m] * d_mu + parts[1][m] * d_h + parts[2][m] * d_a01 + parts[3][m] * d_a10
      for m in range(psi.shape[0])
    ]
  )
  return value, grad


def general_pairs(coeffs, psi, z0, z1):
  """For any ``d``: ``M`` rows of shape ``S`` and ``z [d, P]`` as
  ``(S, generators [d, d, n], z0 [d, n], z1 [d, n])``, ``n = prod(S)``."""
  shape = coeffs[0].shape
  coeffs = [c.reshape(-1) for c in coeffs]
  # z [d, P] against trials [K, P]: align the pair axis, then flatten.
  expand = lambda z: z.reshape(z.shape[:1] + (1,) * (len(shape) - 1) + z.shape[1:])  # noqa: E731
  z0, z1 = (
    jnp.broadcast_to(expand(z), z.shape[:1] + shape).reshape(len(z), -1)
    for z in (z0, z1)
  )
  return shape, combine(psi[..., None], coeffs), z0, z1


def residual_general(generator, z0, z1):
  """``z1 - expm(A) z0`` as ``(z1 - z0) - (expm(A) - I) z0``
  (:func:`expm_pairs_shift`): ``[d, d, n]``, ``[d, n]`` -> ``[d, n]``."""
  return (z1 - z0) - expm_pairs_shift(generator, z0)


def data_general(coeffs, psi, z0, z1):
  """``f`` of each pair for any ``d``, ``[P]``."""
  shape, generator, z0, z1 = general_pairs(coeffs, psi, z0, z1)
  return 0.5 * jnp.sum(residual_general(generator, z0, z1) ** 2, axis=0).reshape(shape)


def value_and_grad_general(coeffs, psi, z0, z1):
  """``(f, grad f)`` for any ``d``. With ``r = z1 - expm(A) z0`` and ``L(A,
  E)`` the Frechet derivative of ``expm`` (whose adjoint is ``L(A^T, .)``),
  ``df / dc_m = -<r, L(A, psi_m) z0> = -<psi_m^T, L(A, z0 r^T)>_F``: one JVP
  of :func:`expm_pairs` for all ``M`` operators; ``f`` and ``r`` as
  :func:`data_general` computes them."""
  shape, generator, z0, z1 = general_pairs(coeffs, psi, z0, z1)
  residual = residual_general(generator, z0, z1)
  _, frechet = jax.jvp(expm_pairs, (generator,), (z0[:, None] * residual[None],))
  grad = jnp.stack(
    [
      -jnp.sum(psi[m].T[:, :, None] * frechet, axis=(0, 1)).reshape(shape)
      for m in range(psi.shape[0])
    ]
  )
  return 0.5 * jnp.sum(residual**2, axis=0).reshape(shape), grad


def data_term(index, coeffs, psi, z0, z1):
  """``f(c)`` per pair: ``c [M, P]``, ``z0, z1 [d, P]`` -> ``[P]``, stored."""
  if psi.shape[-1] == 2:
    fn = lambda c: data_2x2(index, c, psi, z0, z1, with_grad=False)  # noqa: E731
  else:
    fn = lambda c: data_general(c, psi, z0, z1)  # noqa: E731
  return materialize(index, fn, coeffs)


def value_and_grad(index, coeffs, psi, z0, z1):
  """``(f [P], grad [M, P])``, stored."""
  if psi.shape[-1] == 2:
    fn = lambda c: data_2x2(index, c, psi, z0, z1, with_grad=True)  # noqa: E731
  else:
    fn = lambda c: value_and_grad_general(c, psi, z0, z1)  # noqa: E731
  return materialize(index, fn, coeffs)
