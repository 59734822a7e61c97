"""Tests of the ``"gauss_newton"`` solver (``vaells_jax.core.solvers.gauss_newton``).

Its closed-form Jacobian against scipy's ``expm_frechet``, one step's trust
region, and its results against ``"pgd"`` from the very same starts
(``tests/test_pgd.py`` holds both solvers to scipy CG with the original's
settings, to never ending above their start, to recovering rotation angles,
to jit/vmap and to the fallback of diverged starts).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

from vaells_jax import infer_coefficients, inference_objective
from vaells_jax.config import Config
from vaells_jax.core.inference import solver_starts
from vaells_jax.core.solvers import gauss_newton as gn


def _pairs(m, n, seed, noise=1e-3):
  """Pairs as a training step sees them: ``||psi_m||_F`` in 0.03-0.5,
  ``||z0||`` in 0.3-3, Laplace coefficients."""
  rng = np.random.default_rng(seed)
  psi = rng.normal(size=(m, 2, 2))
  psi *= rng.uniform(0.03, 0.5, (m, 1, 1)) / np.linalg.norm(
    psi, axis=(1, 2), keepdims=True
  )
  z0 = rng.normal(size=(n, 2))
  z0 *= rng.uniform(0.3, 3.0, (n, 1)) / np.linalg.norm(z0, axis=-1, keepdims=True)
  coeffs = rng.laplace(scale=1.0, size=(n, m))
  z1 = np.stack(
    [
      scipy.linalg.expm(np.einsum("m,mij->ij", c, psi)) @ z
      for c, z in zip(coeffs, z0, strict=True)
    ]
  )
  return psi, z0, z1 + noise * rng.normal(size=z1.shape)


def test_jacobian_matches_scipy_frechet():
  # delta = h^2 + a01 a10 of either sign, and near 0 (the series branch).
  rng = np.random.default_rng(0)
  m, n = 3, 40
  psi = 0.5 * rng.normal(size=(m, 2, 2))
  coeffs = rng.uniform(-3, 3, (m, n))
  coeffs[:, :8] *= 1e-3
  z0, z1 = rng.normal(size=(2, n)), rng.normal(size=(2, n))
  with jax.enable_x64(True):
    value, r0, r1, j0, j1 = gn._jacobian_2x2(
      0, jnp.asarray(coeffs), *(jnp.asarray(a) for a in (psi, z0, z1))
    )
  for i in range(n):
    a = np.einsum("m,mij->ij", coeffs[:, i], psi)
    moved = scipy.linalg.expm(a) @ z0[:, i]
    residual = moved - z1[:, i]
    np.testing.assert_allclose([r0[i], r1[i]], residual, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(value[i], 0.5 * np.sum(residual**2), rtol=1e-10)
    for k in range(m):
      column = scipy.linalg.expm_frechet(a, psi[k], compute_expm=False) @ z0[:, i]
      np.testing.assert_allclose([j0[k, i], j1[k, i]], column, rtol=1e-8, atol=1e-10)


def test_one_step_stays_in_the_trust_region():
  n = 400
  psi, z0, z1 = (jnp.asarray(a) for a in _pairs(4, n, 1, noise=0.5))
  init = solver_starts(jax.random.key(0), 1, 4, jnp.full(n, -2.5), jnp.full(n, 2.5))
  l1 = jnp.full(n, 1e-4)
  one = gn.solve_gauss_newton(init, psi, z0, z1, l1, max_iter=1, tol=1e-9)[0]
  change = jnp.einsum("rnm,mij->rnij", one - init, psi)
  norms = np.asarray(jnp.sqrt(jnp.sum(change**2, axis=(-2, -1))))[0]
  # Where no coefficient stopped at zero (which can lengthen the change:
  # the operators are not orthogonal).
  kept = np.all(np.asarray(one * init > 0), axis=-1)[0]
  assert kept.sum() >= 25
  assert np.max(norms[kept]) <= gn.RADIUS * (1 + 1e-5)
  assert np.mean(norms[kept] > 0.9 * gn.RADIUS) > 0.1  # the cut is reached


@pytest.mark.parametrize("num_ops", [1, 4])
@pytest.mark.whole_run  # a solver's quality at length
def test_as_good_as_pgd_from_the_same_starts(num_ops):
  # M = 4 > d = 2: the valley that proximal gradient needs hundreds of
  # iterations to follow; 1000 of them as the reference.
  psi, z0, z1 = (np.asarray(a, np.float32) for a in _pairs(num_ops, 80, 2))
  kwargs = dict(l1_weight=1e-5, key=jax.random.key(2), init_range=(-2.5, 2.5))
  ours = infer_coefficients(psi, z0, z1, method="gauss_newton", tol=1e-9, **kwargs)
  pgd = infer_coefficients(psi, z0, z1, method="pgd", tol=1e-9, max_iter=1000, **kwargs)
  ours_obj, pgd_obj = (np.asarray(r.objective, np.float64) for r in (ours, pgd))
  recomputed = inference_objective(psi, ours.coeffs, z0, z1, 1e-5)
  np.testing.assert_allclose(ours_obj, recomputed, rtol=1e-5, atol=1e-10)
  assert np.median(ours_obj) <= np.median(pgd_obj) * 1.01
  assert np.mean(ours_obj <= pgd_obj * 1.02 + 1e-9) >= 0.9
  assert np.median(np.asarray(ours.num_iter)) <= 40


def test_chunks_give_the_same_results():
  with jax.enable_x64(True):
    psi, z0, z1 = (jnp.asarray(a) for a in _pairs(3, 50, 5))
    init = solver_starts(jax.random.key(6), 2, 3, jnp.full(50, -2.5), jnp.full(50, 2.5))
    l1 = jnp.full(50, 1e-5)
    whole = gn.solve_gauss_newton(init, psi, z0, z1, l1, max_iter=30, tol=1e-12)
    chunked = gn.solve_gauss_newton(
      init, psi, z0, z1, l1, max_iter=30, tol=1e-12, chunk=16
    )
  for a, b in zip(whole, chunked, strict=True):
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_only_two_dimensional_codes():
  psi = np.zeros((2, 3, 3), np.float32)
  with pytest.raises(ValueError, match="2-D codes"):
    infer_coefficients(
      psi,
      np.ones(3),
      np.ones(3),
      l1_weight=0.0,
      key=jax.random.key(0),
      method="gauss_newton",
    )
  with pytest.raises(ValueError, match="latent_dim=2"):
    Config(latent_dim=3, inference_method="gauss_newton")


def test_a_pair_stops_only_where_no_damping_moves_it():
  # tol = 0: pairs stop only when no trial lowers F. Where the most damped
  # trial rounds back to c, a pair stops before its damping passes the
  # give-up value; iterating on past that (done cleared, the damping still
  # growing 1000-fold) must never move it.
  n = 100
  psi, z0, z1 = (jnp.asarray(a, jnp.float32) for a in _pairs(4, n, 3))
  coeffs = solver_starts(jax.random.key(1), 1, 4, jnp.full(n, -2.5), jnp.full(n, 2.5))
  coeffs = coeffs[0].T
  l1 = jnp.full(n, 1e-4, jnp.float32)
  z0, z1 = z0.T, z1.T
  state = gn._initial_state(coeffs, psi, z0, z1, l1)
  step = jax.jit(lambda s: gn._iterate(0, s, psi, z0, z1, l1, 0.0))
  for _ in range(300):
    state = step(state)
  assert np.all(np.asarray(state.done))
  early = np.asarray(state.damping) <= gn._GIVE_UP
  assert early.sum() >= n // 2  # stopped by the rounding rule
  stopped = state.coeffs
  state = state._replace(done=jnp.zeros(n, bool))
  for _ in range(4):
    state = step(state)
    np.testing.assert_array_equal(np.asarray(state.coeffs), np.asarray(stopped))
