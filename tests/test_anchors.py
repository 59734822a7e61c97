"""Anchors chosen from the data alone (vaells_jax.data.anchors)."""

import numpy as np
import pytest

from vaells_jax.data.anchors import geodesic_distances, separate_pieces, spread_anchors


def _circle(n, seed, dim=10):
  """A noisy unit circle (``dim = 2``: as it is, so arc length = angle), or
  one mapped linearly to ``dim`` dimensions."""
  rng = np.random.default_rng(seed)
  angle = rng.uniform(0, 2 * np.pi, n)
  x = np.c_[np.cos(angle), np.sin(angle)]
  if dim != 2:
    x = x @ rng.normal(size=(2, dim))
  return x + 0.01 * rng.normal(size=x.shape), angle


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("count", [3, 4, 6])
def test_anchors_on_a_circle_come_out_spread(seed, count):
  x, angle = _circle(120, seed, dim=2)  # a 2-D circle: arc length = angle
  anchors = spread_anchors(x, np.zeros(len(x), int), count)[0]
  picked = [int(np.argmin(np.linalg.norm(x - a, axis=1))) for a in anchors]
  gaps = np.diff(np.sort(np.r_[angle[picked], angle[picked].min() + 2 * np.pi]))
  even = 2 * np.pi / count
  assert len(set(picked)) == count
  assert gaps.min() > 0.6 * even and gaps.max() < 1.4 * even, np.degrees(gaps)


def test_never_two_neighbouring_anchors_in_any_class():
  x0, _ = _circle(100, 0)
  x1, _ = _circle(60, 1)
  x = np.concatenate([x0, 2 * x1])
  labels = np.repeat([0, 1], [100, 60])
  anchors = spread_anchors(x, labels, 3)
  assert anchors.shape == (2, 3, 10)
  for c in range(2):
    points = x[labels == c]
    assert all(np.any(np.all(points == a, axis=1)) for a in anchors[c])
    geo = geodesic_distances(points)
    idx = [int(np.argmin(np.linalg.norm(points - a, axis=1))) for a in anchors[c]]
    neighbours = np.argsort(geo, axis=1)[:, 1:9]
    assert not any(j in neighbours[i] for i in idx for j in idx)
    perimeter = 2 * geo.max()  # a closed curve: the farthest point is half way
    pairwise = geo[np.ix_(idx, idx)][np.triu_indices(3, 1)]
    assert pairwise.min() > 0.6 * perimeter / 3


def test_anchors_on_an_open_curve_cover_it():
  rng = np.random.default_rng(0)
  t = rng.uniform(0, 1, 200)
  x = np.c_[t * 4, np.sin(3 * t)] + 0.005 * rng.normal(size=(200, 2))
  anchors = spread_anchors(x, np.zeros(200, int), 4)[0]
  at = np.sort([t[np.argmin(np.linalg.norm(x - a, axis=1))] for a in anchors])
  assert at[0] < 0.25 and at[-1] > 0.75 and np.diff(at).min() > 0.12


def test_too_few_points_for_the_anchors():
  with pytest.raises(ValueError, match="fewer than anchors_per_class=3"):
    spread_anchors(np.zeros((2, 3)), np.zeros(2, int), 3)


def test_separate_pieces_still_give_finite_distances():
  x = np.r_[np.zeros((5, 2)), np.ones((5, 2)) * 10] + np.arange(10)[:, None] * 0.01
  geo = geodesic_distances(x, neighbours=2)
  assert np.all(np.isfinite(geo)) and geo[0, 9] > geo[0, 4]


def _rings_and_spiral(seed, n=300):
  """Three concentric rings (radii 0.7, 1.7, 2.7) and, alone, a spiral of
  1.75 turns, each mapped linearly to 10-D with noise 0.01."""
  rng = np.random.default_rng(seed)
  mapping = rng.uniform(-1, 1, (10, 2))
  angle = rng.uniform(0, 2 * np.pi, n)
  labels = np.arange(n) % 3
  radius = 0.7 + 1.0 * labels
  rings = (radius[:, None] * np.c_[np.cos(angle), np.sin(angle)]) @ mapping.T
  t = rng.uniform(0, 1, n)
  spiral = (
    (0.3 + 1.7 * t)[:, None] * np.c_[np.cos(3.5 * np.pi * t), np.sin(3.5 * np.pi * t)]
  ) @ mapping.T
  noise = 0.01 * rng.normal(size=(2, n, 10))
  return rings + noise[0], labels, spiral + noise[1]


@pytest.mark.parametrize("seed", range(3))
def test_separate_curves_without_labels_become_classes(seed):
  rings, labels, spiral = _rings_and_spiral(seed)
  pieces = separate_pieces(rings)
  assert sorted(np.unique(pieces)) == [0, 1, 2]
  for piece in range(3):  # each piece is one ring, whole
    assert np.unique(labels[pieces == piece]).size == 1
  assert np.all(separate_pieces(spiral) == 0)  # its turns pass close: one curve


def test_a_gap_in_the_sampling_does_not_split_a_curve():
  angle = np.r_[np.linspace(0, 1, 40), np.linspace(1.3, 4, 100)]  # a gap of 12 spacings
  x = np.c_[np.cos(angle), np.sin(angle), np.zeros((140, 3))]
  assert np.all(separate_pieces(x) == 0)


def test_many_points_build_the_graph_of_a_subsample():
  rings, labels, _ = _rings_and_spiral(0, n=2400)
  pieces = separate_pieces(rings)
  assert np.unique(pieces).size == 3
  for piece in range(3):
    assert np.unique(labels[pieces == piece]).size == 1
