"""A matrix exponential for the small latent matrices of transport operators.

``jax.scipy.linalg.expm`` picks a Pade order with ``lax.cond`` and solves a
linear system; under ``vmap`` inside the inference solver's line search every
branch runs, which makes it the bottleneck of coefficient inference. Here the
exponential is a truncated Taylor series on ``A / 2^s`` (``||A / 2^s||_1 <=
1/2``) followed by ``s`` squarings, written with ``where`` so that it has no
control flow at all and differentiates like any other expression. The Taylor
degree is chosen per dtype so that the truncation error is below the dtype's
rounding error; tests check it against ``scipy.linalg.expm`` and
``jax.scipy.linalg.expm``.

For ``2 x 2`` matrices (the synthetic experiments' latent space) the
exponential has a closed form, used instead: with ``mu = tr(A) / 2``,
``B = A - mu I`` satisfies ``B^2 = delta I``, ``delta = -det(B)``, so

    expm(A) = e^mu (C(delta) I + S(delta) B),
    C(delta) = cosh(sqrt(delta)),  S(delta) = sinh(sqrt(delta)) / sqrt(delta)

(``cos`` and ``sin`` of ``sqrt(-delta)`` for ``delta < 0``; their power series
``sum delta^k / (2k)!`` and ``sum delta^k / (2k + 1)!`` for ``|delta| <= 1``,
which keeps values and gradients exact through ``delta = 0``). That is a few
dozen elementwise operations instead of the Taylor series' matrix products,
and the derivatives ``C' = S / 2``, ``S' = (C - S) / (2 delta)`` are written
out as a custom JVP so that a gradient does not differentiate every branch
``where`` evaluated. The 2 x 2 path keeps the Taylor path's NaN limit, so the
two behave alike; ``benchmarks/inference_speed.py`` measures the gain.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from vaells_jax.core import backend

__all__ = [
  "MAX_SQUARINGS",
  "check_finite",
  "expm_2x2",
  "expm_pairs",
  "expm_pairs_shift",
  "expm_small",
]

MAX_SQUARINGS = 10  # ||A||_1 up to 2^9 = 512; beyond that the result is NaN.
_THETA = 0.5
# Taylor remainder theta^(K+1) / (K+1)!: 5e-9 for K=8, 2e-20 for K=16.
_DEGREE = {jnp.dtype(jnp.float32): 8, jnp.dtype(jnp.float64): 16}
# Terms of the 2 x 2 series in delta on |delta| <= 1: remainder below
# 1 / (2K)!, 2e-9 for K=6 and 4e-19 for K=10.
_SERIES_TERMS = {jnp.dtype(jnp.float32): 6, jnp.dtype(jnp.float64): 10}


def expm_small(a: ArrayLike, *, checked: bool = False) -> jax.Array:
  """``expm`` of a batch of small square matrices.

  Valid range: finite ``a`` with ``||a||_1 <= 0.5 * 2**MAX_SQUARINGS`` (512);
  the result is then finite unless ``expm(a)`` itself overflows the dtype
  (entries beyond ``e^88`` in float32). Outside it the result is NaN (a
  matrix beyond 512) or inf/NaN, returned as computed so that ``jit`` works;
  ``checked=True`` raises a ``ValueError`` naming the cause instead.

  Args:
    a: ``[..., d, d]`` floating matrices.
    checked: raise instead of returning a non-finite result (concrete
      arrays only, outside ``jit``).

  Returns:
    ``[..., d, d]``: the matrix exponentials; NaN where ``||a||_1`` exceeds
    ``0.5 * 2**MAX_SQUARINGS`` (as ``jax.scipy.linalg.expm`` does past its
    squaring limit).

  Raises:
    ValueError: with ``checked``, where the result is not finite.
  """
  result = _expm_small(a)
  if checked:
    check_finite(result, "expm_small", a=a, generator=a)
  return result


def check_finite(result, what: str, **inputs):
  """Returns ``result``, or raises ``ValueError`` if it holds inf or NaN.

  The message names the non-finite input among ``inputs`` if there is one,
  else the largest ``||.||_1`` of ``inputs["generator"]`` (out of range).
  Needs concrete arrays: under ``jit`` there is nothing to check yet.
  """
  arrays = [result, *inputs.values()]
  if any(isinstance(a, jax.core.Tracer) for a in arrays):
    raise ValueError(
      "checked=True needs concrete arrays (call it outside jit/vmap, or test "
      "the result with jnp.isfinite)."
    )
  if np.all(np.isfinite(np.asarray(result))):
    return result
  for name, value in inputs.items():
    if name != "generator" and not np.all(np.isfinite(np.asarray(value))):
      raise ValueError(f"{what} is not finite: {name} contains inf or NaN.")
  norm = np.max(np.abs(np.asarray(inputs["generator"])).sum(axis=-2))
  raise ValueError(
    f"{what} is not finite: the generator sum_m c_m psi_m has ||A||_1 up to "
    f"{norm:.3g}, outside the valid range (module docstring)."
  )


def _expm_small(a):
  """:func:`expm_small` without the check."""
  a = jnp.asarray(a)
  norm = jnp.max(jnp.sum(jnp.abs(a), axis=-2), axis=-1)
  if a.shape[-2:] == (2, 2):
    result = expm_2x2(a)
    overflow = norm > _THETA * 2.0**MAX_SQUARINGS
  else:
    result, overflow = _expm_taylor(a, norm)
  return jnp.where(overflow[..., None, None], jnp.nan, result)


def _expm_taylor(a, norm):
  """Taylor series and squaring (module docstring); ``(expm, overflow)``."""
  degree = _DEGREE.get(a.dtype, 16)
  squarings = jnp.ceil(jnp.log2(jnp.maximum(norm, 1e-30) / _THETA))
  squarings = jnp.clip(squarings, 0, MAX_SQUARINGS + 1).astype(jnp.int32)
  scaled = a / (2.0**squarings).astype(a.dtype)[..., None, None]
  eye = jnp.eye(a.shape[-1], dtype=a.dtype)
  result = eye + scaled / degree  # Horner: I + A (I + A/2 (I + ...)).
  for k in range(degree - 1, 0, -1):
    result = eye + (scaled @ result) / k
  for i in range(MAX_SQUARINGS):
    result = jnp.where((i < squarings)[..., None, None], result @ result, result)
  return result, squarings > MAX_SQUARINGS


def _taylor(a, degree, *, identity=True):
  """``sum_{k <= degree} a^k / k!`` of ``[d, d, P]`` matrices by
  Paterson-Stockmeyer: ``a^2, a^3, a^4`` and one product per further 4
  degrees (4 products for degree 8, 6 for 16, against ``degree - 1`` by
  Horner). Without ``identity``, the sum from ``k = 1``."""
  eye = jnp.eye(a.shape[0], dtype=a.dtype)[:, :, None]
  a2 = _pairs_product(a, a)
  powers = (eye, a, a2, _pairs_product(a2, a))
  a4 = _pairs_product(a2, a2)
  coefficient = [1.0 / math.factorial(k) for k in range(degree + 1)]
  coefficient[0] = 1.0 if identity else 0.0
  block = lambda j: sum(  # noqa: E731
    coefficient[4 * j + i] * powers[i] for i in range(4) if 4 * j + i <= degree
  )
  top = degree // 4  # p(a) = sum_j a^(4j) block(j), Horner in a^4
  if degree % 4 == 0:  # block(top) = coefficient I: no product for it
    result, top = block(top - 1) + coefficient[degree] * a4, top - 1
  else:
    result = block(top)
  for j in range(top - 1, -1, -1):
    result = block(j) + _pairs_product(a4, result)
  return result


def _pairs_product(a, b):
  """``a[:, :, p] @ b[:, :, p]`` for every ``p``: ``[d, d, P]`` matrices with
  the batch on the minor axis, as ``d`` broadcast multiply-adds, which XLA:CPU
  fuses into one loop over contiguous pairs (a sum over a product axis, or a
  batched ``dot``, is several times slower at ``d = 6``:
  ``benchmarks/expm_pairs.py``)."""
  return sum(a[:, k, None] * b[None, k] for k in range(a.shape[1]))


def _expm_minus_identity_pairs(a):
  """``(expm(a) - I, overflow)`` of ``[d, d, P]`` matrices: ``W = T(a / 2^s)``,
  ``T`` the Taylor polynomial without its constant term, then ``s`` rounds
  of ``W <- W W + 2 W`` (``(I + W)^2 - I``), so rounding stays relative to
  ``expm(a) - I`` however small it is. Only as many rounds run as the matrix
  that needs the most (each matrix is squared its own number of times)."""
  norm = jnp.max(jnp.sum(jnp.abs(a), axis=0), axis=0)
  squarings = jnp.ceil(jnp.log2(jnp.maximum(norm, 1e-30) / _THETA))
  squarings = jnp.clip(squarings, 0, MAX_SQUARINGS + 1).astype(jnp.int32)
  overflow = ~(squarings <= MAX_SQUARINGS)  # NaN norms too
  squarings = jnp.where(overflow, 0, squarings)
  scaled = a / (2.0**squarings).astype(a.dtype)
  result = _taylor(scaled, _DEGREE.get(a.dtype, 16), identity=False)
  rounds = jnp.max(squarings)

  def masked(i, w):
    return jnp.where(i < squarings, _pairs_product(w, w) + 2 * w, w)

  # A CPU skips the rounds past the most any matrix needs; on a GPU that
  # conditional is a round trip to the host in every round of every
  # evaluation, so it runs all rounds, masked (the same result).
  def skipping(i, w):
    return jax.lax.cond(i < rounds, masked, lambda i, w: w, i, w)

  square = lambda step: jax.lax.fori_loop(0, MAX_SQUARINGS, step, result)  # noqa: E731
  return backend.per_platform(
    lambda: square(skipping), lambda: square(masked)
  ), overflow


def expm_pairs(a):
  """:func:`expm_small` of ``[d, d, P]`` matrices, the batch on the minor
  axis (the layout of the per-pair-step solver, :mod:`vaells_jax.core.solvers.pgd`).

  Each matrix is scaled and squared as in :func:`expm_small`, in the form
  ``expm(a) - I`` (:func:`_expm_minus_identity_pairs`); the Taylor
  polynomial takes 4 (float32) or 6 (float64) products (Paterson-Stockmeyer,
  each product :func:`_pairs_product`). At most ``MAX_SQUARINGS`` rounds of
  a fixed-length loop, whatever the norm. Same valid range and NaN beyond
  it. Differentiable in forward and reverse mode; under ``vmap`` of another
  axis every round runs.

  Args:
    a: ``[d, d, P]`` floating matrices.

  Returns:
    ``[d, d, P]``: their exponentials.
  """
  result, overflow = _expm_minus_identity_pairs(a)
  result = result + jnp.eye(a.shape[0], dtype=a.dtype)[:, :, None]
  return jnp.where(overflow, jnp.nan, result)


def expm_pairs_shift(a, z):
  """``(expm(a[:, :, p]) - I) z[:, p]`` for ``[d, d, P]`` matrices and
  ``[d, P]`` vectors, the batch on the minor axis.

  ``expm(a) - I`` as in :func:`expm_pairs`, without adding ``I``: rounding is
  relative to the shift, not to ``z``, so the per-pair-step solver's residual
  ``(z1 - z0) - shift`` keeps the digits that ``z1 - expm(a) z0`` loses when
  ``a`` is small, and with them the solver ends as low as the original
  method on more pairs (docs/studies/benchmarks-solvers.md, "Latent dimension above 2").
  Same valid range as :func:`expm_small`, NaN beyond it.

  Args:
    a: ``[d, d, P]`` floating matrices.
    z: ``[d, P]`` vectors.

  Returns:
    ``[d, P]``.
  """
  result, overflow = _expm_minus_identity_pairs(a)
  shift = sum(result[:, j] * z[j] for j in range(z.shape[0]))
  return jnp.where(overflow, jnp.nan, shift)


def _polyval(coefficients, x):
  """``sum_j coefficients[j] x^j`` (Horner)."""
  result = jnp.full_like(x, coefficients[-1])
  for coefficient in coefficients[-2::-1]:
    result = coefficient + x * result
  return result


@jax.custom_jvp
def _cosh_sinhc(delta):
  """``(C(delta), S(delta))`` of the module docstring, elementwise."""
  terms = _SERIES_TERMS.get(delta.dtype, 10)
  small = jnp.abs(delta) <= 1.0
  root = jnp.sqrt(jnp.where(small, 1.0, jnp.abs(delta)))
  positive = delta > 0
  cosh = jnp.where(positive, jnp.cosh(root), jnp.cos(root))
  sinhc = jnp.where(positive, jnp.sinh(root), jnp.sin(root)) / root
  series = [1.0 / math.factorial(2 * j) for j in range(terms)]
  cosh = jnp.where(small, _polyval(series, delta), cosh)
  series = [1.0 / math.factorial(2 * j + 1) for j in range(terms)]
  sinhc = jnp.where(small, _polyval(series, delta), sinhc)
  return cosh, sinhc


def cosh_minus_one(delta, cosh):
  """``C(delta) - 1`` without cancellation: the series ``sum_{k >= 1}
  delta^k / (2k)!`` for ``|delta| <= 1``, else ``cosh - 1`` (``cosh`` is
  ``C(delta)``; there ``|C - 1| >= 0.46``, except near the zeros of ``1 -
  cos``)."""
  terms = _SERIES_TERMS.get(delta.dtype, 10)
  series = delta * _polyval(
    [1.0 / math.factorial(2 * j + 2) for j in range(terms)], delta
  )
  return jnp.where(jnp.abs(delta) <= 1.0, series, cosh - 1.0)


def cosh_sinhc_slope(delta):
  """``(C, S, S')`` of the 2 x 2 closed form: ``C(delta)``, ``S(delta)`` and
  ``S' = (C - S) / (2 delta)``, a series near 0 (``C' = S / 2``)."""
  cosh, sinhc = _cosh_sinhc(delta)
  small = jnp.abs(delta) <= 1.0
  terms = _SERIES_TERMS.get(delta.dtype, 10)
  series = [(j + 1) / math.factorial(2 * j + 3) for j in range(terms)]
  slope = jnp.where(
    small,
    _polyval(series, delta),
    (cosh - sinhc) / (2.0 * jnp.where(small, 1.0, delta)),
  )
  return cosh, sinhc, slope


@_cosh_sinhc.defjvp
def _cosh_sinhc_jvp(primals, tangents):
  """``C' = S / 2`` and ``S'`` from :func:`cosh_sinhc_slope`.

  Written out so that the gradient costs a few multiplications instead of the
  derivative of every branch that ``where`` evaluates.
  """
  (delta,), (tangent,) = primals, tangents
  cosh, sinhc, slope = cosh_sinhc_slope(delta)
  return (cosh, sinhc), (0.5 * sinhc * tangent, slope * tangent)


def expm_2x2(a):
  """Closed-form ``expm`` of ``[..., 2, 2]`` matrices (see the module docstring).

  Exact to rounding for any finite ``a``: no norm limit (rotations stay
  finite for any angle); entries overflow to inf only where ``expm(a)``
  itself exceeds the dtype."""
  a00, a01, a10, a11 = a[..., 0, 0], a[..., 0, 1], a[..., 1, 0], a[..., 1, 1]
  half_diff = 0.5 * (a00 - a11)
  cosh, sinhc = _cosh_sinhc(half_diff * half_diff + a01 * a10)
  scale = jnp.exp(0.5 * (a00 + a11))
  sinhc = scale * sinhc
  return jnp.stack(
    [
      jnp.stack([scale * cosh + sinhc * half_diff, sinhc * a01], -1),
      jnp.stack([sinhc * a10, scale * cosh - sinhc * half_diff], -1),
    ],
    -2,
  )
