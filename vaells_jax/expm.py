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
"""

from __future__ import annotations

import jax.numpy as jnp

__all__ = ["MAX_SQUARINGS", "expm_small"]

MAX_SQUARINGS = 10  # ||A||_1 up to 2^9 = 512; beyond that the result is NaN.
_THETA = 0.5
# Taylor remainder theta^(K+1) / (K+1)!: 5e-9 for K=8, 2e-20 for K=16.
_DEGREE = {jnp.dtype(jnp.float32): 8, jnp.dtype(jnp.float64): 16}


def expm_small(a):
  """``expm`` of a batch of small square matrices.

  Args:
    a: ``[..., d, d]`` floating matrices.

  Returns:
    ``[..., d, d]``: the matrix exponentials; NaN where ``||a||_1`` exceeds
    ``0.5 * 2**MAX_SQUARINGS`` (as ``jax.scipy.linalg.expm`` does past its
    squaring limit).
  """
  a = jnp.asarray(a)
  degree = _DEGREE.get(a.dtype, 16)
  norm = jnp.max(jnp.sum(jnp.abs(a), axis=-2), axis=-1)
  squarings = jnp.ceil(jnp.log2(jnp.maximum(norm, 1e-30) / _THETA))
  squarings = jnp.clip(squarings, 0, MAX_SQUARINGS + 1).astype(jnp.int32)
  scaled = a / (2.0**squarings).astype(a.dtype)[..., None, None]
  eye = jnp.eye(a.shape[-1], dtype=a.dtype)
  result = eye + scaled / degree  # Horner: I + A (I + A/2 (I + ...)).
  for k in range(degree - 1, 0, -1):
    result = eye + (scaled @ result) / k
  for i in range(MAX_SQUARINGS):
    result = jnp.where((i < squarings)[..., None, None], result @ result,
                       result)
  overflow = (squarings > MAX_SQUARINGS)[..., None, None]
  return jnp.where(overflow, jnp.nan, result)
