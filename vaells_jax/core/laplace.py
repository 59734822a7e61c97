"""The factorial Laplace distribution of transport-operator coefficients.

``q(c_m) = exp(-|c_m| / b) / (2 b)``; samples come from the reparameterised
inverse-CDF map of paper appendix A, ``c_m = -b sign(u_m) log(1 - 2|u_m|)`` with
``u ~ Uniform(-1/2, 1/2)``, so gradients flow through ``b``.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike, DTypeLike

__all__ = ["laplace_from_uniform", "laplace_log_prob", "sample_laplace"]


def laplace_from_uniform(u, scale):
  """The inverse-CDF map ``l(u; b)`` from ``Uniform(-1/2, 1/2)`` to Laplace(0, b).

  The endpoint ``|u| = 1/2`` would give an infinite sample; ``|u|`` is clipped
  to the largest value below ``1/2`` that keeps the result finite.

  Args:
    u: uniform variates in ``[-1/2, 1/2]``, any shape.
    scale: Laplace scale ``b > 0``, broadcasting with ``u``.

  Returns:
    Laplace samples, the broadcast shape of ``u`` and ``scale``.
  """
  u = jnp.asarray(u)
  dtype = jnp.result_type(u, jnp.float32)
  tiny = jnp.finfo(dtype).eps
  two_abs_u = jnp.minimum(2.0 * jnp.abs(u), 1.0 - tiny)
  return -scale * jnp.sign(u) * jnp.log1p(-two_abs_u)


def sample_laplace(
  key: jax.Array,
  shape: Sequence[int],
  scale: ArrayLike,
  dtype: DTypeLike = jnp.float32,
) -> jax.Array:
  """Reparameterised Laplace(0, ``scale``) samples; finite for every key.

  Args:
    key: a ``jax.random`` key.
    shape: output shape, e.g. ``(batch, M)``.
    scale: Laplace scale ``b > 0`` (scalar or broadcasting with ``shape``).
    dtype: floating dtype of the result.

  Returns:
    Samples of shape ``shape``.
  """
  u = jax.random.uniform(key, shape, dtype=dtype, minval=-0.5, maxval=0.5)
  return laplace_from_uniform(u, jnp.asarray(scale, dtype))


def laplace_log_prob(x: ArrayLike, scale: ArrayLike) -> jax.Array:
  """Elementwise log density ``-|x| / b - log(2 b)`` of Laplace(0, b).

  Args:
    x: values, any shape.
    scale: Laplace scale ``b > 0``, broadcasting with ``x``.

  Returns:
    Log densities, the broadcast shape.
  """
  return -jnp.abs(x) / scale - jnp.log(2.0 * scale)
