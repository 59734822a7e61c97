"""Tests of ``vaells_jax.models.baselines``: VAE, VampPrior VAE and hyperspherical VAE.

Densities are compared with scipy and float64 NumPy formulas; the
importance-sampled log-likelihood with the exact marginal of a linear-Gaussian
model built from the MLP networks themselves (``relu(a) - relu(-a) = a``).
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.special
import scipy.stats

from vaells_jax.models import baselines

D, LATENT, HIDDEN, NUM_PSEUDO = 4, 3, (16,), 5


def _diag_gauss_logpdf(z, mean, log_var):
  """scipy's ``log N(z; mean, diag exp(log_var))``, one row at a time."""
  return np.array(
    [
      scipy.stats.multivariate_normal(m, np.diag(np.exp(v))).logpdf(w)
      for w, m, v in zip(z, mean, log_var, strict=True)
    ]
  )


def test_gaussian_log_probs_match_scipy():
  rng = np.random.default_rng(0)
  z, mean = rng.normal(size=(2, 6, 3))
  log_var = rng.uniform(-2.0, 1.5, size=(6, 3))
  with jax.enable_x64(True):
    got = baselines.gaussian_log_prob(
      jnp.asarray(z), jnp.asarray(mean), jnp.asarray(log_var)
    )
    std = baselines.standard_normal_log_prob(jnp.asarray(z))
  np.testing.assert_allclose(got, _diag_gauss_logpdf(z, mean, log_var), rtol=1e-12)
  np.testing.assert_allclose(
    std, scipy.stats.multivariate_normal(np.zeros(3)).logpdf(z), rtol=1e-12
  )


def test_gaussian_kl_closed_form_and_monte_carlo():
  rng = np.random.default_rng(1)
  mean = rng.normal(size=(4, 3))
  log_var = rng.uniform(-1.5, 1.0, size=(4, 3))
  with jax.enable_x64(True):
    kl = np.asarray(
      baselines.gaussian_kl_to_standard_normal(jnp.asarray(mean), jnp.asarray(log_var))
    )
  # Independent formula: KL = 1/2 (tr S + m^T m - d - log det S).
  var = np.exp(log_var)
  formula = 0.5 * (var.sum(-1) + (mean**2).sum(-1) - 3 - np.log(var.prod(-1)))
  np.testing.assert_allclose(kl, formula, rtol=1e-12)
  # Monte Carlo E_q[log q - log p] with scipy densities.
  for i in range(4):
    q = scipy.stats.multivariate_normal(mean[i], np.diag(var[i]))
    z = q.rvs(size=200_000, random_state=rng)
    mc = q.logpdf(z) - scipy.stats.multivariate_normal(np.zeros(3)).logpdf(z)
    assert abs(mc.mean() - kl[i]) < 5 * mc.std() / math.sqrt(len(mc)) + 1e-3


def test_vampprior_log_prob_matches_numpy_mixture():
  rng = np.random.default_rng(2)
  z = rng.normal(size=(2, 5, 3)) * 2.0
  means = rng.normal(size=(7, 3))
  log_vars = rng.uniform(-1.0, 0.5, size=(7, 3))
  with jax.enable_x64(True):
    got = baselines.vampprior_log_prob(
      jnp.asarray(z), jnp.asarray(means), jnp.asarray(log_vars)
    )
  pdfs = np.stack(
    [
      scipy.stats.multivariate_normal(m, np.diag(np.exp(v))).pdf(z)
      for m, v in zip(means, log_vars, strict=True)
    ]
  )  # [K, 2, 5]
  np.testing.assert_allclose(got, np.log(pdfs.mean(axis=0)), rtol=1e-10)
  with pytest.raises(ValueError, match=r"pseudo_means, pseudo_log_vars \[K, d\]"):
    baselines.vampprior_log_prob(z, means, log_vars[:, :2])


def test_observation_log_prob_is_vaells_gaussian():
  rng = np.random.default_rng(3)
  x, x_hat = rng.normal(size=(2, 5, D))
  with jax.enable_x64(True):
    got = baselines.observation_log_prob(jnp.asarray(x), jnp.asarray(x_hat), 4.0)
  ref = [
    scipy.stats.multivariate_normal(m, np.eye(D) / 4.0).logpdf(v)
    for v, m in zip(x, x_hat, strict=True)
  ]
  np.testing.assert_allclose(got, ref, rtol=1e-12)


# ----------------------------------------------------------------------------
# The models.


REPEATS = 25  # copies of each point in a training batch: 25 ELBO samples


class Built(NamedTuple):
  """One model, compiled twice: a training step and an evaluation."""

  baseline: baselines.Baseline
  params: dict
  step: Callable  # jitted: params, opt_state, key -> (..., (loss, terms))
  opt_state: Any
  loss: jax.Array  # loss_and_terms at the initial params and PRNGKey(1)
  terms: baselines.ElboTerms
  out: dict  # evaluate(params, PRNGKey(2)): "ll" [8] (K = 200), "prior" [2000, d]


@pytest.fixture(scope="module")
def data():
  rng = np.random.default_rng(0)
  return rng.normal(size=(8, D)).astype(np.float32)


def _evaluate(baseline, data, params, key):
  k_ll, k_prior = jax.random.split(key)
  return {
    "ll": baseline.log_likelihood(params, data, k_ll, 200),
    "prior": baseline.sample_prior(params, k_prior, 2000),
  }


@pytest.fixture(scope="module", params=baselines.BASELINES)
def built(request, data):
  """Each model with tiny networks and ``zeta1 = 1``, trained by Adam on
  ``REPEATS`` copies of ``data`` (``[REPEATS * 8, D]``)."""
  baseline, params = baselines.init(
    jax.random.PRNGKey(0),
    request.param,
    D,
    LATENT,
    hidden=HIDDEN,
    num_pseudo=NUM_PSEUDO,
    zeta1=1.0,
    pseudo_init=data[:NUM_PSEUDO] if request.param == "vampprior" else None,
  )
  opt = optax.adam(1e-2)
  x = jnp.tile(data, (REPEATS, 1))

  @jax.jit
  def step(params, opt_state, key):
    (loss, terms), grads = jax.value_and_grad(baseline.loss_and_terms, has_aux=True)(
      params, x, key
    )
    updates, opt_state = opt.update(grads, opt_state)
    return optax.apply_updates(params, updates), opt_state, (loss, terms)

  opt_state = opt.init(params)
  loss, terms = step(params, opt_state, jax.random.PRNGKey(1))[2]
  out = jax.jit(functools.partial(_evaluate, baseline, data))(
    params, jax.random.PRNGKey(2)
  )
  return Built(baseline, params, step, opt_state, loss, terms, out)


def _normal_logpdf(z, mean, log_var):
  """float64 ``log N(z; mean, diag exp(log_var))`` by scipy: ``[..., d] -> [...]``."""
  return scipy.stats.norm.logpdf(z, mean, np.exp(0.5 * log_var)).sum(-1)


def _vmf_kl_to_uniform_scipy(kappa, p):
  """``log C_p(kappa) + kappa A_p(kappa) + log |S^{p-1}|`` with ``scipy.special``."""
  v = p / 2 - 1
  log_c = (
    v * np.log(kappa)
    - p / 2 * np.log(2 * np.pi)
    - np.log(scipy.special.ive(v, kappa))
    - kappa
  )
  mean_length = scipy.special.ive(v + 1, kappa) / scipy.special.ive(v, kappa)
  log_area = np.log(2) + p / 2 * np.log(np.pi) - scipy.special.gammaln(p / 2)
  return log_c + kappa * mean_length + log_area


def test_elbo_terms_shapes_and_kl(built, data):
  baseline, params = built.baseline, built.params
  terms = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), built.terms)
  for a in (terms.log_px, terms.kl, terms.elbo):
    assert a.shape == (REPEATS * 8,) and np.all(np.isfinite(a))
  assert terms.z.shape == (REPEATS * 8, LATENT)
  np.testing.assert_allclose(terms.elbo, terms.log_px - terms.kl, rtol=1e-6)
  np.testing.assert_allclose(built.loss, -terms.elbo.mean(), rtol=1e-6)
  x = np.tile(data, (REPEATS, 1))
  post = [np.asarray(a, np.float64) for a in baseline.encode(params, x)]
  if baseline.model == "vae":
    mean, log_var = post
    kl = 0.5 * (np.exp(log_var) + mean**2 - 1 - log_var).sum(-1)
  elif baseline.model == "svae":
    kl = _vmf_kl_to_uniform_scipy(post[1], LATENT)
    assert np.all(post[1] > 1.0)
    np.testing.assert_allclose(np.linalg.norm(terms.z, axis=-1), 1.0, rtol=1e-5)
  else:  # single-sample log q(z | x) - log p(z) at the ELBO's own z
    comps = [np.asarray(a, np.float64) for a in baseline.prior_components(params)]
    log_p = scipy.special.logsumexp(
      _normal_logpdf(terms.z[:, None], *comps), axis=-1
    ) - np.log(NUM_PSEUDO)
    kl = _normal_logpdf(terms.z, *post) - log_p
  np.testing.assert_allclose(terms.kl, kl, rtol=1e-4, atol=1e-4)
  x_hat = np.asarray(baseline.decode(params, built.terms.z), np.float64)
  log_px = scipy.stats.norm.logpdf(x, x_hat, 1.0).sum(-1)  # zeta1 = 1
  np.testing.assert_allclose(terms.log_px, log_px, rtol=1e-5, atol=1e-4)
  sample = functools.partial(baseline.sample_posterior, n=3)
  shape = jax.eval_shape(sample, params, jax.random.PRNGKey(0), data).shape
  assert shape == (8, 3, LATENT)


def test_elbo_below_importance_sampled_log_likelihood(built):
  ll = np.asarray(built.out["ll"])
  assert ll.shape == (8,) and np.all(np.isfinite(ll))
  elbo = np.asarray(built.terms.elbo).reshape(REPEATS, 8).mean(0)  # per point
  assert elbo.mean() < ll.mean()


def test_samples(built):
  baseline, params = built.baseline, built.params
  prior = np.asarray(built.out["prior"])
  assert prior.shape == (2000, LATENT)
  if baseline.model == "svae":
    np.testing.assert_allclose(np.linalg.norm(prior, axis=-1), 1.0, rtol=1e-5)
    assert np.all(np.abs(prior.mean(0)) < 0.1)  # uniform: mean 0
  elif baseline.model == "vae":
    np.testing.assert_allclose(prior.mean(0), 0.0, atol=0.1)
    np.testing.assert_allclose(prior.var(0), 1.0, atol=0.15)
  else:  # the mixture's mean is the mean of the component means
    comps = baseline.prior_components(params)
    assert comps.mean.shape == (NUM_PSEUDO, LATENT)
    np.testing.assert_allclose(prior.mean(0), comps.mean.mean(0), atol=0.15)


def test_training_lowers_the_loss(built):
  params, opt_state = built.params, built.opt_state
  for i in range(40):
    params, opt_state, (loss, _) = built.step(
      params, opt_state, jax.random.PRNGKey(100 + i)
    )
    assert np.isfinite(loss)
  after, _ = built.step(params, opt_state, jax.random.PRNGKey(1))[2]  # same noise
  assert float(after) < float(built.loss) - 0.5


def test_loss_is_minus_mean_elbo(data):
  baseline, params = baselines.init(
    jax.random.PRNGKey(0), "vae", D, LATENT, hidden=HIDDEN
  )
  loss, elbo = jax.jit(
    lambda p, key: (baseline.loss(p, data, key), baseline.elbo_terms(p, data, key).elbo)
  )(params, jax.random.PRNGKey(3))
  assert loss.shape == () and elbo.shape == (8,)
  np.testing.assert_allclose(loss, -np.mean(elbo), rtol=1e-6)


# ----------------------------------------------------------------------------
# Closed form: a linear-Gaussian VAE.


def _linear_gaussian_vae(data_dim, latent_dim, zeta1, seed):
  """A ``"vae"`` whose networks are exactly linear, with the exact posterior.

  ``g(z) = W z + b`` with orthogonal columns of ``W``, so the posterior
  ``N(A (x - b), S)``, ``S = (I + W^T W zeta1)^-1``, ``A = zeta1 S W^T``, is
  diagonal and the encoder gives it exactly. Each one-hidden-layer ReLU MLP is
  linear through ``relu(a) - relu(-a) = a``.

  Returns:
    ``(baseline, params, W, b)`` (``W``, ``b`` float64).
  """
  width = 2 * max(data_dim, latent_dim)
  baseline = baselines.Baseline.create(
    "vae", data_dim, latent_dim, hidden=(width,), zeta1=zeta1
  )
  rng = np.random.default_rng(seed)
  q, _ = np.linalg.qr(rng.normal(size=(data_dim, latent_dim)))
  w = q * np.array([1.5, 0.7, 2.0][:latent_dim])
  b = rng.normal(size=data_dim)
  cov = 1.0 / (1.0 + zeta1 * (w**2).sum(0))  # diag of S
  a = zeta1 * cov[:, None] * w.T  # [d, D]

  def split(dim):  # [dim, width]: u -> (relu(u), relu(-u), 0)
    k = np.zeros((dim, width))
    k[:, :dim], k[:, dim : 2 * dim] = np.eye(dim), -np.eye(dim)
    return k

  def unsplit(m, dim):  # [width, out]: (relu(u), relu(-u)) -> m u
    k = np.zeros((width, m.shape[0]))
    k[:dim], k[dim : 2 * dim] = m.T, -m.T
    return k

  enc_out = np.concatenate(
    [unsplit(a, data_dim), np.zeros((width, latent_dim))], axis=1
  )
  enc_bias = np.concatenate([-a @ b, np.log(cov)])
  f32 = lambda v: jnp.asarray(v, jnp.float32)  # noqa: E731
  params = {
    "encoder": {
      "body": {
        "Dense_0": {"kernel": f32(split(data_dim)), "bias": f32(np.zeros(width))},
        "Dense_1": {"kernel": f32(enc_out), "bias": f32(enc_bias)},
      }
    },
    "decoder": {
      "Dense_0": {"kernel": f32(split(latent_dim)), "bias": f32(np.zeros(width))},
      "Dense_1": {"kernel": f32(unsplit(w, latent_dim)), "bias": f32(b)},
    },
  }
  return baseline, params, w, b


def test_vae_log_likelihood_equals_linear_gaussian_marginal():
  zeta1, k = 4.0, 20_000
  baseline, params, w, b = _linear_gaussian_vae(3, 2, zeta1, seed=0)
  x = np.random.default_rng(1).normal(size=(5, 3)).astype(np.float32)
  exact = scipy.stats.multivariate_normal(b, w @ w.T + np.eye(3) / zeta1).logpdf(x)

  @jax.jit
  def estimate(params, key):  # (log p(x) [5], log weights [5, K]), same samples
    return (
      baseline.log_likelihood(params, x, key, k),
      baseline.log_weights(params, x, key, k).total,
    )

  # q is the exact posterior: every importance weight equals p(x).
  ll, log_w = estimate(params, jax.random.PRNGKey(0))
  np.testing.assert_allclose(
    log_w, np.repeat(exact[:, None], k, 1), rtol=1e-5, atol=1e-4
  )
  np.testing.assert_allclose(ll, exact, rtol=1e-5, atol=1e-4)
  # A wider, shifted q: the estimate converges to p(x), the ELBO stays below.
  bias = params["encoder"]["body"]["Dense_1"]["bias"]
  params["encoder"]["body"]["Dense_1"]["bias"] = bias + jnp.asarray(
    [0.3, -0.2, 0.8, 0.8]
  )
  ll, log_w = estimate(params, jax.random.PRNGKey(1))
  log_w = np.asarray(log_w, np.float64)
  np.testing.assert_allclose(
    ll, scipy.special.logsumexp(log_w, -1) - np.log(k), rtol=1e-5
  )
  np.testing.assert_allclose(ll, exact, atol=0.02)
  assert np.all(log_w.mean(-1) < exact - 0.05)


# ----------------------------------------------------------------------------
# Argument checks.


@pytest.mark.parametrize(
  "kwargs, match",
  [
    ({"model": "iwae"}, r"model must be one of \('vae', 'vampprior', 'svae'\)"),
    ({"model": "svae", "latent_dim": 1}, r"svae needs latent_dim >= 2"),
    ({"input_dim": 0}, r"input_dim must be an int >= 1, got 0"),
    ({"latent_dim": 2.5}, r"latent_dim must be an int >= 1, got 2.5"),
    ({"hidden": ()}, r"hidden must be a non-empty sequence"),
    ({"hidden": (16, -1)}, r"hidden must be a non-empty sequence"),
    ({"zeta1": 0.0}, r"zeta1 \(the observation precision\) must be"),
    ({"network": "resnet"}, r"network must be one of \('mlp', 'conv'\)"),
    ({"network": "conv"}, r"input_dim must be 784"),
    ({"model": "vampprior", "num_pseudo": 0}, r"num_pseudo must be an int >= 1"),
    (
      {"model": "vampprior", "pseudo_init": np.zeros((3, D))},
      r"pseudo_init must have shape \[num_pseudo, input_dim\] = \[5, 4\]",
    ),
    (
      {"model": "vampprior", "pseudo_init": np.full((5, D), np.nan)},
      r"pseudo_init must be finite",
    ),
    (
      {"model": "vae", "pseudo_init": np.zeros((5, D))},
      r"pseudo_init is only used by 'vampprior'",
    ),
  ],
)
def test_invalid_arguments(kwargs, match):
  args = {
    "model": "vae",
    "input_dim": D,
    "latent_dim": LATENT,
    "hidden": HIDDEN,
    "num_pseudo": NUM_PSEUDO,
    **kwargs,
  }
  with pytest.raises(ValueError, match=match):
    baselines.init(jax.random.PRNGKey(0), **args)


def test_invalid_shapes_and_counts(data):
  baseline, params = baselines.init(
    jax.random.PRNGKey(0), "vae", D, LATENT, hidden=HIDDEN
  )
  with pytest.raises(ValueError, match=r"x must be \[\.\.\., 4\], got shape"):
    baseline.elbo_terms(params, data[:, :3], jax.random.PRNGKey(0))
  with pytest.raises(ValueError, match=r"z must be \[\.\.\., 3\]"):
    baseline.decode(params, jnp.zeros((2, 2)))
  with pytest.raises(ValueError, match=r"num_samples must be an int >= 1"):
    baseline.log_likelihood(params, data, jax.random.PRNGKey(0), 0)
  with pytest.raises(ValueError, match=r"only 'vampprior' has prior components"):
    baseline.prior_components(params)


def test_conv_networks_shapes():
  """The table-5 networks plug in (shapes only: traced, not compiled)."""
  baseline = baselines.Baseline.create("svae", 784, 3, network="conv", zeta1=1.0)
  x = jax.ShapeDtypeStruct((2, 784), jnp.float32)
  params = {
    "encoder": jax.eval_shape(baseline.encoder.init, jax.random.PRNGKey(0), x)[
      "params"
    ],
    "decoder": jax.eval_shape(
      baseline.decoder.init,
      jax.random.PRNGKey(0),
      jax.ShapeDtypeStruct((2, 3), jnp.float32),
    )["params"],
  }
  post = jax.eval_shape(baseline.encode, params, x)
  assert post.mean_direction.shape == (2, 3) and post.kappa.shape == (2,)
  assert jax.eval_shape(baseline.decode, params, post.mean_direction).shape == (2, 784)
