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
  ``max_iter`` iterations;
* for ``d > 2``, :data:`_POLISH` Levenberg-Marquardt steps from the best
  iterate then close what accelerated gradient leaves along ill-conditioned
  directions (:func:`_polish`); each is taken only where ``F`` falls.

Pairs lie on the last (minor) axis of every array, so each operation is
elementwise over contiguous pairs and vectorises; for ``d = 2`` the matrix
exponential is the closed form of :mod:`vaells_jax.core.expm` written on the
four entries. For ``d > 2`` values come from
:func:`~vaells_jax.core.expm.expm_pairs_shift` and the gradient from one
JVP of :func:`~vaells_jax.core.expm.expm_pairs`
(:func:`_value_and_grad_general`), both with products elementwise over the
pairs. Either way the residual is ``(expm(A) - I) z0 - (z1 - z0)``, so its
rounding is relative to the shift, not to ``z0``. Large batches are solved
in chunks of :data:`CHUNK` pairs (``lax.map``) so that the working set stays
in cache.
"""

from __future__ import annotations

import math
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

__all__ = ["CHUNK", "map_chunks", "run_blocks", "solve_columns", "solve_pgd"]

CHUNK = 1024  # pairs per lax.map chunk (benchmarks/inference_scaling.py)
_STAGES = 3  # times run_blocks gathers its running pairs into a smaller array
# Trial steps per iteration, as multiples of the pair's step t: the longest
# that passes the step test is taken and becomes the next t.
_SCALES = (2.0, 1.0, 0.5, 0.25)
_MIN_SHRINK = 0.1
_MAX_STEP = 1e6
_BLOCK = 10  # iterations between checks that every pair has stopped
# d > 2: Levenberg-Marquardt steps after the loop (_polish); on a trained
# nat_mnist state's pairs they raise the share as low as the original method
# from 0.84 to 0.95 of the prior pairs, 3 steps as much as 10
# (benchmarks/original_pairs.py; docs/benchmarks.md).
_POLISH = 5


def _materialize(index, fn, *args):
  """``fn(*args)``, computed once and stored.

  XLA:CPU fuses an elementwise producer into each of its consumers and
  recomputes it there: a gradient with ``M`` rows, or a state with a dozen
  fields, each recomputed the transcendental functions of the matrix
  exponential (measured: 3x the time of one evaluation). A conditional is a
  fusion boundary; ``index`` is a loop counter (never batched by ``vmap``,
  so the conditional stays one), always ``>= 0``.
  """
  return jax.lax.cond(index >= 0, fn, fn, *args)


def _combine(weights, coeffs):
  """``sum_m weights[m] coeffs[m]``: ``weights [M, ...]`` against ``M`` rows
  ``[P]`` (``[M]`` scalars, or operators ``[M, d, d, 1]`` for ``[d, d, P]``
  generators)."""
  return sum(weights[m] * coeffs[m] for m in range(weights.shape[0]))


def _parts_2x2(psi):
  """Per operator: ``tr / 2``, ``(psi_00 - psi_11) / 2``, ``psi_01``, ``psi_10``."""
  return (
    0.5 * (psi[:, 0, 0] + psi[:, 1, 1]),
    0.5 * (psi[:, 0, 0] - psi[:, 1, 1]),
    psi[:, 0, 1],
    psi[:, 1, 0],
  )


class _Forward2x2(NamedTuple):
  """The closed form at ``c`` for ``d = 2`` (:func:`_forward_2x2`), each ``[P]``
  (``parts``: ``[M]`` rows of :func:`_parts_2x2`)."""

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


def _forward_2x2(index, coeffs, psi, z0, z1, *, with_slope):
  """``w = expm(A) z0`` and the residual ``w - z1`` of each pair for ``d = 2``.

  With ``A = mu I + B``, ``B = [[h, a01], [a10, -h]]``, ``delta = h^2 + a01
  a10``: ``w = e^mu (C(delta) z0 + S(delta) B z0)``, the residual computed as
  ``(w - z0) - (z1 - z0)``. ``with_slope`` adds ``S'`` for derivatives.
  """
  parts = _parts_2x2(psi)
  mu, h, a01, a10 = (_combine(p, coeffs) for p in parts)

  def transcendental(mu, delta):
    functions = cosh_sinhc_slope(delta) if with_slope else _cosh_sinhc(delta)
    return (jnp.expm1(mu), cosh_minus_one(delta, functions[0])) + tuple(functions)

  scale_m1, cosh_m1, cosh, sinhc, *slope = _materialize(
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
  return _Forward2x2(
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


def _data_2x2(index, coeffs, psi, z0, z1, *, with_grad):
  """``f`` of each pair for ``d = 2`` and, with ``with_grad``, its gradient.

  ``f`` from :func:`_forward_2x2`; the gradient is the chain rule through
  ``mu, h, a01, a10`` (each linear in ``c``), written out so that it costs a
  few dozen elementwise operations.

  Returns:
    ``f [P]`` and, with ``with_grad``, ``grad [M, P]``.
  """
  fwd = _forward_2x2(index, coeffs, psi, z0, z1, with_slope=with_grad)
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


def _general_pairs(coeffs, psi, z0, z1):
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
  return shape, _combine(psi[..., None], coeffs), z0, z1


def _residual_general(generator, z0, z1):
  """``z1 - expm(A) z0`` as ``(z1 - z0) - (expm(A) - I) z0``
  (:func:`expm_pairs_shift`): ``[d, d, n]``, ``[d, n]`` -> ``[d, n]``."""
  return (z1 - z0) - expm_pairs_shift(generator, z0)


def _data_general(coeffs, psi, z0, z1):
  """``f`` of each pair for any ``d``, ``[P]``."""
  shape, generator, z0, z1 = _general_pairs(coeffs, psi, z0, z1)
  return 0.5 * jnp.sum(_residual_general(generator, z0, z1) ** 2, axis=0).reshape(shape)


def _value_and_grad_general(coeffs, psi, z0, z1):
  """``(f, grad f)`` for any ``d``. With ``r = z1 - expm(A) z0`` and ``L(A,
  E)`` the Frechet derivative of ``expm`` (whose adjoint is ``L(A^T, .)``),
  ``df / dc_m = -<r, L(A, psi_m) z0> = -<psi_m^T, L(A, z0 r^T)>_F``: one JVP
  of :func:`expm_pairs` for all ``M`` operators; ``f`` and ``r`` as
  :func:`_data_general` computes them."""
  shape, generator, z0, z1 = _general_pairs(coeffs, psi, z0, z1)
  residual = _residual_general(generator, z0, z1)
  _, frechet = jax.jvp(expm_pairs, (generator,), (z0[:, None] * residual[None],))
  grad = jnp.stack(
    [
      -jnp.sum(psi[m].T[:, :, None] * frechet, axis=(0, 1)).reshape(shape)
      for m in range(psi.shape[0])
    ]
  )
  return 0.5 * jnp.sum(residual**2, axis=0).reshape(shape), grad


def _data(index, coeffs, psi, z0, z1):
  """``f(c)`` per pair: ``c [M, P]``, ``z0, z1 [d, P]`` -> ``[P]``, stored."""
  if psi.shape[-1] == 2:
    fn = lambda c: _data_2x2(index, c, psi, z0, z1, with_grad=False)  # noqa: E731
  else:
    fn = lambda c: _data_general(c, psi, z0, z1)  # noqa: E731
  return _materialize(index, fn, coeffs)


def _value_and_grad(index, coeffs, psi, z0, z1):
  """``(f [P], grad [M, P])``, stored."""
  if psi.shape[-1] == 2:
    fn = lambda c: _data_2x2(index, c, psi, z0, z1, with_grad=True)  # noqa: E731
  else:
    fn = lambda c: _value_and_grad_general(c, psi, z0, z1)  # noqa: E731
  return _materialize(index, fn, coeffs)


def _soft_threshold(x, threshold):
  return jnp.sign(x) * jnp.maximum(jnp.abs(x) - threshold, 0.0)


def _dot(a, b):
  """``sum_m a_m b_m`` of two coefficient arrays ``[M, ...]``, written as a
  sum of rows (elementwise, so it fuses with its operands)."""
  return sum(a[m] * b[m] for m in range(a.shape[0]))


def _first(flags):
  """Index of the first true row of ``flags [K, P]`` (0 where none is)."""
  index = jnp.zeros(flags.shape[1:], jnp.int32)
  for k in range(len(flags) - 1, -1, -1):
    index = jnp.where(flags[k], k, index)
  return index


def _pick(rows, choice):
  """``rows[choice[p], p]`` for ``K`` rows, as a chain of selects (a gather
  costs many times more on XLA:CPU)."""
  result = rows[-1]
  for k in range(len(rows) - 2, -1, -1):
    result = jnp.where(choice == k, rows[k], result)
  return result


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
  choice = jnp.where(ok, _first(passed), len(_SCALES) - 1)
  pick = lambda a: _pick(a, choice)  # noqa: E731
  scale = pick(jnp.broadcast_to(scales, f_trial.shape))
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
  objective = pick(f_trial + penalty)
  take = active & ok
  theta = state.theta
  next_theta = 0.5 * (1.0 + jnp.sqrt(1.0 + 4.0 * theta * theta))
  error = jnp.sqrt(pick(sq)) / (scale * step)
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
  f_y, grad = _value_and_grad(index, y, psi, z0, z1)
  grad = jnp.where(jnp.isfinite(f_y) & jnp.isfinite(grad), grad, 0.0)
  # All trials at once, [M, K, P]: one evaluation of f on K P points.
  t = jnp.asarray(_SCALES, step.dtype)[:, None] * step
  trials = _soft_threshold(y[:, None] - t * grad[:, None], t * l1)
  diff = trials - y[:, None]
  choice, take, step, beta, objective, error, done, theta = _materialize(
    index,
    lambda *args: _decide(state, f_y, *args, tol),
    _data(index, trials, psi, z0, z1),
    _dot(diff, diff),
    _dot(grad, diff),
    l1 * sum(jnp.abs(u) for u in trials),
  )
  chosen = _pick(jnp.moveaxis(trials, 1, 0), choice)
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
  value = _data(0, coeffs, psi, z0, z1)
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
  )
  best = state.best
  if psi.shape[-1] > 2:
    best = _polish(best, psi, z0, z1, l1)
  return best, state.num_iter, state.error


def run_blocks(iterate, state, max_iter: int, block: int, pairs):
  """``state = iterate(i, state, *pairs)`` until ``max_iter`` iterations or
  every pair has stopped (``state.done``), checked every ``block`` iterations.

  Blocks are a ``fori_loop`` (whose counter ``vmap`` leaves unbatched, so
  :func:`_materialize`'s conditional stays one) inside a ``while_loop``; a
  pair is frozen (marked done for ``iterate``) once it has run
  ``max_iter`` iterations, and a pair done before an iteration stays done.

  The loop runs as long as its slowest pair, while most pairs stop far
  earlier. So once no more pairs are running than half the array holds,
  they are gathered (with ``pairs``: arrays with the pairs on their last
  axis, as every field of ``state``) into an array of that size
  (:func:`_compacted_sizes`), which goes on, and is scattered back at the
  end. Each pair's iterations are elementwise, so the results do not
  change (``tests/test_pgd.py``; on a training step's real pairs the same
  to the bit, docs/benchmarks.md).
  """

  def loop(start, state, pairs, running):
    def run_block(carry):
      start, state = carry

      def body(i, state):
        frozen = state._replace(done=state.done | (start + i >= max_iter))
        new = iterate(i, frozen, *pairs)
        return new._replace(done=state.done | (new.done & ~frozen.done))

      return start + block, jax.lax.fori_loop(0, block, body, state)

    return jax.lax.while_loop(
      lambda carry: (
        (carry[0] < max_iter) & (jnp.sum(~carry[1].done, axis=-1) > running)
      ),
      run_block,
      (start, state),
    )

  def run(start, state, pairs, sizes):
    if not sizes:
      return loop(start, state, pairs, 0)
    start, state = loop(start, state, pairs, sizes[0])
    order = jnp.argsort(state.done, stable=True)[: sizes[0]]  # running pairs first
    gather = lambda a: jnp.take(a, order, axis=-1)  # noqa: E731
    start, rest = run(
      start,
      jax.tree_util.tree_map(gather, state),
      jax.tree_util.tree_map(gather, pairs),
      sizes[1:],
    )
    return start, jax.tree_util.tree_map(
      lambda a, b: a.at[..., order].set(b), state, rest
    )

  return run(0, state, pairs, _compacted_sizes(state.done.shape[-1]))[1]


def _compacted_sizes(num_pairs: int) -> list:
  """The arrays :func:`run_blocks` gathers its running pairs into: each half
  the last, rounded up to a multiple of 16 pairs (another vectorisation of
  the tail of an array could round differently), at most :data:`_STAGES`."""
  sizes = [num_pairs]
  while len(sizes) <= _STAGES and (size := -(-sizes[-1] // 32) * 16) < sizes[-1]:
    sizes.append(size)
  return sizes[1:]


def _polish(coeffs, psi, z0, z1, l1):
  """:data:`_POLISH` Levenberg-Marquardt steps on ``F`` from ``coeffs [M,
  P]``, per pair: ``(J^T J + lambda diag(J^T J)) delta = J^T r - l1
  sign(c)`` with ``J`` the Jacobian of ``expm(A) z0`` (``M`` JVPs of
  :func:`expm_pairs`); a coefficient that would cross zero stops there; a
  step is taken where ``F`` falls (``lambda / 3``), else ``lambda * 2``."""
  num_ops = psi.shape[0]
  operators = psi[..., None]  # [M, d, d, 1]

  def objective(c):
    residual = _residual_general(_combine(operators, c), z0, z1)
    value = 0.5 * jnp.sum(residual**2, axis=0) + l1 * jnp.sum(jnp.abs(c), axis=0)
    return value, residual

  def body(_, carry):
    c, value, residual, damping = carry
    a = _combine(operators, c)
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


def map_chunks(fn, arrays, *, chunk, axis, mode="constant"):
  """``fn(*arrays)``, in ``lax.map`` chunks of ``chunk`` entries along ``axis``.

  ``axis`` (0 or -1) indexes the entries in every array and in every output
  of ``fn``. With more than ``chunk`` entries the arrays are padded
  (``jnp.pad`` ``mode``) to whole chunks, each chunk solved by one ``fn``
  call, and the padding dropped from the outputs; otherwise one call.
  """
  total = arrays[0].shape[axis]
  if total <= chunk:
    return fn(*arrays)
  chunks = math.ceil(total / chunk)

  def split(a):  # [..., total, ...] -> [chunks, ..., chunk, ...]
    k = axis % a.ndim
    widths = [(0, 0)] * a.ndim
    widths[k] = (0, chunks * chunk - total)
    a = jnp.pad(a, widths, mode=mode)
    return jnp.moveaxis(
      a.reshape(a.shape[:k] + (chunks, chunk) + a.shape[k + 1 :]), k, 0
    )

  def merge(a):  # [chunks, ..., chunk, ...] -> [..., total, ...]
    k = axis % (a.ndim - 1)
    a = jnp.moveaxis(a, 0, k)
    a = a.reshape(a.shape[:k] + (chunks * chunk,) + a.shape[k + 2 :])
    return jax.lax.slice_in_dim(a, 0, total, axis=k)

  out = jax.lax.map(lambda args: fn(*args), [split(a) for a in arrays])
  return jax.tree_util.tree_map(merge, out)


def solve_columns(solve_chunk, init, z0, z1, l1_weight, *, chunk=CHUNK):
  """``solve_chunk(coeffs [M, P], z0 [d, P], z1 [d, P], l1 [P])`` on every
  start of every pair, the pairs on the minor axis, in chunks of ``chunk``.

  Args:
    solve_chunk: returns ``(coeffs [M, P], num_iter [P], error [P])``.
    init: starting coefficients, ``[R, N, M]``.
    z0, z1: points, ``[N, d]``.
    l1_weight: sparsity weights, ``[N]``.
    chunk: pairs (starts) per ``lax.map`` chunk.

  Returns:
    ``(coeffs [R, N, M], num_iter [R, N], error [R, N])``.
  """
  num_restarts, num_pairs, num_ops = init.shape
  total = num_restarts * num_pairs
  tile = lambda a: jnp.tile(a.T, (1,) * (a.ndim - 1) + (num_restarts,))  # noqa: E731
  columns = [init.reshape(total, num_ops).T, tile(z0), tile(z1), tile(l1_weight)]
  # Padding pairs (z0 = z1 = 0, c = 0, no weight) stop at once.
  coeffs, num_iter, error = map_chunks(solve_chunk, columns, chunk=chunk, axis=-1)
  return (
    coeffs.T.reshape(num_restarts, num_pairs, num_ops),
    num_iter.reshape(num_restarts, num_pairs),
    error.reshape(num_restarts, num_pairs),
  )


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
