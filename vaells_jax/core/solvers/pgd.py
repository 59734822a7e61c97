"""Accelerated proximal gradient with a per-pair step: the ``"pgd"`` solver.

Minimises, for every pair at once,

    F(c) = f(c) + l1_weight ||c||_1,   f(c) = 1/2 ||z1 - expm(sum_m c_m psi_m) z0||^2,

with a fixed amount of work per iteration and per pair, so that a batch costs
what its pairs cost, not what its worst pair costs (a vmapped backtracking
line search runs as many trials as the pair that needs the most). Each
iteration evaluates ``f`` and its gradient at the extrapolated point ``y``
(one fused pass) and ``f`` alone at four proximal steps ``x+ = prox(y - s t
grad f(y))``, ``s`` in ``(2, 1, 1/2, 1/4)``, evaluated together:

* step control per pair: a trial passes if ``f(x+)`` lies below the quadratic
  model ``f(y) + <g, x+ - y> + ||x+ - y||^2 / (2 s t)`` (the backtracking
  test of FISTA); the longest that passes is taken and its step ``s t``
  becomes the pair's ``t``, so ``t`` can double every iteration. If none
  passes, ``t`` shrinks to put the longest next trial at 0.9 / (the curvature
  measured along the shortest) and the pair retries from ``y``. The step is
  carried across iterations and starts at ``1 / sum_m ||psi_m z1||^2``, the
  Gauss-Newton curvature at a solution of a commuting dictionary;
* momentum: FISTA's extrapolation, never restarted (restarting it whenever
  ``F`` rose made pgd end higher than fista on the rank-deficient ``M > d``
  pairs, ``benchmarks/pgd_quality.py``); instead each pair keeps the iterate
  of lowest ``F`` seen, and that is the result, so the result is never worse
  than any iterate, the start included;
* a pair stops (its state frozen) once a taken step has a proximal-gradient
  mapping ``||x+ - y|| / (s t)`` at most ``tol``; the loop ends when every
  pair has stopped (checked every :data:`_BLOCK` iterations) or after
  ``max_iter`` iterations. On a GPU or TPU it runs all ``max_iter``, a loop
  of known trip count (``run_blocks``'s ``counted``): at the training
  steps' tolerance a step's pairs run to ``max_iter`` anyway
  (``benchmarks/gpu_census.py --iterations``), and a GPU then reads no
  loop condition on the host;
* for ``d > 2``, :data:`_POLISH` Levenberg-Marquardt steps from the best
  iterate then close what accelerated gradient leaves along ill-conditioned
  directions (:func:`_polish`); each is taken only where ``F`` falls.

Pairs lie on the last (minor) axis of every array
(:mod:`vaells_jax.core.solvers.columns`, which also runs the loop in blocks
and chunks); values and gradients are
:mod:`vaells_jax.core.solvers.pairs`'s.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from vaells_jax.core.expm import expm_pairs
from vaells_jax.core.solvers.columns import (
  CHUNK,
  first_true,
  materialize,
  pick,
  run_blocks,
  solve_columns,
)
from vaells_jax.core.solvers.pairs import (
  combine,
  data_term,
  residual_general,
  value_and_grad,
)

__all__ = ["solve_pgd"]

# Trial steps per iteration, as multiples of the pair's step t: the longest
# that passes the step test is taken and becomes the next t.
_SCALES = (2.0, 1.0, 0.5, 0.25)
_MIN_SHRINK = 0.1
_MAX_STEP = 1e6
_BLOCK = 10  # iterations between checks that every pair has stopped
# d > 2: Levenberg-Marquardt steps after the loop (_polish); on a trained
# nat_mnist state's pairs they raise the share as low as the original method
# from 0.84 to 0.95 of the prior pairs, 3 steps as much as 10
# (benchmarks/original_pairs.py; docs/studies/benchmarks-solvers.md).
_POLISH = 5


def _soft_threshold(x, threshold):
  return jnp.sign(x) * jnp.maximum(jnp.abs(x) - threshold, 0.0)


def _dot(a, b):
  """``sum_m a_m b_m`` of two coefficient arrays ``[M, ...]``, written as a
  sum of rows (elementwise, so it fuses with its operands)."""
  return sum(a[m] * b[m] for m in range(a.shape[0]))


class _State(NamedTuple):
  """Coefficients are ``[M, P]`` arrays, the pairs on the minor axis: every
  operation is elementwise over the pairs, and one fusion updates all ``M``
  rows (a tuple of rows costs a fusion and a loop copy per row, and at the
  training steps' 120 pairs the loop's cost is its number of operations)."""

  x: jax.Array  # current iterate (F may rise under momentum) [M, P]
  y: jax.Array  # extrapolated point [M, P]
  best: jax.Array  # iterate of lowest F so far [M, P]
  best_objective: jax.Array  # its F [P]
  theta: jax.Array  # momentum parameter [P]
  step: jax.Array  # step size [P]
  objective: jax.Array  # F(x) [P]
  error: jax.Array  # proximal-gradient mapping norm of the last accepted step [P]
  done: jax.Array  # stopped [P]
  num_iter: jax.Array  # iterations run [P]


def _passes(f_y, f_trial, sq, slope, step):
  """The step test: ``f(x+) <= f(y) + <g, x+ - y> + ||x+ - y||^2 / (2 t)``.

  Returns ``(passed, excess)``, ``excess = f(x+) - f(y) - <g, x+ - y>``
  (half the curvature of ``f`` along the step times its squared length). A
  tolerance absorbs rounding of ``f`` near convergence.
  """
  rounding = 8 * jnp.finfo(f_y.dtype).eps * (jnp.abs(f_y) + jnp.abs(f_trial))
  excess = f_trial - f_y - slope
  finite = jnp.isfinite(f_y) & jnp.isfinite(f_trial)
  return finite & (excess <= 0.5 * sq / step + rounding), excess


def _decide(state, f_y, f_trial, sq, slope, penalty, tol):
  """Per pair: which trial to take, the next step, the momentum.

  Args:
    state: the :class:`_State` before the iteration.
    f_y: ``f(y)``, ``[P]``.
    f_trial, sq, slope, penalty: ``f(x+)``, ``||x+ - y||^2``, ``<g, x+ -
      y>`` and ``l1 ||x+||_1`` of the trial with step ``_SCALES[k] t``, each
      ``[K, P]``.
    tol: stopping tolerance.

  Returns:
    ``(choice, take, step, beta, objective, error, done, theta)``, each
    ``[P]``: ``choice``: the index of the first (longest) trial that passed,
    else the last; ``take``: a trial passed and becomes the iterate.
  """
  step = state.step
  scales = jnp.asarray(_SCALES, step.dtype)[:, None]
  passed, excess = _passes(f_y, f_trial, sq, slope, scales * step)
  ok = jnp.any(passed, axis=0)
  choice = jnp.where(ok, first_true(passed), len(_SCALES) - 1)
  at_choice = lambda a: pick(a, choice)  # noqa: E731
  scale = at_choice(jnp.broadcast_to(scales, f_trial.shape))
  # None passed: the next longest trial is 0.9 / (the curvature measured
  # along the shortest step).
  inverse_curvature = 0.5 * sq[-1] / jnp.maximum(excess[-1], 1e-30)
  shortest = _SCALES[-1] * step
  shrunk = (
    jnp.where(
      jnp.isfinite(f_trial[-1]) & (excess[-1] > 0),
      jnp.clip(0.9 * inverse_curvature, _MIN_SHRINK * shortest, 0.9 * shortest),
      _MIN_SHRINK * shortest,
    )
    / _SCALES[0]
  )
  active = ~state.done
  new_step = jnp.minimum(jnp.where(ok, scale * step, shrunk), _MAX_STEP)
  objective = at_choice(f_trial + penalty)
  take = active & ok
  theta = state.theta
  next_theta = 0.5 * (1.0 + jnp.sqrt(1.0 + 4.0 * theta * theta))
  error = jnp.sqrt(at_choice(sq)) / (scale * step)
  return (
    choice,
    take,
    jnp.where(active, new_step, step),
    (theta - 1.0) / next_theta,
    jnp.where(take, objective, state.objective),
    jnp.where(take, error, state.error),
    state.done | (take & (error <= tol)),
    jnp.where(take, next_theta, theta),
  )


def _iterate(index, state: _State, psi, z0, z1, l1, tol) -> _State:
  """One iteration for every pair not yet stopped (module docstring)."""
  x, y, step = state.x, state.y, state.step
  f_y, grad = value_and_grad(index, y, psi, z0, z1)
  grad = jnp.where(jnp.isfinite(f_y) & jnp.isfinite(grad), grad, 0.0)
  # All trials at once, [M, K, P]: one evaluation of f on K P points.
  t = jnp.asarray(_SCALES, step.dtype)[:, None] * step
  trials = _soft_threshold(y[:, None] - t * grad[:, None], t * l1)
  diff = trials - y[:, None]
  choice, take, step, beta, objective, error, done, theta = materialize(
    index,
    lambda *args: _decide(state, f_y, *args, tol),
    data_term(index, trials, psi, z0, z1),
    _dot(diff, diff),
    _dot(grad, diff),
    l1 * sum(jnp.abs(u) for u in trials),
  )
  chosen = pick(jnp.moveaxis(trials, 1, 0), choice)
  # Taken: extrapolate (FISTA); rejected: retry from y with smaller steps.
  y = jnp.where(take, chosen + beta * (chosen - x), y)
  improved = take & (objective < state.best_objective)
  return _State(
    x=jnp.where(take, chosen, x),
    y=y,
    best=jnp.where(improved, chosen, state.best),
    best_objective=jnp.where(improved, objective, state.best_objective),
    theta=theta,
    step=step,
    objective=objective,
    error=error,
    done=done,
    num_iter=state.num_iter + ~state.done,
  )


def _solve_chunk(coeffs, psi, z0, z1, l1, *, max_iter, tol):
  """Runs the loop on one chunk: ``coeffs [M, P]``, ``z0, z1 [d, P]``, ``l1 [P]``."""
  dtype = coeffs.dtype
  value = data_term(0, coeffs, psi, z0, z1)
  objective = value + l1 * jnp.sum(jnp.abs(coeffs), axis=0)
  # Gauss-Newton curvature sum_m ||psi_m z1||^2 (exact at a solution when the
  # operators commute); tiny for z1 near 0, hence the cap.
  moved = jnp.sum(psi[..., None] * z1[None, None, :, :], axis=2)  # [M, d, P]
  curvature = jnp.sum(moved * moved, axis=(0, 1))
  step = jnp.minimum(1.0 / jnp.maximum(curvature, 1.0 / _MAX_STEP), _MAX_STEP)
  num_pairs = z0.shape[-1]
  state = _State(
    x=coeffs,
    y=coeffs,
    best=coeffs,
    best_objective=jnp.where(jnp.isfinite(objective), objective, jnp.inf),
    theta=jnp.ones(num_pairs, dtype),
    step=step.astype(dtype),
    # A start outside expm's range has no finite objective to improve on.
    objective=jnp.where(jnp.isfinite(objective), objective, jnp.inf),
    error=jnp.full(num_pairs, jnp.inf, dtype),
    done=jnp.zeros(num_pairs, bool),
    num_iter=jnp.zeros(num_pairs, jnp.int32),
  )

  state = run_blocks(
    lambda i, s, z0, z1, l1: _iterate(i, s, psi, z0, z1, l1, tol),
    state,
    max_iter,
    _BLOCK,
    (z0, z1, l1),
    counted=True,  # a training step's pairs run to max_iter (module docstring)
  )
  best = state.best
  if psi.shape[-1] > 2:
    best = _polish(best, psi, z0, z1, l1)
  return best, state.num_iter, state.error


def _polish(coeffs, psi, z0, z1, l1):
  """:data:`_POLISH` Levenberg-Marquardt steps on ``F`` from ``coeffs [M,
  P]``, per pair: ``(J^T J + lambda diag(J^T J)) delta = J^T r - l1
  sign(c)`` with ``J`` the Jacobian of ``expm(A) z0`` (``M`` JVPs of
  :func:`expm_pairs`); a coefficient that would cross zero stops there; a
  step is taken where ``F`` falls (``lambda / 3``), else ``lambda * 2``."""
  num_ops = psi.shape[0]
  operators = psi[..., None]  # [M, d, d, 1]

  def objective(c):
    residual = residual_general(combine(operators, c), z0, z1)
    value = 0.5 * jnp.sum(residual**2, axis=0) + l1 * jnp.sum(jnp.abs(c), axis=0)
    return value, residual

  def body(_, carry):
    c, value, residual, damping = carry
    a = combine(operators, c)
    frechet = jax.vmap(lambda t: jax.jvp(expm_pairs, (a,), (t,))[1])(
      jnp.broadcast_to(operators, (num_ops,) + a.shape)
    )
    jac = jnp.sum(frechet * z0[None, None], axis=2)  # [M, d, P]
    gram = jnp.einsum("mip,nip->pmn", jac, jac)
    rhs = jnp.einsum("mip,ip->pm", jac, residual) - (l1 * jnp.sign(c)).T
    diag = jnp.diagonal(gram, axis1=1, axis2=2)
    system = gram + jnp.eye(num_ops) * (damping[:, None] * diag + 1e-30)[:, None]
    trial = c + jnp.linalg.solve(system, rhs[..., None])[..., 0].T
    trial = jnp.where(trial * c < 0, 0.0, trial)
    trial_value, trial_residual = objective(trial)
    better = trial_value < value  # False for NaN
    return (
      jnp.where(better, trial, c),
      jnp.where(better, trial_value, value),
      jnp.where(better, trial_residual, residual),
      jnp.where(better, damping / 3, damping * 2),
    )

  value, residual = objective(coeffs)
  damping = jnp.full(value.shape, 1e-3, value.dtype)
  carry = (coeffs, value, residual, damping)
  return jax.lax.fori_loop(0, _POLISH, body, carry)[0]


def solve_pgd(init, psi, z0, z1, l1_weight, *, max_iter, tol, chunk=CHUNK):
  """Solves every start of every pair (module docstring).

  Args:
    init: starting coefficients, ``[R, N, M]``.
    psi: operators, ``[M, d, d]``.
    z0, z1: points, ``[N, d]``.
    l1_weight: sparsity weights, ``[N]``.
    max_iter: iterations per start.
    tol: stopping tolerance on the proximal-gradient mapping norm.
    chunk: pairs (starts) per ``lax.map`` chunk.

  Returns:
    ``(coeffs [R, N, M], num_iter [R, N], error [R, N])``: the final (best)
    iterate, the proximal-gradient iterations it took and its last
    proximal-gradient mapping norm (``inf`` if no step was accepted).
  """
  solve = lambda c, a, b, lam: _solve_chunk(  # noqa: E731
    c, psi, a, b, lam, max_iter=max_iter, tol=tol
  )
  return solve_columns(solve, init, z0, z1, l1_weight, chunk=chunk)
