"""Global coefficient inference for a single operator (``M = 1``).

With one operator the inference objective is a function of one number,

    f(t) = 1/2 ||z1 - expm(t psi) z0||^2 + l1_weight |t|,

so its global minimum can be found by search instead of from random starts.
Since ``f(t) >= l1_weight |t|`` and ``f(0) = 1/2 ||z1 - z0||^2``, the
minimiser lies in ``|t| <= f(0) / l1_weight``. The solve:

1. **Grid.** ``t_k = k h``, ``k = -K..K`` (``K = GRID_STEPS``), over
   ``|t| <= T`` with ``T = min(max_n f_n(0) / l1_weight_n, K theta / ||psi||_2)``
   and ``h = T / K``: the bracket of every pair, capped so that the spacing
   stays ``h ||psi||_2 <= theta`` (``theta = GRID_ANGLE`` radians). Along the
   path ``y(t) = expm(t psi) z0`` moves by at most ``h ||psi||_2 e^(h ||psi||_2)
   ||y||`` between grid points, whatever the eigenvalues of ``psi`` (rotation
   speed ``|Im lambda|`` and growth rate ``Re lambda`` are both at most
   ``||psi||_2``): about 63 points per turn of the fastest rotation. The cap is
   ``|t| ||psi||_2 <= K theta`` (102 radians, 16 turns of the fastest
   rotation): with ``l1_weight = 1e-6`` the bracket is ``10^6`` times the
   squared distance, far beyond any path the encoder produces, so the search
   is global up to the cap. One table ``expm(t_k psi)`` (``[2K + 1, d, d]``,
   :func:`vaells_jax.expm_small`: Taylor series with scaling and squaring, exact
   for any ``psi``, defective or not; no eigendecomposition) is shared by all
   pairs; each pair's objective on the grid is then one matrix product.
2. **Candidates.** On each side of ``t = 0`` the ``CANDIDATES`` lowest local
   minima of the grid values (ranked by their parabolic vertex), and the
   first grid point where ``f`` decreases from 0 on that side but is above
   ``f(0)`` at ``h`` (a dip inside ``(0, h)`` does not show on the grid).
3. **Refinement.** On each candidate's bracket ``[t_(k-1), t_(k+1)]`` (one side
   of 0, where ``f`` is smooth), safeguarded Newton: a Newton step on
   ``f' = 0`` where the curvature is positive, the step lands inside the
   bracket and the last Newton step lowered ``f``; a golden-section step into
   the larger part of the bracket otherwise. The bracket always holds a point
   no higher than its ends, so each step keeps the best point and shrinks the
   bracket. Inside a bracket ``|t - t_k| ||psi||_2 <= theta``, so
   ``expm(t psi) z0 = expm((t - t_k) psi) y(t_k)`` is a short Taylor series on
   a vector (5 terms in float32, 10 in float64; truncation below rounding).
4. **Choice.** The lowest of ``f(0)`` and the refined candidates (ties go to
   ``t = 0``).

``converged`` means the chosen ``t`` is stationary: ``|f'(t)| <= tol`` or
within the rounding error of ``f'`` (for ``t = 0``: ``|g'(0)| <= l1_weight``
to the same tolerance, the subgradient condition of the kink). It does not
vouch for minima beyond the cap.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from vaells_jax.core import backend
from vaells_jax.core.expm import expm_small

__all__ = [
  "CANDIDATES",
  "DEVICE_PAIR_BLOCK",
  "GRID_ANGLE",
  "GRID_STEPS",
  "PAIR_BLOCK",
  "global_minima",
  "grid_spacing",
  "refine",
  "solve_exact",
  "spectral_norm_bound",
]

GRID_STEPS = 1024  # grid points on each side of t = 0.
GRID_ANGLE = 0.1  # h ||psi||_2 at most: radians of the fastest rotation per step.
CANDIDATES = 4  # local grid minima refined on each side of t = 0 (and j = 1).
PAIR_BLOCK = 512  # pairs per block of the grid search (bounds its memory).
DEVICE_PAIR_BLOCK = 8192  # the same on a GPU or TPU, whose blocks run in turn
_GOLDEN = 0.3819660112501051  # (3 - sqrt(5)) / 2
# Rounding of phi' in units of eps (1 + u ||psi||_2)(||z1|| + ||y||) ||dy/du||.
# The refinement stops at _SLOPE_ROUNDING units: measured in float32 on
# benchmarks/exact_inference.py (both cases), |phi'| at the float64
# minimiser is at most 0.7 units (median 0.005 and 0.04). ``converged``
# allows _SLOPE_BOUND units; a stop there leaves t up to 5e-4 from the
# minimiser (objective up to 1e-8 high; tests/test_exact_inference.py has
# such pairs).
_SLOPE_ROUNDING = 2.0
_SLOPE_BOUND = 64.0
# Squarings of psi^T psi in spectral_norm_bound (a GPU's ||psi||_2).
_NORM_ROUNDS = 20
# Taylor terms of expm(s psi) y for |s| ||psi||_2 <= GRID_ANGLE: remainder below
# 0.1^6 / 6! = 1.4e-9 (float32), 0.1^11 / 11! = 2.5e-19 (float64).
_TAYLOR_TERMS = {jnp.dtype(jnp.float32): 5, jnp.dtype(jnp.float64): 10}


def grid_spacing(psi, z0, z1, l1_weight):
  """The grid step ``h`` of the search (module docstring), a scalar.

  Args:
    psi: the operator, ``[d, d]``.
    z0, z1: the pairs, ``[N, d]``.
    l1_weight: ``[N]``.

  Returns:
    ``h = T / GRID_STEPS``; ``T = 1`` where the bracket is empty or unbounded
    (``psi = 0`` with ``l1_weight = 0``: every ``t`` is then optimal).
  """
  f0 = 0.5 * jnp.sum((z1 - z0) ** 2, axis=-1)
  positive = l1_weight > 0
  bracket = jnp.where(positive, f0 / jnp.where(positive, l1_weight, 1), jnp.inf)
  bracket = jnp.max(jnp.where(jnp.isnan(bracket), 0.0, bracket))
  norm = backend.per_platform(
    lambda m: jnp.linalg.norm(m, ord=2), spectral_norm_bound, psi
  )
  cap = GRID_STEPS * GRID_ANGLE / jnp.where(norm > 0, norm, 1.0)
  span = jnp.where(norm > 0, jnp.minimum(bracket, cap), bracket)
  span = jnp.where(jnp.isfinite(span) & (span > 0), span, 1.0)
  return span / GRID_STEPS


def spectral_norm_bound(psi, rounds=_NORM_ROUNDS):
  """An upper bound of ``||psi||_2`` (up to rounding) within a factor
  ``d^(2^-(rounds + 1))`` (``1 + 1.1e-6`` for ``d <= 10`` at the default),
  by repeated squaring of ``a = psi^T psi``: ``tr(a^n)^(1/n)`` lies in
  ``[lambda_max, d^(1/n) lambda_max]`` for ``n = 2^rounds``, whatever the
  gap between ``a``'s eigenvalues. Matrix products only (at full float32
  precision, not a GPU's TF32), where an SVD (the CPU's choice) is a
  batched iterative solver on a GPU; each square is scaled by its trace and
  the logarithms of the scales are carried, so nothing overflows."""
  matmul = functools.partial(jnp.matmul, precision=jax.lax.Precision.HIGHEST)
  a = matmul(psi.T, psi)
  scale = jnp.trace(a)
  c = a / jnp.where(scale > 0, scale, 1.0)
  log_n_trace = jnp.zeros((), a.dtype)  # log tr(c0^n): c's own trace is 1
  for _ in range(rounds):
    c = matmul(c, c)
    t = jnp.trace(c)
    c = c / t
    log_n_trace = 2.0 * log_n_trace + jnp.log(t)
  log_top = log_n_trace / 2.0**rounds
  return jnp.where(scale > 0, jnp.sqrt(scale * jnp.exp(log_top)), 0.0)


def _matvec(psi, y):
  """``psi @ y`` over the last axis of ``y [..., d]``."""
  return jnp.einsum("ij,...j->...i", psi, y)


def _path(psi, sign, step, base):
  """``expm(sign step psi) base``: Taylor series (Horner) for a short step.

  Args:
    psi: ``[d, d]``; sign, step: ``[...]``, ``|step| ||psi||_2 <= GRID_ANGLE``;
    base: ``[..., d]``.
  """
  scale = (sign * step)[..., None]
  acc = base
  for j in range(_TAYLOR_TERMS.get(base.dtype, 10), 0, -1):
    acc = base + (scale / j) * _matvec(psi, acc)
  return acc


def _evaluate(psi, sign, z1, lam, u, base_u, base_y):
  """``phi(u) = f(sign u)`` on one side of 0 and its derivatives in ``u``.

  The noise estimate grows with ``u ||psi||_2``: the rounding error of the
  squarings in ``expm(t psi)`` does.

  Returns:
    ``(phi, d1, d2, (noise, tie))``, each ``[...]``: the objective, ``phi'``,
    ``phi''`` and estimates of the rounding errors of ``phi'`` and ``phi``.
  """
  y = _path(psi, sign, u - base_u, base_y)
  p = sign[..., None] * _matvec(psi, y)  # dy/du
  q = sign[..., None] * _matvec(psi, p)  # d2y/du2
  r = z1 - y
  phi = 0.5 * jnp.sum(r * r, axis=-1) + lam * u
  d1 = lam - jnp.sum(r * p, axis=-1)
  d2 = jnp.sum(p * p, axis=-1) - jnp.sum(r * q, axis=-1)
  norm = lambda v: jnp.sqrt(jnp.sum(v * v, axis=-1))  # noqa: E731
  eps = jnp.finfo(y.dtype).eps
  growth = 1.0 + u * jnp.linalg.norm(psi, ord=2)
  scale = growth * (norm(z1) + norm(y))
  noise = _SLOPE_ROUNDING * eps * scale * norm(p)
  phi = jnp.where(jnp.isfinite(phi), phi, jnp.inf)
  return phi, d1, d2, (noise, 16 * eps * scale * scale)


def refine(psi, sign, z1, lam, base_u, base_y, lo, hi, valid, max_iter, tol):
  """Safeguarded Newton on each candidate's bracket ``[lo, hi]`` (in ``u >= 0``).

  Args:
    psi: ``[d, d]``; sign: ``[...]`` (+1 or -1: the side of 0);
    z1: ``[..., d]``; lam: ``[...]``;
    base_u, base_y: the candidate's grid point and ``y`` there, ``[...]``,
      ``[..., d]``; lo, hi: its bracket, ``[...]``; valid: whether to
      refine it (else its objective is ``inf``), ``[...]``.

  Returns:
    ``(u, phi, converged, num_iter)``, each ``[...]``.
  """
  evaluate = functools.partial(_evaluate, psi, sign, z1, lam)
  eps = jnp.finfo(base_y.dtype).eps
  width_tol = 4 * eps * jnp.maximum(base_u, hi - lo)

  def stationary(d1, noise):  # what ``converged`` reports
    return jnp.abs(d1) <= jnp.maximum(tol, noise[0] * (_SLOPE_BOUND / _SLOPE_ROUNDING))

  # Newton converges quadratically: the loop goes on to the rounding level.
  def located(d1, noise):
    return jnp.abs(d1) <= noise[0]

  phi, d1, d2, noise = evaluate(base_u, base_u, base_y)
  phi = jnp.where(valid, phi, jnp.inf)
  # A grid minimum at the cap that still descends: the bracket's minimum is
  # its end (not stationary); nothing to refine.
  at_cap = (base_u >= hi) & (d1 < 0)
  done = located(d1, noise) | ~jnp.isfinite(phi) | at_cap
  state = dict(
    it=jnp.zeros((), jnp.int32),
    lo=lo,
    hi=hi,
    u=base_u,
    phi=phi,
    d1=d1,
    d2=d2,
    conv=stationary(d1, noise) & valid,
    failed=jnp.zeros(phi.shape, bool),
    done=done,
    iters=jnp.zeros(phi.shape, jnp.int32),
  )

  def cond(s):
    return (s["it"] < max_iter) & ~jnp.all(s["done"])

  body = functools.partial(
    _refine_step,
    evaluate=evaluate,
    base=(base_u, base_y),
    tests=(stationary, located),
    width_tol=width_tol,
  )
  s = jax.lax.while_loop(cond, body, state)
  return s["u"], s["phi"], s["conv"], s["iters"]


def _refine_step(s, *, evaluate, base, tests, width_tol):
  """One step of :func:`refine`'s loop: a Newton step where it is safe, a
  golden-section one otherwise; the bracket shrinks around the better point.

  Args:
    s: the loop's state (:func:`refine`).
    evaluate: ``(u, base_u, base_y) -> (phi, d1, d2, noise)``.
    base: the candidates' ``(base_u [...], base_y [..., d])``.
    tests: ``(stationary, located)``: ``(d1, noise) -> [...]`` bool.
    width_tol: brackets this narrow are done, ``[...]``.
  """
  (base_u, base_y), (stationary, located) = base, tests
  u, lo, hi = s["u"], s["lo"], s["hi"]
  newton = u - s["d1"] / jnp.where(s["d2"] > 0, s["d2"], 1.0)
  use_newton = (s["d2"] > 0) & (newton > lo) & (newton < hi) & ~s["failed"]
  golden = jnp.where(hi - u > u - lo, u + _GOLDEN * (hi - u), u - _GOLDEN * (u - lo))
  trial = jnp.where(use_newton, newton, golden)
  phi, d1, d2, noise = evaluate(trial, base_u, base_y)
  # Where the values tie within rounding, the smaller slope is closer.
  tie = (phi <= s["phi"] + noise[1]) & (jnp.abs(d1) < jnp.abs(s["d1"]))
  better = (phi <= s["phi"]) | tie
  right = trial > u
  new_lo = jnp.where(better, jnp.where(right, u, lo), jnp.where(right, lo, trial))
  new_hi = jnp.where(better, jnp.where(right, hi, u), jnp.where(right, trial, hi))
  keep = lambda new, old: jnp.where(s["done"], old, jnp.where(better, new, old))  # noqa: E731
  conv = jnp.where(better, stationary(d1, noise), s["conv"])
  found = jnp.where(better, located(d1, noise), False)
  stuck = new_hi - new_lo <= width_tol
  return dict(
    it=s["it"] + 1,
    lo=jnp.where(s["done"], lo, new_lo),
    hi=jnp.where(s["done"], hi, new_hi),
    u=keep(trial, u),
    phi=keep(phi, s["phi"]),
    d1=keep(d1, s["d1"]),
    d2=keep(d2, s["d2"]),
    conv=jnp.where(s["done"], s["conv"], conv),
    failed=use_newton & ~better,
    done=s["done"] | found | stuck,
    iters=s["iters"] + (~s["done"]).astype(jnp.int32),
  )


def _candidates(values):
  """Where each side's refinements start: ``j = 1`` and the lowest local minima.

  Local minima are ranked by the vertex of the parabola through their three
  grid values (the grid value alone errs by up to ``f'' h^2 / 8``, enough to
  misrank the nearly equal minima of a rotation, ``t* + 2 pi k / omega``,
  whose objectives differ by ``l1_weight 2 pi / omega``). ``j = 1`` (bracket
  ``[0, 2h]``) is refined where ``f`` decreases from 0 on that side but is
  back above ``f(0)`` at ``h`` (the caller's test): such a dip in ``(0, h)``
  is not a grid minimum.

  Args:
    values: ``[..., K + 1]``, index ``j`` at ``|t| = j h`` (``j = 0``: t = 0).

  Returns:
    ``(j, valid)``: indices in ``1..K`` and whether each is a grid minimum
    (``j = 1``: finite), ``[..., CANDIDATES + 1]``.
  """
  inner = values[..., 1:]
  before = values[..., :-1]
  after = jnp.concatenate([values[..., 2:], values[..., -1:]], -1)
  local = (inner <= before) & (inner <= after) & jnp.isfinite(inner)
  curvature = before - 2 * inner + after
  safe = jnp.where(local & (curvature > 0), curvature, 1.0)
  vertex = inner - jnp.where(curvature > 0, (after - before) ** 2 / (8 * safe), 0.0)
  masked = jnp.where(local, vertex, jnp.inf)
  lowest, idx = jax.lax.top_k(-masked, CANDIDATES)
  first = jnp.ones_like(idx[..., :1])
  return (
    jnp.concatenate([first, idx + 1], -1),
    jnp.concatenate([jnp.isfinite(inner[..., :1]), jnp.isfinite(lowest)], -1),
  )


def _solve_block(psi, table, h, z0, z1, lam, *, max_iter, tol):
  """The exact solve of a block of pairs ``[N, d]`` on a shared grid table."""
  k = GRID_STEPS
  t = h * jnp.arange(-k, k + 1, dtype=z0.dtype)
  y = jnp.einsum("gij,nj->ngi", table, z0)  # [N, 2K + 1, d]
  values = 0.5 * jnp.sum((z1[:, None] - y) ** 2, -1) + lam[:, None] * jnp.abs(t)
  values = jnp.where(jnp.isfinite(values), values, jnp.inf)
  sides = jnp.stack([values[:, k:], values[:, k::-1]], axis=1)  # [N, 2, K + 1]
  j, valid = _candidates(sides)  # [N, 2, C + 1]
  sign = jnp.broadcast_to(jnp.array([1.0, -1.0], z0.dtype)[None, :, None], j.shape)
  slope0 = -jnp.sum((z1 - z0) * _matvec(psi, z0), -1)  # g'(0), [N]
  # j = 1 matters only for a dip inside (0, h): f decreases away from 0 on
  # that side but is back above f(0) at h (else a grid minimum covers it).
  descends = lam[:, None] + sign[..., 0] * slope0[:, None] < 0  # [N, 2]
  dip = descends & (sides[..., 1] >= sides[..., 0])
  valid = valid.at[..., 0].set(valid[..., 0] & dip)
  grid_index = k + jnp.where(sign > 0, j, -j)
  base_y = jnp.take_along_axis(y, grid_index.reshape(len(z0), -1, 1), axis=1)
  base_y = base_y.reshape(j.shape + z0.shape[-1:])
  ju = j.astype(z0.dtype)
  u, phi, conv, iters = refine(
    psi,
    sign,
    z1[:, None, None],
    lam[:, None, None],
    ju * h,
    base_y,
    (ju - 1) * h,
    jnp.minimum(ju + 1, k) * h,
    valid,
    max_iter,
    tol,
  )
  n = len(z0)
  f0 = 0.5 * jnp.sum((z1 - z0) ** 2, -1)
  f0 = jnp.where(jnp.isfinite(f0), f0, jnp.inf)
  all_phi = jnp.concatenate([f0[:, None], phi.reshape(n, -1)], 1)
  best = jnp.argmin(all_phi, axis=1)
  t_all = jnp.concatenate([jnp.zeros((n, 1), z0.dtype), (sign * u).reshape(n, -1)], 1)
  coeff = jnp.take_along_axis(t_all, best[:, None], 1)[:, 0]
  eps = jnp.finfo(z0.dtype).eps
  norm = functools.partial(jnp.linalg.norm, axis=-1)
  noise0 = _SLOPE_BOUND * eps * (norm(z1) + norm(z0)) * norm(_matvec(psi, z0))
  conv0 = jnp.abs(slope0) <= lam + jnp.maximum(tol, noise0)
  conv_all = jnp.concatenate([conv0[:, None], conv.reshape(n, -1)], 1)
  converged = jnp.take_along_axis(conv_all, best[:, None], 1)[:, 0]
  return coeff, converged, jnp.max(iters.reshape(n, -1), axis=1)


def solve_exact(init, psi, z0, z1, l1_weight, *, max_iter, tol):
  """:func:`global_minima` in the form of every solver
  (:class:`vaells_jax.core.solvers.Solve`).

  Args:
    init: ``[R, N, 1]``; only its shape is read: the global minimum does not
      depend on a start, so every restart gets it.
    psi, z0, z1, l1_weight, max_iter, tol: as for :func:`global_minima`.

  Returns:
    ``(coeffs [R, N, 1], num_iter [R, N], error [R, N])``: ``error`` is 0
    where :func:`global_minima` says converged, ``inf`` where not.
  """
  coeffs, converged, num_iter = global_minima(
    psi, z0, z1, l1_weight, max_iter=max_iter, tol=tol
  )
  error = jnp.where(converged, 0.0, jnp.inf).astype(z0.dtype)
  restarts = init.shape[0]
  return tuple(
    jnp.broadcast_to(a, (restarts,) + a.shape) for a in (coeffs, num_iter, error)
  )


@functools.partial(jax.jit, static_argnames=("max_iter", "tol", "block"))
def global_minima(psi, z0, z1, l1_weight, *, max_iter, tol, block=PAIR_BLOCK):
  """The global minimiser of each pair's objective for one operator (module docstring).

  Args:
    psi: the dictionary, ``[1, d, d]``.
    z0, z1: the pairs, ``[N, d]``.
    l1_weight: ``[N]``.
    max_iter: refinement iterations (safeguarded Newton steps) per candidate.
    tol: stationarity tolerance on ``|f'(t)|``.
    block: pairs per block of the grid search (``lax.map`` over blocks
      beyond that: memory ``block (2K + 1) d`` numbers, not ``N (2K + 1) d``);
      at least :data:`DEVICE_PAIR_BLOCK` on a GPU or TPU.

  Returns:
    ``(coeffs [N, 1], converged [N], num_iter [N])``: ``num_iter`` is the most
    refinement iterations any of the pair's candidates ran.
  """
  psi = psi[0]
  h = grid_spacing(psi, z0, z1, l1_weight)
  t = h * jnp.arange(-GRID_STEPS, GRID_STEPS + 1, dtype=z0.dtype)
  table = expm_small(t[:, None, None] * psi)  # [2K + 1, d, d]
  solve = functools.partial(_solve_block, psi, table, h, max_iter=max_iter, tol=tol)
  blocked = lambda n: functools.partial(_blocks, solve, n)  # noqa: E731
  coeff, conv, iters = backend.per_platform(
    blocked(block), blocked(max(block, DEVICE_PAIR_BLOCK)), z0, z1, l1_weight
  )
  return coeff[:, None], conv, iters


def _blocks(solve, block, z0, z1, l1_weight):
  """``solve`` on blocks of ``block`` pairs, one after the other."""
  n = z0.shape[0]
  if n <= block:
    return solve(z0, z1, l1_weight)
  pad = -n % block
  blocks = [
    jnp.concatenate([a, jnp.repeat(a[-1:], pad, axis=0)]).reshape(
      (-1, block) + a.shape[1:]
    )
    for a in (z0, z1, l1_weight)
  ]
  return tuple(
    r.reshape(-1)[:n] for r in jax.lax.map(lambda b: solve(*b), tuple(blocks))
  )
