"""Tests of ``vaells_jax.core.inference``: batched sparse coefficient inference.

Each distinct (dtype, number of pairs, ``num_restarts``, ``init_range``,
``max_iter``, ``tol``) compiles the solver anew (several seconds on CPU), so the
tests share problem shapes and module-scoped solutions where they can.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from scipy_reference import default_tol_cg_pairs

from vaells_jax import infer_coefficients, inference_objective
from vaells_jax.config import Config
from vaells_jax.core.inference import DEFAULT_MAX_ITER, solver_starts
from vaells_jax.core.solvers import resolve
from vaells_jax.models.vaells import solvers

# Rotation problem: restarts r = 0..3 start in [-3.5 + 1.75 r, -1.75 + 1.75 r),
# which together cover [-3.5, 3.5). Twelve angles, so that the [3, 4]
# broadcasting problem shares the compiled solver.
ROTATION_RESTARTS = {"num_restarts": 4, "init_range": (-3.5, -1.75)}
THETAS = np.linspace(-3.0, 3.0, 12)
NUM_THETAS = len(THETAS)
SMALL_L1 = 1e-6
# Random problem (conftest.random_problem) with the library's default settings.
RANDOM_L1 = 0.01
DEFAULT_INIT_RANGE = (0.0, 1.0)


def _rotation(angles):
  """Unit vectors at ``angles``: ``[..., 2]``."""
  angles = np.asarray(angles)
  return np.stack([np.cos(angles), np.sin(angles)], axis=-1)


def _solver_starts(key, num_restarts, num_pairs, num_ops, init_range, dtype):
  """The starting coefficients ``[R, N, M]`` the solver draws for ``N`` pairs.

  ``test_restart_starts_shift_by_width`` checks that the solver starts there.
  """
  lo, hi = (jnp.full(num_pairs, v, dtype) for v in init_range)
  return solver_starts(key, num_restarts, num_ops, lo, hi)


def _to_numpy(result):
  """An ``InferenceResult`` as a dict of NumPy arrays (dtypes kept)."""
  return {name: np.asarray(value) for name, value in result._asdict().items()}


@pytest.fixture(scope="module")
def rotation_f32(rotation_psi):
  """Float32 rotation problem: ``z0 = e_1`` to ``z1`` at each of ``THETAS``."""
  key = jax.random.key(0)
  z0 = np.array([1.0, 0.0], np.float32)
  z1 = _rotation(THETAS).astype(np.float32)
  psi = rotation_psi.astype(np.float32)
  result = infer_coefficients(
    psi, z0, z1, l1_weight=SMALL_L1, key=key, **ROTATION_RESTARTS
  )
  return {"psi": psi, "z0": z0, "z1": z1, "key": key, "result": _to_numpy(result)}


@pytest.fixture(scope="module")
def random_solutions(random_problem):
  """Default-settings JAX solutions per dtype, with the starts they drew."""
  key = jax.random.key(1)
  problem = random_problem
  num_pairs, num_ops = problem["coeffs"].shape
  solutions = {}
  for dtype in ("float32", "float64"):
    with jax.enable_x64(dtype == "float64"):
      psi, z0, z1 = (jnp.asarray(problem[k], dtype) for k in ("psi", "z0", "z1"))
      result = infer_coefficients(psi, z0, z1, l1_weight=RANDOM_L1, key=key)
      recomputed = inference_objective(psi, result.coeffs, z0, z1, RANDOM_L1)
      starts = _solver_starts(key, 1, num_pairs, num_ops, DEFAULT_INIT_RANGE, dtype)
      solutions[dtype] = {
        "result": _to_numpy(result),
        "recomputed": np.asarray(recomputed),
        "starts": np.asarray(starts),
      }
  return {"key": key, **solutions}


@pytest.fixture(scope="module")
def cg_objectives(random_problem, random_solutions):
  """scipy CG at its default tolerance (``default_tol_cg_pairs``, not the
  original's setting) per dtype, from the starts the JAX solver drew, on
  the same float values the JAX solver saw."""
  return {
    dtype: default_tol_cg_pairs(
      *(np.asarray(random_problem[k], dtype) for k in ("psi", "z0", "z1")),
      RANDOM_L1,
      random_solutions[dtype]["starts"],
      max_iter=50,
    )[1]
    for dtype in ("float32", "float64")
  }


def test_recovers_rotation_angle(rotation_f32):
  result = rotation_f32["result"]
  assert result["coeffs"].shape == (NUM_THETAS, 1)
  assert result["coeffs"].dtype == np.float32
  for name in ("objective", "num_iter", "converged"):
    assert result[name].shape == (NUM_THETAS,)
  np.testing.assert_allclose(result["coeffs"][:, 0], THETAS, atol=1e-2)
  # At the optimum only the (tiny) l1 term remains: SMALL_L1 * |theta|.
  np.testing.assert_allclose(result["objective"], 0.0, atol=1e-5)
  assert np.all(result["converged"])
  assert np.all(result["num_iter"] >= 1)
  assert np.all(result["num_iter"] <= DEFAULT_MAX_ITER["fista"])


def test_objective_matches_inference_objective(rotation_f32):
  r = rotation_f32
  recomputed = inference_objective(
    r["psi"], r["result"]["coeffs"], r["z0"], r["z1"], SMALL_L1
  )
  np.testing.assert_allclose(
    r["result"]["objective"], np.asarray(recomputed), rtol=1e-5, atol=1e-8
  )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_objective_matches_recomputed_on_random_problem(random_solutions, dtype):
  solution = random_solutions[dtype]
  assert solution["result"]["coeffs"].dtype == np.dtype(dtype)
  assert solution["result"]["objective"].dtype == np.dtype(dtype)
  rtol = {"float32": 1e-5, "float64": 1e-12}[dtype]
  np.testing.assert_allclose(
    solution["result"]["objective"], solution["recomputed"], rtol=rtol, atol=rtol**2
  )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.whole_run  # a solver's quality at length
def test_at_least_as_good_as_scipy_cg_reference(random_solutions, cg_objectives, dtype):
  ours = random_solutions[dtype]["result"]["objective"].astype(np.float64)
  theirs = cg_objectives[dtype]
  assert np.all(np.isfinite(ours))
  slack = {"float32": 1e-7, "float64": 0.0}[dtype]
  assert np.median(ours) <= np.median(theirs) * (1 + 1e-3) + slack, (
    np.median(ours),
    np.median(theirs),
  )
  # Not only the median: almost every pair does at least as well.
  as_good = ours <= theirs * (1 + 1e-3) + slack
  assert np.mean(as_good) >= 0.9, np.flatnonzero(~as_good)


def test_more_restarts_are_never_worse(random_problem, random_solutions):
  # Restart 0 of a multi-restart solve starts where the single-restart solve
  # does (same key; the draws agree on their common prefix) ...
  key = random_solutions["key"]
  num_pairs, num_ops = random_problem["coeffs"].shape
  with jax.enable_x64(True):
    one = _solver_starts(key, 1, num_pairs, num_ops, DEFAULT_INIT_RANGE, jnp.float64)
    four = _solver_starts(key, 4, num_pairs, num_ops, DEFAULT_INIT_RANGE, jnp.float64)
    np.testing.assert_array_equal(np.asarray(four[0]), np.asarray(one[0]))
    psi, z0, z1 = (jnp.asarray(random_problem[k]) for k in ("psi", "z0", "z1"))
    result = infer_coefficients(
      psi, z0, z1, l1_weight=RANDOM_L1, key=key, num_restarts=4
    )
    objective = np.asarray(result.objective)
  # ... so in float64 the best of four is never worse than that single start.
  single = random_solutions["float64"]["result"]["objective"]
  np.testing.assert_array_less(objective, single * (1 + 1e-9) + 1e-15)
  # And the extra restarts do find better optima on some pairs.
  assert np.any(objective < single * (1 - 1e-6))


@pytest.mark.whole_run  # a solver's quality at length
def test_lm_recovers_rotation_angle(rotation_f32):
  r = rotation_f32
  result = _to_numpy(
    infer_coefficients(
      r["psi"],
      r["z0"],
      r["z1"],
      l1_weight=SMALL_L1,
      key=r["key"],
      method="lm",
      **ROTATION_RESTARTS,
    )
  )
  assert result["coeffs"].shape == (NUM_THETAS, 1)
  assert result["coeffs"].dtype == np.float32
  np.testing.assert_allclose(result["coeffs"][:, 0], THETAS, atol=1e-2)
  np.testing.assert_allclose(result["objective"], 0.0, atol=1e-5)
  assert np.all(result["converged"])
  # Levenberg-Marquardt iterations plus at most 10 proximal-gradient ones.
  assert np.all(result["num_iter"] <= DEFAULT_MAX_ITER["lm"] + 10)
  # Under jit and vmap (the solver's while loops batched once more).
  solve = jax.jit(
    jax.vmap(
      lambda z1: infer_coefficients(
        r["psi"],
        r["z0"],
        z1,
        l1_weight=SMALL_L1,
        key=r["key"],
        method="lm",
        **ROTATION_RESTARTS,
      )
    )
  )
  batched = solve(np.stack([r["z1"], r["z1"][::-1]]))
  np.testing.assert_allclose(np.asarray(batched.coeffs[0]), result["coeffs"], atol=1e-5)
  np.testing.assert_allclose(
    np.asarray(batched.coeffs[1, :, 0]), THETAS[::-1], atol=1e-2
  )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.whole_run  # a solver's quality at length
def test_lm_at_least_as_good_as_scipy_cg_reference(
  random_problem, random_solutions, cg_objectives, dtype
):
  # Same starts as the CG reference (the key the fixture solved with).
  with jax.enable_x64(dtype == "float64"):
    psi, z0, z1 = (jnp.asarray(random_problem[k], dtype) for k in ("psi", "z0", "z1"))
    result = infer_coefficients(
      psi, z0, z1, l1_weight=RANDOM_L1, key=random_solutions["key"], method="lm"
    )
    ours = np.asarray(result.objective, np.float64)
    recomputed = np.asarray(inference_objective(psi, result.coeffs, z0, z1, RANDOM_L1))
  theirs = cg_objectives[dtype]
  rtol = {"float32": 1e-5, "float64": 1e-12}[dtype]
  np.testing.assert_allclose(ours, recomputed, rtol=rtol, atol=rtol**2)
  slack = {"float32": 1e-7, "float64": 0.0}[dtype]
  assert np.median(ours) <= np.median(theirs) * (1 + 1e-3) + slack, (
    np.median(ours),
    np.median(theirs),
  )
  as_good = ours <= theirs * (1 + 1e-3) + slack
  assert np.mean(as_good) >= 0.9, np.flatnonzero(~as_good)
  # The proximal-gradient polish leaves exact zeros (l1 = 0.01 is large
  # enough here for some coefficients to belong at zero).
  assert np.any(np.asarray(result.coeffs) == 0.0)


@pytest.mark.whole_run  # a solver's quality at length
def test_lm_beats_proximal_gradient_on_stiff_anchor_pairs():
  # Training-step pairs as benchmarks/inference_speed.py draws them (d = 4
  # here, so the Taylor expm runs): anchors carried far by operators of norm
  # about 1-2, starts in U[-2.5, 2.5] (two of the original's
  # restart ranges). Proximal
  # gradient's step is bounded by the stiffest direction and it leaves the
  # data term unfitted; Levenberg-Marquardt fits it on most pairs (a few end
  # in local minima, as CG's do: the problem is not convex).
  rng = np.random.default_rng(3)
  num_ops, dim, num_pairs, l1 = 4, 4, 40, 5e-6
  skew = rng.normal(size=(num_ops, dim, dim))
  psi = 0.5 * (skew - skew.transpose(0, 2, 1)) + 0.05 * rng.normal(
    size=(num_ops, dim, dim)
  )
  z1 = rng.normal(size=(num_pairs, dim))
  z1 /= np.linalg.norm(z1, axis=-1, keepdims=True)
  coeffs = rng.laplace(scale=1.0, size=(num_pairs, num_ops))
  z0 = np.stack(
    [
      scipy.linalg.expm(-np.einsum("m,mij->ij", c, psi)) @ z
      for c, z in zip(coeffs, z1, strict=True)
    ]
  )
  psi, z0, z1 = (np.asarray(a, np.float32) for a in (psi, z0, z1))
  key = jax.random.key(4)
  kwargs = dict(l1_weight=l1, key=key, init_range=(-2.5, 2.5), tol=1e-6)
  lm = infer_coefficients(psi, z0, z1, method="lm", **kwargs)
  fista = infer_coefficients(psi, z0, z1, method="fista", **kwargs)
  starts = np.asarray(
    _solver_starts(key, 1, num_pairs, num_ops, (-2.5, 2.5), jnp.float32)
  )
  _, cg = default_tol_cg_pairs(psi, z0, z1, l1, starts, max_iter=50)
  data = lambda r: (
    np.asarray(r.objective)
    - l1
    * np.abs(  # noqa: E731
      np.asarray(r.coeffs)
    ).sum(-1)
  )
  assert np.median(data(lm)) < 1e-6, np.median(data(lm))
  assert np.median(data(fista)) > 100 * np.median(data(lm))
  ours = np.asarray(lm.objective)
  assert np.median(ours) < np.median(cg), (np.median(ours), np.median(cg))
  assert np.mean(ours <= cg * (1 + 1e-3) + 1e-7) >= 0.75


def test_restart_starts_shift_by_width(rotation_f32):
  # With z0 = z1 = 0 the data term is constant, so the solver only shrinks the
  # start by SMALL_L1 * stepsize and stops; the best restart is the start of
  # smallest |c|. That exposes the starts the solver drew.
  key = jax.random.key(5)
  z1 = np.zeros_like(rotation_f32["z1"])
  z0 = np.zeros_like(rotation_f32["z0"])
  result = infer_coefficients(
    rotation_f32["psi"],
    z0,
    z1,
    l1_weight=SMALL_L1,
    key=key,
    method="fista",
    **ROTATION_RESTARTS,
  )
  lo, hi = ROTATION_RESTARTS["init_range"]
  num_restarts = ROTATION_RESTARTS["num_restarts"]
  starts = np.asarray(
    _solver_starts(key, num_restarts, NUM_THETAS, 1, (lo, hi), jnp.float32)
  )[..., 0]
  width = hi - lo
  for r in range(num_restarts):
    assert np.all(starts[r] >= lo + r * width - 1e-6)
    assert np.all(starts[r] < hi + r * width + 1e-6)
  best = starts[np.argmin(np.abs(starts), axis=0), np.arange(NUM_THETAS)]
  np.testing.assert_allclose(np.asarray(result.coeffs)[:, 0], best, atol=1e-5)
  # The winners come from the middle restarts, whose ranges contain 0.
  assert np.all(np.abs(best) <= width)


def test_diverged_starts_fall_back_to_identity(rotation_f32):
  # With psi scaled by 1e9 every start has ||A||_1 > 2^26, beyond the squaring
  # limit of expm_small (solver); the operator (|rotation|: real eigenvalues
  # +-1) makes expm(A) itself overflow, so the reported objective (the
  # closed form) is not finite either and every restart diverges. The
  # documented fallback is c = 0 with objective 1/2 ||z1 - z0||^2, not
  # converged.
  scale = 1e9
  key = jax.random.key(6)
  starts = np.asarray(
    _solver_starts(
      key,
      ROTATION_RESTARTS["num_restarts"],
      NUM_THETAS,
      1,
      ROTATION_RESTARTS["init_range"],
      jnp.float32,
    )
  )
  assert np.all(scale * np.abs(starts) > 2.0**26)  # The premise: all overflow.
  r = rotation_f32
  result = _to_numpy(
    infer_coefficients(
      scale * np.abs(r["psi"]),
      r["z0"],
      r["z1"],
      l1_weight=SMALL_L1,
      key=key,
      **ROTATION_RESTARTS,
    )
  )
  np.testing.assert_array_equal(result["coeffs"], 0.0)
  np.testing.assert_allclose(
    result["objective"], 0.5 * np.sum((r["z1"] - r["z0"]) ** 2, axis=-1), rtol=1e-6
  )
  assert not np.any(result["converged"])


def test_broadcasting_pairs_and_per_pair_l1(rotation_psi):
  # Anchors z0 [B, A, 2] against samples z1 [B, 1, 2], all on the unit circle;
  # the rotation carrying z0[b, a] to z1[b] has angle diffs[b, a].
  rng = np.random.default_rng(7)
  num_b, num_a = 3, 4
  diffs = rng.uniform(0.3, 2.8, (num_b, num_a)) * rng.choice([-1, 1], (num_b, num_a))
  targets = rng.uniform(-np.pi, np.pi, (num_b, 1))
  z0 = _rotation(targets - diffs).astype(np.float32)
  z1 = _rotation(targets).astype(np.float32)
  psi = rotation_psi.astype(np.float32)
  key = jax.random.key(2)
  kwargs = dict(key=key, **ROTATION_RESTARTS)

  result = infer_coefficients(psi, z0, z1, l1_weight=SMALL_L1, **kwargs)
  assert result.coeffs.shape == (num_b, num_a, 1)
  for name in ("objective", "num_iter", "converged"):
    assert getattr(result, name).shape == (num_b, num_a)
  np.testing.assert_allclose(np.asarray(result.coeffs)[..., 0], diffs, atol=1e-2)

  # Each entry equals solving that pair alone (the solution is unique).
  for b, a in np.ndindex(num_b, num_a):
    alone = infer_coefficients(psi, z0[b, a], z1[b, 0], l1_weight=SMALL_L1, **kwargs)
    assert alone.coeffs.shape == (1,)
    assert alone.objective.shape == ()
    np.testing.assert_allclose(
      np.asarray(result.coeffs[b, a]), np.asarray(alone.coeffs), atol=1e-3
    )
    np.testing.assert_allclose(
      np.asarray(result.objective[b, a]), np.asarray(alone.objective), atol=1e-5
    )

  # Per-pair weights [B, A]: minimising 1 - cos(c - diff) + l1 |c| gives
  # c = diff - sign(diff) asin(l1) (for |diff| > asin(l1)).
  # (No zero weight: with l1 = 0, diff - 2 pi is an equally good optimum.)
  choices = np.array([1e-3, 0.02, 0.1, 0.3], np.float32)
  l1 = choices[rng.integers(0, 4, (num_b, num_a))]
  l1[0, :] = choices  # Every weight occurs.
  weighted = infer_coefficients(psi, z0, z1, l1_weight=l1, **kwargs)
  assert weighted.coeffs.shape == (num_b, num_a, 1)
  expected = diffs - np.sign(diffs) * np.arcsin(l1)
  np.testing.assert_allclose(np.asarray(weighted.coeffs)[..., 0], expected, atol=1e-2)
  expected_objective = 1 - np.cos(np.arcsin(l1)) + l1 * np.abs(expected)
  np.testing.assert_allclose(
    np.asarray(weighted.objective), expected_objective, atol=1e-4
  )
  recomputed = inference_objective(psi, weighted.coeffs, z0, z1, l1)
  np.testing.assert_allclose(
    np.asarray(weighted.objective), np.asarray(recomputed), rtol=1e-5, atol=1e-7
  )


def test_works_under_jit(rotation_f32):
  r = rotation_f32

  @jax.jit
  def solve(psi, z0, z1, l1_weight, key):
    return infer_coefficients(
      psi, z0, z1, l1_weight=l1_weight, key=key, **ROTATION_RESTARTS
    )

  result = _to_numpy(solve(r["psi"], r["z0"], r["z1"], jnp.float32(SMALL_L1), r["key"]))
  for name, value in r["result"].items():
    assert result[name].shape == value.shape
    assert result[name].dtype == value.dtype
  np.testing.assert_allclose(result["coeffs"], r["result"]["coeffs"], atol=1e-5)
  np.testing.assert_allclose(result["objective"], r["result"]["objective"], atol=1e-7)


def test_works_under_vmap(rotation_f32):
  r = rotation_f32
  z1_stack = np.stack([r["z1"], r["z1"][::-1]])

  def solve(z1):
    return infer_coefficients(
      r["psi"], r["z0"], z1, l1_weight=SMALL_L1, key=r["key"], **ROTATION_RESTARTS
    )

  batched = _to_numpy(jax.vmap(solve)(z1_stack))
  assert batched["coeffs"].shape == (2, NUM_THETAS, 1)
  assert batched["objective"].shape == (2, NUM_THETAS)
  # The key is shared, so each slice is the unbatched solve of that slice.
  for i, z1 in enumerate(z1_stack):
    alone = r["result"] if i == 0 else _to_numpy(solve(z1))
    np.testing.assert_allclose(batched["coeffs"][i], alone["coeffs"], atol=1e-5)
    np.testing.assert_allclose(batched["objective"][i], alone["objective"], atol=1e-7)
  np.testing.assert_allclose(batched["coeffs"][1, :, 0], THETAS[::-1], atol=1e-2)


@pytest.mark.parametrize("method", ["fista", "pgd"])
@pytest.mark.whole_run  # a solver's quality at length
def test_batches_beyond_a_chunk_solve_each_pair_as_alone(random_problem, method):
  """Past ``CHUNK`` starts the solve runs in chunks; every pair's result is
  its result in a batch of its own chunk's size, wherever the cut falls."""
  from vaells_jax.core.inference import infer_from_starts
  from vaells_jax.core.solvers.columns import CHUNK

  psi = jnp.asarray(random_problem["psi"], jnp.float32)
  rng = np.random.default_rng(0)
  num_pairs, d = CHUNK + 300, psi.shape[-1]
  z0 = rng.normal(size=(num_pairs, d)).astype(np.float32)
  z1 = rng.normal(size=(num_pairs, d)).astype(np.float32)
  starts = rng.uniform(-1, 1, (2, num_pairs, psi.shape[0])).astype(np.float32)
  solve = lambda sl: _to_numpy(  # noqa: E731
    infer_from_starts(
      psi,
      z0[sl],
      z1[sl],
      l1_weight=RANDOM_L1,
      starts=starts[:, sl],
      max_iter=20,
      method=method,
    )
  )
  whole = solve(slice(None))
  head, tail = solve(slice(0, 500)), solve(slice(500, None))
  # Batches of other sizes round differently in the last bits, and with M > d
  # the minima lie in flat valleys where that moves the coefficients and,
  # after 20 iterations, a few objectives (by up to 0.2% on one x86 CPU,
  # one pair of 1324 by 0.6% on an AMD EPYC): the objectives are what must
  # agree, nearly all of them to float32 rounding.
  parts = np.concatenate([head["objective"], tail["objective"]])
  np.testing.assert_allclose(whole["objective"], parts, rtol=1e-2)
  assert np.mean(np.isclose(whole["objective"], parts, rtol=1e-5)) > 0.95


def test_results_are_constants_for_autodiff(rotation_f32):
  r = rotation_f32

  def loss(psi, z0, z1):
    result = infer_coefficients(
      psi, z0, z1, l1_weight=SMALL_L1, key=r["key"], **ROTATION_RESTARTS
    )
    return jnp.sum(result.coeffs**2) + jnp.sum(result.objective)

  grads = jax.grad(loss, argnums=(0, 1, 2))(
    jnp.asarray(r["psi"]), jnp.asarray(r["z0"]), jnp.asarray(r["z1"])
  )
  for grad, arg in zip(grads, ("psi", "z0", "z1"), strict=True):
    assert grad.shape == r[arg].shape
    np.testing.assert_array_equal(np.asarray(grad), 0.0)


def test_danskin_gradient_matches_finite_difference_of_optimum(rotation_psi):
  # z1 off the unit circle, so the optimal value has a nonzero gradient
  # (z1 - R(c*) z0, of norm radius - 1 = 0.3) and the l1 term moves c*.
  thetas = np.array([-2.0, 0.5, 2.5])
  radius, l1, step = 1.3, 0.05, 1e-3
  offsets = step * np.array([[0, 0], [1, 0], [-1, 0], [0, 1], [0, -1]])
  z1_base = radius * _rotation(thetas)
  with jax.enable_x64(True):
    psi = jnp.asarray(rotation_psi)
    z0 = jnp.array([1.0, 0.0])
    z1_all = jnp.asarray(z1_base[:, None, :] + offsets)  # [3, 5, 2]
    result = infer_coefficients(
      psi, z0, z1_all, l1_weight=l1, key=jax.random.key(3), **ROTATION_RESTARTS
    )
    assert result.coeffs.dtype == jnp.float64
    assert result.objective.dtype == jnp.float64
    optimum = jax.lax.stop_gradient(result.coeffs[:, 0])
    danskin = jax.grad(
      lambda z1: jnp.sum(inference_objective(psi, optimum, z0, z1, l1))
    )(jnp.asarray(z1_base))
    danskin = np.asarray(danskin)
    value = np.asarray(result.objective)
    coeffs = np.asarray(result.coeffs)[..., 0]
  # c* = theta - sign(theta) asin(l1 / radius), the same for every offset up
  # to O(step).
  expected_c = thetas - np.sign(thetas) * np.arcsin(l1 / radius)
  np.testing.assert_allclose(coeffs[:, 0], expected_c, atol=1e-3)
  finite_difference = np.stack(
    [
      (value[:, 1] - value[:, 2]) / (2 * step),
      (value[:, 3] - value[:, 4]) / (2 * step),
    ],
    axis=-1,
  )
  assert np.all(np.linalg.norm(danskin, axis=-1) > 0.25)
  np.testing.assert_allclose(danskin, finite_difference, atol=1e-3)
  np.testing.assert_allclose(danskin, z1_base - _rotation(expected_c), atol=1e-3)


@pytest.mark.parametrize(
  "changes,message",
  [
    ({"l1_weight": -0.1}, "l1_weight"),
    ({"l1_weight": np.array([0.1, -1e-3, 0.0])}, "l1_weight"),
    ({"z0": np.zeros(3)}, r"z0.*d=2"),
    ({"z1": np.zeros((3, 1))}, r"z1.*d=2"),
    ({"z0": np.zeros((4, 2))}, "do not broadcast"),
    ({"l1_weight": np.ones(4)}, "do not broadcast"),
    ({"psi": np.zeros((2, 2))}, r"psi must have shape \[M, d, d\]"),
    ({"psi": np.zeros((1, 2, 3))}, r"psi must have shape \[M, d, d\]"),
    (
      {"psi": np.zeros((1, 0, 0)), "z0": np.zeros(0), "z1": np.zeros(0)},
      r"M, d >= 1, got \(1, 0, 0\)",
    ),
    ({"num_restarts": 0}, "num_restarts"),
    ({"num_restarts": 2.0}, "num_restarts"),
    ({"max_iter": 0}, "max_iter"),
    ({"init_range": (1.0, 0.0)}, "init_range"),
    ({"init_range": (0.0, 1.0, 2.0)}, "init_range"),
    ({"tol": 0.0}, "tol"),
    ({"method": "cg"}, "method"),
  ],
)
def test_invalid_arguments_raise(rotation_psi, changes, message):
  kwargs = {
    "psi": rotation_psi,
    "z0": np.array([1.0, 0.0]),
    "z1": _rotation(np.array([0.1, 0.2, 0.3])),
    "l1_weight": 0.1,
    "key": jax.random.key(0),
  }
  kwargs.update(changes)
  psi, z0, z1 = kwargs.pop("psi"), kwargs.pop("z0"), kwargs.pop("z1")
  with pytest.raises(ValueError, match=message):
    infer_coefficients(psi, z0, z1, **kwargs)


@pytest.mark.parametrize(
  "x64,dtypes,expected",
  [
    (False, ("float32", "float32", "float32"), "float32"),
    (True, ("float32", "float32", "float32"), "float32"),
    (True, ("float64", "float64", "float64"), "float64"),
    (True, ("float64", "float32", "float32"), "float64"),
    (True, ("float32", "float32", "float64"), "float64"),
  ],
)
def test_output_dtype_follows_inputs(rotation_psi, x64, dtypes, expected):
  # Shapes and dtypes only (traced, not compiled).
  with jax.enable_x64(x64):
    psi, z0, z1 = (
      jax.ShapeDtypeStruct(shape, dtype)
      for shape, dtype in zip(((1, 2, 2), (2,), (5, 2)), dtypes, strict=True)
    )
    out = jax.eval_shape(
      lambda p, a, b: infer_coefficients(p, a, b, l1_weight=0.1, key=jax.random.key(0)),
      psi,
      z0,
      z1,
    )
  assert out.coeffs.shape == (5, 1)
  assert out.coeffs.dtype == np.dtype(expected)
  assert out.objective.dtype == np.dtype(expected)
  assert out.converged.dtype == np.bool_


def test_auto_picks_the_solver_for_the_shape():
  assert resolve("auto", 4, 2) == "gauss_newton"
  assert resolve("auto", 1, 2) == "gauss_newton"
  assert resolve("auto", 1, 10) == "exact"
  assert resolve("auto", 1, 10, starts=True) == "pgd"  # exact takes no starts
  assert resolve("auto", 4, 6) == "pgd"
  assert resolve("lm", 1, 10) == "lm"
  # A model's solvers carry the resolved name (the evaluation branches on it).
  assert solvers(Config(num_ops=1, latent_dim=3)).prior.method == "exact"
  assert solvers(Config()).posterior.method == "gauss_newton"
  rng = np.random.default_rng(0)
  for num_ops, dim in ((1, 3), (2, 3)):
    psi = 0.3 * rng.normal(size=(num_ops, dim, dim)).astype(np.float32)
    z0, z1 = rng.normal(size=(2, 6, dim)).astype(np.float32)
    kwargs = dict(l1_weight=1e-3, key=jax.random.key(0))
    auto = infer_coefficients(psi, z0, z1, **kwargs)
    named = infer_coefficients(
      psi, z0, z1, method=resolve("auto", num_ops, dim), **kwargs
    )
    for name in auto._fields:
      np.testing.assert_array_equal(getattr(auto, name), getattr(named, name))
