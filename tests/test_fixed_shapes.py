"""Restarts solved as pairs of a one-restart solve equal the restart solve.

``vaells_jax.evaluation.fixed_shapes.solve_restarts_as_pairs`` moves the
restarts of a solve into pairs (the synthetic report's paths run through the
log-likelihood's one-restart program this way); the reference is the
restart solve itself, ``Solver.__call__``, whose coefficients must come
back to float32 rounding when both programs solve at most 512 pairs: bit for
bit where XLA:CPU compiles both alike, all but a few last bits where it does
not (it depends on the CPU; larger batches round further apart:
docs/studies/benchmarks-evaluation.md).
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from vaells_jax.core.inference import (
  Solver,
  infer_coefficients,
  infer_from_starts,
  solver_starts,
)
from vaells_jax.evaluation.fixed_shapes import solve_restarts_as_pairs

NUM_PAIRS, NUM_OPS, DIM = 20, 4, 2
L1 = 0.01
# Sixteen restarts tiling [-2, 2), as spread_restarts tiles the orbits. With
# "fista": "gauss_newton" (what "auto" picks for d = 2) solves the pairs in
# blocks whose composition changes its rounding (up to 2e-3 relative here).
SOLVER = Solver(method="fista", num_restarts=16, init_range=(-2.0, -1.75))


@pytest.fixture(scope="module")
def problem():
  rng = np.random.default_rng(0)
  psi = rng.normal(size=(NUM_OPS, DIM, DIM)).astype(np.float32)
  z0, z1 = rng.normal(size=(2, NUM_PAIRS, DIM)).astype(np.float32)
  key = jax.random.key(3)
  expected = SOLVER(psi, z0, z1, l1_weight=L1, key=key)
  return psi, z0, z1, key, expected


@pytest.mark.parametrize("pairs", [16 * NUM_PAIRS, 128])  # one block; padded blocks
def test_restarts_as_pairs_equal_restart_solve(problem, pairs):
  psi, z0, z1, key, expected = problem
  coeffs, objective = solve_restarts_as_pairs(
    SOLVER, psi, z0, z1, l1_weight=L1, key=key, pairs=pairs
  )
  expected_coeffs = np.asarray(expected.coeffs)
  # Bit for bit on one x86 CPU; on an AMD EPYC 2 of the 80 differ by < 1e-6.
  assert np.mean(coeffs != expected_coeffs) <= 0.05
  np.testing.assert_allclose(coeffs, expected_coeffs, rtol=1e-5, atol=1e-6)
  # The final objective (jax.scipy.linalg.expm of [R, N] against [1, R N]
  # coefficients) rounds apart by up to an ulp.
  np.testing.assert_allclose(objective, np.asarray(expected.objective), rtol=3e-7)


def test_restarts_matter_on_this_problem(problem):
  """Without restart 1..15 the results differ: the test above can fail."""
  psi, z0, z1, key, expected = problem
  first = SOLVER.replace(num_restarts=1)(psi, z0, z1, l1_weight=L1, key=key)
  better = np.asarray(expected.objective) < np.asarray(first.objective)
  assert better.sum() >= 3, better


def test_infer_from_starts_equals_infer_coefficients(problem):
  psi, z0, z1, key, _ = problem
  lo, hi = (np.full(NUM_PAIRS, b, np.float32) for b in (-1.0, 1.0))
  starts = solver_starts(key, 2, NUM_OPS, lo, hi)
  got = infer_from_starts(psi, z0, z1, l1_weight=L1, starts=starts)
  want = infer_coefficients(
    psi, z0, z1, l1_weight=L1, key=key, num_restarts=2, init_range=(-1.0, 1.0)
  )
  for name in got._fields:
    np.testing.assert_array_equal(getattr(got, name), getattr(want, name))


@pytest.mark.parametrize(
  "starts, message",
  [
    (np.zeros(NUM_OPS), r"\[R, \.\.\., M\]"),
    (np.zeros((1, NUM_PAIRS, NUM_OPS + 1)), "M=4"),
    (np.zeros((1, NUM_PAIRS + 1, NUM_OPS)), "broadcast"),
    (np.zeros((NUM_PAIRS, NUM_OPS)), "starts hold"),
  ],
)
def test_infer_from_starts_rejects_bad_starts(problem, starts, message):
  psi, z0, z1, _, _ = problem
  with pytest.raises(ValueError, match=message):
    infer_from_starts(psi, z0, z1, l1_weight=L1, starts=starts)
