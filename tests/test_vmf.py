"""Tests of ``vaells_jax.models.vmf``: Bessel functions, vMF densities and sampling.

References are independent of the implementation: ``scipy.special.ive``
(Amos's algorithm), a float64 log-space power series of ``I_v`` (where ``ive``
underflows), ``scipy.stats.vonmises_fisher``, quadrature and finite
differences. Derivatives of elementwise functions are taken as the gradient
of a sum, so that they reuse the compiled forward program of the same shape.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.special
import scipy.stats

from vaells_jax.models import vmf

ORDERS = np.array([0.0, 0.5, 1.0, 2.5, 10.0, 49.0, 200.0, 500.0, 999.5])
ARGS = np.concatenate([[1e-30, 1e-6], np.logspace(-5, 5, 41), [1e7]])
KAPPAS7 = np.array([1e-3, 0.1, 1.0, 10.0, 100.0, 1e3, 1e4])


def log_ive_series(v, x):
  """``log ive(v, x)`` from the power series summed in log space (float64)."""
  k = np.arange(int(x / 2 + 60 * np.sqrt(x + 1) + 200), dtype=np.float64)
  terms = (
    (2 * k + v) * np.log(x / 2)
    - scipy.special.gammaln(k + 1)
    - scipy.special.gammaln(k + v + 1)
  )
  return scipy.special.logsumexp(terms) - x


def log_ive_reference(v, x):
  """scipy's ``log(ive)`` where it is a normal float, else the power series."""
  value = scipy.special.ive(v, x)
  if 1e-300 < value < np.inf:
    return np.log(value)
  return log_ive_series(v, x)


@pytest.fixture(scope="module")
def grid():
  """Orders, arguments ``[9, 44]`` and reference ``log ive`` (float64)."""
  orders, args = np.meshgrid(ORDERS, ARGS, indexing="ij")
  return orders, args, np.vectorize(log_ive_reference)(orders, args)


def scipy_ratio(v, x):
  return scipy.special.ive(v + 1, x) / scipy.special.ive(v, x)


def elementwise_grad(fn, argnum, *args):
  """``d fn / d args[argnum]`` of an elementwise ``fn``, as grad of the sum."""
  return jax.grad(lambda *a: jnp.sum(fn(*a)), argnums=argnum)(*args)


def unit(a):
  return a / np.linalg.norm(a, axis=-1, keepdims=True)


# --- Bessel functions -------------------------------------------------------


def test_series_reference_agrees_with_scipy():
  for v, x in [(0.0, 1e-3), (2.5, 30.0), (49.0, 1e4), (200.0, 1e5)]:
    np.testing.assert_allclose(
      log_ive_series(v, x), np.log(scipy.special.ive(v, x)), rtol=1e-10
    )


@pytest.mark.parametrize("dtype, tol", [("float64", 1e-12), ("float32", 5e-6)])
def test_log_bessel_ive_matches_reference(grid, dtype, tol):
  orders, args, reference = grid
  with jax.enable_x64(True):
    got = vmf.log_bessel_ive(jnp.asarray(orders, dtype), jnp.asarray(args, dtype))
    assert got.dtype == dtype
    got = np.asarray(got, np.float64)
  assert np.all(np.isfinite(got))
  # Absolute error in log ive is relative error in ive; large logs relative.
  error = np.abs(got - reference) / np.maximum(1.0, np.abs(reference))
  worst = np.unravel_index(error.argmax(), error.shape)
  assert error.max() < tol, (error.max(), orders[worst], args[worst])
  # Leading terms at the ends: (x/2)^v / Gamma(v+1) and 1 / sqrt(2 pi x).
  np.testing.assert_allclose(
    got[:, 0],
    ORDERS * np.log(0.5e-30) - scipy.special.gammaln(ORDERS + 1),
    rtol=tol,
    atol=tol,
  )
  np.testing.assert_allclose(got[:3, -1], -0.5 * np.log(2 * np.pi * 1e7), rtol=1e-6)


def test_log_bessel_ive_gradient_in_x(grid):
  orders, args, _ = grid
  with jax.enable_x64(True):
    got = np.asarray(elementwise_grad(vmf.log_bessel_ive, 1, orders, args))
    step = 1e-3 * args  # Relative steps; values carry ~1e-14 noise.
    finite_diff = (
      np.asarray(vmf.log_bessel_ive(orders, args + step))
      - np.asarray(vmf.log_bessel_ive(orders, args - step))
    ) / (2 * step)
    got32 = np.asarray(
      elementwise_grad(
        vmf.log_bessel_ive, 1, orders.astype(np.float32), args.astype(np.float32)
      )
    )
  assert np.all(np.isfinite(got)) and np.all(np.isfinite(got32))
  # Arguments below 1e-30 are evaluated at 1e-30, so skip that column.
  np.testing.assert_allclose(got[:, 1:], finite_diff[:, 1:], rtol=1e-5, atol=1e-7)
  # d/dx log ive_v(x) = I_{v+1} / I_v + v / x - 1, where scipy represents it.
  with np.errstate(all="ignore"):
    identity = scipy_ratio(orders, args) + orders / args - 1.0
  ok = scipy.special.ive(orders + 1, args) > 1e-290
  np.testing.assert_allclose(got[ok], identity[ok], rtol=1e-8)
  # float32 keeps the ~-1/(2x) derivative at large x (no 1 - r cancellation).
  np.testing.assert_allclose(got32, got, rtol=2e-3)


@pytest.mark.slow  # Compiles the order-derivative program (~5 s on 2 cores).
def test_log_bessel_ive_gradient_in_order(grid):
  orders, args, _ = grid
  orders = orders + 0.3
  with jax.enable_x64(True):
    _, got = jax.jvp(
      lambda v: vmf.log_bessel_ive(v, args), (orders,), (np.ones_like(orders),)
    )
  h = 1e-5
  reference = np.vectorize(log_ive_reference)
  finite_diff = (reference(orders + h, args) - reference(orders - h, args)) / (2 * h)
  np.testing.assert_allclose(got, finite_diff, rtol=1e-6, atol=1e-8)


def test_bessel_ratio_and_its_derivative(grid):
  orders, args, _ = grid
  ok = scipy.special.ive(orders + 1, args) > 1e-290
  with jax.enable_x64(True):
    ratio = np.asarray(vmf.bessel_ratio(orders, args))
    slope = np.asarray(elementwise_grad(vmf.bessel_ratio, 1, orders, args))
    slope32 = np.asarray(
      elementwise_grad(
        vmf.bessel_ratio, 1, orders.astype(np.float32), args.astype(np.float32)
      )
    )
  np.testing.assert_allclose(ratio[ok], scipy_ratio(orders[ok], args[ok]), rtol=1e-12)
  # r' = 1 - r^2 - (2v + 1) r / x; that form cancels badly beyond x ~ 100.
  small = ok & (args < 100)
  r = scipy_ratio(orders[small], args[small])
  np.testing.assert_allclose(
    slope[small], 1 - r**2 - (2 * orders[small] + 1) * r / args[small], rtol=1e-9
  )
  # Near 0: r ~ x / (2v + 2); at large x, r' ~ (v + 1/2) / x^2 (float32 too).
  np.testing.assert_allclose(ratio[:, 0], 1e-30 / (2 * ORDERS + 2), rtol=1e-12)
  np.testing.assert_allclose(slope[:, 0], 1 / (2 * ORDERS + 2), rtol=1e-12)
  np.testing.assert_allclose(slope[:, -1], (ORDERS + 0.5) / 1e14, rtol=2e-2)
  np.testing.assert_allclose(slope32, slope, rtol=1e-3)


def test_bessel_functions_jit_vmap_broadcast(grid):
  orders, args, _ = grid
  orders, args = orders.astype(np.float32), args.astype(np.float32)
  eager = vmf.log_bessel_ive(orders, args)
  assert eager.dtype == jnp.float32
  np.testing.assert_allclose(
    jax.jit(vmf.log_bessel_ive)(orders, args), eager, rtol=1e-6
  )
  np.testing.assert_allclose(
    jax.vmap(vmf.log_bessel_ive)(orders, args), eager, rtol=1e-6
  )
  broadcast = vmf.log_bessel_ive(
    ORDERS[:, None].astype(np.float32), ARGS.astype(np.float32)
  )
  np.testing.assert_array_equal(broadcast, eager)
  integer = vmf.log_bessel_ive(np.floor(orders).astype(np.int32), args)
  assert integer.dtype == jnp.float32
  np.testing.assert_array_equal(integer, vmf.log_bessel_ive(np.floor(orders), args))


# --- vMF densities ----------------------------------------------------------


def test_log_sphere_area_and_dim_validation():
  np.testing.assert_allclose(vmf.log_sphere_area(2), np.log(2 * np.pi))
  np.testing.assert_allclose(vmf.log_sphere_area(3), np.log(4 * np.pi))
  for bad in [1, 0, 2.5, "3"]:
    with pytest.raises(ValueError, match="dim"):
      vmf.log_sphere_area(bad)


@pytest.mark.parametrize("dim", [2, 3, 50, 1000])
def test_log_normalizer_limit_at_zero(dim):
  kappa = np.array([0.0, 1e-30, 1e-12, 1e-8, 1e-6, 1e-5, 1e-4])
  with jax.enable_x64(True):
    got = vmf.vmf_log_normalizer(kappa, dim)
    slope = elementwise_grad(vmf.vmf_log_normalizer, 0, kappa, dim)
  # log C_p = -log area - log 0F1(; p/2; kappa^2 / 4) ~ -log area - k^2 / (2p).
  np.testing.assert_allclose(
    got, -vmf.log_sphere_area(dim) - kappa**2 / (2 * dim), rtol=1e-12
  )
  # d log C / d kappa = -A_p(kappa) ~ -kappa / p.
  np.testing.assert_allclose(slope, -kappa / dim, rtol=1e-6, atol=1e-30)


@pytest.mark.parametrize("dim", [3, 10, 50])
def test_log_prob_matches_scipy(dim):
  rng = np.random.default_rng(dim)
  mu = unit(rng.standard_normal(dim))
  x = unit(rng.standard_normal((20, dim)))
  x[0] = mu  # The mode.
  kappa = np.concatenate([KAPPAS7[:-1], [5e4]])
  reference = np.stack(
    [scipy.stats.vonmises_fisher(mu, k).logpdf(x) for k in kappa], -1
  )
  with jax.enable_x64(True):
    got = np.asarray(vmf.vmf_log_prob(x[:, None], mu, kappa))  # [20, 7]
  np.testing.assert_allclose(got, reference, rtol=1e-10, atol=1e-9)
  got32 = np.asarray(
    vmf.vmf_log_prob(
      x[:, None].astype(np.float32), mu.astype(np.float32), kappa.astype(np.float32)
    )
  )
  # float32 rounding of kappa mu^T x alone is ~6e-8 kappa.
  error32 = np.abs(got32 - reference)
  assert np.all(error32 <= 1e-5 * np.abs(reference) + 1e-6 * kappa), error32


def test_density_integrates_to_one_on_circle_and_sphere():
  theta = np.linspace(0.0, np.pi, 40001)[:, None]
  with jax.enable_x64(True):
    # p = 2: twice the integral over [0, pi] by symmetry.
    circle = np.stack([np.cos(theta), np.sin(theta)], -1)  # [n, 1, 2]
    density2 = np.exp(vmf.vmf_log_prob(circle, np.array([1.0, 0.0]), KAPPAS7))
    # p = 3: surface element 2 pi sin(theta) d theta around mu = e3.
    sphere = np.stack([np.sin(theta), 0 * theta, np.cos(theta)], -1)
    density3 = np.exp(vmf.vmf_log_prob(sphere, np.array([0.0, 0.0, 1.0]), KAPPAS7))
  np.testing.assert_allclose(
    2 * scipy.integrate.simpson(density2, x=theta[:, 0], axis=0), 1.0, rtol=1e-8
  )
  np.testing.assert_allclose(
    scipy.integrate.simpson(
      2 * np.pi * np.sin(theta) * density3, x=theta[:, 0], axis=0
    ),
    1.0,
    rtol=1e-8,
  )


@pytest.mark.parametrize("dim", [3, 10, 50])
def test_entropy_and_kl_match_scipy(dim):
  mu = np.eye(dim)[0]
  reference = np.array([scipy.stats.vonmises_fisher(mu, k).entropy() for k in KAPPAS7])
  with jax.enable_x64(True):
    entropy = np.asarray(vmf.vmf_entropy(dim, KAPPAS7))
    entropy_mu = np.asarray(vmf.vmf_entropy(jnp.asarray(mu), KAPPAS7))
    kl = np.asarray(vmf.vmf_kl_to_uniform(KAPPAS7, dim))
  kl32 = np.asarray(vmf.vmf_kl_to_uniform(KAPPAS7.astype(np.float32), dim))
  np.testing.assert_allclose(entropy, reference, rtol=1e-10, atol=1e-12)
  np.testing.assert_array_equal(entropy_mu, entropy)
  np.testing.assert_allclose(
    kl, vmf.log_sphere_area(dim) - reference, rtol=1e-9, atol=1e-12
  )
  assert np.all(kl > 0) and np.all(np.diff(kl) > 0)
  # Small kappa: KL ~ kappa^2 / (2 p), also in float32.
  np.testing.assert_allclose(kl[0], 1e-6 / (2 * dim), rtol=1e-3)
  np.testing.assert_allclose(kl32, kl, rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("dim", [3, 10, 100])
def test_kl_gradient(dim):
  with jax.enable_x64(True):
    got = np.asarray(elementwise_grad(vmf.vmf_kl_to_uniform, 0, KAPPAS7, dim))
    h = 1e-3 * KAPPAS7
    finite_diff = (
      np.asarray(vmf.vmf_kl_to_uniform(KAPPAS7 + h, dim))
      - np.asarray(vmf.vmf_kl_to_uniform(KAPPAS7 - h, dim))
    ) / (2 * h)
    # d KL / d kappa = kappa A_p'(kappa).
    exact = KAPPAS7 * np.asarray(
      elementwise_grad(vmf.bessel_ratio, 1, np.full(7, dim / 2 - 1), KAPPAS7)
    )
  got32 = np.asarray(
    elementwise_grad(vmf.vmf_kl_to_uniform, 0, KAPPAS7.astype(np.float32), dim)
  )
  np.testing.assert_allclose(got, finite_diff, rtol=1e-5)
  np.testing.assert_allclose(got, exact, rtol=1e-12)
  np.testing.assert_allclose(got32, got, rtol=1e-3)


def test_log_prob_shapes_and_validation():
  x = unit(np.random.default_rng(0).standard_normal((4, 1, 5)))
  mu = unit(np.ones((7, 5)))
  assert vmf.vmf_log_prob(x, mu, KAPPAS7).shape == (4, 7)
  with pytest.raises(ValueError, match="last axis"):
    vmf.vmf_log_prob(x, mu[:, :4], 1.0)
  with pytest.raises(ValueError, match="dim"):
    vmf.vmf_log_prob(np.ones((2, 1)), np.ones((2, 1)), 1.0)


# --- Sampling ---------------------------------------------------------------


def exact_cdf_w_p3(w, kappa):
  """CDF of ``w = mu^T x`` for p = 3, whose density is ``exp(kappa w)`` up to
  a constant on ``[-1, 1]``."""
  return np.exp(kappa * (w - 1)) * -np.expm1(-kappa * (w + 1)) / -np.expm1(-2 * kappa)


KAPPAS = np.array([0.1, 1.0, 10.0, 100.0, 1000.0])


def mean_directions(dim, rng):
  """One mean direction per row of ``KAPPAS``, including +-e1 and near e1."""
  e1 = np.eye(dim)[0]
  return np.stack(
    [
      unit(rng.standard_normal(dim)),
      e1,
      -e1,
      unit(e1 + 1e-9),
      unit(rng.standard_normal(dim)),
    ]
  )


@pytest.mark.parametrize("dim", [3, 10, 50])
def test_sample_moments_match_vmf(dim):
  n = 10000 if dim < 50 else 4000  # Each round draws [5, n, p + 1] uniforms.
  mu = mean_directions(dim, np.random.default_rng(dim))  # [5, p]
  kappa = np.repeat(KAPPAS[:, None], n, axis=1)  # [5, n]
  x = vmf.sample_vmf(
    jax.random.key(dim), mu[:, None].astype(np.float32), kappa.astype(np.float32)
  )
  assert x.shape == (len(KAPPAS), n, dim) and x.dtype == jnp.float32
  x = np.asarray(x, np.float64)
  np.testing.assert_allclose(np.linalg.norm(x, axis=-1), 1.0, atol=1e-6)
  exact = scipy_ratio(dim / 2 - 1, KAPPAS)  # A_p(kappa) = E[mu^T x].
  for x_k, mu_k, a_k in zip(x, mu, exact, strict=True):
    w = x_k @ mu_k
    assert abs(w.mean() - a_k) < 4 * w.std() / np.sqrt(n) + 1e-6, (a_k, w.mean())
    # The mean is A_p mu: nothing along other directions.
    sem = x_k.std(0) / np.sqrt(n)
    np.testing.assert_array_less(np.abs(x_k.mean(0) - a_k * mu_k), 4 * sem + 1e-6)
    # The tangent part is uniform: second moments (1 - E w^2)/(p-1) (I - mu mu^T).
    tangent = x_k - w[:, None] * mu_k
    second = tangent.T @ tangent / n
    sem = np.sqrt(np.maximum((tangent**2).T @ tangent**2 / n - second**2, 0) / n)
    expected = (1 - np.mean(w**2)) / (dim - 1) * (np.eye(dim) - np.outer(mu_k, mu_k))
    np.testing.assert_array_less(np.abs(second - expected), 4 * sem + 1e-7)


def test_w_follows_exact_distribution_for_p3():
  n = 5000
  with jax.enable_x64(True):
    kappa = np.repeat(KAPPAS[:, None], n, axis=1)
    sample = vmf.sample_vmf_w(jax.random.key(7), kappa, 3)
    w = np.asarray(sample.w)
  assert np.all(sample.accepted) and 1 <= int(sample.rounds) < 50
  for k, column in zip(KAPPAS, w, strict=True):
    result = scipy.stats.kstest(column, lambda a, k=k: exact_cdf_w_p3(a, k))
    assert result.pvalue > 1e-3, (k, result)
    wrong = scipy.stats.kstest(column, lambda a, k=k: exact_cdf_w_p3(a, 1.2 * k))
    assert k < 1 or wrong.pvalue < 1e-4, (k, wrong)  # The test has power.


@pytest.mark.parametrize("kappa", [1.0, 10.0, 100.0])
def test_w_matches_scipy_samples_for_p10(kappa):
  n, dim = 5000, 10
  mu = np.eye(dim)[3]
  reference = (
    scipy.stats.vonmises_fisher(mu, kappa).rvs(n, random_state=np.random.default_rng(1))
    @ mu
  )
  with jax.enable_x64(True):
    w = np.asarray(vmf.sample_vmf_w(jax.random.key(2), np.full(n, kappa), dim).w)
  assert scipy.stats.ks_2samp(w, reference).pvalue > 1e-3
  # Power: half the concentration is told apart.
  lower = (
    scipy.stats.vonmises_fisher(mu, 0.5 * kappa).rvs(
      n, random_state=np.random.default_rng(1)
    )
    @ mu
  )
  assert scipy.stats.ks_2samp(w, lower).pvalue < 1e-4


def test_samples_and_gradients_finite_at_extremes():
  dtype = "float32"  # float64 extremes are in the finite-difference test.
  kappa = np.array([0.0, 1e-3, 1.0, 1e4, 1e5], dtype)

  @jax.jit
  def grads_and_samples(mu, kappa):
    def loss(mu, kappa):
      x = vmf.sample_vmf(jax.random.key(5), mu, kappa)
      return jnp.sum(x * jnp.arange(1.0, x.shape[-1] + 1, dtype=x.dtype)), x

    return jax.grad(loss, argnums=(0, 1), has_aux=True)(mu, kappa)

  for dim in [2, 100]:
    mu = np.tile(unit(np.ones(dim)), (len(kappa), 1)).astype(dtype)
    with jax.enable_x64(True):
      grads, x = grads_and_samples(mu, kappa)
      assert x.dtype == dtype
    for array in (x, *grads):
      assert np.all(np.isfinite(np.asarray(array))), (dim, array)
    np.testing.assert_allclose(
      np.linalg.norm(np.asarray(x, np.float64), axis=-1), 1.0, atol=1e-5
    )
    # The sample approaches mu as kappa grows.
    cosine = np.sum(np.asarray(x, np.float64) * mu, -1)
    assert cosine[-1] > 1 - 1e-3 * dim, cosine


def test_sampler_jit_and_vmap_match_eager():
  mu = unit(np.random.default_rng(6).standard_normal((3, 5))).astype(np.float32)
  kappa = np.array([0.5, 5.0, 50.0], np.float32)
  keys = jax.random.split(jax.random.key(8), 4)
  eager = np.stack([vmf.sample_vmf(k, mu, kappa) for k in keys])
  mapped = jax.jit(jax.vmap(vmf.sample_vmf, in_axes=(0, None, None)))(keys, mu, kappa)
  np.testing.assert_allclose(mapped, eager, rtol=1e-6, atol=1e-6)


def test_reparameterised_sample_matches_finite_differences():
  dim = 5
  theta = np.random.default_rng(9).standard_normal((6, dim))
  log_kappa = np.log(np.array([1e-3, 0.3, 2.0, 20.0, 300.0, 1e4]))
  weights = np.arange(1.0, dim + 1)

  def loss(theta, log_kappa):
    mu = theta / jnp.linalg.norm(theta, axis=-1, keepdims=True)
    x = vmf.sample_vmf(jax.random.key(10), mu, jnp.exp(log_kappa))
    return jnp.sum(jnp.sin(x @ weights))

  # One compiled program for the values and the gradient.
  value_and_grad = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
  loss = lambda theta, log_kappa: value_and_grad(theta, log_kappa)[0]
  with jax.enable_x64(True):
    _, (grad_theta, grad_kappa) = value_and_grad(theta, log_kappa)
    assert np.all(np.isfinite(grad_theta)) and np.all(np.isfinite(grad_kappa))
    h = 1e-6
    for i in range(len(log_kappa)):
      step = np.zeros_like(log_kappa)
      step[i] = h
      finite_diff = (loss(theta, log_kappa + step) - loss(theta, log_kappa - step)) / (
        2 * h
      )
      np.testing.assert_allclose(grad_kappa[i], finite_diff, rtol=1e-5, atol=1e-8)
    direction = np.random.default_rng(11).standard_normal(theta.shape)
    finite_diff = (
      loss(theta + h * direction, log_kappa) - loss(theta - h * direction, log_kappa)
    ) / (2 * h)
  np.testing.assert_allclose(np.sum(grad_theta * direction), finite_diff, rtol=1e-5)
  assert np.all(np.abs(np.asarray(grad_kappa)) > 0)


def test_round_limit_keeps_last_proposal_and_reports_it():
  sample = vmf.sample_vmf_w(jax.random.key(12), np.full(2000, 10.0), 3, max_rounds=1)
  assert int(sample.rounds) == 1
  accepted = np.asarray(sample.accepted)
  assert 0.5 < accepted.mean() < 0.95  # Wood's acceptance ~0.7 here.
  w = np.asarray(sample.w)
  assert np.all(np.isfinite(w)) and np.all(np.abs(w) <= 1)


def test_sampler_validation():
  with pytest.raises(ValueError, match="max_rounds"):
    vmf.sample_vmf(jax.random.key(0), np.eye(3)[0], 1.0, max_rounds=0)
  with pytest.raises(ValueError, match="dim"):
    vmf.sample_vmf(jax.random.key(0), np.ones(1), 1.0)
  with pytest.raises(ValueError, match="dim"):
    vmf.sample_vmf_w(jax.random.key(0), 1.0, 1)
