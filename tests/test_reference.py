"""Tests of ``benchmarks/scipy_reference.py``: the original method of inference.

The original (``trans_opt_objectives.py`` of the VAELLS research code) runs
``scipy.optimize.minimize(method="CG", options={"maxiter": 50}, tol=10^-7)``
per pair with its eigendecomposition gradient, posterior pairs from one start
in ``U[0, 1]``, prior pairs from restart ``r`` in
``U[-2.5 + 2.5 r, -2.5 + 2.5 (r + 1)]``.
"""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
import scipy.linalg
import scipy_reference as reference


def _pairs(seed, num_pairs, dim, num_ops, noise=0.01):
  """Concentric-like pairs: ``z1 = expm(A(c)) z0 + noise``, ``c ~ Laplace(1)``."""
  rng = np.random.default_rng(seed)
  skew = rng.normal(size=(num_ops, dim, dim))
  psi = 0.5 * (skew - skew.transpose(0, 2, 1)) + 0.05 * rng.normal(
    size=(num_ops, dim, dim)
  )
  z0 = rng.normal(size=(num_pairs, dim))
  coeffs = rng.laplace(size=(num_pairs, num_ops))
  z1 = np.stack(
    [
      scipy.linalg.expm(np.einsum("m,mij->ij", c, psi)) @ z
      for c, z in zip(coeffs, z0, strict=True)
    ]
  )
  return psi, z0, z1 + noise * rng.normal(size=z1.shape), rng


def test_tolerance_is_the_original_xor():
  assert reference.ORIGINAL_TOL == -13
  assert reference.ORIGINAL_MAX_ITER == 50


def test_original_cg_passes_the_original_settings():
  psi, z0, z1, _ = _pairs(0, 1, 2, 4)
  with mock.patch.object(
    reference.scipy.optimize, "minimize", wraps=reference.scipy.optimize.minimize
  ) as spy:
    reference.original_cg(psi, z0[0], z1[0], 5e-6, np.zeros(4))
  kwargs = spy.call_args.kwargs
  assert kwargs["method"] == "CG"
  assert kwargs["tol"] == -13
  assert kwargs["options"] == {"maxiter": 50, "disp": False}
  assert kwargs["jac"] is reference.original_gradient


@pytest.mark.parametrize("dim,num_ops", [(2, 4), (2, 1), (6, 2)])
def test_original_gradient_is_exact(dim, num_ops):
  psi, z0, z1, rng = _pairs(1, 8, dim, num_ops)
  l1 = 1e-3
  for n in range(8):
    c = rng.normal(size=num_ops)
    got = reference.original_gradient(c, psi, z0[n], z1[n], l1)
    frechet = reference.frechet_gradient(c, psi, z0[n], z1[n], l1)
    h = 1e-6
    diff = np.array(
      [
        (
          reference.transport_objective(c + h * e, psi, z0[n], z1[n], l1)
          - reference.transport_objective(c - h * e, psi, z0[n], z1[n], l1)
        )
        / (2 * h)
        for e in np.eye(num_ops)
      ]
    )
    np.testing.assert_allclose(got, frechet, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got, diff, rtol=1e-6, atol=1e-8)


@pytest.mark.whole_run  # the original's CG at length
def test_original_cg_runs_longer_and_ends_lower_than_default_tolerance():
  # scipy's default gtol=1e-5 stops CG after a few iterations; the original's
  # gtol=-13 never stops it, so it runs to 50 iterations or a failed line
  # search (next test), from the same start, along the same path.
  psi, z0, z1, rng = _pairs(2, 30, 2, 4)
  starts = rng.uniform(0.0, 1.0, (30, 4))
  pairs = list(zip(z0, z1, starts, strict=True))
  original = [reference.original_cg(psi, a, b, 1e-6, c0) for a, b, c0 in pairs]
  default = [reference.default_tol_cg(psi, a, b, 1e-6, c0) for a, b, c0 in pairs]
  iters, default_iters = (np.array([r[2] for r in rs]) for rs in (original, default))
  assert np.all(iters >= default_iters)
  assert np.median(iters) >= 2 * np.median(default_iters), (iters, default_iters)
  assert np.any(iters == 50)
  ours, theirs = (np.array([r[1] for r in rs]) for rs in (original, default))
  assert np.all(ours <= theirs * (1 + 1e-9) + 1e-15), (ours, theirs)
  assert np.median(ours) < np.median(theirs)


@pytest.mark.whole_run  # the original's CG at length
def test_original_cg_iterations_end_only_at_fifty_or_a_failed_line_search():
  psi, z0, z1, rng = _pairs(3, 10, 2, 4, noise=0.0)
  for a, b in zip(z0, z1, strict=True):
    c0 = rng.uniform(-2.5, 0.0, 4)
    res = reference.scipy.optimize.minimize(
      reference.transport_objective,
      c0,
      args=(psi, a, b, 5e-6),
      method="CG",
      jac=reference.original_gradient,
      options={"maxiter": 50, "disp": False},
      tol=reference.ORIGINAL_TOL,
    )
    assert res.nit == 50 or res.status == 2, res  # 2: precision loss
    assert reference.original_cg(psi, a, b, 5e-6, c0)[2] == res.nit


def test_prior_starts_are_the_original_ranges():
  starts = reference.original_prior_starts(np.random.default_rng(0), 2, 5000)
  assert starts.shape == (2, 5000)
  np.testing.assert_array_less(-2.5 - 1e-12, starts[0])
  np.testing.assert_array_less(starts[0], 0.0)
  np.testing.assert_array_less(0.0, starts[1])
  np.testing.assert_array_less(starts[1], 2.5)
  np.testing.assert_allclose(starts.mean(axis=1), [-1.25, 1.25], atol=0.05)


def test_step_inference_solves_each_pair_as_the_original():
  # B=3 samples, S=2 draws, A=4 anchors, R=2 restarts: 3*2 posterior solves
  # from U[0, 1] with zeta_q, 3*2*4*2 prior solves from the restart ranges.
  psi, points, _, rng = _pairs(4, 3 * 2 + 3 + 3 * 4, 2, 3)
  z = points[:6].reshape(3, 2, 2)
  mu, anchors = points[6:9], points[9:].reshape(3, 4, 2)
  calls = []

  def fake_cg(psi, z0, z1, l1, c0, gradient):
    calls.append((z0, z1, l1, np.array(c0)))
    return np.array(c0), float(np.sum(c0**2)), 7

  with mock.patch.object(reference, "original_cg", fake_cg):
    step = reference.original_step_inference(psi, mu, anchors, z, 1e-6, 5e-6, 2, rng)
  assert len(calls) == 6 + 48
  post = [c for c in calls if c[2] == 1e-6]
  prior = [c for c in calls if c[2] == 5e-6]
  assert len(post) == 6 and len(prior) == 48
  for z0, _, _, c0 in post:
    assert np.all((0 <= c0) & (c0 <= 1))
    assert any(np.array_equal(z0, m) for m in mu)
  for i, (_, _, _, c0) in enumerate(prior):
    lo = -2.5 + 2.5 * (i % 2)
    assert np.all((lo <= c0) & (c0 <= lo + 2.5)), (i, c0)
  # The best restart is kept: the start closer to 0 (fake objective |c0|^2).
  firsts, seconds = (np.array([c[3] for c in prior[r::2]]) for r in (0, 1))
  best = np.where(
    (np.sum(firsts**2, -1) <= np.sum(seconds**2, -1))[:, None], firsts, seconds
  )
  got = step.prior_coeffs.transpose(1, 0, 2, 3).reshape(-1, 3)  # [S, B, A] order
  np.testing.assert_array_equal(got, best)
  assert step.posterior_coeffs.shape == (3, 2, 3)
  assert step.prior_objective.shape == (3, 2, 4)
  assert np.all(step.iterations == 7)
  np.testing.assert_array_equal(step.iterations.shape, (3, 2, 1 + 8))
