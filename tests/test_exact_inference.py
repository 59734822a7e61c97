"""Tests of ``method="exact"`` (``vaells_jax.core.solvers.exact``): one operator.

The reference is brute force in NumPy/SciPy: ``scipy.linalg.expm`` on a grid
of 40 001 coefficients over the solver's search interval (20 to 100 times
finer than the solver's grid), the best grid minima refined with
``scipy.optimize.minimize_scalar``. Where the interval is the whole bracket
``|t| <= f(0) / l1_weight`` (every problem here but ``capped``), the reference
is the global minimum.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
import scipy.optimize

from vaells_jax import infer_coefficients, inference_objective
from vaells_jax.config import Config
from vaells_jax.core.inference import Solver
from vaells_jax.core.solvers import exact

NUM_PAIRS, DIM = 24, 4


def _pairs(rng, psi, spread, noise=0.05):
  """``z0 ~ N(0, I)``, ``z1 = expm(t psi) z0 + noise``, ``t ~ U(-spread, spread)``."""
  z0 = rng.standard_normal((NUM_PAIRS, DIM))
  ts = rng.uniform(-spread, spread, NUM_PAIRS)
  z1 = np.stack([scipy.linalg.expm(t * psi) @ z for t, z in zip(ts, z0, strict=True)])
  return z0, z1 + noise * rng.standard_normal(z1.shape)


def _problem(name):
  """``(psi [d, d], z0 [N, d], z1 [N, d], l1_weight)`` of a named problem."""
  rng = np.random.default_rng(sum(map(ord, name)))
  if name in ("skew", "capped"):
    a = rng.standard_normal((DIM, DIM))
    psi = 0.5 * (a - a.T)
    psi *= 0.5 / np.linalg.norm(psi, 2)
    return (psi, *_pairs(rng, psi, 8.0), 0.05 if name == "skew" else 1e-4)
  if name == "general":  # real eigenvalues: paths grow or shrink
    psi = 0.3 * rng.standard_normal((DIM, DIM))
    return (psi, *_pairs(rng, psi, 3.0), 0.2)
  if name == "defective":  # one Jordan block: expm(t psi) is a polynomial in t
    psi = 0.5 * np.eye(DIM, k=1)
    return (psi, *_pairs(rng, psi, 3.0), 0.2)
  if name == "near_defective":  # a Jordan block split by 1e-9 under rotation
    jordan = 0.5 * np.eye(DIM, k=1) + np.diag(1e-9 * np.arange(DIM))
    basis = scipy.linalg.expm(0.3 * (lambda a: a - a.T)(rng.standard_normal((4, 4))))
    psi = basis @ jordan @ basis.T
    return (psi, *_pairs(rng, psi, 3.0), 0.2)
  if name == "zero":
    return (np.zeros((DIM, DIM)), *_pairs(rng, np.zeros((DIM, DIM)), 1.0), 0.01)
  if name == "large_l1":  # l1_weight above |g'(0)| and f(0): c* = 0
    a = rng.standard_normal((DIM, DIM))
    psi = 0.5 * (a - a.T)
    return (psi, *_pairs(rng, psi, 2.0), 100.0)
  raise KeyError(name)


def _objective(t, psi, z0, z1, lam):
  t = float(np.squeeze(t))
  r = z1 - scipy.linalg.expm(t * psi) @ z0
  return 0.5 * r @ r + lam * abs(t)


def _expm_grid(psi, ts, block=200):
  """``expm(t psi)`` on an even grid ``ts [G]``: ``[G, d, d]``.

  ``scipy.linalg.expm`` at every ``block``-th point times the powers
  ``expm(k step psi) = expm(step psi)^k``, ``k < block`` (rounding grows by
  at most ``block`` products; ``G`` full ``expm`` calls took 20 s).
  """
  step = scipy.linalg.expm((ts[1] - ts[0]) * psi)
  powers = [np.eye(len(psi))]
  for _ in range(block - 1):
    powers.append(step @ powers[-1])
  anchors = scipy.linalg.expm(ts[::block, None, None] * psi)
  table = np.einsum("bij,kjl->bkil", anchors, np.stack(powers))
  return table.reshape((-1,) + psi.shape)[: len(ts)]


def reference(psi, z0, z1, lam, span, points=40_001):
  """Brute-force minimum of each pair's objective over ``|t| <= span``, ``[N]``."""
  ts = np.linspace(-span, span, points)
  table = _expm_grid(psi, ts)
  y = np.einsum("gij,nj->ngi", table, z0)
  values = 0.5 * np.sum((z1[:, None] - y) ** 2, -1) + lam * np.abs(ts)
  best = []
  for n, v in enumerate(values):
    found = [v.min(), _objective(0.0, psi, z0[n], z1[n], lam)]
    inner = np.flatnonzero((v[1:-1] <= v[:-2]) & (v[1:-1] <= v[2:])) + 1
    for k in inner[np.argsort(v[inner])[:4]]:
      res = scipy.optimize.minimize_scalar(
        _objective,
        bounds=(ts[k - 1], ts[k + 1]),
        method="bounded",
        args=(psi, z0[n], z1[n], lam),
        options={"xatol": 1e-12},
      )
      found.append(res.fun)
    best.append(min(found))
  return np.asarray(best)


@functools.cache
def _reference_of(name):
  """``(problem, span, reference minimum [N])`` of a named problem."""
  problem = _problem(name)
  span = _search_span(*problem)
  return problem, span, reference(*problem, span)


def _search_span(psi, z0, z1, lam):
  """The solver's interval ``T`` (module docstring of ``core.solvers.exact``)."""
  with jax.enable_x64(True):
    h = exact.grid_spacing(
      jnp.asarray(psi), jnp.asarray(z0), jnp.asarray(z1), jnp.full(len(z0), lam)
    )
  return float(h) * exact.GRID_STEPS


def _exact(psi, z0, z1, lam, dtype, **kwargs):
  with jax.enable_x64(dtype == "float64"):
    result = infer_coefficients(
      jnp.asarray(psi[None], dtype),
      jnp.asarray(z0, dtype),
      jnp.asarray(z1, dtype),
      l1_weight=lam,
      key=jax.random.key(0),
      method="exact",
      **kwargs,
    )
    return {k: np.asarray(v) for k, v in result._asdict().items()}


PROBLEMS = ["skew", "capped", "general", "defective", "near_defective", "zero"]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", PROBLEMS)
def test_exact_reaches_the_brute_force_minimum(name, dtype):
  (psi, z0, z1, lam), span, ref = _reference_of(name)
  bracket = np.max(0.5 * np.sum((z1 - z0) ** 2, -1)) / lam
  # Every problem but "capped" is searched over its whole bracket.
  assert (span < bracket) == (name == "capped")
  ours = _exact(psi, z0, z1, lam, dtype)
  slack = {"float64": 1e-9, "float32": 2e-5}[dtype] * (1 + ref)
  assert np.all(ours["objective"] <= ref + slack), (ours["objective"] - ref).max()
  assert np.all(ours["converged"])
  # The reference is a minimum: ours is not lower by more than rounding.
  assert np.all(ours["objective"] >= ref - slack)


def test_zero_psi_and_large_weight_give_zero():
  for name in ("zero", "large_l1"):
    psi, z0, z1, lam = _problem(name)
    ours = _exact(psi, z0, z1, lam, "float64")
    np.testing.assert_array_equal(ours["coeffs"], 0.0)
    np.testing.assert_allclose(ours["objective"], 0.5 * np.sum((z1 - z0) ** 2, -1))
    assert np.all(ours["converged"])


def test_dip_inside_the_first_grid_step_is_found():
  """A minimum at ``0 < t* < h`` above ``f(0)`` at ``t = h`` is refined too.

  Rotations of ``e_1``: half the pairs end at angle ``pi`` (their bracket
  ``f(0) / l1_weight = 2e6`` makes the grid the capped one, ``h = 0.1``), half
  at angle ``2e-4``: their minimum ``2e-4 - 1e-6`` lies inside the first grid
  step, and ``f(h) > f(0)``.
  """
  psi = np.zeros((DIM, DIM))
  psi[0, 1], psi[1, 0] = -1.0, 1.0
  z0 = np.tile(np.eye(DIM)[0], (NUM_PAIRS, 1))
  angles = np.where(np.arange(NUM_PAIRS) % 2, np.pi, 2e-4)
  z1 = np.zeros((NUM_PAIRS, DIM))
  z1[:, 0], z1[:, 1] = np.cos(angles), np.sin(angles)
  assert _search_span(psi, z0, z1, 1e-6) / exact.GRID_STEPS > 100 * 2e-4
  ours = _exact(psi, z0, z1, 1e-6, "float64")
  np.testing.assert_allclose(ours["coeffs"][::2, 0], 2e-4 - 1e-6, rtol=1e-6)
  np.testing.assert_allclose(np.abs(ours["coeffs"][1::2, 0]), np.pi, rtol=1e-6)
  assert np.all(ours["converged"])


@pytest.mark.whole_run  # a solver's quality at length
def test_never_worse_than_fista_with_restarts():
  better = []
  for name in ("skew", "capped", "general"):
    psi, z0, z1, lam = _problem(name)
    ours = _exact(psi, z0, z1, lam, "float64")
    with jax.enable_x64(True):
      fista = infer_coefficients(
        jnp.asarray(psi[None]),
        jnp.asarray(z0),
        jnp.asarray(z1),
        l1_weight=lam,
        key=jax.random.key(1),
        num_restarts=4,
        init_range=(-4.0, -2.0),
        max_iter=300,
        tol=1e-10,
        method="fista",
      )
      default = infer_coefficients(  # fista's default start and iterations
        jnp.asarray(psi[None]),
        jnp.asarray(z0),
        jnp.asarray(z1),
        l1_weight=lam,
        key=jax.random.key(1),
        method="fista",
      )
    theirs = np.asarray(fista.objective)
    assert np.all(ours["objective"] <= theirs + 1e-9 * (1 + theirs)), name
    theirs = np.asarray(default.objective)
    assert np.all(ours["objective"] <= theirs + 1e-9 * (1 + theirs)), name
    better.append(np.sum(ours["objective"] < theirs - 1e-3))
  # ... and clearly lower on some pairs than one start in [0, 1] (the
  # defaults): that start ends in a local minimum there.
  assert sum(better) > 0


def test_jit_vmap_and_blocks_agree():
  psi, z0, z1, lam = _problem("general")
  plain = _exact(psi, z0, z1, lam, "float32")
  f32 = lambda a: jnp.asarray(a, jnp.float32)  # noqa: E731
  solver = Solver(method="exact")

  @jax.jit
  def solve(p, a, b):
    return solver(p, a, b, l1_weight=lam, key=jax.random.key(0))

  jitted = solve(f32(psi[None]), f32(z0), f32(z1))
  np.testing.assert_allclose(jitted.coeffs, plain["coeffs"], rtol=1e-6)
  # vmap over two dictionaries (as population training does) and two halves.
  psis = jnp.stack([f32(psi[None]), f32(2 * psi[None])])
  mapped = jax.vmap(solve, in_axes=(0, None, None))(psis, f32(z0), f32(z1))
  np.testing.assert_allclose(mapped.coeffs[0], plain["coeffs"], rtol=1e-6)
  np.testing.assert_allclose(
    mapped.objective[1], _exact(2 * psi, z0, z1, lam, "float32")["objective"], rtol=1e-6
  )
  halves = jax.vmap(solve, in_axes=(None, 0, 0))(
    f32(psi[None]), f32(z0).reshape(2, -1, DIM), f32(z1).reshape(2, -1, DIM)
  )
  assert np.all(halves.objective.reshape(-1) <= plain["objective"] + 1e-5)
  # Blocks of 5 pairs (lax.map, padded) give the single block's answer.
  lam_n = jnp.full(NUM_PAIRS, lam, jnp.float32)
  args = (f32(psi[None]), f32(z0), f32(z1), lam_n)
  one = exact.global_minima(*args, max_iter=20, tol=1e-4)
  blocks = exact.global_minima(*args, max_iter=20, tol=1e-4, block=5)
  objective = lambda c: inference_objective(args[0], c, *args[1:])  # noqa: E731
  np.testing.assert_allclose(objective(one[0]), objective(blocks[0]), rtol=1e-5)
  np.testing.assert_array_equal(one[1], blocks[1])


def test_validation():
  psi, z0, z1, lam = _problem("skew")
  two = np.stack([psi, psi])
  with pytest.raises(ValueError, match='method="exact" solves one operator'):
    infer_coefficients(
      two, z0, z1, l1_weight=lam, key=jax.random.key(0), method="exact"
    )
  with pytest.raises(ValueError, match="num_ops=1"):
    Config(inference_method="exact", num_ops=4)
  assert Config(inference_method="exact", num_ops=1).inference_method == "exact"
  with pytest.raises(ValueError, match="method must be one of"):
    infer_coefficients(
      psi[None], z0, z1, l1_weight=lam, key=jax.random.key(0), method="x"
    )


def test_non_finite_pair_does_not_spoil_the_others():
  psi, z0, z1, lam = _problem("skew")
  z1 = z1.copy()
  z1[3] = np.nan
  ours = _exact(psi, z0, z1, lam, "float64")
  assert np.isnan(ours["objective"][3]) and not ours["converged"][3]
  others = np.delete(np.arange(NUM_PAIRS), 3)
  assert np.all(np.isfinite(ours["objective"][others]))
  assert np.all(ours["converged"][others])


def test_float32_refines_to_the_minimiser():
  """Float32 Newton goes on to the rounding of ``f'``, not a bound 100x above it.

  Rotated-MNIST scale: codes of norm 3, ``|t| ||psi||_2`` up to 3.3, l1
  weight 1e-6. A stop at ``|f'| <= 64 eps (1 + |t| ||psi||) (||z1|| + ||y||)
  ||psi y||`` leaves ``t`` up to 7e-4 from the float64 minimiser here and the
  objective up to 3e-9 above its minimum (float64 evaluation); the stop at 2
  such units leaves 3e-5 and 1e-11.
  """
  rng = np.random.default_rng(7)
  a = rng.standard_normal((DIM, DIM))
  psi = 0.1 * (a - a.T)
  psi[0, 1], psi[1, 0] = psi[0, 1] - 1.0, psi[1, 0] + 1.0
  psi *= 0.3 / np.linalg.norm(psi, 2)
  z0 = rng.standard_normal((NUM_PAIRS, DIM))
  z0 *= 3 / np.linalg.norm(z0, axis=-1, keepdims=True)
  ts = rng.choice([-1, 1], NUM_PAIRS) * rng.uniform(6, 11, NUM_PAIRS)
  z1 = np.stack([scipy.linalg.expm(t * psi) @ z for t, z in zip(ts, z0, strict=True)])
  z1 += 0.15 * rng.standard_normal(z1.shape)
  ours = _exact(psi, z0, z1, 1e-6, "float32")["coeffs"][:, 0].astype(np.float64)
  best = _exact(psi, z0, z1, 1e-6, "float64")["coeffs"][:, 0]
  value = lambda c: np.array(  # noqa: E731
    [_objective(t, psi, a, b, 1e-6) for t, a, b in zip(c, z0, z1, strict=True)]
  )
  excess = value(ours) - value(best)
  assert np.all(np.abs(ours - best) <= 1e-4), np.abs(ours - best).max()
  assert np.all(excess <= 1e-10), excess.max()
