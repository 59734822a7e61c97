"""Importance-sampled log-likelihood: the estimator and every constant."""

import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
import scipy.stats

from vaells_jax.config import Config
from vaells_jax.evaluation.likelihood import (
  importance_log_likelihood,
  iwae_bound,
  log_weights,
)
from vaells_jax.models.vaells import Model
from vaells_jax.training.step import init_state


def test_iwae_bound_exact_with_the_true_posterior():
  # p(z) = N(0, 1), p(x | z) = N(z, s^2): log p(x) = log N(x; 0, 1 + s^2). With
  # q the exact posterior every weight equals p(x), so the bound is exact.
  s2, x = 0.3, 1.7
  post_var = s2 / (1 + s2)
  z = x / (1 + s2) + np.sqrt(post_var) * np.random.default_rng(0).normal(size=50)
  log_w = (
    scipy.stats.norm.logpdf(x, z, np.sqrt(s2))
    + scipy.stats.norm.logpdf(z)
    - scipy.stats.norm.logpdf(z, x / (1 + s2), np.sqrt(post_var))
  )
  exact = scipy.stats.norm.logpdf(x, 0, np.sqrt(1 + s2))
  np.testing.assert_allclose(float(iwae_bound(log_w)), exact, rtol=1e-6)


def test_iwae_bound_converges_from_the_prior():
  s2, x = 0.5, 0.8
  z = np.random.default_rng(1).normal(size=200_000)  # q = prior
  log_w = scipy.stats.norm.logpdf(x, z, np.sqrt(s2))
  exact = scipy.stats.norm.logpdf(x, 0, np.sqrt(1 + s2))
  assert abs(float(iwae_bound(log_w)) - exact) < 0.01
  assert float(jnp.mean(log_w)) < exact  # the ELBO is below


def _model(**kw):
  config = Config(
    latent_dim=2,
    num_ops=2,
    hidden=(16,),
    batch_size=4,
    gamma=0.05,
    zeta1=4.0,
    zeta3=2.0,
    inference_max_iter=20,
    **kw,
  )
  data_dim = 5
  rng = np.random.default_rng(0)
  anchors = rng.normal(size=(2, 3, data_dim)).astype(np.float32)
  state = init_state(jax.random.PRNGKey(0), config, anchors, data_dim)
  x = rng.normal(size=(6, data_dim)).astype(np.float32)
  labels = np.asarray([0, 1, 0, 1, 1, 0], np.int32)
  batch = {"x": x, "source": {"x": x, "label": labels}}
  return Model.create(config, data_dim), state, batch


@pytest.mark.whole_run  # a solver's quality at length
def test_log_weights_constants_with_identity_operators():
  """With psi = 0 every transport is the identity and a large l1 weight makes
  the inferred coefficients exactly 0, so each term has a closed form."""
  model, state, batch = _model(zeta_q=100.0, zeta_p=100.0)
  cfg = model.config
  params = {**state.params, "psi": jnp.zeros_like(state.psi)}
  terms = log_weights(model, params, batch, jax.random.PRNGKey(3), 7)
  z = np.asarray(terms.samples, np.float64)  # [P, K, d]
  mu = np.asarray(model.encode(state.params, batch["x"]), np.float64)
  b, gamma, d, m = 1 / cfg.zeta3, cfg.gamma, cfg.latent_dim, cfg.num_ops
  laplace_at_zero = m * np.log(1 / (2 * b))
  gauss = lambda w, centre: scipy.stats.multivariate_normal(  # noqa: E731
    centre, gamma**2 * np.eye(d)
  ).logpdf(w)
  log_q = np.stack([gauss(z[p], mu[p]) for p in range(len(mu))]) + laplace_at_zero
  np.testing.assert_allclose(terms.log_q, log_q, rtol=1e-4, atol=1e-3)

  anchors = np.asarray(model.encode(state.params, state.params["anchors"]), np.float64)[
    batch["source"]["label"]
  ]  # [P, A, d]
  per_anchor = np.stack(
    [[gauss(z[p], a) for a in anchors[p]] for p in range(len(mu))]
  )  # [P, A, K]
  log_prior = scipy.special.logsumexp(per_anchor, axis=1) - np.log(3) + laplace_at_zero
  np.testing.assert_allclose(terms.log_prior, log_prior, rtol=1e-4, atol=1e-3)

  x_hat = np.asarray(model.decode(state.params, terms.samples), np.float64)
  sigma = 1 / np.sqrt(cfg.zeta1)
  log_px = np.stack(
    [
      [
        scipy.stats.multivariate_normal(x_hat[p, k], sigma**2 * np.eye(5)).logpdf(
          batch["x"][p]
        )
        for k in range(7)
      ]
      for p in range(len(mu))
    ]
  )
  np.testing.assert_allclose(terms.log_px, log_px, rtol=1e-5, atol=1e-4)


def test_importance_log_likelihood_chunks_and_jensen():
  model, state, batch = _model()
  ll, elbo = importance_log_likelihood(
    model, state.params, batch, jax.random.PRNGKey(0), 5, chunk_size=4
  )
  assert ll.shape == elbo.shape == (6,)  # 6 points in chunks of 4 (padded)
  assert np.all(np.isfinite(ll)) and np.all(ll >= elbo - 1e-6)


def test_log_likelihood_needs_posterior_noise():
  model, state, batch = _model()
  model = model._replace(config=Config(**{**model.config.__dict__, "gamma": 0.0}))
  try:
    log_weights(model, state.params, batch, jax.random.PRNGKey(0), 2)
  except ValueError as e:
    assert "gamma" in str(e)
  else:
    raise AssertionError("gamma = 0 must be refused")


_PAPER_CHUNK = """
import dataclasses, jax, numpy as np
from vaells_jax.experiments import rot_mnist
from vaells_jax.evaluation.likelihood import importance_log_likelihood
from vaells_jax.models.vaells import Model, init_params
cfg = dataclasses.replace(rot_mnist.get_config("paper"), inference_max_iter=20)
rng = np.random.default_rng(0)
anchors = rng.random((10, 10, 784)).astype(np.float32)
params = init_params(jax.random.PRNGKey(1), cfg, anchors, 784)
x = rng.random((25, 784)).astype(np.float32)
batch = {"x": x, "source": {"x": x, "label": np.zeros(25, np.int32)}}
ll, elbo = importance_log_likelihood(
  Model.create(cfg, 784), params, batch, jax.random.PRNGKey(3), 10
)
assert ll.shape == (25,) and np.all(np.isfinite(ll)), ll
print("finished")
"""


@pytest.mark.whole_run  # a subprocess
def test_conv_log_likelihood_finishes():
  """A rotated-MNIST chunk (25 digits x 10 samples, conv decoder, 10 anchors
  each) finishes. With XLA's concurrency-optimised CPU scheduler on, it hung
  at 0 % CPU in 1 of 3 runs (jaxlib 0.10.2); ``import vaells_jax`` turns that
  scheduler off. In a subprocess with a time limit, so that a hang fails the
  test instead of stalling the suite."""
  root = pathlib.Path(__file__).resolve().parent.parent
  done = subprocess.run(
    [sys.executable, "-c", _PAPER_CHUNK],
    cwd=root,
    env={**os.environ, "PYTHONPATH": str(root)},
    capture_output=True,
    text=True,
    timeout=240,
  )
  assert done.returncode == 0 and "finished" in done.stdout, done.stderr[-2000:]


def test_import_turns_off_the_concurrent_cpu_scheduler_unless_named():
  """``import vaells_jax`` adds the flag that avoids the hang above, and
  leaves an XLA_FLAGS that already names it as it is."""
  root = pathlib.Path(__file__).resolve().parent.parent
  show = "import os, vaells_jax; print(os.environ.get('XLA_FLAGS'))"
  flag = "--xla_cpu_enable_concurrency_optimized_scheduler"
  for given, expected in (
    ("--xla_dump_to=/nonexistent", f"--xla_dump_to=/nonexistent {flag}=false"),
    (f"{flag}=true", f"{flag}=true"),
  ):
    out = subprocess.run(
      [sys.executable, "-c", show],
      cwd=root,
      env={**os.environ, "PYTHONPATH": str(root), "XLA_FLAGS": given},
      capture_output=True,
      text=True,
      check=True,
    ).stdout.strip()
    assert out == expected
