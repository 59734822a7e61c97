"""data_coverage: decoded orbits scored against the data, no ground truth."""

import jax
import numpy as np
import pytest
import scipy.linalg
from tiny import TINY, TINY_DATA

from vaells_jax.models.vaells import Model
from vaells_jax.training import coverage
from vaells_jax.training.step import init_state

NOISE = 0.01
T = 801  # orbit points; the start is the middle one


def _circles(rng, n=400):
  """Two noisy circles (radii 1 and 2) in 2-D, one class each."""
  t = rng.uniform(0, 2 * np.pi, 2 * n)
  labels = np.repeat([0, 1], n)
  radius = np.where(labels == 0, 1.0, 2.0)[:, None]
  x = radius * np.stack([np.cos(t), np.sin(t)], 1) + NOISE * rng.normal(size=(2 * n, 2))
  return x, labels


def _orbits(radius_of_angle, turns=1.0):
  """Decoded orbits ``[T, 2 classes, 1 anchor, 2]`` from angle 0, by class
  radius (1, 2) times ``radius_of_angle(angle)``."""
  angle = np.linspace(-turns, turns, T) * 2 * np.pi
  ring = np.stack([np.cos(angle), np.sin(angle)], -1)
  scale = radius_of_angle(angle)[:, None]
  return np.stack([scale * ring, 2 * scale * ring], 1)[:, :, None]


def _score(orbits, x, labels):
  return coverage.data_coverage(orbits, T // 2, x, labels)


def test_an_orbit_along_each_circle_covers_the_data():
  x, labels = _circles(np.random.default_rng(0))
  assert _score(_orbits(np.ones_like), x, labels) == 1.0


def test_an_orbit_counts_only_while_it_stays_on_the_data():
  x, labels = _circles(np.random.default_rng(1))
  # Spirals off the circles within a few degrees of the start.
  assert _score(_orbits(lambda a: np.exp(0.3 * np.abs(a))), x, labels) < 0.3
  # Follows the circles a quarter turn each way, leaves them for the next
  # quarter and comes back for the rest of the turn: it passes every point,
  # but only the stretch before it first leaves counts.
  detour = _orbits(lambda a: np.where(abs(abs(a) - 0.75 * np.pi) < np.pi / 4, 1.5, 1))
  assert 0.45 < _score(detour, x, labels) < 0.65
  assert _score(_orbits(lambda a: np.full_like(a, 1.5)), x, labels) == 0.0


def test_an_orbit_that_crosses_to_another_class_has_left_its_own():
  t = np.linspace(0, 2 * np.pi, 1200, endpoint=False)  # two rings close together
  labels = np.arange(1200) % 2
  radius = np.where(labels == 0, 1.0, 1.15)[:, None]
  x = radius * np.stack([np.cos(t), np.sin(t)], 1)
  # Class 0's orbit runs along its ring for a quarter turn each way, then
  # along the other class's ring: within the (wide) reach of its own data
  # all the way, but nearer the other's from the quarter on.
  crossing = _orbits(lambda a: np.where(np.abs(a) < np.pi / 2, 1.0, 1.15))
  crossing[:, 1] = _orbits(np.ones_like)[:, 0] * 1.15  # class 1 on its ring
  score = coverage.data_coverage(crossing, T // 2, x, labels, reaches=(4.0,))
  assert 0.7 < score < 0.8  # class 1: 1, class 0: about half its ring


def test_data_coverage_is_zero_without_a_finite_orbit():
  x, labels = _circles(np.random.default_rng(2))
  assert _score(np.full_like(_orbits(np.ones_like), np.nan), x, labels) == 0.0


def test_the_best_anchor_of_each_class_counts():
  x, labels = _circles(np.random.default_rng(3))
  good = _orbits(np.ones_like)
  off = _orbits(lambda a: np.full_like(a, 1.5))
  assert _score(np.concatenate([off, good], axis=2), x, labels) == 1.0


def test_member_data_coverage_follows_the_strongest_operator_from_the_anchors():
  # Against orbits built independently: scipy's expm of the strongest
  # operator, two turns of its fastest rotation each way.
  params = init_state(
    jax.random.PRNGKey(0), TINY, TINY_DATA.anchors, TINY_DATA.data_dim
  ).params
  params["psi"] = (
    params["psi"].at[1].set(np.asarray([[0.0, -2.0], [2.0, 0.0]], np.float32))
  )
  model = Model.create(TINY, TINY_DATA.data_dim)
  x, labels = TINY_DATA.x_train, TINY_DATA.labels_train
  got = coverage.member_data_coverage(model, params, x, labels)
  starts = np.asarray(model.encode(params, params["anchors"]))
  span = 2 * np.pi * coverage.DATA_COVERAGE_TURNS / 2.0
  ts = np.linspace(-span, span, coverage.DATA_COVERAGE_POINTS)
  flows = np.stack([scipy.linalg.expm(t * np.asarray(params["psi"][1])) for t in ts])
  decoded = model.decode(params, np.einsum("tij,caj->tcai", flows, starts))
  want = coverage.data_coverage(decoded, coverage.DATA_COVERAGE_POINTS // 2, x, labels)
  assert 0.0 < got <= 1.0
  assert abs(got - want) < 0.02


def test_data_coverage_does_not_depend_on_the_data_units():
  x, labels = _circles(np.random.default_rng(4))
  detour = _orbits(lambda a: np.where(abs(abs(a) - 0.75 * np.pi) < np.pi / 4, 1.5, 1))
  score = _score(detour, x, labels)
  assert _score(100 * detour + 1000, 100 * x + 1000, labels) == pytest.approx(
    score, abs=0.01
  )


def test_member_sample_distance_measures_the_priors_samples_against_the_data():
  # Against the library's own prior draws (TrainedVAELLS), measured by hand.
  from vaells_jax.api import TrainedVAELLS

  params = init_state(
    jax.random.PRNGKey(1), TINY, TINY_DATA.anchors, TINY_DATA.data_dim
  ).params
  model = Model.create(TINY, TINY_DATA.data_dim)
  x, labels = TINY_DATA.x_train, TINY_DATA.labels_train
  key = jax.random.PRNGKey(7)
  got = coverage.member_sample_distance(
    model, params, x, labels, key, laplace_scale=1 / TINY.zeta3, gamma=TINY.gamma
  )
  trained = TrainedVAELLS(TINY, params, TINY_DATA)
  samples = trained._sample_around(
    key, trained.anchors_latent, coverage.SAMPLES_PER_ANCHOR
  )
  decoded = np.asarray(trained.decode(samples))  # [C, A, S, D]
  gaps, spacing = [], []
  for c in range(decoded.shape[0]):
    points = x[labels == c]
    to_data = np.linalg.norm(decoded[c][..., None, :] - points, axis=-1)
    gaps.append(to_data.min(axis=-1).ravel())
    among = np.linalg.norm(points[:, None] - points[None], axis=-1)
    spacing.append(np.sort(among, axis=1)[:, coverage.DATA_COVERAGE_NEIGHBOURS])
  want = np.mean(np.concatenate(gaps)) / np.median(np.concatenate(spacing))
  assert got == pytest.approx(want, rel=1e-4)
