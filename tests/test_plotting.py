"""Smoke tests: every plotting function writes a non-empty PNG and returns its
figure, built outside pyplot."""

import jax.numpy as jnp
import numpy as np
import pytest
from matplotlib.figure import Figure

from vaells_jax.evaluation import plotting

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _assert_png(fig, path):
  assert isinstance(fig, Figure)
  data = path.read_bytes()
  assert len(data) > 1000
  assert data[:8] == PNG_SIGNATURE


@pytest.fixture
def rng():
  return np.random.default_rng(0)


def test_latent_embedding_discrete_and_continuous(tmp_path, rng):
  z = rng.normal(size=(50, 3))
  out = plotting.plot_latent_embedding(
    tmp_path / "a.png", z, rng.integers(0, 2, 50), z[:4], "t", "class"
  )
  _assert_png(out, tmp_path / "a.png")
  out = plotting.plot_latent_embedding(
    tmp_path / "sub" / "b.png", jnp.asarray(z), rng.uniform(size=50), None
  )
  _assert_png(out, tmp_path / "sub" / "b.png")


def test_ground_truth(tmp_path, rng):
  out = plotting.plot_ground_truth(
    tmp_path / "gt.png", rng.normal(size=(40, 2)), rng.uniform(size=40)
  )
  _assert_png(out, tmp_path / "gt.png")


@pytest.mark.parametrize("magnitudes", [None, np.array([0.5, 1.5, 2.0])])
def test_orbits(tmp_path, rng, magnitudes):
  out = plotting.plot_orbits(
    tmp_path / "orbits.png",
    rng.normal(size=(30, 2)),
    rng.normal(size=(3, 2, 10, 2)),
    magnitudes=magnitudes,
  )
  _assert_png(out, tmp_path / "orbits.png")


def test_prior_samples(tmp_path, rng):
  out = plotting.plot_prior_samples(
    tmp_path / "prior.png",
    rng.normal(size=(30, 2)),
    rng.normal(size=(3, 20, 2)),
    rng.normal(size=(3, 2)),
  )
  _assert_png(out, tmp_path / "prior.png")


def test_paths(tmp_path, rng):
  out = plotting.plot_paths(
    tmp_path / "paths.png", rng.normal(size=(30, 2)), rng.normal(size=(2, 15, 2))
  )
  _assert_png(out, tmp_path / "paths.png")


def test_posterior_contour(tmp_path, rng):
  gx, gy = np.linspace(-1, 1, 12), np.linspace(-2, 2, 9)
  data = -((gx[None, :] ** 2) + gy[:, None] ** 2)
  coeff = -np.abs(gx[None, :] - gy[:, None])
  out = plotting.plot_posterior_contour(
    tmp_path / "contour.png",
    gx,
    gy,
    data,
    coeff,
    data + coeff,
    np.zeros(2),
    rng.normal(size=(30, 2)),
  )
  _assert_png(out, tmp_path / "contour.png")


def test_operator_magnitudes(tmp_path):
  out = plotting.plot_operator_magnitudes(
    tmp_path / "mags.png", jnp.array([0.1, 2.0, 0.7, 1.2])
  )
  _assert_png(out, tmp_path / "mags.png")


def test_figures_stay_out_of_pyplot(tmp_path, rng):
  import matplotlib.pyplot as plt

  before = len(plt.get_fignums())
  plotting.plot_operator_magnitudes(tmp_path / "m.png", rng.uniform(size=3))
  assert len(plt.get_fignums()) == before


def test_orbits_with_diverging_and_nan_points(tmp_path, rng):
  orbits = rng.normal(size=(1, 2, 10, 2))
  orbits[0, 0, -1] = 1e6
  orbits[0, 1, -1] = np.nan
  out = plotting.plot_orbits(tmp_path / "o.png", rng.normal(size=(30, 2)), orbits)
  _assert_png(out, tmp_path / "o.png")
