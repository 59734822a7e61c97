"""The verdict on a trained model (vaells_jax.runs.verdict) and the
population's refusal of blown-up members."""

import dataclasses
import types

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
  config = types.SimpleNamespace(image_shape=())

  def flat(self):  # vectors already
    return self

  def sample_prior(self, key, n, label):
    rng = np.random.default_rng(label)
    angle = rng.uniform(0, 2 * np.pi, n)
    radius = (1.0 + label) * (1 + self.prior_spread * rng.normal(size=n))
    return radius[:, None] * np.c_[np.cos(angle), np.sin(angle)]

  @property
  def anchors_latent(self):
    return self.encode(self.data.anchors)

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
  anchors = np.zeros((2, 3, 5))  # three on each circle
  turns = 2 * np.pi * np.arange(3) / 3
  anchors[..., :2] = np.c_[np.cos(turns), np.sin(turns)] * [[[1.0]], [[2.0]]]
  return _Data(x[:train], labels[:train], x[train:], labels[train:], anchors)


ROTATION = np.array([[[0.0, -0.05], [0.05, 0.0]]])
SCALING = np.array([[[0.05, 0.0], [0.0, 0.05]]])


def test_a_model_whose_operator_turns_the_circles_has_learned():
  result = verdict(_Model(_rings(), ROTATION))
  assert result["verdict"] == "learned", result
  assert result["signals"]["latent_coverage"] > 0.95
  assert result["signals"]["data_coverage"] > 0.95
  assert result["signals"]["reconstruction_error"] < 1e-12
  assert result["thresholds"] == THRESHOLDS


def test_a_model_whose_operator_scales_the_codes_has_not():
  result = verdict(_Model(_rings(), SCALING))
  assert result["verdict"] == "not learned"
  assert result["signals"]["data_coverage"] < THRESHOLDS["data_coverage_low"]
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


@pytest.mark.parametrize(
  "latent, data, expected",
  [
    (0.25, THRESHOLDS["data_coverage_learned"], "learned"),  # a spiral
    (0.25, 0.9, "uncertain"),
    (0.25, THRESHOLDS["data_coverage_low"], "uncertain"),
    (0.25, 0.5, "not learned"),
    (0.5, 0.5, "uncertain"),
    (0.25, float("nan"), "not learned"),  # stored before data_coverage
    (0.8, float("nan"), "learned"),
  ],
)
def test_a_decoded_orbit_along_the_data_counts_as_coverage(latent, data, expected):
  signals = {
    "latent_coverage": latent,
    "data_coverage": data,
    "reconstruction_error": 0.001,
    "operator_norm": 0.05,
  }
  if np.isnan(data):
    del signals["data_coverage"]
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


SIDE = 16  # the constructed image models' images are SIDE x SIDE


def _blobs(angle, label):
  """Images ``[..., SIDE * SIDE]`` of two Gaussian blobs turned by
  ``angle`` about the centre, ``0.8 + 0.5 label`` radians apart."""
  grid = np.arange(SIDE) - (SIDE - 1) / 2
  angle, label = np.broadcast_arrays(np.asarray(angle, float), label)
  images = 0.0
  for offset in (np.zeros_like(angle), 0.8 + 0.5 * label):
    cx, cy = 5 * np.cos(angle + offset), 5 * np.sin(angle + offset)
    dx = grid - cx[..., None, None]
    dy = grid[:, None] - cy[..., None, None]
    images = images + np.exp(-(dx**2 + dy**2) / 4.5)
  return images.reshape(angle.shape + (SIDE * SIDE,))


@dataclasses.dataclass
class _TurningBlobs:
  """An image model built by hand: class ``c`` at angle ``a`` has the code
  ``(cos a, sin a, c - 1)``; it encodes by the nearest of 720 true images and
  decodes exactly. ``blur``: it decodes every code to its class's mean image.
  Its operators turn the codes (or scale them) as ``psi`` says. It takes
  and gives images ``[..., SIDE, SIDE]``, its :meth:`flat` view vectors."""

  data: _Data
  psi: np.ndarray
  blur: bool = False
  flat_view: bool = False
  config = types.SimpleNamespace(image_shape=(SIDE, SIDE, 1))

  def flat(self):
    return dataclasses.replace(self, flat_view=True)

  def decode(self, z):
    images = self._decode(np.asarray(z))
    if self.flat_view:
      return images
    return images.reshape(images.shape[:-1] + (SIDE, SIDE))

  def _decode(self, z):
    label = np.clip(np.rint(z[..., 2] + 1), 0, 2)
    angle = np.arctan2(z[..., 1], z[..., 0])
    if self.blur:
      angle = np.linspace(0, 2 * np.pi, 90)[:, None] + 0 * angle.ravel()
      return _blobs(angle, label.ravel()).mean(0).reshape(z.shape[:-1] + (-1,))
    return _blobs(angle, label)

  def encode(self, x):
    assert self.flat_view, "the verdict must compute on the flat view"
    angles = np.linspace(0, 2 * np.pi, 720, endpoint=False)
    codes = np.stack(
      [np.c_[np.cos(angles), np.sin(angles), np.full(720, c - 1.0)] for c in range(3)]
    ).reshape(-1, 3)
    table = self._decode(codes)
    gaps = ((np.asarray(x)[:, None] - table[None]) ** 2).sum(-1)
    return codes[gaps.argmin(axis=1)]

  @property
  def anchors_latent(self):
    turns = 2 * np.pi * np.arange(3) / 3
    return np.stack(
      [np.c_[np.cos(turns), np.sin(turns), np.full(3, c - 1.0)] for c in range(3)]
    )

  def sample_prior(self, key, n, label):
    angle = np.random.default_rng(label).uniform(0, 2 * np.pi, n)
    return np.c_[np.cos(angle), np.sin(angle), np.full(n, label - 1.0)]


def _turning_images(seed=0, n=450):
  """Three classes of :func:`_blobs` at random angles, pixel noise 0.02."""
  rng = np.random.default_rng(seed)
  labels = np.arange(n) % 3
  x = _blobs(rng.uniform(0, 2 * np.pi, n), labels)
  x += 0.02 * rng.normal(size=x.shape)
  train = 4 * n // 5
  return _Data(x[:train], labels[:train], x[train:], labels[train:], np.zeros(0))


TURN_CODES = np.zeros((2, 3, 3))
TURN_CODES[0, :2, :2] = [[0.0, -0.5], [0.5, 0.0]]
SCALE_CODES = np.zeros((2, 3, 3))
SCALE_CODES[0, :2, :2] = np.eye(2) * 0.5


@pytest.mark.parametrize(
  "psi, blur, expected",
  [
    (TURN_CODES, False, "learned"),
    (SCALE_CODES, False, "not learned"),  # its orbits stay at one image
    (TURN_CODES, True, "not learned"),  # it decodes a blur of the class
  ],
)
def test_the_image_verdict_on_constructed_image_models(psi, blur, expected):
  result = verdict(_TurningBlobs(_turning_images(), psi, blur))
  assert result["verdict"] == expected, result
  signals = result["signals"]
  if expected == "learned":
    assert signals["image_coverage"] > 0.95 and signals["sample_class"] == 1.0
    assert signals["sample_spreads"] < 0.2  # the training images: noisy, 120
    assert signals["reconstruction_error"] < 0.02
  assert "sample_noise_levels" not in signals  # curve distances: not on images


@dataclasses.dataclass
class _TorusModel(_Model):
  """A flat torus (two unit circles turned by two angles) in the first four
  of 6 coordinates, codes the first four; the prior's samples on it."""

  def sample_prior(self, key, n, label):
    rng = np.random.default_rng(label)
    return _torus(rng.uniform(0, 2 * np.pi, (n, 2)))

  def encode(self, x):
    return np.asarray(x)[..., :4]

  def decode(self, z):
    z = np.asarray(z)
    return np.concatenate([z, np.zeros(z.shape[:-1] + (2,))], -1)


def _torus(angles):
  a, b = angles[..., 0], angles[..., 1]
  return np.stack([np.cos(a), np.sin(a), np.cos(b), np.sin(b)], -1)


def _torus_data(seed=0, n=600):
  rng = np.random.default_rng(seed)
  x = np.zeros((n, 6))
  x[:, :4] = _torus(rng.uniform(0, 2 * np.pi, (n, 2)))
  anchors = np.zeros((1, 3, 6))
  anchors[0, :, :4] = _torus(rng.uniform(0, 2 * np.pi, (3, 2)))
  labels = np.zeros(n, int)
  return _Data(x[:400], labels[:400], x[400:], labels[400:], anchors)


def _plane_rotation(first):
  psi = np.zeros((4, 4))
  psi[first + 1, first], psi[first, first + 1] = 0.05, -0.05
  return psi


@pytest.mark.parametrize(
  "second, expected",
  [(_plane_rotation(2), "learned"), (np.zeros((4, 4)), "not learned")],
)
def test_on_a_surface_the_operators_must_cover_both_directions(second, expected):
  psi = np.stack([_plane_rotation(0), second])
  result = verdict(_TorusModel(_torus_data(), psi))
  signals = result["signals"]
  assert signals["data_directions"] == 2
  assert result["verdict"] == expected, result["reasons"]
  if expected == "learned":
    assert signals["surface_coverage"] > 0.95
  else:  # one circle of the torus: an orbit along the data, one direction
    assert signals["surface_coverage"] < THRESHOLDS["surface_coverage_low"]
    assert "directions" in result["reasons"][0]


def test_curves_extend_in_one_direction():
  result = verdict(_Model(_rings(noise=0.01), ROTATION))
  assert result["signals"]["data_directions"] == 1
  assert "surface_coverage" not in result["signals"]
