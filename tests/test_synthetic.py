"""Tests of the synthetic data sets and their ground truth."""

import numpy as np
import pytest

from vaells_jax.data import (
  load_dataset,
  make_concentric,
  make_swiss_roll,
  save_dataset,
  swiss_roll_arc_length,
)
from vaells_jax.data.dataset import _ARRAY_FIELDS


@pytest.fixture(scope="module")
def circles():
  return make_concentric(seed=3)


@pytest.fixture(scope="module")
def roll():
  return make_swiss_roll(seed=3)


def test_concentric_shapes(circles):
  assert circles.x_train.shape == (400, 20)
  assert circles.labels_train.shape == circles.t_train.shape == (400,)
  assert circles.pos_train.shape == (400, 2)
  assert circles.x_test.shape == (200, 20)
  assert circles.anchors.shape == (2, 3, 20)
  assert circles.anchor_pos.shape == (2, 3, 2)
  assert circles.mapping.shape == (20, 2)
  assert 4000 <= circles.manifold.shape[0] <= 20000
  assert circles.manifold_labels.shape == circles.manifold.shape[:1]
  assert circles.num_classes == 2 and circles.name == "concentric"
  assert np.issubdtype(circles.labels_train.dtype, np.integer)
  assert np.bincount(circles.labels_train).tolist() == [200, 200]


def test_swiss_roll_shapes(roll):
  assert roll.x_train.shape == (1000, 20) and roll.x_test.shape == (300, 20)
  assert roll.anchors.shape == (1, 4, 20)
  assert roll.num_classes == 1 and roll.name == "swiss_roll"
  assert not roll.labels_train.any() and not roll.labels_test.any()
  assert 4000 <= roll.manifold.shape[0] <= 20000
  assert np.all((roll.t_train >= 1.5 * np.pi) & (roll.t_train <= 4.5 * np.pi))


@pytest.mark.parametrize("make", [make_concentric, make_swiss_roll])
def test_seeding(make):
  a, b, c = make(seed=1), make(seed=1), make(seed=2)
  for field in _ARRAY_FIELDS:
    np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
  assert not np.allclose(a.x_train, c.x_train)
  assert not np.allclose(a.mapping, c.mapping)


@pytest.mark.parametrize("make", [make_concentric, make_swiss_roll])
def test_noise_free_points_lie_on_the_map(make):
  noisy, clean = make(seed=5), make(seed=5, noise_std=0.0)
  np.testing.assert_array_equal(noisy.pos_train, clean.pos_train)
  np.testing.assert_array_equal(noisy.mapping, clean.mapping)
  np.testing.assert_allclose(
    clean.x_train, clean.pos_train @ clean.mapping.T, atol=1e-12
  )
  np.testing.assert_allclose(clean.x_test, clean.pos_test @ clean.mapping.T, atol=1e-12)
  np.testing.assert_allclose(
    clean.anchors, clean.anchor_pos @ clean.mapping.T, atol=1e-12
  )
  noise = noisy.x_train - clean.x_train
  assert abs(noise.std() - 0.01) < 1e-3 and abs(noise.mean()) < 1e-3


def test_mapping_is_uniform_in_unit_box(circles):
  assert np.all(np.abs(circles.mapping) <= 1.0)
  assert circles.mapping.std() > 0.4  # U[-1, 1] has std 0.577


def test_circle_radii_and_angles(circles):
  for pos, labels, t in (
    (circles.pos_train, circles.labels_train, circles.t_train),
    (circles.pos_test, circles.labels_test, circles.t_test),
  ):
    radius = np.linalg.norm(pos, axis=1)
    np.testing.assert_allclose(radius, np.where(labels == 0, 0.5, 1.0))
    np.testing.assert_allclose(
      np.arctan2(pos[:, 1], pos[:, 0]) % (2 * np.pi), t % (2 * np.pi), atol=1e-9
    )
  grid_radius = np.linalg.norm(
    circles.manifold @ np.linalg.pinv(circles.mapping).T, axis=1
  )
  np.testing.assert_allclose(
    grid_radius, np.where(circles.manifold_labels == 0, 0.5, 1.0)
  )


def test_circle_anchors_evenly_spaced(circles):
  for k, radius in enumerate((0.5, 1.0)):
    pos = circles.anchor_pos[k]
    np.testing.assert_allclose(np.linalg.norm(pos, axis=1), radius)
    angles = np.sort(np.arctan2(pos[:, 1], pos[:, 0]) % (2 * np.pi))
    gaps = np.diff(np.append(angles, angles[0] + 2 * np.pi))
    np.testing.assert_allclose(gaps, 2 * np.pi / 3)


@pytest.mark.parametrize(
  "make, count",
  [(make_concentric, "anchors_per_class"), (make_swiss_roll, "num_anchors")],
)
def test_random_anchors_lie_on_the_manifold_and_keep_the_points(make, count):
  even = make(seed=5)
  placed = [make(seed=s, anchor_placement="random", **{count: 6}) for s in (5, 5, 6)]
  np.testing.assert_array_equal(placed[0].x_train, even.x_train)
  np.testing.assert_array_equal(placed[0].anchors, placed[1].anchors)
  assert not np.allclose(placed[0].anchors, placed[2].anchors)
  assert placed[0].anchors.shape == (even.num_classes, 6, even.data_dim)
  np.testing.assert_allclose(
    placed[0].anchors, placed[0].anchor_pos @ placed[0].mapping.T, rtol=1e-12
  )
  # Every anchor sits on the class's curve: within a grid step of the manifold.
  for c in range(even.num_classes):
    grid = even.manifold[even.manifold_labels == c]
    gaps = np.linalg.norm(placed[0].anchors[c][:, None] - grid[None], axis=-1)
    spacing = np.linalg.norm(np.diff(grid, axis=0), axis=-1).max()
    assert gaps.min(axis=1).max() <= spacing
  # Not evenly spaced: the anchors' gaps along the curve differ.
  pos = placed[0].anchor_pos[0]
  assert np.ptp(np.linalg.norm(np.diff(pos, axis=0), axis=-1)) > 1e-3


def test_swiss_roll_ground_truth(roll):
  t = roll.t_train
  np.testing.assert_allclose(
    roll.pos_train, np.stack([t * np.cos(t), t * np.sin(t)], -1) / 10
  )


def test_swiss_roll_anchors_evenly_spaced_in_arc_length(roll):
  pos = roll.anchor_pos[0]
  t = np.linalg.norm(pos, axis=1) * 10.0  # |p(t)| = t / 10
  s = swiss_roll_arc_length(t)
  s_min, s_max = swiss_roll_arc_length(np.array([1.5 * np.pi, 4.5 * np.pi]))
  length = s_max - s_min
  np.testing.assert_allclose(s - s_min, (np.arange(4) + 0.5) / 4 * length, rtol=1e-6)


def test_arc_length_matches_numerical_integral():
  t = np.linspace(1.0, 14.0, 200_001)
  speed = np.linalg.norm(
    np.gradient(np.stack([t * np.cos(t), t * np.sin(t)], -1) / 10, t, axis=0), axis=1
  )
  integral = np.sum((speed[1:] + speed[:-1]) / 2 * np.diff(t))
  expected = swiss_roll_arc_length(14.0) - swiss_roll_arc_length(1.0)
  np.testing.assert_allclose(integral, expected, rtol=1e-5)


@pytest.mark.parametrize("make", [make_concentric, make_swiss_roll])
def test_manifold_grid_is_dense(make):
  data = make(seed=0)
  for k in range(data.num_classes):
    grid = data.manifold[data.manifold_labels == k]
    steps = np.linalg.norm(np.diff(grid, axis=0), axis=1)
    assert steps.max() < 0.2 * data.noise_std * np.sqrt(data.data_dim)


def test_save_load_round_trip(tmp_path, roll):
  path = save_dataset(tmp_path / "roll", roll)
  assert path.endswith(".npz")
  loaded = load_dataset(path)
  for field in _ARRAY_FIELDS:
    np.testing.assert_array_equal(getattr(loaded, field), getattr(roll, field))
    assert getattr(loaded, field).dtype == getattr(roll, field).dtype
  assert loaded.noise_std == roll.noise_std and loaded.name == "swiss_roll"
  assert loaded.num_classes == 1


def test_load_rejects_missing_fields(tmp_path):
  np.savez(tmp_path / "bad.npz", x_train=np.zeros((2, 3)))
  with pytest.raises(ValueError, match="lacks fields"):
    load_dataset(tmp_path / "bad.npz")


@pytest.mark.parametrize(
  "make, kwargs, match",
  [
    (make_concentric, {"num_per_circle": 0}, "num_per_circle"),
    (make_concentric, {"num_test_per_circle": -1}, "num_test_per_circle"),
    (make_concentric, {"anchors_per_class": 2.5}, "anchors_per_class"),
    (make_concentric, {"noise_std": -0.1}, "noise_std"),
    (make_concentric, {"radii": (0.5, -1.0)}, "radii"),
    (make_concentric, {"data_dim": 0}, "data_dim"),
    (make_swiss_roll, {"num_train": 0}, "num_train"),
    (make_swiss_roll, {"num_anchors": 0}, "num_anchors"),
    (make_swiss_roll, {"noise_std": float("nan")}, "noise_std"),
    (make_swiss_roll, {"anchor_placement": "evenly"}, "anchor_placement"),
    (make_concentric, {"anchor_placement": None}, "anchor_placement"),
  ],
)
def test_invalid_arguments(make, kwargs, match):
  with pytest.raises(ValueError, match=match):
    make(**kwargs)
