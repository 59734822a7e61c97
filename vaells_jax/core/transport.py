"""Transport operators: the flows ``expm(sum_m c_m Psi_m)`` of the latent manifold.

A dictionary ``psi`` of ``M`` operators ``[M, d, d]`` and coefficients ``c``
``[..., M]`` define the linear map ``T_psi(c) = expm(sum_m c_m psi_m)`` that moves
a latent point ``z0`` along the learned manifold: ``z1 = T_psi(c) @ z0``.
Everything here is a pure function of arrays, differentiable in every argument
and safe under ``jit``, ``vmap`` and ``grad``.

Valid range: finite ``psi``, ``coeffs`` and ``z0`` whose generator
``A = sum_m c_m psi_m`` has ``||A||_1`` below about 80 (float32; about 700 in
float64), since ``expm(A)`` grows like ``e^||A||``. Outside it the result can
be ``inf`` or NaN: it is returned as computed (so that ``jit`` and ``vmap``
work unchanged), and ``checked=True`` raises a ``ValueError`` naming the cause
instead (for concrete arrays, outside ``jit``). Rotations (antisymmetric
generators) stay finite for any coefficients.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.linalg import expm
from jax.typing import ArrayLike

from vaells_jax.core.expm import check_finite, expm_2x2

__all__ = ["check_finite", "generator", "transport", "transport_path", "check_psi"]


def check_psi(psi) -> tuple[int, int]:
  """Checks that ``psi`` is a dictionary ``[M, d, d]``; returns ``(M, d)``.

  Raises:
    ValueError: if ``psi`` is not a 3-D array of square matrices.
  """
  shape = jnp.shape(psi)
  if len(shape) != 3 or shape[1] != shape[2] or shape[0] < 1 or shape[1] < 1:
    raise ValueError(
      f"psi must have shape [M, d, d] with M, d >= 1, got {tuple(shape)}."
    )
  return shape[0], shape[1]


def _check_coeffs_and_points(psi, coeffs, z0) -> None:
  num_ops, dim = check_psi(psi)
  if jnp.ndim(coeffs) < 1 or jnp.shape(coeffs)[-1] != num_ops:
    raise ValueError(
      f"coeffs must have shape [..., M] with M={num_ops} (the number of "
      f"operators in psi), got {tuple(jnp.shape(coeffs))}."
    )
  if jnp.ndim(z0) < 1 or jnp.shape(z0)[-1] != dim:
    raise ValueError(
      f"z0 must have shape [..., d] with d={dim} (psi is [M, d, d]), got "
      f"{tuple(jnp.shape(z0))}."
    )
  try:
    jnp.broadcast_shapes(jnp.shape(coeffs)[:-1], jnp.shape(z0)[:-1])
  except ValueError:
    raise ValueError(
      "The leading dimensions of coeffs and z0 do not broadcast: "
      f"{tuple(jnp.shape(coeffs))} vs {tuple(jnp.shape(z0))}."
    ) from None


def generator(psi: ArrayLike, coeffs: ArrayLike) -> jax.Array:
  """The dynamics matrix ``A = sum_m coeffs_m psi_m``.

  Args:
    psi: operator dictionary, ``[M, d, d]``.
    coeffs: coefficients, ``[..., M]``.

  Returns:
    ``[..., d, d]``.
  """
  return jnp.einsum("...m,mij->...ij", coeffs, psi)


def transport(
  psi: ArrayLike, coeffs: ArrayLike, z0: ArrayLike, *, checked: bool = False
) -> jax.Array:
  """Moves ``z0`` along the manifold: ``expm(sum_m coeffs_m psi_m) @ z0``.

  Valid for finite inputs with ``||sum_m coeffs_m psi_m||_1`` below about 80
  in float32 (module docstring); outside it the result may be inf or NaN.

  Args:
    psi: operator dictionary, ``[M, d, d]``.
    coeffs: coefficients, ``[..., M]``.
    z0: starting points, ``[..., d]``. The leading dimensions of ``coeffs`` and
      ``z0`` broadcast against each other.
    checked: raise instead of returning a non-finite result (concrete
      arrays only).

  Returns:
    The transported points, ``[..., d]`` (the broadcast leading shape).

  Raises:
    ValueError: if the shapes do not fit together; with ``checked``, if the
      result is not finite (naming a non-finite input, or the generator's
      norm).
  """
  _check_coeffs_and_points(psi, coeffs, z0)
  result = _transport(psi, coeffs, z0)
  if checked:
    check_finite(
      result,
      "transport",
      psi=psi,
      coeffs=coeffs,
      z0=z0,
      generator=generator(psi, coeffs),
    )
  return result


def _expm(a):
  """``expm`` of ``[..., d, d]`` matrices: the closed form for ``d = 2``
  (:func:`~vaells_jax.core.expm.expm_2x2`; a few dozen elementwise
  operations where ``jax.scipy.linalg.expm`` runs a Pade approximant, an LU
  solve and a squaring loop), ``jax.scipy.linalg.expm`` otherwise."""
  return expm_2x2(a) if a.shape[-2:] == (2, 2) else expm(a)


def _transport(psi, coeffs, z0):
  """``transport`` without the shape checks (for inner loops)."""
  operator = _expm(generator(psi, coeffs))
  return jnp.einsum("...ij,...j->...i", operator, z0)


def transport_path(
  psi: ArrayLike,
  coeffs: ArrayLike,
  z0: ArrayLike,
  ts: ArrayLike,
  *,
  checked: bool = False,
) -> jax.Array:
  """Points along the path ``z(t) = expm(t * sum_m coeffs_m psi_m) @ z0``.

  Valid where every ``t * coeffs`` is in :func:`transport`'s range; outside
  it points may be inf or NaN (``checked=True`` raises instead).

  ``t in [0, 1]`` interpolates from ``z0`` to ``transport(psi, coeffs, z0)``;
  ``t`` outside that range extrapolates. With one-hot ``coeffs`` this traces
  the orbit of a single operator.

  Args:
    psi: operator dictionary, ``[M, d, d]``.
    coeffs: coefficients, ``[..., M]``.
    z0: starting points, ``[..., d]``, broadcasting with ``coeffs``.
    ts: path times, ``[T]`` (a scalar is treated as ``[1]``).
    checked: raise instead of returning non-finite points (concrete arrays
      only).

  Returns:
    ``[T, ..., d]``: the point at each time.

  Raises:
    ValueError: if the shapes do not fit together or ``ts`` is not 1-D; with
      ``checked``, if a point is not finite.
  """
  _check_coeffs_and_points(psi, coeffs, z0)
  ts = jnp.atleast_1d(jnp.asarray(ts))
  if ts.ndim != 1:
    raise ValueError(f"ts must be 1-D [T], got shape {ts.shape}.")
  batch_ndim = len(jnp.broadcast_shapes(jnp.shape(coeffs)[:-1], jnp.shape(z0)[:-1]))
  scaled = ts.reshape((-1,) + (1,) * (batch_ndim + 1)) * coeffs
  result = _transport(psi, scaled, z0)
  if checked:
    check_finite(
      result,
      "transport_path",
      psi=psi,
      coeffs=coeffs,
      z0=z0,
      ts=ts,
      generator=generator(psi, scaled),
    )
  return result
