"""Each VAELLS objective term against a direct NumPy/SciPy evaluation."""

import math

import numpy as np
import pytest
import scipy.linalg
import scipy.special

from vaells_jax.core import objective

RNG = np.random.default_rng(0)
M, D_LAT, B, A = 3, 2, 4, 5
PSI = RNG.normal(size=(M, D_LAT, D_LAT)) * 0.3


def _np_transport(c, z0):
  return scipy.linalg.expm(np.einsum("m,mij->ij", c, PSI)) @ z0


def test_reconstruction_error():
  x, x_hat = RNG.normal(size=(B, 7)), RNG.normal(size=(B, 7))
  expected = [0.5 * np.sum((a - b) ** 2) for a, b in zip(x, x_hat, strict=True)]
  np.testing.assert_allclose(
    objective.reconstruction_error(x, x_hat), expected, rtol=1e-5
  )


def test_posterior_log_density():
  c, start, z = (
    RNG.normal(size=(B, M)),
    RNG.normal(size=(B, D_LAT)),
    RNG.normal(size=(B, D_LAT)),
  )
  got = objective.posterior_log_density(np.float32(PSI), c, start, z, 2.0, 0.5)
  expected = [
    -0.5 * 2.0 * np.sum((z[i] - _np_transport(c[i], start[i])) ** 2)
    - 0.5 * np.abs(c[i]).sum()
    for i in range(B)
  ]
  np.testing.assert_allclose(got, expected, rtol=1e-4)


def _per_anchor(c, anchors, z, w_data, w_l1):
  def term(b, i):
    residual = z[b] - _np_transport(c[b, i], anchors[b, i])
    return -0.5 * w_data * np.sum(residual**2) - w_l1 * np.abs(c[b, i]).sum()

  return np.array([[term(b, i) for i in range(A)] for b in range(B)])


def test_prior_log_density_mixture_and_closest():
  c = RNG.normal(size=(B, A, M))
  anchors, z = RNG.normal(size=(B, A, D_LAT)), RNG.normal(size=(B, D_LAT))
  per = _per_anchor(c, anchors, z, 1.5, 0.1)
  got = objective.prior_log_density(np.float32(PSI), c, anchors, z, 1.5, 0.1)
  np.testing.assert_allclose(
    got, scipy.special.logsumexp(per, axis=1) - math.log(A), rtol=1e-4
  )
  inf_obj = RNG.uniform(size=(B, A))
  got = objective.prior_log_density(
    np.float32(PSI), c, anchors, z, 1.5, 0.1, closest=True, inference_objective=inf_obj
  )
  np.testing.assert_allclose(got, per[np.arange(B), inf_obj.argmin(axis=1)], rtol=1e-4)
  with pytest.raises(ValueError, match="inference_objective"):
    objective.prior_log_density(PSI, c, anchors, z, 1.0, 0.1, closest=True)


def test_frobenius_and_constants():
  np.testing.assert_allclose(
    objective.frobenius_penalty(PSI, 0.02),
    0.01 * sum(np.linalg.norm(p, "fro") ** 2 for p in PSI),
    rtol=1e-6,
  )
  np.testing.assert_allclose(
    objective.gaussian_log_norm(3, 0.1),
    -1.5 * np.log(2 * np.pi) - 3 * np.log(0.1),
    rtol=1e-6,
  )
  np.testing.assert_allclose(
    objective.laplace_log_norm(4, 0.5), 4 * np.log(1.0), atol=1e-7
  )
