"""Tests of the evaluation metrics against brute force and known answers."""

import jax.numpy as jnp
import numpy as np
import pytest

from vaells_jax.evaluation.metrics import (
  knn_class_accuracy,
  latent_path_distance,
  manifold_distance,
  nearest_neighbours,
  orbit_coverage,
)


def _pairwise(a, b):
  """Brute-force distances ``[P, G]`` by explicit differences."""
  return np.sqrt(np.sum((a[:, None, :] - b[None, :, :]) ** 2, axis=-1))


def _brute_loo_nn(x):
  d = _pairwise(x, x)
  np.fill_diagonal(d, np.inf)
  return d.argmin(axis=1), d.min(axis=1)


@pytest.fixture
def rng():
  return np.random.default_rng(0)


@pytest.mark.parametrize("chunk_size", [1, 7, 1024])
def test_nearest_neighbours_matches_brute_force(rng, chunk_size):
  q, r = rng.normal(size=(53, 5)), rng.normal(size=(31, 5))
  index, dist = nearest_neighbours(q, r, chunk_size=chunk_size)
  d = _pairwise(q, r)
  np.testing.assert_array_equal(index, d.argmin(axis=1))
  np.testing.assert_allclose(dist, d.min(axis=1), rtol=1e-12)


@pytest.mark.parametrize("chunk_size", [1, 7, 1024])
def test_nearest_neighbours_leave_one_out(rng, chunk_size):
  x = rng.normal(size=(40, 3))
  index, dist = nearest_neighbours(x, x, exclude_self=True, chunk_size=chunk_size)
  expected_index, expected_dist = _brute_loo_nn(x)
  np.testing.assert_array_equal(index, expected_index)
  np.testing.assert_allclose(dist, expected_dist, rtol=1e-12)
  assert np.all(index != np.arange(40))


def test_knn_accuracy_matches_brute_force(rng):
  x, labels = rng.normal(size=(60, 2)), rng.integers(0, 3, size=60)
  expected = np.mean(labels[_brute_loo_nn(x)[0]] == labels)
  assert knn_class_accuracy(x, labels, chunk_size=8) == pytest.approx(expected)


def test_knn_accuracy_separated_clusters(rng):
  x = np.concatenate([rng.normal(size=(30, 4)), 100 + rng.normal(size=(30, 4))])
  labels = np.repeat([0, 1], 30)
  assert knn_class_accuracy(jnp.asarray(x), jnp.asarray(labels)) == 1.0


def test_knn_accuracy_excludes_self():
  # Alternating labels on a line: every nearest *other* point has the other label.
  x = np.arange(10.0)[:, None]
  assert knn_class_accuracy(x, np.arange(10) % 2) == 0.0


def test_manifold_distance_matches_brute_force(rng):
  points, grid = rng.normal(size=(45, 6)), rng.normal(size=(80, 6))
  expected = _pairwise(points, grid).min(axis=1).mean() / 0.05
  got = manifold_distance(points, grid, 0.05, chunk_size=10)
  assert got == pytest.approx(expected, rel=1e-12)


def test_manifold_distance_zero_on_grid(rng):
  grid = 30 * rng.normal(size=(500, 20))
  points = grid[rng.choice(500, size=50)]
  assert manifold_distance(points, grid, 0.01) == 0.0


def test_manifold_distance_known_offset():
  # Grid on the x axis, points 0.03 above it: distance 3 noise levels.
  grid = np.stack([np.linspace(-1, 1, 2001), np.zeros(2001)], axis=-1)
  points = np.stack([np.linspace(-0.5, 0.5, 11), np.full(11, 0.03)], axis=-1)
  assert manifold_distance(points, grid, 0.01) == pytest.approx(3.0)


def test_manifold_distance_accepts_batched_points(rng):
  grid, points = rng.normal(size=(20, 3)), rng.normal(size=(4, 5, 3))
  assert manifold_distance(points, grid, 1.0) == pytest.approx(
    manifold_distance(points.reshape(20, 3), grid, 1.0)
  )


def test_latent_path_distance_matches_brute_force(rng):
  points, enc = rng.normal(size=(3, 9, 2)), rng.normal(size=(70, 2))
  scale = np.median(_brute_loo_nn(enc)[1])
  flat = points.reshape(-1, 2)
  expected = _pairwise(flat, enc).min(axis=1).mean() / scale
  got = latent_path_distance(jnp.asarray(points), enc, chunk_size=5)
  assert got == pytest.approx(expected, rel=1e-6)


def test_latent_path_distance_known_answer():
  # Encodings on a unit-spaced line; points half a unit off it.
  enc = np.stack([np.arange(20.0), np.zeros(20)], axis=-1)
  assert latent_path_distance(enc, enc) == 0.0
  points = enc[:5] + np.array([0.0, 0.5])
  assert latent_path_distance(points, enc) == pytest.approx(0.5)


def _circle(angles, radius=1.0):
  return radius * np.stack([np.cos(angles), np.sin(angles)], axis=-1)


def test_orbit_coverage_known_answers():
  curve = _circle(2 * np.pi * np.arange(1000) / 1000)  # equal arc length
  noise = 0.01
  # Around the whole curve, 0.2 noise levels off it, from any start.
  whole = _circle(np.linspace(-np.pi, 3 * np.pi, 2001), radius=1.002)
  assert orbit_coverage(whole, curve, noise, start=1000) == 1.0
  assert orbit_coverage(whole, curve, noise, start=0) == 1.0
  # Along a quarter, then 10 noise levels off (a threshold of 5 cuts there).
  ts = np.linspace(0.0, 2 * np.pi, 2001)
  drift = _circle(ts, radius=np.where(ts < np.pi / 2, 1.0, 1.1)[:, None])
  assert orbit_coverage(drift, curve, noise, start=0) == 1.0
  assert orbit_coverage(drift, curve, noise, start=0, threshold=5.0) == 0.26
  # A jump off the curve ends the stretch even where the orbit comes back.
  jump = drift.copy()
  jump[500:600] *= 2.0  # off between a quarter (index 500) and 0.3 of a turn
  assert orbit_coverage(jump, curve, noise, start=100) == 0.26
  # From 0.3 of a turn to a full turn: bins 15-49, and bin 0 at the end.
  assert orbit_coverage(jump, curve, noise, start=1500) == 0.72
  assert orbit_coverage(jump, curve, noise, start=550) == 0.0  # starts off


def test_orbit_coverage_matches_a_direct_walk(rng):
  curve = rng.normal(size=(300, 5)).cumsum(axis=0)
  orbit = curve[rng.integers(0, 300, 200)] + rng.normal(size=(200, 5)) * 0.3
  d = _pairwise(orbit, curve)
  on, start = d.min(axis=1) / 0.1 <= 12.0, int(np.argmax(d.min(axis=1) < 1.0))
  lo = hi = start
  while lo > 0 and on[lo - 1]:
    lo -= 1
  while hi + 1 < len(on) and on[hi + 1]:
    hi += 1
  pieces = {int(i) * 7 // 300 for i in d[lo : hi + 1].argmin(axis=1)}
  assert orbit_coverage(orbit, curve, 0.1, start, threshold=12.0, bins=7) == (
    len(pieces) / 7
  )
  with pytest.raises(ValueError, match="start must index"):
    orbit_coverage(orbit, curve, 0.1, start=200)


def test_errors():
  x = np.zeros((4, 2))
  with pytest.raises(ValueError, match="noise_std"):
    manifold_distance(x, x, 0.0)
  with pytest.raises(ValueError, match="spacing"):
    latent_path_distance(np.ones((2, 2)), x)
  with pytest.raises(ValueError, match="labels"):
    knn_class_accuracy(np.arange(8.0).reshape(4, 2), np.zeros(3))
  with pytest.raises(ValueError, match="dimension"):
    nearest_neighbours(np.zeros((3, 2)), np.zeros((3, 4)))
  with pytest.raises(ValueError, match="exclude_self"):
    knn_class_accuracy(np.zeros((1, 2)), np.zeros(1))
  with pytest.raises(ValueError, match="non-finite"):
    manifold_distance(np.full((2, 2), np.nan), x, 1.0)


def test_noisy_synthetic_data_sit_sqrt_d_minus_1_noise_levels_off():
  from vaells_jax.data import make_concentric

  data = make_concentric(seed=0)
  score = manifold_distance(data.x_train, data.manifold, data.noise_std)
  assert score == pytest.approx(np.sqrt(data.data_dim - 1), rel=0.1)
  clean = make_concentric(seed=0, noise_std=0.0)
  assert manifold_distance(clean.x_train, clean.manifold, data.noise_std) < 0.2
  assert knn_class_accuracy(data.pos_train, data.labels_train) == 1.0
