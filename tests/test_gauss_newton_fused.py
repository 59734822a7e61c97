"""Tests of the ``"gauss_newton_fused"`` solver (one Pallas kernel), run in
Pallas's interpret mode on the CPU: its iterations against
``"gauss_newton"``'s, its results, ``vmap``, and that it lowers to a Triton
kernel for a GPU."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_gauss_newton import _pairs

from vaells_jax import infer_coefficients, inference_objective
from vaells_jax.config import Config
from vaells_jax.core.inference import solver_starts
from vaells_jax.core.solvers import gauss_newton as gn
from vaells_jax.core.solvers import gauss_newton_fused as gf


def _problem(num_ops, num_pairs, seed, dtype, noise=0.1, restarts=2):
  psi, z0, z1 = (jnp.asarray(a, dtype) for a in _pairs(num_ops, num_pairs, seed, noise))
  bound = jnp.full(num_pairs, 2.5, dtype)
  init = solver_starts(jax.random.key(seed), restarts, num_ops, -bound, bound)
  return init, psi, z0, z1, jnp.full(num_pairs, 1e-2, dtype)


@pytest.mark.parametrize("num_ops", [1, 3])
def test_its_iterations_are_gauss_newtons(num_ops):
  # Float64, the first iterations of the same starts: the same steps to
  # rounding (further on, trials the trust region cuts to nearly the same
  # point can swap places by a rounding, and valleys carry that on).
  # 300 pairs: a grid of three programs, the last partly padding.
  with jax.enable_x64(True):
    problem = _problem(num_ops, 150, num_ops, jnp.float64)
    for iters in (1, 2):
      ours = gf.solve_gauss_newton_fused(*problem, max_iter=iters, tol=1e-9)
      theirs = gn.solve_gauss_newton(*problem, max_iter=iters, tol=1e-9)
      np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-7, atol=1e-8)
      np.testing.assert_array_equal(ours[1], theirs[1])
      np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("num_ops", [1, 4])
def test_solves_as_well_as_gauss_newton(num_ops):
  init, psi, z0, z1, l1 = _problem(num_ops, 400, 7 + num_ops, jnp.float32)
  solve = lambda fn: jax.jit(  # noqa: E731
    lambda *a: fn(*a, max_iter=100, tol=1e-6)
  )(init, psi, z0, z1, l1)
  ours, theirs = solve(gf.solve_gauss_newton_fused), solve(gn.solve_gauss_newton)
  objective = lambda c: np.asarray(  # noqa: E731
    inference_objective(psi, c, z0[None], z1[None], l1[None]), np.float64
  )
  f_ours, f_theirs = objective(ours[0]), objective(theirs[0])
  assert np.all(np.isfinite(f_ours))
  assert np.mean(np.abs(f_ours - f_theirs) <= 1e-5 + 1e-3 * f_theirs) >= 0.97
  assert abs(np.median(f_ours) - np.median(f_theirs)) <= 1e-3 * np.median(f_theirs)
  # Iterations (where ||q|| meets tol = 1e-6 is float32's rounding).
  iters, their_iters = np.asarray(ours[1]), np.asarray(theirs[1])
  assert np.median(iters) == np.median(their_iters)
  assert np.mean(iters) == pytest.approx(np.mean(their_iters), rel=0.05)


def test_through_infer_coefficients_and_vmap():
  init, psi, z0, z1, _ = _problem(2, 40, 3, jnp.float32)
  kwargs = dict(l1_weight=1e-2, key=jax.random.key(1), tol=1e-6)
  ours = infer_coefficients(psi, z0, z1, method="gauss_newton_fused", **kwargs)
  theirs = infer_coefficients(psi, z0, z1, method="gauss_newton", **kwargs)
  np.testing.assert_allclose(ours.objective, theirs.objective, rtol=1e-3, atol=1e-5)
  # Members of a population: vmap adds a dimension to the kernel's grid.
  stacked = jnp.stack([psi, 2.0 * psi])
  l1 = jnp.full(40, 1e-2)
  solve = lambda p: gf.solve_gauss_newton_fused(  # noqa: E731
    init, p, z0, z1, l1, max_iter=30, tol=1e-6
  )
  batched = jax.vmap(solve)(stacked)
  for k, member in enumerate(stacked):
    one = solve(member)
    for a, b in zip(one, batched, strict=True):
      np.testing.assert_allclose(a, b[k], rtol=1e-6, atol=1e-7)


def test_lowers_to_one_triton_kernel_for_a_gpu():
  # What can be checked without a GPU: the program for one (cross-platform
  # lowering) holds the kernel as Triton and no other loop.
  problem = _problem(3, 300, 1, jnp.float32)
  solve = jax.jit(lambda *a: gf.solve_gauss_newton_fused(*a, max_iter=100, tol=1e-9))
  lowered = lambda platform: solve.trace(*problem).lower(  # noqa: E731
    lowering_platforms=(platform,)
  )
  for gpu in ("cuda", "rocm"):
    text = lowered(gpu).as_text()
    assert re.findall(r"custom_call @(\S+)\(", text) == ["__gpu$xla.gpu.triton"]
    assert "stablehlo.while" not in text
  # A TPU gets gauss_newton's loop instead.
  text = lowered("tpu").as_text()
  assert "triton" not in text and "stablehlo.while" in text


def test_only_two_dimensional_codes():
  with pytest.raises(ValueError, match="2-D codes"):
    gf.solve_gauss_newton_fused(
      jnp.zeros((1, 3, 2)),
      jnp.zeros((2, 3, 3)),
      jnp.ones((3, 3)),
      jnp.ones((3, 3)),
      jnp.zeros(3),
      max_iter=5,
      tol=1e-6,
    )
  with pytest.raises(ValueError, match="latent_dim=2"):
    Config(latent_dim=3, inference_method="gauss_newton_fused")
  assert Config(latent_dim=2, inference_method="gauss_newton_fused")
