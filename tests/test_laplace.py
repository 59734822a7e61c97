"""Tests of ``vaells_jax.core.laplace``: sampling, the inverse CDF and log density."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from vaells_jax import laplace_log_prob, sample_laplace
from vaells_jax.core.laplace import laplace_from_uniform


@pytest.mark.parametrize("scale", [0.01, 1.0, 3.0])
def test_samples_follow_laplace_distribution(scale):
  samples = sample_laplace(jax.random.key(0), (20000,), scale)
  assert samples.shape == (20000,)
  assert samples.dtype == jnp.float32
  samples = np.asarray(samples, np.float64)
  result = scipy.stats.kstest(samples, scipy.stats.laplace(scale=scale).cdf)
  assert result.pvalue > 0.01, result
  # The test has power: the same samples reject a scale off by 20%.
  wrong = scipy.stats.kstest(samples, scipy.stats.laplace(scale=1.2 * scale).cdf)
  assert wrong.pvalue < 1e-6, wrong


def test_samples_broadcast_per_column_scale():
  scales = np.array([0.5, 2.0])
  with jax.enable_x64(True):
    samples = sample_laplace(
      jax.random.key(1), (20000, 2), jnp.asarray(scales), dtype=jnp.float64
    )
    assert samples.dtype == jnp.float64
    samples = np.asarray(samples)
  for column, scale in zip(samples.T, scales, strict=True):
    result = scipy.stats.kstest(column, scipy.stats.laplace(scale=scale).cdf)
    assert result.pvalue > 0.01, result


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_inverse_cdf_is_finite_at_and_near_endpoints(dtype):
  np_dtype = np.dtype(dtype)
  eps = np.finfo(np_dtype).eps
  half = np_dtype.type(0.5)
  u = np.array(
    [
      half,
      -half,
      np.nextafter(half, 0),
      np.nextafter(-half, 0),
      np.nextafter(half, 1),
      np.nextafter(-half, -1),
      half - eps,
      -half + eps,
      half + eps,
      -half - eps,
    ],
    np_dtype,
  )
  with jax.enable_x64(True):
    samples = laplace_from_uniform(jnp.asarray(u), 2.0)
    assert samples.dtype == np_dtype
    samples = np.asarray(samples)
  assert np.all(np.isfinite(samples)), samples
  np.testing.assert_array_equal(np.sign(samples), np.sign(u))
  # The clipped endpoint is the largest magnitude the map can produce.
  largest = -2.0 * np.log(eps)
  assert np.all(np.abs(samples) <= largest * (1 + 1e-6))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_inverse_cdf_matches_scipy_ppf(dtype):
  u = np.linspace(-0.499, 0.499, 101)
  with jax.enable_x64(True):
    samples = np.asarray(laplace_from_uniform(jnp.asarray(u, dtype), 0.7))
  expected = scipy.stats.laplace(scale=0.7).ppf(u.astype(dtype) + 0.5)
  rtol = {"float32": 1e-5, "float64": 1e-12}[dtype]
  np.testing.assert_allclose(samples, expected, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_samples_are_finite_for_many_keys(dtype):
  keys = jax.random.split(jax.random.key(2), 2000)
  with jax.enable_x64(True):
    samples = jax.vmap(lambda k: sample_laplace(k, (500,), 1.0, dtype=dtype))(keys)
    assert samples.dtype == dtype
    samples = np.asarray(samples)
  assert samples.shape == (2000, 500)
  assert np.all(np.isfinite(samples))


def test_log_prob_matches_scipy():
  # |x| / b stays below ~700, where SciPy's logpdf underflows to -inf.
  x = np.linspace(-5.0, 5.0, 41)[:, None]
  scales = np.array([0.01, 0.5, 1.0, 3.0])
  with jax.enable_x64(True):
    log_prob = laplace_log_prob(jnp.asarray(x), jnp.asarray(scales))
    assert log_prob.shape == (41, 4)
    log_prob = np.asarray(log_prob)
  expected = scipy.stats.laplace(scale=scales).logpdf(x)
  np.testing.assert_allclose(log_prob, expected, rtol=1e-12)
  log_prob32 = laplace_log_prob(x.astype(np.float32), scales.astype(np.float32))
  assert log_prob32.dtype == jnp.float32
  np.testing.assert_allclose(np.asarray(log_prob32), expected, rtol=1e-5)


def test_samples_gradient_wrt_scale_is_sample_over_scale():
  key = jax.random.key(3)
  scale = 1.7
  with jax.enable_x64(True):
    sample_fn = lambda b: sample_laplace(key, (1000,), b, dtype=jnp.float64)
    samples = np.asarray(sample_fn(scale))
    jacobian = np.asarray(jax.jacfwd(sample_fn)(scale))
    # Reverse mode agrees, e.g. for a scalar loss.
    grad = float(jax.grad(lambda b: jnp.sum(sample_fn(b) ** 2))(scale))
  assert jacobian.shape == (1000,)
  np.testing.assert_allclose(jacobian, samples / scale, rtol=1e-12)
  np.testing.assert_allclose(grad, 2 * np.sum(samples**2) / scale, rtol=1e-12)
