"""Damped Gauss-Newton in orthants for 2-D codes: the ``"gauss_newton"`` solver.

Minimises, for every pair at once and for ``d = 2``,

    F(c) = 1/2 ||r(c)||^2 + l1 ||c||_1,   r(c) = expm(sum_m c_m psi_m) z0 - z1.

With ``M`` coefficients and only ``d = 2`` equations the data term has a
valley (a set of generators that all carry ``z0`` to ``z1``) that only the
small ``l1`` term tilts; proximal gradient crawls along it (hundreds of
iterations, ``benchmarks/loop_ops.py``). Each iteration here instead solves the
local model in every direction at once:

* orthant: coefficients that are nonzero keep their sign ``s_m``; a zero one
  becomes free in the direction that lowers ``F`` (``|grad_m f| > l1``) and
  stays at zero otherwise. On the free ones ``F`` is smooth, with gradient
  ``q = J^T r + l1 s`` (``J [2, M]`` the Jacobian of ``expm(A) z0``, closed form);
* step: ``delta = -(J^T J + lambda I)^{-1} q``, through the ``2 x 2`` system
  ``(lambda I + J J^T) y = J q`` (Woodbury: ``delta = -(q - J^T y) /
  lambda``), so each step costs a handful of elementwise operations for any
  ``M``; along the valley ``J^T J`` is singular and the step is the ``l1``
  term's descent scaled by ``1 / lambda``;
* trust region: each step's generator ``sum_m delta_m psi_m`` is cut to
  Frobenius norm :data:`RADIUS` (the operators are periodic in rotation-like
  directions; an uncut step along the valley lands in another period, at a far
  larger ``||c||_1``); then a coefficient that would cross zero stops at zero
  (which can lengthen the generator's change a little: the operators are not
  orthogonal);
* damping: :data:`_DAMPING` multiples of the pair's ``lambda`` (relative to
  ``trace J J^T``) are tried together in one evaluation of ``F``; the lowest
  ``F`` below the current one is taken and ``lambda`` follows it (divided by
  3); if none is lower, ``lambda`` grows 1000-fold. ``F`` never rises, so the
  last iterate is the best;
* a pair stops once ``||q|| <= tol`` (the minimum-norm subgradient of ``F``,
  zero exactly at a stationary point) or when no trial lowers ``F`` and
  either the damping is beyond ``10^6`` or the most damped trial rounds
  back to ``c`` in every coefficient (a larger damping's shorter step would
  too: the pair cannot move again); the loop ends when every pair has
  stopped (checked every :data:`_BLOCK` iterations) or after ``max_iter``
  iterations.

Pairs lie on the last axis of every array, as in :mod:`vaells_jax.core.solvers.pgd`,
whose closed-form ``f`` this module shares.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from vaells_jax.core.solvers.columns import (
  CHUNK,
  materialize,
  pick,
  run_blocks,
  solve_columns,
)
from vaells_jax.core.solvers.pairs import combine, data_term, forward_2x2, parts_2x2

__all__ = ["RADIUS", "solve_gauss_newton"]

RADIUS = 1.0  # largest ||sum_m delta_m psi_m||_F of one step
# Trial dampings per iteration, as multiples of the pair's lambda.
_DAMPING = (0.1, 1.0, 10.0, 100.0)
_START_DAMPING = 1e-2
_GIVE_UP = 1e6  # damping beyond which a pair with no lower trial stops
_BLOCK = 5  # iterations between checks that every pair has stopped


def _jacobian_2x2(index, coeffs, psi, z0, z1):
  """``f [P]``, the residual ``r`` (two rows ``[P]``) and the Jacobian of
  ``w = expm(A) z0``, two rows ``[M, P]`` (one per component of ``w``).

  With ``A = mu I + B`` (:func:`vaells_jax.core.solvers.pairs.forward_2x2`): ``w =
  e^mu (C z0 + S v)``, ``v = B z0``, ``delta = h^2 + a01 a10``; ``dw/dmu =
  w``, ``dw/d delta = e^mu (S/2 z0 + S' v)``, and ``h, a01, a10`` enter
  through ``delta`` and ``v``.
  """
  fwd = forward_2x2(index, coeffs, psi, z0, z1, with_slope=True)
  parts, h, a01, a10 = fwd.parts, fwd.h, fwd.a01, fwd.a10
  scale, sinhc, (slope,), v0, v1 = fwd.scale, fwd.sinhc, fwd.slope, fwd.v0, fwd.v1
  r0, r1 = fwd.r0, fwd.r1
  d0 = scale * (0.5 * sinhc * z0[0] + slope * v0)  # dw / d delta
  d1 = scale * (0.5 * sinhc * z0[1] + slope * v1)
  e_s = scale * sinhc
  by_part = (  # dw / d(mu, h, a01, a10), each (component 0, component 1)
    (fwd.w0, fwd.w1),
    (2.0 * h * d0 + e_s * z0[0], 2.0 * h * d1 - e_s * z0[1]),
    (a10 * d0 + e_s * z0[1], a10 * d1),
    (a01 * d0, a01 * d1 + e_s * z0[0]),
  )
  jac = [
    jnp.stack(
      [sum(parts[k][m] * by_part[k][i] for k in range(4)) for m in range(len(psi))]
    )
    for i in range(2)
  ]
  return 0.5 * (r0 * r0 + r1 * r1), r0, r1, jac[0], jac[1]


class _State(NamedTuple):
  coeffs: jax.Array  # [M, P]
  objective: jax.Array  # F(coeffs) [P]
  damping: jax.Array  # lambda / trace(J J^T) [P]
  error: jax.Array  # ||q|| at the last iterate evaluated [P]
  done: jax.Array  # stopped [P]
  num_iter: jax.Array  # iterations run [P]


def _iterate(index, state: _State, psi, z0, z1, l1, tol) -> _State:
  """One damped Gauss-Newton step for every pair not yet stopped."""
  c = state.coeffs
  value, r0, r1, j0, j1 = materialize(
    index, lambda c: _jacobian_2x2(index, c, psi, z0, z1), c
  )
  ok = jnp.isfinite(value) & jnp.isfinite(state.objective)
  grad = j0 * r0 + j1 * r1
  sign = jnp.where(
    c != 0,
    jnp.sign(c),
    jnp.where(grad + l1 < 0, 1.0, jnp.where(grad - l1 > 0, -1.0, 0.0)),
  )
  free = ok & (sign != 0)
  q = jnp.where(free, grad + l1 * sign, 0.0)
  j0, j1 = jnp.where(free, j0, 0.0), jnp.where(free, j1, 0.0)
  error = jnp.where(ok, jnp.sqrt(jnp.sum(q * q, axis=0)), jnp.inf)
  # (lambda I + J J^T) y = J q, 2 x 2, for every trial damping at once [K, P].
  a, b, d = (jnp.sum(u * v, axis=0) for u, v in ((j0, j0), (j0, j1), (j1, j1)))
  jq0, jq1 = jnp.sum(j0 * q, axis=0), jnp.sum(j1 * q, axis=0)
  scales = jnp.asarray(_DAMPING, c.dtype)[:, None]
  lam = scales * state.damping * jnp.maximum(a + d, 1e-30)
  det = (lam + a) * (lam + d) - b * b
  y0 = ((lam + d) * jq0 - b * jq1) / det
  y1 = ((lam + a) * jq1 - b * jq0) / det
  step = -(q[:, None] - j0[:, None] * y0 - j1[:, None] * y1) / lam  # [M, K, P]
  # Trust region on the generator's change (Frobenius norm).
  mu, h, a01, a10 = (combine(p, step) for p in parts_2x2(psi))
  norm = jnp.sqrt(2.0 * (mu * mu + h * h) + a01 * a01 + a10 * a10)
  step = step * jnp.minimum(1.0, RADIUS / jnp.maximum(norm, 1e-30))
  trials = c[:, None] + step
  trials = jnp.where(free[:, None] & (trials * sign[:, None] > 0), trials, 0.0)
  f_trial = data_term(index, trials, psi, z0, z1) + l1 * sum(jnp.abs(u) for u in trials)
  f_trial = jnp.where(jnp.isfinite(f_trial), f_trial, jnp.inf)
  choice = jnp.argmin(f_trial, axis=0)
  lowest = jnp.min(f_trial, axis=0)
  active = ~state.done
  take = active & ok & (lowest < state.objective)
  chosen_scale = pick(jnp.broadcast_to(scales, f_trial.shape), choice)
  damping = jnp.where(take, state.damping * chosen_scale / 3.0, state.damping * 1e3)
  unmoved = jnp.all(trials[:, -1] == c, axis=0)
  stuck = ~take & ((state.damping > _GIVE_UP) | unmoved)
  return _State(
    coeffs=jnp.where(take, pick(jnp.moveaxis(trials, 1, 0), choice), c),
    objective=jnp.where(take, lowest, state.objective),
    damping=jnp.where(active, jnp.maximum(damping, 1e-12), state.damping),
    error=jnp.where(active, error, state.error),
    done=state.done | ~ok | (error <= tol) | stuck,
    num_iter=state.num_iter + active,
  )


def _initial_state(coeffs, psi, z0, z1, l1) -> _State:
  """The loop's state at the starts ``coeffs [M, P]``."""
  num_pairs = z0.shape[-1]
  dtype = coeffs.dtype
  objective = data_term(0, coeffs, psi, z0, z1) + l1 * jnp.sum(jnp.abs(coeffs), axis=0)
  return _State(
    coeffs=coeffs,
    objective=jnp.where(jnp.isfinite(objective), objective, jnp.inf),
    damping=jnp.full(num_pairs, _START_DAMPING, dtype),
    error=jnp.full(num_pairs, jnp.inf, dtype),
    done=jnp.zeros(num_pairs, bool),
    num_iter=jnp.zeros(num_pairs, jnp.int32),
  )


def _solve_chunk(coeffs, psi, z0, z1, l1, *, max_iter, tol):
  """The loop on one chunk: ``coeffs [M, P]``, ``z0, z1 [2, P]``, ``l1 [P]``."""
  state = run_blocks(
    lambda i, s, z0, z1, l1: _iterate(i, s, psi, z0, z1, l1, tol),
    _initial_state(coeffs, psi, z0, z1, l1),
    max_iter,
    _BLOCK,
    (z0, z1, l1),
  )
  return state.coeffs, state.num_iter, state.error


def solve_gauss_newton(init, psi, z0, z1, l1_weight, *, max_iter, tol, chunk=CHUNK):
  """Solves every start of every pair (module docstring); ``d = 2`` only.

  Args, returns: as :func:`vaells_jax.core.solvers.pgd.solve_pgd` (``error`` is
  ``||q||`` at the last iterate, ``inf`` where ``F`` was not finite).

  Raises:
    ValueError: if the codes are not 2-D.
  """
  if psi.shape[-1] != 2:
    raise ValueError(
      f'method="gauss_newton" solves 2-D codes (d = 2), got d = {psi.shape[-1]}; '
      'use "pgd" or "fista".'
    )
  solve = lambda c, a, b, lam: _solve_chunk(  # noqa: E731
    c, psi, a, b, lam, max_iter=max_iter, tol=tol
  )
  return solve_columns(solve, init, z0, z1, l1_weight, chunk=chunk)
