"""Tests of the ``"pgd"`` solver (``vaells_jax.core.solvers.pgd``).

Its pieces against independent references (the fused 2 x 2 value and
gradient against scipy's ``expm`` and ``expm_frechet``), and its results
against the jaxopt ``"fista"`` solver and scipy from the very same starts.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from scipy_reference import (
  frechet_gradient,
  original_cg_pairs,
  transport_objective,
)

from vaells_jax import infer_coefficients, inference_objective
from vaells_jax.core.inference import solver_starts
from vaells_jax.core.solvers import columns, pairs, pgd
from vaells_jax.core.solvers.gauss_newton import solve_gauss_newton

THETAS = np.linspace(-3.0, 3.0, 12)
ROTATION = {"num_restarts": 4, "init_range": (-3.5, -1.75)}


def _rotation(angles):
  return np.stack([np.cos(angles), np.sin(angles)], axis=-1)


def _pairs(d, m, n, seed):
  """Realistic pairs: ``||psi_m||_F`` in 0.03-0.5, ``||z0||`` in 0.3-3."""
  rng = np.random.default_rng(seed)
  psi = rng.normal(size=(m, d, d))
  psi *= rng.uniform(0.03, 0.5, (m, 1, 1)) / np.linalg.norm(
    psi, axis=(1, 2), keepdims=True
  )
  z0 = rng.normal(size=(n, d))
  z0 *= rng.uniform(0.3, 3.0, (n, 1)) / np.linalg.norm(z0, axis=-1, keepdims=True)
  coeffs = rng.laplace(scale=1.0, size=(n, m))
  z1 = np.stack(
    [
      scipy.linalg.expm(np.einsum("m,mij->ij", c, psi)) @ z
      for c, z in zip(coeffs, z0, strict=True)
    ]
  )
  return psi, z0, z1 + 1e-3 * rng.normal(size=z1.shape)


@pytest.mark.parametrize("dim", [2, 4])
def test_value_and_gradient_match_scipy(dim):
  # delta = h^2 + a01 a10 of either sign, and near 0 (the series branch).
  rng = np.random.default_rng(0)
  m, n = 3, 40
  psi = 0.5 * rng.normal(size=(m, dim, dim))
  coeffs = rng.uniform(-3, 3, (m, n))
  coeffs[:, :8] *= 1e-3
  z0, z1 = rng.normal(size=(dim, n)), rng.normal(size=(dim, n))
  with jax.enable_x64(True):
    value, grad = pairs.value_and_grad(
      0, tuple(jnp.asarray(coeffs)), *(jnp.asarray(a) for a in (psi, z0, z1))
    )
    alone = pairs.data_term(
      0, tuple(jnp.asarray(coeffs)), *(jnp.asarray(a) for a in (psi, z0, z1))
    )
  reference = [
    (
      transport_objective(coeffs[:, i], psi, z0[:, i], z1[:, i], 0.0),
      frechet_gradient(coeffs[:, i], psi, z0[:, i], z1[:, i], 0.0),
    )
    for i in range(n)
  ]
  np.testing.assert_allclose(value, [r[0] for r in reference], rtol=1e-10)
  np.testing.assert_allclose(alone, [r[0] for r in reference], rtol=1e-10)
  np.testing.assert_allclose(
    np.stack(grad), np.stack([r[1] for r in reference], axis=1), rtol=1e-8, atol=1e-10
  )


# Per method: how close the angle, and fewer iterations than this (Gauss-Newton:
# a rotation of up to 6 radians in steps of at most its RADIUS, then a few
# Newton steps).
_ROTATION_BOUNDS = {"pgd": (1e-2, 100), "gauss_newton": (1e-3, 30)}


@pytest.mark.parametrize("method", ["pgd", "gauss_newton"])
def test_recovers_rotation_angle(rotation_psi, method):
  atol, most_iter = _ROTATION_BOUNDS[method]
  result = infer_coefficients(
    rotation_psi.astype(np.float32),
    np.array([1.0, 0.0], np.float32),
    _rotation(THETAS).astype(np.float32),
    l1_weight=1e-6,
    key=jax.random.key(0),
    method=method,
    **ROTATION,
  )
  np.testing.assert_allclose(np.asarray(result.coeffs)[:, 0], THETAS, atol=atol)
  np.testing.assert_allclose(np.asarray(result.objective), 0.0, atol=1e-5)
  assert np.all(np.asarray(result.converged))
  num_iter = np.asarray(result.num_iter)
  assert np.all((num_iter >= 1) & (num_iter < most_iter))


@pytest.mark.parametrize("dim,num_ops", [(2, 1), (2, 4), (6, 2)])
@pytest.mark.whole_run  # a solver's quality at length
def test_as_good_as_fista_from_the_same_starts(dim, num_ops):
  psi, z0, z1 = (np.asarray(a, np.float32) for a in _pairs(dim, num_ops, 60, 1))
  kwargs = dict(l1_weight=1e-5, key=jax.random.key(2), init_range=(-2.5, 2.5))
  ours = infer_coefficients(psi, z0, z1, method="pgd", tol=1e-9, **kwargs)
  fista = infer_coefficients(psi, z0, z1, method="fista", tol=1e-9, **kwargs)
  ours_obj, fista_obj = (np.asarray(r.objective, np.float64) for r in (ours, fista))
  recomputed = inference_objective(psi, ours.coeffs, z0, z1, 1e-5)
  np.testing.assert_allclose(ours_obj, recomputed, rtol=1e-5, atol=1e-10)
  # Neither converges on every pair in 100 iterations (M > d leaves a flat
  # valley that only the small l1 term tilts), so the two end at slightly
  # different points of it: compare medians and the fraction within 2%.
  assert np.median(ours_obj) <= np.median(fista_obj) * 1.01
  assert np.mean(ours_obj <= fista_obj * 1.02 + 1e-9) >= 0.85


@pytest.mark.whole_run  # a solver's quality at length
def test_polish_never_raises_and_ends_where_scipy_does(monkeypatch):
  # d = 6, M = 4 (the natural-MNIST size), 100 proximal-gradient iterations.
  # The Levenberg-Marquardt steps after them never raise a pair's objective,
  # and end within 1e-6 of scipy L-BFGS-B run to convergence from the same
  # start on nearly every pair (measured 0.975; without them 0.675). float64,
  # so that 1e-6 of these objectives (about 1e-5) is above the rounding.
  psi, z0, z1 = _pairs(6, 4, 40, 3)
  l1 = np.full(40, 1e-5)
  with jax.enable_x64(True):
    starts = solver_starts(jax.random.key(4), 1, 4, jnp.zeros(40), jnp.ones(40))
    args = [jnp.asarray(a) for a in (starts, psi, z0, z1, l1)]
    polished = pgd.solve_pgd(*args, max_iter=100, tol=0.0)[0][0]
    monkeypatch.setattr(pgd, "_POLISH", 0)
    plain = pgd.solve_pgd(*args, max_iter=100, tol=0.0)[0][0]
    polished_obj, plain_obj = (
      np.asarray(inference_objective(psi, c, z0, z1, l1)) for c in (polished, plain)
    )
  assert np.all(polished_obj <= plain_obj * (1 + 1e-9))

  def objective(c, p, a, b, lam):
    moved = scipy.linalg.expm(np.einsum("m,mij->ij", c, p)) @ a
    return 0.5 * np.sum((b - moved) ** 2) + lam * np.sum(np.abs(c))

  best = np.array(
    [
      scipy.optimize.minimize(
        objective,
        s,
        args=(psi.astype(float), a, b, 1e-5),
        method="L-BFGS-B",
        options={"maxiter": 2000, "ftol": 1e-15, "gtol": 1e-12},
      ).fun
      for s, a, b in zip(np.asarray(starts[0]), z0, z1, strict=True)
    ]
  )
  assert np.mean(polished_obj <= best * (1 + 1e-6) + 1e-12) >= 0.9
  assert np.mean(plain_obj <= best * (1 + 1e-6) + 1e-12) < 0.8


@pytest.fixture(scope="module")
def original_objectives(random_problem):
  """The original's CG on conftest's problem per dtype, from the starts
  ``solver_starts`` draws with key 1 (the same for both methods)."""
  key = jax.random.key(1)
  n, m = random_problem["coeffs"].shape
  objectives = {}
  for dtype in ("float32", "float64"):
    with jax.enable_x64(dtype == "float64"):
      starts = solver_starts(key, 1, m, jnp.zeros(n, dtype), jnp.ones(n, dtype))
    objectives[dtype] = original_cg_pairs(
      *(np.asarray(random_problem[k], dtype) for k in ("psi", "z0", "z1")),
      0.01,
      np.asarray(starts),
    )[1]
  return objectives


@pytest.mark.parametrize("method", ["pgd", "gauss_newton"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_as_good_as_scipy_cg_from_the_same_starts(
  random_problem, original_objectives, dtype, method
):
  # conftest's problem with the library's default settings, as the fista
  # solver is tested in test_inference.py.
  key = jax.random.key(1)
  with jax.enable_x64(dtype == "float64"):
    psi, z0, z1 = (jnp.asarray(random_problem[k], dtype) for k in ("psi", "z0", "z1"))
    ours = infer_coefficients(psi, z0, z1, l1_weight=0.01, key=key, method=method)
    ours = np.asarray(ours.objective, np.float64)
  cg = original_objectives[dtype]
  slack = {"float32": 1e-7, "float64": 0.0}[dtype]
  assert np.median(ours) <= np.median(cg) * (1 + 1e-3) + slack
  assert np.mean(ours <= cg * (1 + 1e-3) + slack) >= 0.9


@pytest.mark.parametrize("method", ["pgd", "gauss_newton"])
def test_float64_and_never_worse_than_the_start(method):
  psi, z0, z1 = _pairs(2, 2, 30, 3)
  key = jax.random.key(4)
  with jax.enable_x64(True):
    result = infer_coefficients(
      psi, z0, z1, l1_weight=1e-4, key=key, init_range=(-1.0, 1.0), method=method
    )
    assert result.coeffs.dtype == jnp.float64
    starts = solver_starts(key, 1, 2, jnp.full(30, -1.0), jnp.full(30, 1.0))[0]
    start_obj = inference_objective(psi, starts, z0, z1, 1e-4)
    recomputed = inference_objective(psi, result.coeffs, z0, z1, 1e-4)
  np.testing.assert_allclose(result.objective, recomputed, rtol=1e-12)
  assert np.all(np.asarray(result.objective) <= np.asarray(start_obj))
  assert np.mean(np.asarray(result.objective) < 0.5 * np.asarray(start_obj)) > 0.5


def test_chunks_give_the_same_results():
  # float64: in float32 different chunk sizes round differently (another
  # vectorisation) and 30 iterations amplify that to 1e-4.
  with jax.enable_x64(True):
    psi, z0, z1 = (jnp.asarray(a) for a in _pairs(2, 3, 50, 5))
    lo, hi = jnp.full(50, -2.5), jnp.full(50, 2.5)
    init = solver_starts(jax.random.key(6), 2, 3, lo, hi)
    l1 = jnp.full(50, 1e-5)
    whole = pgd.solve_pgd(init, psi, z0, z1, l1, max_iter=30, tol=1e-12)
    chunked = pgd.solve_pgd(init, psi, z0, z1, l1, max_iter=30, tol=1e-12, chunk=16)
  for a, b, rtol in zip(whole, chunked, (1e-9, 0, 1e-6), strict=True):
    # The last output, the mapping norm ||x+ - y|| / t, is a difference of
    # nearby iterates: its rounding is relative to them, not to itself.
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-12)


def test_iterations_and_convergence_flags(rotation_psi):
  args = (
    rotation_psi.astype(np.float32),
    np.array([1.0, 0.0], np.float32),
    _rotation(THETAS).astype(np.float32),
  )
  kwargs = dict(l1_weight=1e-6, key=jax.random.key(0), method="pgd", **ROTATION)
  short = infer_coefficients(*args, max_iter=3, tol=1e-9, **kwargs)
  np.testing.assert_array_equal(short.num_iter, 3)
  assert not np.any(short.converged)
  # Stopped pairs stay stopped: the same result for a larger budget.
  loose = infer_coefficients(*args, tol=1e-3, **kwargs)
  longer = infer_coefficients(*args, tol=1e-3, max_iter=200, **kwargs)
  assert np.all(loose.converged)
  np.testing.assert_array_equal(loose.num_iter, longer.num_iter)
  np.testing.assert_array_equal(loose.coeffs, longer.coeffs)


@pytest.mark.parametrize("method", ["pgd", "gauss_newton"])
@pytest.mark.whole_run  # a solver's quality at length
def test_jit_and_vmap(rotation_psi, method):
  psi = rotation_psi.astype(np.float32)
  z0 = np.array([1.0, 0.0], np.float32)
  stack = np.stack([_rotation(THETAS), _rotation(THETAS[::-1])]).astype(np.float32)

  def solve(z1):
    return infer_coefficients(
      psi, z0, z1, l1_weight=1e-6, key=jax.random.key(1), method=method, **ROTATION
    )

  batched = jax.jit(jax.vmap(solve))(stack)
  for i in range(2):
    alone = solve(stack[i])
    np.testing.assert_allclose(batched.coeffs[i], alone.coeffs, atol=1e-5)
    np.testing.assert_array_equal(batched.converged[i], alone.converged)


@pytest.mark.parametrize("method", ["pgd", "gauss_newton"])
def test_diverged_starts_fall_back_to_identity(rotation_psi, method):
  # |rotation| has real eigenvalues: expm(1e9 A) overflows, the objective of
  # every start is not finite (a rotation's stays finite at any angle).
  z1 = _rotation(THETAS).astype(np.float32)
  result = infer_coefficients(
    1e9 * np.abs(rotation_psi).astype(np.float32),
    np.array([1.0, 0.0], np.float32),
    z1,
    l1_weight=1e-6,
    key=jax.random.key(6),
    method=method,
    **ROTATION,
  )
  np.testing.assert_array_equal(result.coeffs, 0.0)
  assert not np.any(result.converged)


@pytest.mark.parametrize("axis", [0, -1])
def test_map_chunks_is_the_whole_call(axis):
  """Chunked along either axis, padding included, the outputs are the whole
  call's: entries of any count, outputs of several ranks."""
  rng = np.random.default_rng(0)
  a = jnp.asarray(rng.normal(size=(3, 37) if axis == -1 else (37, 3)))
  b = jnp.asarray(rng.normal(size=37))
  other = 0 if axis == -1 else 1

  def fn(a, b):
    return jnp.sum(a, axis=other) * b, a * b[None] if axis == -1 else a * b[:, None]

  for mode in ("constant", "edge"):
    whole = fn(a, b)
    chunked = columns.map_chunks(fn, [a, b], chunk=8, axis=axis, mode=mode)
    for x, y in zip(whole, chunked, strict=True):
      np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize(
  "method, dim, tol", [("pgd", 2, 1e-4), ("pgd", 3, 1e-4), ("gauss_newton", 2, 1e-6)]
)
def test_compacting_the_last_running_pairs_changes_nothing(
  monkeypatch, method, dim, tol
):
  # run_blocks gathers the pairs still running into ever smaller arrays; each
  # pair's iterations are elementwise, so only the rounding of another
  # vectorisation could differ (float64 here, as in the chunk test above).
  solve = {"pgd": pgd.solve_pgd, "gauss_newton": solve_gauss_newton}[method]
  num_pairs = 128
  sizes = columns.compacted_sizes(num_pairs)
  assert sizes == [64, 32, 16]
  with jax.enable_x64(True):
    psi, z0, z1 = (jnp.asarray(a) for a in _pairs(dim, 3, num_pairs, 7))
    init = solver_starts(
      jax.random.key(8), 1, 3, jnp.full(num_pairs, -2.5), jnp.full(num_pairs, 2.5)
    )
    l1 = jnp.full(num_pairs, 1e-5)

    def run():  # a new function: traced again, with the patched sizes
      return jax.jit(lambda *a: solve(*a, max_iter=300, tol=tol))(init, psi, z0, z1, l1)

    compacted = run()
    monkeypatch.setattr(columns, "compacted_sizes", lambda n: [])
    whole = run()
  iters = np.sort(np.asarray(whole[1]).ravel())[::-1]
  # The last stage (16 pairs) ran: some pair went on past the first block
  # boundary at which at most 16 were running.
  boundary = 5 * -(-iters[sizes[-1]] // 5)
  assert iters[0] > boundary
  for a, b, rtol in zip(whole, compacted, (1e-9, 0, 1e-6), strict=True):
    np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-12)
