"""Tests of `vaells_jax.core.expm`: `expm_small`, `expm_pairs`, `expm_pairs_shift`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

from vaells_jax import expm_small
from vaells_jax.core.expm import MAX_SQUARINGS, expm_pairs, expm_pairs_shift

NORMS = (1e-3, 1e-2, 1e-1, 1.0, 3.0, 10.0, 30.0, 100.0)
PER_NORM = 3
# Error relative to the largest entry of the exact exponential.
TOLERANCE = {"float32": 2e-5, "float64": 1e-12}
# The largest 1-norm expm_small handles (see expm.py).
NORM_LIMIT = 0.5 * 2.0**MAX_SQUARINGS


def _test_matrices(dim, seed):
  """Random ``[len(NORMS) * PER_NORM, d, d]`` float64 matrices.

  Each is a Gaussian matrix shifted so that its spectral abscissa is 0 and
  scaled to a 1-norm from ``NORMS``. The shift keeps ``expm`` of order 1 even
  for ``||A||_1 = 100`` (otherwise it overflows float32), so the error relative
  to its largest entry measures the algorithm, not the conditioning.
  """
  rng = np.random.default_rng(seed)
  mats = []
  for norm in NORMS:
    for _ in range(PER_NORM):
      a = rng.standard_normal((dim, dim))
      a -= np.linalg.eigvals(a).real.max() * np.eye(dim)
      mats.append(a * (norm / np.abs(a).sum(axis=-2).max()))
  return np.stack(mats)


def _relative_errors(result, reference):
  """Per-matrix max abs error over the max abs entry of ``reference``."""
  result = np.asarray(result, np.float64)
  scale = np.abs(reference).max(axis=(-2, -1))
  return np.abs(result - reference).max(axis=(-2, -1)) / scale


def _assert_small(errors, tol):
  """Asserts all errors are below ``tol``, naming the worst matrix's norm."""
  worst = int(np.argmax(errors))
  assert errors[worst] <= tol, (
    f"relative error {errors[worst]:.3g} > {tol:.1g} for the matrix with "
    f"||A||_1 = {NORMS[worst // PER_NORM]}"
  )


@pytest.mark.parametrize("dim", [2, 3, 10])
def test_expm_small_matches_scipy_and_jax(dim):
  mats = _test_matrices(dim, seed=dim)
  exact = np.stack([scipy.linalg.expm(a) for a in mats])
  with jax.enable_x64(True):
    # JAX's expm in float64 is the JAX reference for both dtypes: its float32
    # result alone can be off by ~1e-4 for 2x2 matrices of norm ~30.
    jax_exact = np.asarray(jax.scipy.linalg.expm(jnp.asarray(mats)))
    expm_jit = jax.jit(expm_small)
    results = {
      dtype: expm_jit(jnp.asarray(mats, dtype)) for dtype in ("float32", "float64")
    }
  for dtype, result in results.items():
    assert result.dtype == jnp.dtype(dtype)
    assert result.shape == mats.shape
    _assert_small(_relative_errors(result, exact), TOLERANCE[dtype])
    _assert_small(_relative_errors(result, jax_exact), TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_expm_small_2x2_closed_form_at_its_seams(dtype):
  mats = _closed_form_edges()
  exact = np.stack([scipy.linalg.expm(a) for a in mats])
  with jax.enable_x64(True):
    result = expm_small(jnp.asarray(mats, dtype))
  assert result.dtype == jnp.dtype(dtype)
  errors = np.abs(np.asarray(result, np.float64) - exact).max(axis=(-2, -1))
  np.testing.assert_array_less(
    errors / np.abs(exact).max(axis=(-2, -1)), TOLERANCE[dtype]
  )


def test_expm_small_default_dtype_and_unbatched():
  a = np.array([[0.1, -0.4], [0.3, 0.2]])
  result = expm_small(a.astype(np.float32))
  assert result.dtype == jnp.float32
  assert result.shape == (2, 2)
  np.testing.assert_allclose(np.asarray(result), scipy.linalg.expm(a), rtol=1e-6)


def _weighted_loss(expm_fn, weights):
  """``A -> sum(W * expm(A) + expm(A)^2 / 2)``, a generic scalar of expm."""

  def loss(a):
    e = expm_fn(a)
    return jnp.sum(jnp.asarray(weights) * e + 0.5 * e**2)

  return loss


def test_expm_small_gradient_matches_jax_expm():
  mats = _test_matrices(3, seed=13)[::2]
  weights = np.random.default_rng(3).standard_normal(mats.shape)
  with jax.enable_x64(True):
    a = jnp.asarray(mats)
    grad = jax.jit(jax.grad(_weighted_loss(expm_small, weights)))(a)
    expected = jax.jit(jax.grad(_weighted_loss(jax.scipy.linalg.expm, weights)))(a)
    grad, expected = np.asarray(grad), np.asarray(expected)
  assert np.all(np.isfinite(grad))
  scale = np.abs(expected).max(axis=(-2, -1), keepdims=True)
  np.testing.assert_array_less(np.abs(grad - expected) / scale, 1e-10)


def _closed_form_edges():
  """2x2 matrices at the seams of the closed form: ``delta = -det(A - mu I)``
  at 0, just either side of 0 and of the series' edge ``|delta| = 1``, and a
  nilpotent, a rotation and a scaling generator."""
  mats = [
    np.array([[0.3, 0.0], [0.0, 0.3]]),  # delta = 0 (scalar)
    np.array([[0.0, 1.0], [0.0, 0.0]]),  # nilpotent, delta = 0
    np.array([[0.0, -2.0], [2.0, 0.0]]),  # rotation, delta = -4
    np.array([[1.5, 0.0], [0.0, -0.5]]),
  ]  # delta = 1 exactly
  for delta in (
    1e-9,
    -1e-9,
    1e-3,
    -1e-3,
    1 - 1e-7,
    1 + 1e-7,
    -1 + 1e-7,
    -1 - 1e-7,
    30.0,
    -30.0,
  ):
    mats.append(np.array([[0.2, 1.0], [delta, 0.2]]))  # delta = a01 * a10
  return np.stack(mats)


@pytest.mark.parametrize("dim", [2, 10])
def test_expm_small_gradient_matches_scipy_frechet(dim):
  # grad_A sum(G * expm(A)) = L_expm(A^T, G), the adjoint Frechet derivative.
  # The zero matrix checks that the kink of the norm at 0 gives no NaN; the
  # 2x2 edge cases check the closed form's branches.
  mats = [np.zeros((1, dim, dim)), _test_matrices(dim, seed=20)]
  if dim == 2:
    mats.append(_closed_form_edges())
  mats = np.concatenate(mats)
  weights = np.random.default_rng(4).standard_normal(mats.shape)
  with jax.enable_x64(True):
    grad = jax.jit(jax.grad(_weighted_loss(expm_small, weights)))(jnp.asarray(mats))
    grad = np.asarray(grad)
  for a, w, g in zip(mats, weights, grad, strict=True):
    upstream = w + scipy.linalg.expm(a)
    expected = scipy.linalg.expm_frechet(a.T, upstream, compute_expm=False)
    np.testing.assert_allclose(g, expected, rtol=0, atol=1e-10 * np.abs(expected).max())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_expm_small_is_nan_beyond_squaring_limit(dtype):
  # 2x2 rotation generators with 1-norm t: expm is a rotation by t, so it is
  # well conditioned and only the squaring limit decides NaN or not.
  generator = np.array([[0.0, -1.0], [1.0, 0.0]])
  angles = np.array(
    [1.0, 0.99 * NORM_LIMIT, NORM_LIMIT, 1.01 * NORM_LIMIT, 10 * NORM_LIMIT]
  )
  with jax.enable_x64(True):
    result = np.asarray(
      expm_small(jnp.asarray(angles[:, None, None] * generator, dtype))
    )
  # Angle of the matrix actually passed (after rounding to dtype).
  rounded = angles.astype(dtype).astype(np.float64)
  rotations = np.stack(
    [np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]) for t in rounded[:3]]
  )
  # Rounding errors grow with the number of squarings (about 2^10 here).
  tol = {"float32": 1e-3, "float64": 1e-11}[dtype]
  np.testing.assert_allclose(result[:3], rotations, atol=tol)
  assert np.all(np.isnan(result[3:]))


def test_expm_small_nan_only_for_overflowing_batch_entries():
  a = np.zeros((3, 2, 2), np.float32)
  a[1, 0, 1] = 2 * NORM_LIMIT  # Nilpotent: expm is exact, but the norm is over.
  result = np.asarray(expm_small(a))
  assert np.all(np.isnan(result[1]))
  # expm(0) = I exactly.
  np.testing.assert_array_equal(result[[0, 2]], np.stack([np.eye(2)] * 2))


def _pairs(mats):
  """``[P, d, d]`` -> ``[d, d, P]`` (``expm_pairs``'s layout)."""
  return jnp.moveaxis(jnp.asarray(mats), 0, -1)


@pytest.mark.parametrize("dim", [3, 6, 10])
def test_expm_pairs_and_shift_match_scipy(dim):
  mats = _test_matrices(dim, seed=30 + dim)
  exact = np.stack([scipy.linalg.expm(a) for a in mats])
  z = np.random.default_rng(dim).standard_normal(mats.shape[:2])
  shift = np.einsum("pij,pj->pi", exact - np.eye(dim), z)
  with jax.enable_x64(True):
    for dtype in ("float32", "float64"):
      result = jax.jit(expm_pairs)(_pairs(mats.astype(dtype)))
      computed = jax.jit(expm_pairs_shift)(
        _pairs(mats.astype(dtype)), z.T.astype(dtype)
      )
      assert result.dtype == computed.dtype == jnp.dtype(dtype)
      # float32 at ||A||_1 = 100: 1e-5 to 2.5e-5 (rounding through 8
      # squarings); 1e-6 and less up to ||A||_1 = 10.
      tol = {"float32": 5e-5, "float64": TOLERANCE["float64"]}[dtype]
      _assert_small(_relative_errors(np.moveaxis(result, -1, 0), exact), tol)
      # Relative to the shift, not to z: at ||A||_1 = 1e-3 the shift is
      # 1e-3 |z| and keeps float32's digits.
      error = np.abs(np.asarray(computed).T - shift).max(axis=-1)
      _assert_small(error / np.abs(shift).max(axis=-1), tol)


def test_expm_pairs_and_shift_are_nan_beyond_the_limit_only_where_it_is_passed():
  a = np.zeros((4, 6, 6))
  a[1, 0, 1] = 2 * NORM_LIMIT  # nilpotent: exact expm finite, norm over
  a[2, 0, 0] = np.nan
  a[3] = np.diag(np.linspace(-1.0, 1.0, 6))
  z = np.ones((6, 4), np.float32)
  result = np.moveaxis(np.asarray(expm_pairs(_pairs(a.astype(np.float32)))), -1, 0)
  shift = np.asarray(expm_pairs_shift(_pairs(a.astype(np.float32)), z)).T
  assert np.all(np.isnan(result[1:3])) and np.all(np.isnan(shift[1:3]))
  np.testing.assert_array_equal(result[0], np.eye(6))
  np.testing.assert_array_equal(shift[0], 0.0)
  np.testing.assert_allclose(result[3], np.diag(np.exp(np.linspace(-1, 1, 6))), 1e-6)
  np.testing.assert_allclose(shift[3], np.expm1(np.linspace(-1, 1, 6)), 1e-6)


def test_expm_pairs_derivatives_match_scipy_frechet():
  # Reverse mode (a loss of the exponentials) and forward mode (the JVP the
  # per-pair-step solver takes its gradient from), against expm_frechet.
  mats = np.concatenate([np.zeros((1, 6, 6)), _test_matrices(6, seed=40)])
  weights = np.random.default_rng(5).standard_normal(mats.shape)
  with jax.enable_x64(True):
    loss = _weighted_loss(expm_pairs, np.moveaxis(weights, 0, -1))
    grad = np.moveaxis(np.asarray(jax.jit(jax.grad(loss))(_pairs(mats))), -1, 0)
    _, jvp = jax.jit(lambda a, t: jax.jvp(expm_pairs, (a,), (t,)))(
      _pairs(mats), _pairs(weights)
    )
    jvp = np.moveaxis(np.asarray(jvp), -1, 0)
  for a, w, g, j in zip(mats, weights, grad, jvp, strict=True):
    upstream = w + scipy.linalg.expm(a)
    expected = scipy.linalg.expm_frechet(a.T, upstream, compute_expm=False)
    np.testing.assert_allclose(g, expected, rtol=0, atol=1e-10 * np.abs(expected).max())
    expected = scipy.linalg.expm_frechet(a, w, compute_expm=False)
    np.testing.assert_allclose(j, expected, rtol=0, atol=1e-10 * np.abs(expected).max())


def test_expm_pairs_under_vmap():
  # vmap batches the data-dependent number of squaring rounds; each batch
  # keeps its own.
  mats = _test_matrices(4, seed=50).reshape(len(NORMS), PER_NORM, 4, 4)
  with jax.enable_x64(True):
    a = jnp.moveaxis(jnp.asarray(mats), 1, -1)  # [norms, d, d, P]
    np.testing.assert_allclose(
      jax.vmap(expm_pairs)(a), np.stack([expm_pairs(m) for m in a]), rtol=1e-12
    )
