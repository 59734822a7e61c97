"""The jaxopt solvers, ``"fista"`` and ``"lm"``: one start of one pair at a
time, vmapped over every start of every pair.

* ``"fista"``: accelerated proximal gradient (``ProximalGradient``,
  ``prox_lasso``, backtracking line search) on the objective itself;
* ``"lm"``: Levenberg-Marquardt (``LevenbergMarquardt``) on the objective with
  the l1 term smoothed, ``|c| ~ sqrt(c^2 + eps^2)`` (``eps = 1e-3``), written as
  the extra residuals ``sqrt(2 l1_weight) (c^2 + eps^2)^(1/4)``; then a few
  proximal-gradient iterations on the exact objective, which set the
  coefficients that belong at zero to exactly zero and give ``converged`` the
  same meaning as for ``"fista"``.

This is the only module that imports jaxopt, so it can be swapped here.
"""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp

from vaells_jax.core.expm import expm_small
from vaells_jax.core.solvers.columns import CHUNK, map_chunks
from vaells_jax.core.transport import generator

__all__ = ["data_term", "solve_fista", "solve_lm"]

_LM_SMOOTHING = 1e-3  # eps of the smoothed l1 term sqrt(c^2 + eps^2).
_LM_POLISH_ITER = 10  # proximal-gradient iterations after Levenberg-Marquardt.


def _jaxopt():
  """``(jaxopt, prox_lasso)``, imported on first use: the ``"fista"`` and
  ``"lm"`` solvers need them, and importing jaxopt (with scipy.optimize)
  takes about 0.4 s. This is the one module that imports jaxopt ("JAXopt is
  no longer maintained": known), so it can be swapped here."""
  with warnings.catch_warnings():
    warnings.filterwarnings(
      "ignore", "JAXopt is no longer maintained", DeprecationWarning
    )
    import jaxopt
    from jaxopt.prox import prox_lasso
  return jaxopt, prox_lasso


def residual(coeffs, psi, z0, z1):
  """``z1 - T_psi(coeffs) z0``, ``[..., d]``."""
  operator = expm_small(generator(psi, coeffs))
  # A broadcast product, not a batched dot: XLA:CPU runs batches of tiny dots
  # slower than the same arithmetic done elementwise
  # (docs/studies/benchmarks-inference.md).
  return z1 - jnp.sum(operator * z0[..., None, :], axis=-1)


def data_term(coeffs, psi, z0, z1):
  """``1/2 ||z1 - T_psi(coeffs) z0||^2`` over the last axis."""
  return 0.5 * jnp.sum(residual(coeffs, psi, z0, z1) ** 2, axis=-1)


def _smoothed_residual(coeffs, l1_weight, psi, z0, z1):
  """One pair's residuals whose half squared norm is the smoothed objective.

  ``[z1 - T(c) z0, sqrt(2 l1_weight) (c^2 + eps^2)^(1/4)]``, ``[d + M]``: half
  its squared norm is the data term plus ``l1_weight sum_m sqrt(c_m^2 +
  eps^2)``.
  """
  penalty = jnp.sqrt(2.0 * l1_weight) * (coeffs * coeffs + _LM_SMOOTHING**2) ** 0.25
  return jnp.concatenate([residual(coeffs, psi, z0, z1), penalty])


def _safe_value_and_grad(coeffs, psi, z0, z1):
  """Value and gradient of the data term, ``(inf, 0)`` where not finite.

  jaxopt's line search only backtracks when the trial value compares larger,
  so a NaN (from an overflowing ``expm`` after a long trial step) would be
  accepted; ``inf`` makes it backtrack instead.
  """
  value, grad = jax.value_and_grad(data_term)(coeffs, psi, z0, z1)
  finite = jnp.isfinite(value)
  grad = jnp.where(finite & jnp.isfinite(grad), grad, 0.0)
  return jnp.where(finite, value, jnp.inf), grad


def _in_chunks(solve_one, init, z0, z1, l1_weight, chunk=CHUNK):
  """``solve_one`` (one start of one pair), vmapped over every start
  ``init [R, N, M]`` of every pair: ``[R, N, ...]`` results.

  Beyond ``chunk`` starts the starts are flattened and solved in
  ``lax.map`` chunks: a vmapped line search runs as many trials as the worst
  start of its batch needs, so a hard pair costs its chunk, not the whole
  batch (``benchmarks/inference_scaling.py``,
  docs/studies/benchmarks-inference.md). The last
  chunk is padded with copies of the last start: a zero pair's gradient is
  zero, and jaxopt's line search then tries every step length on every
  iteration. Up to ``chunk`` starts, one vmap over restarts of a vmap over
  pairs (the program ``solve_restarts_as_pairs`` reproduces to float32
  rounding).
  """
  num_restarts, num_pairs, num_ops = init.shape
  total = num_restarts * num_pairs
  if total <= chunk:
    solve = jax.vmap(jax.vmap(solve_one), in_axes=(0, None, None, None))
    return solve(init, z0, z1, l1_weight)
  flat = [
    init.reshape(total, num_ops),
    jnp.tile(z0, (num_restarts, 1)),
    jnp.tile(z1, (num_restarts, 1)),
    jnp.tile(l1_weight, num_restarts),
  ]
  out = map_chunks(jax.vmap(solve_one), flat, chunk=chunk, axis=0, mode="edge")
  return tuple(a.reshape((num_restarts, num_pairs) + a.shape[1:]) for a in out)


def _jaxopt_solver(psi, *, max_iter, tol, method):
  """``solve_one(c0, z0, z1, l1) -> (coeffs, iterations, error)`` of one pair
  with jaxopt: ``"fista"`` or ``"lm"`` (then a few proximal steps)."""
  jaxopt, prox_lasso = _jaxopt()
  proximal = functools.partial(
    jaxopt.ProximalGradient,
    fun=_safe_value_and_grad,
    value_and_grad=True,
    prox=prox_lasso,
    acceleration=True,
    tol=tol,
    implicit_diff=False,
    jit=True,
    unroll=False,
  )

  if method == "fista":
    solver = proximal(maxiter=max_iter)

    def solve_one(c0, a, b, lam):
      params, state = solver.run(c0, lam, psi, a, b)
      return params, state.iter_num, state.error
  elif method == "lm":
    marquardt = jaxopt.LevenbergMarquardt(
      _smoothed_residual,
      maxiter=max_iter,
      damping_parameter=1.0,
      tol=tol,
      xtol=0.0,
      gtol=0.0,
      solver="inv",
      materialize_jac=True,
      implicit_diff=False,
      jit=True,
      unroll=False,
    )
    polish = proximal(maxiter=_LM_POLISH_ITER)

    def solve_one(c0, a, b, lam):
      c1, state = marquardt.run(c0, lam, psi, a, b)
      # Keep the start where the step diverged or did not improve the objective.
      start, end = (
        data_term(c, psi, a, b) + lam * jnp.sum(jnp.abs(c)) for c in (c0, c1)
      )
      c1 = jnp.where(jnp.isfinite(end) & (end <= start), c1, c0)
      params, polished = polish.run(c1, lam, psi, a, b)
      return params, state.iter_num + polished.iter_num, polished.error

  return solve_one


def solve_fista(init, psi, z0, z1, l1_weight, *, max_iter, tol):
  """``"fista"`` on every start ``init [R, N, M]`` of every pair (the
  signature of :mod:`vaells_jax.core.solvers`)."""
  solve_one = _jaxopt_solver(psi, max_iter=max_iter, tol=tol, method="fista")
  return _in_chunks(solve_one, init, z0, z1, l1_weight)


def solve_lm(init, psi, z0, z1, l1_weight, *, max_iter, tol):
  """``"lm"`` on every start ``init [R, N, M]`` of every pair."""
  solve_one = _jaxopt_solver(psi, max_iter=max_iter, tol=tol, method="lm")
  return _in_chunks(solve_one, init, z0, z1, l1_weight)
