"""The verdict on a trained model (vaells_jax.runs.verdict) and the
population's refusal of blown-up members."""

import dataclasses

import numpy as np
import pytest

from vaells_jax.runs.verdict import (
  THRESHOLDS,
  decide,
  noise_level,
  polyline_distance,
  verdict,
)
from vaells_jax.training import selection


@dataclasses.dataclass
class _Data:
  x_train: np.ndarray
  labels_train: np.ndarray
  x_test: np.ndarray
  labels_test: np.ndarray
  anchors: np.ndarray  # [C, A, D]


@dataclasses.dataclass
class _Model:
  """A model built by hand: codes are the inputs' first two coordinates;
  the prior's samples lie on the circles, radially off by ``prior_spread``."""

  data: _Data
  psi: np.ndarray
  decoder_gain: float = 1.0
  prior_spread: float = 0.0

  def flat(self):  # vectors already
    return self

  def sample_prior(self, key, n, label):
    rng = np.random.default_rng(label)
    angle = rng.uniform(0, 2 * np.pi, n)
    radius = (1.0 + label) * (1 + self.prior_spread * rng.normal(size=n))
    return radius[:, None] * np.c_[np.cos(angle), np.sin(angle)]

  def encode(self, x):
    return np.asarray(x)[..., :2]

  def decode(self, z):
    z = np.asarray(z)
    return self.decoder_gain * np.concatenate([z, np.zeros(z.shape[:-1] + (3,))], -1)


def _rings(seed=0, n=300, noise=0.0):
  """Two circles (radii 1 and 2) in the first two of 5 coordinates; 2/3 of
  the ``n`` points for training."""
  rng = np.random.default_rng(seed)
  labels = np.arange(n) % 2
  angle = rng.uniform(0, 2 * np.pi, n)
  x = np.zeros((n, 5))
  x[:, :2] = (1.0 + labels)[:, None] * np.c_[np.cos(angle), np.sin(angle)]
  x += noise * rng.normal(size=x.shape)
  train = 2 * n // 3
  return _Data(
    x[:train], labels[:train], x[train:], labels[train:], np.zeros((2, 3, 5))
  )


ROTATION = np.array([[[0.0, -0.05], [0.05, 0.0]]])
SCALING = np.array([[[0.05, 0.0], [0.0, 0.05]]])


def test_a_model_whose_operator_turns_the_circles_has_learned():
  result = verdict(_Model(_rings(), ROTATION))
  assert result["verdict"] == "learned", result
  assert result["signals"]["latent_coverage"] > 0.95
  assert result["signals"]["reconstruction_error"] < 1e-12
  assert result["thresholds"] == THRESHOLDS


def test_a_model_whose_operator_scales_the_codes_has_not():
  result = verdict(_Model(_rings(), SCALING))
  assert result["verdict"] == "not learned"
  assert "latent_coverage" in result["reasons"][0]


def test_blown_up_operators_or_reconstructions_are_never_learned():
  blown = verdict(_Model(_rings(), ROTATION * 100))  # norm 7: blew up
  assert blown["verdict"] == "not learned"
  assert any("operators blew up" in r for r in blown["reasons"])
  far = verdict(_Model(_rings(), ROTATION, decoder_gain=1e4))
  assert far["verdict"] == "not learned"
  assert any("do not reconstruct" in r for r in far["reasons"])
  nan = verdict(_Model(_rings(), ROTATION * np.nan))
  assert nan["verdict"] == "not learned"


@pytest.mark.parametrize(
  "coverage, expected",
  [
    (1.0, "learned"),
    (THRESHOLDS["coverage_learned"], "learned"),
    (0.5, "uncertain"),
    (0.1, "not learned"),
  ],
)
def test_the_coverage_thresholds(coverage, expected):
  signals = {
    "latent_coverage": coverage,
    "latent_coverage_wide": 1.0,
    "reconstruction_error": 0.001,
    "operator_norm": 0.05,
  }
  assert decide(signals)["verdict"] == expected


def test_the_population_does_not_keep_a_blown_up_member():
  signals = {
    "latent_coverage": [0.2, 1.0, 0.8],
    "loss": [0.0, -5.0, 0.0],
    "operator_norm": [0.05, 4.5, 0.06],
  }
  best, reason = selection.select(signals, "latent_coverage")
  assert best == 2 and "member 2" in reason
  everyone = dict(signals, operator_norm=[2.0, 3.0, 4.0])
  assert "member 0" in selection.select(everyone, "latent_coverage")[1]


def test_the_noise_level_estimate_on_a_noisy_line():
  rng = np.random.default_rng(0)
  t = rng.uniform(0, 10, 400)
  x = np.outer(t, rng.normal(size=8)) + 0.03 * rng.normal(size=(400, 8))
  assert noise_level(x, np.zeros(400, int)) == pytest.approx(0.03, rel=0.15)


def test_reconstructions_far_off_for_the_noise_keep_it_from_learned():
  data = _rings(n=1500, noise=0.002)  # dense: the estimate sees the noise
  assert noise_level(data.x_train, data.labels_train) < 0.004
  good = verdict(_Model(data, ROTATION))
  assert good["verdict"] == "learned", good["reasons"]

  class Shifted(_Model):
    def decode(self, z):
      return super().decode(z) + 0.1  # 0.22 off: some 70 noise levels

  off = verdict(Shifted(data, ROTATION))
  assert off["verdict"] == "uncertain"
  assert off["signals"]["reconstruction_noise_levels"] > 50
  assert "far off the data's manifold" in off["reasons"][-1]


def test_polyline_distance_is_the_distance_off_the_sampled_curve():
  angle = np.linspace(0, 2 * np.pi, 200, endpoint=False)
  ring = np.c_[np.cos(angle), np.sin(angle), np.zeros(200)]
  # Off the circle radially and out of its plane; along it the gaps are 0.03,
  # so the chords lie within 5e-4 of the circle
  points = np.array([[1.1, 0.0, 0.0], [0.0, 0.95, 0.0], [0.0, -1.0, 0.2]])
  np.testing.assert_allclose(
    polyline_distance(points, ring), [0.1, 0.05, 0.2], atol=1e-3
  )
  # Each point of a sampled curve lies on its neighbours' chords.
  assert polyline_distance(ring, ring, own=True).max() < 1e-3
  rng = np.random.default_rng(0)
  noisy = (ring + 0.01 * rng.normal(size=ring.shape)) * 1000 + 1e4  # any units
  distance = polyline_distance(noisy, noisy, own=True)
  assert 8 < np.median(distance) / np.sqrt(2) < 16  # about the noise, 10


def test_prior_samples_far_off_for_the_noise_keep_it_from_learned():
  data = _rings(n=1500, noise=0.002)
  good = verdict(_Model(data, ROTATION))
  assert good["signals"]["sample_noise_levels"] < 3, good["signals"]
  off = verdict(_Model(data, ROTATION, prior_spread=0.05))  # 0.05-0.1 off
  assert off["signals"]["reconstruction_noise_levels"] < 3
  assert off["signals"]["sample_noise_levels"] > THRESHOLDS["sample_noise_levels_max"]
  assert off["verdict"] == "uncertain"
  assert "prior's samples lie far off" in off["reasons"][-1]


@dataclasses.dataclass
class _ImageModel(_Model):
  """``_Model`` taking and giving images ``[..., 5, 1]``, as a fit on images
  does; the verdict computes on its flattened view."""

  def flat(self):
    return _Model(self.data, self.psi, self.decoder_gain, self.prior_spread)

  def encode(self, x):
    raise AssertionError("the verdict must not hand an image model vectors")


@pytest.mark.parametrize(
  "psi, expected", [(ROTATION, "learned"), (SCALING, "not learned")]
)
def test_the_verdict_on_an_image_model_uses_its_flat_view(psi, expected):
  assert verdict(_ImageModel(_rings(), psi))["verdict"] == expected
