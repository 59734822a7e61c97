"""Sparse coefficient inference: the transport path that carries ``z0`` to ``z1``.

Solves, for every pair at once,

    c*(z0 -> z1) = argmin_c  1/2 ||z1 - expm(sum_m c_m psi_m) z0||^2 + l1_weight ||c||_1

with accelerated proximal gradient (FISTA, ``prox_lasso``, backtracking line
search) from random starts, vmapped over every pair and every restart. This is
the only module that imports jaxopt, so the solver can be swapped in one place.

The data term uses the ``1/2 ||.||^2`` convention throughout the library.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jaxopt
import numpy as np
from jaxopt.prox import prox_lasso

from vaells_jax.expm import expm_small
from vaells_jax.transport import _transport, check_psi, generator

__all__ = [
    "DEFAULT_MAX_ITER",
    "DEFAULT_TOL",
    "InferenceResult",
    "inference_objective",
    "infer_coefficients",
]

DEFAULT_MAX_ITER = 100
DEFAULT_TOL = 1e-4


class InferenceResult(NamedTuple):
  """Output of :func:`infer_coefficients` (``...`` is the broadcast pair shape).

  Attributes:
    coeffs: the inferred coefficients of the best restart, ``[..., M]``.
    objective: its objective value, ``[...]``.
    num_iter: solver iterations that restart ran, ``[...]``.
    converged: whether that restart met the tolerance before ``max_iter``, ``[...]``.
  """

  coeffs: jax.Array
  objective: jax.Array
  num_iter: jax.Array
  converged: jax.Array


def _data_term(coeffs, psi, z0, z1):
  """``1/2 ||z1 - T_psi(coeffs) z0||^2`` over the last axis."""
  operator = expm_small(generator(psi, coeffs))
  # A broadcast product, not a batched dot: XLA:CPU runs batches of tiny dots
  # slower than the same arithmetic done elementwise (README, inference speed).
  residual = z1 - jnp.sum(operator * z0[..., None, :], axis=-1)
  return 0.5 * jnp.sum(residual**2, axis=-1)


def _safe_value_and_grad(coeffs, psi, z0, z1):
  """Value and gradient of the data term, ``(inf, 0)`` where not finite.

  jaxopt's line search only backtracks when the trial value compares larger,
  so a NaN (from an overflowing ``expm`` after a long trial step) would be
  accepted; ``inf`` makes it backtrack instead.
  """
  value, grad = jax.value_and_grad(_data_term)(coeffs, psi, z0, z1)
  finite = jnp.isfinite(value)
  grad = jnp.where(finite & jnp.isfinite(grad), grad, 0.0)
  return jnp.where(finite, value, jnp.inf), grad


def inference_objective(psi, coeffs, z0, z1, l1_weight):
  """The inference objective ``1/2 ||z1 - T_psi(c) z0||^2 + l1_weight ||c||_1``.

  Evaluated with :func:`vaells_jax.transport` (``jax.scipy.linalg.expm``), like
  every other use of the operators; the solver's inner loop uses
  :func:`vaells_jax.expm_small`, equal to it within rounding.

  Args:
    psi: operator dictionary, ``[M, d, d]``.
    coeffs: coefficients, ``[..., M]``.
    z0: starting points, ``[..., d]``.
    z1: end points, ``[..., d]``.
    l1_weight: sparsity weight, scalar or ``[...]``.

  Returns:
    The objective of each pair, ``[...]`` (all leading shapes broadcast).
  """
  residual = z1 - _transport(psi, coeffs, z0)
  return 0.5 * jnp.sum(residual**2, axis=-1) + l1_weight * jnp.sum(
      jnp.abs(coeffs), axis=-1)


def _check_inputs(psi, z0, z1, l1_weight, num_restarts, init_range, max_iter,
                   tol):
  """Validates the arguments of ``infer_coefficients``; returns the pair shape."""
  _, dim = check_psi(psi)
  for name, z in (("z0", z0), ("z1", z1)):
    if jnp.ndim(z) < 1 or jnp.shape(z)[-1] != dim:
      raise ValueError(f"{name} must have shape [..., d] with d={dim} (psi is "
                       f"[M, d, d]), got {tuple(jnp.shape(z))}.")
  if len(init_range) != 2:
    raise ValueError(f"init_range must be (lo, hi), got {init_range}.")
  shapes = [jnp.shape(z0)[:-1], jnp.shape(z1)[:-1], jnp.shape(l1_weight),
            jnp.shape(init_range[0]), jnp.shape(init_range[1])]
  try:
    batch = jnp.broadcast_shapes(*shapes)
  except ValueError:
    raise ValueError(
        "The leading dimensions of z0, z1, l1_weight and init_range do not "
        f"broadcast: {', '.join(str(tuple(s)) for s in shapes)}.") from None
  if not isinstance(l1_weight, jax.core.Tracer) and np.any(
      np.asarray(l1_weight) < 0):
    raise ValueError(f"l1_weight must be >= 0, got {l1_weight}.")
  if not isinstance(num_restarts, int) or num_restarts < 1:
    raise ValueError(f"num_restarts must be an integer >= 1, got {num_restarts}.")
  if not any(isinstance(b, jax.core.Tracer) for b in init_range) and np.any(
      np.asarray(init_range[0]) > np.asarray(init_range[1])):
    raise ValueError(f"init_range must be (lo, hi) with lo <= hi, got {init_range}.")
  if not isinstance(max_iter, int) or max_iter < 1:
    raise ValueError(f"max_iter must be an integer >= 1, got {max_iter}.")
  if not tol > 0:
    raise ValueError(f"tol must be > 0, got {tol}.")
  return batch


def infer_coefficients(psi, z0, z1, *, l1_weight, key, num_restarts=1,
                       init_range=(0.0, 1.0), max_iter=DEFAULT_MAX_ITER,
                       tol=DEFAULT_TOL) -> InferenceResult:
  """Infers the sparse coefficients that transport ``z0`` to ``z1``, batched.

  Minimises ``1/2 ||z1 - expm(sum_m c_m psi_m) z0||^2 + l1_weight ||c||_1`` for
  every pair with accelerated proximal gradient (jaxopt ``ProximalGradient``,
  ``prox_lasso``, backtracking line search). Restart ``r`` starts from
  ``c0 ~ U[lo + r w, hi + r w]^M`` with ``w = hi - lo``; the restart with the
  lowest final objective wins (a start that diverges to a non-finite
  objective is replaced by ``c = 0``, reported as not converged). All pairs
  and restarts run in one vmapped solve, so this works inside ``jit``. The
  inputs are treated as constants (``stop_gradient``): by Danskin's theorem
  the gradient of the optimal value is the partial gradient of the objective
  at ``c*``, so differentiate
  :func:`inference_objective` at the returned coefficients instead.

  Args:
    psi: operator dictionary, ``[M, d, d]``.
    z0: starting points, ``[..., d]``.
    z1: end points, ``[..., d]``; broadcasts with ``z0`` over the leading
      dimensions (e.g. anchors ``[B, A, d]`` against samples ``[B, 1, d]``).
    l1_weight: sparsity weight ``>= 0``, scalar or broadcasting with the pair
      shape (so pairs with different weights can share one solve).
    key: ``jax.random`` key for the random starts.
    num_restarts: number of random starts per pair.
    init_range: ``(lo, hi)`` of the first restart's uniform start; each a
      scalar or an array broadcasting with the pair shape (pairs with
      different start ranges can share one solve).
    max_iter: maximum proximal-gradient iterations per start.
    tol: stopping tolerance on the proximal-gradient mapping norm.

  Returns:
    An :class:`InferenceResult` with ``coeffs [..., M]`` and ``objective``,
    ``num_iter``, ``converged`` of shape ``[...]``.

  Raises:
    ValueError: for shapes that do not fit, a negative ``l1_weight`` (checked
      when it is concrete) or invalid solver settings.
  """
  batch = _check_inputs(psi, z0, z1, l1_weight, num_restarts, init_range,
                        max_iter, tol)
  dtype = jnp.result_type(psi, z0, z1, jnp.float32)
  flat = [
      jnp.broadcast_to(jnp.asarray(a, dtype), batch + tail).reshape(
          (math.prod(batch),) + tail)
      for a, tail in ((z0, z0.shape[-1:]), (z1, z1.shape[-1:]),
                      (l1_weight, ()), (init_range[0], ()), (init_range[1], ()))
  ]
  result = _infer_flat(
      jnp.asarray(psi, dtype), *flat, key, num_restarts=num_restarts,
      max_iter=max_iter, tol=float(tol))
  return InferenceResult(*(r.reshape(batch + r.shape[1:]) for r in result))


@functools.partial(
    jax.jit, static_argnames=("num_restarts", "max_iter", "tol"))
def _infer_flat(psi, z0, z1, l1_weight, lo, hi, key, *, num_restarts, max_iter,
                tol):
  """Solves ``N`` pairs ``z0 [N, d] -> z1 [N, d]``; weights and ranges ``[N]``."""
  psi, z0, z1, l1_weight = jax.lax.stop_gradient((psi, z0, z1, l1_weight))
  num_pairs, num_ops = z0.shape[0], psi.shape[0]
  lo, hi = lo[None, :, None], hi[None, :, None]
  offsets = jnp.arange(num_restarts, dtype=z0.dtype)[:, None, None]
  init = jax.random.uniform(key, (num_restarts, num_pairs, num_ops),
                            dtype=z0.dtype, minval=lo, maxval=hi)
  init = init + offsets * (hi - lo)

  solver = jaxopt.ProximalGradient(
      fun=_safe_value_and_grad, value_and_grad=True, prox=prox_lasso,
      acceleration=True, maxiter=max_iter, tol=tol, implicit_diff=False,
      jit=True, unroll=False)

  def solve_one(c0, a, b, lam):
    params, state = solver.run(c0, lam, psi, a, b)
    return params, state.iter_num, state.error

  solve = jax.vmap(jax.vmap(solve_one), in_axes=(0, None, None, None))
  coeffs, num_iter, error = solve(init, z0, z1, l1_weight)
  objective = inference_objective(psi, coeffs, z0, z1, l1_weight)
  # A start that diverged (expm overflow) falls back to the identity path c=0.
  failed = ~jnp.isfinite(objective)
  coeffs = jnp.where(failed[..., None], 0.0, coeffs)
  objective = jnp.where(failed, _data_term(coeffs, psi, z0, z1), objective)
  error = jnp.where(failed, jnp.inf, error)
  best = jnp.argmin(objective, axis=0)
  pick = lambda a: jnp.take_along_axis(  # noqa: E731
      a, best.reshape((1, num_pairs) + (1,) * (a.ndim - 2)), axis=0)[0]
  return (pick(coeffs), pick(objective), pick(num_iter),
          pick(error) <= tol)
