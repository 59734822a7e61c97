"""The gated rotation span (SPEC section 6) on paths with known answers.

The frames are committed test digits rotated by known angles
(``augment.rotate_images``); the classifier is a stub: 1-nearest neighbour
among the committed training digits (81 % on the committed test digits), so
only digits it classifies correctly upright are used.
"""

import numpy as np
import pytest
from conftest import mnist_dir

from vaells_jax.data import augment, mnist
from vaells_jax.evaluation import rotation


@pytest.fixture(scope="module")
def digits():
  return mnist.load_mnist(mnist_dir())


@pytest.fixture(scope="module")
def nearest(digits):
  ref, ref_labels = digits.x_train, digits.y_train

  def classify(x):
    x = np.asarray(x)
    dist = (x**2).sum(1)[:, None] - 2 * x @ ref.T + (ref**2).sum(1)[None]
    return ref_labels[np.argmin(dist, 1)]

  return classify


def _correct(digits, classify, cls):
  """The first test digit of class ``cls`` that the stub classifies correctly."""
  ok = classify(digits.x_test) == digits.y_test
  return digits.x_test[np.flatnonzero((digits.y_test == cls) & ok)[0]]


def _rotated(image, angles):
  return np.asarray(
    augment.rotate_images(np.repeat(image[None], len(angles), 0), angles)
  )


def test_best_rotation_matches_find_the_angle(digits):
  x = digits.x_test[:3]
  angles = np.array([[0.0, 40.0, 250.0], [355.0, 90.0, 12.0], [180.0, 1.0, 300.0]])
  frames = np.stack([_rotated(xi, a) for xi, a in zip(x, angles, strict=True)])
  found, corr = rotation.best_rotation_matches(frames, x)
  assert np.all(np.abs((found - angles + 180) % 360 - 180) <= 1.0)
  assert np.all(corr > 0.99)
  # Another digit matches the reference far worse; a blank frame correlates 0.
  _, other = rotation.best_rotation_matches(
    np.stack([digits.x_test[5:7], np.zeros((2, 784))]), x[:2]
  )
  assert other[0].max() < 0.8 and np.all(other[1] == 0.0)


def test_gate_level_is_the_autoencoders_own_correlation(digits):
  rng = np.random.default_rng(0)
  x = digits.x_test[:40]
  theta = rng.uniform(0, 360, len(x))
  rotated = np.asarray(augment.rotate_images(x, theta))
  # A perfect autoencoder: its rotated reconstructions are true rotations.
  level, corr, found = rotation.rotation_gate_level(rotated, x)
  assert level > 0.95 and level == pytest.approx(np.percentile(corr, 5))
  assert np.median(np.abs((found - theta + 180) % 360 - 180)) <= 1.0
  # A noisy one reaches less, and its level says so.
  noisy = np.clip(rotated + rng.normal(0, 0.3, rotated.shape), 0, 1)
  assert rotation.rotation_gate_level(noisy, x)[0] < level - 0.2


def test_truly_rotated_digits_give_their_angle_span(digits, nearest):
  classes = (2, 3, 4, 6)
  x = np.stack([_correct(digits, nearest, c) for c in classes])
  angles = np.arange(-90.0, 91.0, 10.0)  # start (t = 0) at index 9
  frames = np.stack([_rotated(xi, angles) for xi in x])
  spans = rotation.gated_rotation_spans(frames, classes, nearest, 0.9, start=9)
  for name in ("gated", "correlation_only", "class_only", "monotonic"):
    np.testing.assert_allclose(spans[name], 180.0, atol=1.0)
  assert spans["kept"].all() and spans["start_class_kept"].all()
  np.testing.assert_allclose(spans["angles"][0], angles, atol=1.0)
  # The operator's sign is arbitrary: the path reversed gives the same span.
  back = rotation.gated_rotation_spans(frames[:, ::-1], classes, nearest, 0.9, 9)
  np.testing.assert_allclose(back["gated"], 180.0, atol=1.0)
  # Turning the same way on both sides is no rotation in t: one side counts.
  folded = np.stack([_rotated(xi, np.abs(angles)) for xi in x])
  fold = rotation.gated_rotation_spans(folded, classes, nearest, 0.9, 9)
  np.testing.assert_allclose(fold["gated"], 90.0, atol=1.0)


@pytest.mark.parametrize("a, b", [(3, 8), (1, 7), (4, 9)])
def test_a_path_that_morphs_into_another_digit_stops_at_the_morph(
  digits, nearest, a, b
):
  first, second = _correct(digits, nearest, a), _correct(digits, nearest, b)
  angles = np.arange(-60.0, 121.0, 10.0)  # start at index 6 (0 degrees)
  # The digit turns throughout; from +40 degrees it cross-fades into the
  # other digit (20 % more a frame), fully the other one from +80.
  share = np.clip((np.arange(len(angles)) - 9) * 0.2, 0, 1)[:, None]
  frames = np.asarray(
    augment.rotate_images((1 - share) * first + share * second, angles)
  )
  spans = rotation.gated_rotation_spans(frames[None], [a], nearest, 0.9, start=6)
  # 60 degrees back, 30 pure forward; no frame that is 60 % the other digit.
  assert 90.0 <= spans["gated"][0] <= 111.0
  assert 90.0 <= spans["class_only"][0] < 120.0
  assert 90.0 <= spans["correlation_only"][0] < 120.0
  assert np.all(spans["classes"][0, 12:] != a)  # the stub sees the morph
  # Without the gates the "rotation" goes on through the other digit.
  assert spans["monotonic"][0] > spans["gated"][0]


def test_unrelated_frames_give_a_small_span(digits, nearest):
  rng = np.random.default_rng(1)
  frames = np.stack(
    [digits.x_test[rng.choice(100, 19, replace=False)] for _ in range(8)]
  )
  labels = nearest(frames[:, 9])
  spans = rotation.gated_rotation_spans(frames, labels, nearest, 0.8, start=9)
  assert np.all(spans["gated"] <= rotation.MAX_FRAME_STEP)
  assert np.all(spans["correlation_only"] <= rotation.MAX_FRAME_STEP)


def test_summarize_spans():
  spans = {
    "gated": np.array([0.0, 40.0, 100.0, 180.0, 200.0]),
    "correlation_only": np.array([10.0, 50.0, 110.0, 190.0, 210.0]),
    "class_only": np.array([0.0, 60.0, 120.0, 200.0, 220.0]),
    "start_class_kept": np.array([False, True, True, True, True]),
  }
  out = rotation.summarize_spans(spans, [3, 3, 1, 1, 1], 0.93)
  assert out["rotation_gated_span_degrees"] == 100.0
  assert out["rotation_gated_span_quartiles"] == [40.0, 180.0]
  assert out["rotation_gated_span_per_class"][3] == 20.0
  assert out["rotation_gated_span_per_class"][1] == 180.0
  assert out["rotation_gated_span_per_class"][0] is None
  assert out["rotation_gated_digits"] == 5
  assert out["rotation_correlation_gate_only_span_degrees"] == 110.0
  assert out["rotation_class_gate_only_span_degrees"] == 120.0
  assert out["rotation_gate_level"] == 0.93
  assert out["rotation_start_class_kept"] == 0.8
