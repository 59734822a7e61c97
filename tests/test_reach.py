"""Operator reach (vaells_jax.evaluation.reach) on paths with known answers,
built from real digits (``conftest.mnist_dir``)."""

import numpy as np
import pytest
from conftest import mnist_dir

from vaells_jax.data import mnist
from vaells_jax.evaluation.reach import (
  CHANGED_THRESHOLD,
  class_kept_reach,
  summarize_reach,
)

STEPS = 10  # frames from the start to each end of a fade
START = STEPS  # the paths have 2 STEPS + 1 frames, t = 0 in the middle


@pytest.fixture(scope="module")
def three_digits():
  """Digits A, B, C of three different classes, float64 ``[784]`` each, and
  their classes."""
  data = mnist.load_mnist(mnist_dir())
  x, y = np.asarray(data.x_test, np.float64), np.asarray(data.y_test)
  picks = [int(np.flatnonzero(y == c)[0]) for c in (3, 5, 8)]
  return [x[i] for i in picks], [int(y[i]) for i in picks]


def _fades(a, b, c):
  """``[2 STEPS + 1, 784]``: from the start A, fading linearly to C as the
  frame index falls and to B as it rises, 1 / STEPS of the way a frame."""
  w = np.arange(-STEPS, STEPS + 1)[:, None] / STEPS
  return np.where(w < 0, a + (-w) * (c - a), a + w * (b - a))


def _mixing_classifier(three, labels, switch_b, switch_c):
  """A stub: the weights of ``x - A`` on ``B - A`` and ``C - A`` (least
  squares) give B's class above ``switch_b``, C's above ``switch_c``, else
  A's."""
  a, b, c = three
  basis = np.stack([b - a, c - a], 1)

  def classify(images):
    weights = np.linalg.lstsq(basis, (np.asarray(images, np.float64) - a).T)[0]
    return np.where(
      weights[0] > switch_b,
      labels[1],
      np.where(weights[1] > switch_c, labels[2], labels[0]),
    )

  return classify


def _rms(x):
  return float(np.sqrt(np.mean(x**2)))


def test_identical_frames_reach_nothing(three_digits):
  (a, _, _), labels = three_digits
  frames = np.tile(a, (2, 2 * STEPS + 1, 1))
  reach = class_kept_reach(
    frames, np.full(2, labels[0]), lambda im: np.full(len(im), labels[0]), START
  )
  np.testing.assert_array_equal(reach["last"], [[0, 2 * STEPS]] * 2)
  np.testing.assert_array_equal(reach["rms"], 0.0)
  np.testing.assert_array_equal(reach["changed_fraction"], 0.0)
  assert reach["at_end"].all() and reach["start_class_kept"].all()


def test_fades_stop_at_the_known_frames_both_ways(three_digits):
  three, labels = three_digits
  a, b, c = three
  # Towards B the class switches between 0.4 and 0.5 of the way, towards C
  # between 0.6 and 0.7: the last kept frames are 4 and 6 frames out.
  classify = _mixing_classifier(three, labels, switch_b=0.45, switch_c=0.65)
  frames = _fades(a, b, c)[None].astype(np.float32)
  reach = class_kept_reach(frames, np.array([labels[0]]), classify, START)
  np.testing.assert_array_equal(reach["last"], [[START - 6, START + 4]])
  expected_rms = [0.6 * _rms(c - a), 0.4 * _rms(b - a)]
  np.testing.assert_allclose(reach["rms"][0], expected_rms, rtol=1e-5)
  # Pixel steps are multiples of 1/255, so no pixel of 0.6 |C - A| or
  # 0.4 |B - A| lies within 3e-4 of the threshold.
  expected_fraction = [
    np.mean(np.abs(0.6 * (c - a)) > CHANGED_THRESHOLD),
    np.mean(np.abs(0.4 * (b - a)) > CHANGED_THRESHOLD),
  ]
  np.testing.assert_array_equal(reach["changed_fraction"][0], expected_fraction)
  assert 0 < expected_fraction[0] < 1 and 0 < expected_fraction[1] < 1
  assert not reach["at_end"].any()
  expected_classes = [labels[2]] * 4 + [labels[0]] * 11 + [labels[1]] * 6
  np.testing.assert_array_equal(reach["classes"][0], expected_classes)

  # The same path reversed swaps the two directions' reaches.
  flipped = class_kept_reach(frames[:, ::-1], np.array([labels[0]]), classify, START)
  np.testing.assert_array_equal(flipped["last"], [[START - 4, START + 6]])
  np.testing.assert_allclose(flipped["rms"][0], expected_rms[::-1], rtol=1e-5)

  # Directions are independent: a path that keeps the class all the way
  # towards C reaches the end on that side only.
  far = class_kept_reach(
    frames,
    np.array([labels[0]]),
    _mixing_classifier(three, labels, switch_b=0.45, switch_c=2.0),
    START,
  )
  np.testing.assert_array_equal(far["last"], [[0, START + 4]])
  np.testing.assert_allclose(far["rms"][0], [_rms(c - a), expected_rms[1]], rtol=1e-5)
  np.testing.assert_array_equal(far["at_end"], [[True, False]])


def test_a_start_frame_of_another_class_reaches_nothing(three_digits):
  three, labels = three_digits
  a, b, c = three
  frames = _fades(a, b, c)[None]
  classify = _mixing_classifier(three, labels, switch_b=0.45, switch_c=0.65)
  reach = class_kept_reach(frames, np.array([labels[1]]), classify, START)
  np.testing.assert_array_equal(reach["last"], [[START, START]])
  np.testing.assert_array_equal(reach["rms"], 0.0)
  np.testing.assert_array_equal(reach["changed_fraction"], 0.0)
  assert not reach["start_class_kept"][0] and not reach["at_end"].any()


def test_the_walk_stops_at_the_first_frame_of_another_class():
  # Frame j is the constant image 0.1 j; the class is 1 except at frames 3
  # and 6 (and 8), so from start 4 the reach is frames 4 and 5.
  frames = np.tile((0.1 * np.arange(9))[None, :, None], (1, 1, 16))
  table = np.array([1, 1, 1, 0, 1, 1, 0, 1, 0])

  def classify(images):
    return table[np.rint(images[:, 0] * 10).astype(int)]

  reach = class_kept_reach(frames, np.array([1]), classify, 4)
  np.testing.assert_array_equal(reach["last"], [[4, 5]])
  np.testing.assert_allclose(reach["rms"], [[0.0, 0.1]], atol=1e-6)
  reach = class_kept_reach(frames, np.array([1]), classify, 1)
  np.testing.assert_array_equal(reach["last"], [[0, 2]])
  np.testing.assert_array_equal(reach["at_end"], [[True, False]])
  # Frame 3 is of another class, its neighbours of the input's: reach 0.
  reach = class_kept_reach(frames, np.array([1]), classify, 3)
  np.testing.assert_array_equal(reach["last"], [[3, 3]])
  np.testing.assert_array_equal(reach["rms"], [[0.0, 0.0]])
  assert not reach["at_end"].any()
  reach = class_kept_reach(frames, np.array([1]), classify, 7)
  np.testing.assert_array_equal(reach["last"], [[7, 7]])
  np.testing.assert_array_equal(reach["rms"], [[0.0, 0.0]])


def test_summarize_reach_medians_of_two_sided_reaches():
  reach = {
    "rms": np.array([[0.1, 0.2], [0.0, 0.0], [0.5, 0.5]]),
    "changed_fraction": np.array([[0.1, 0.0], [0.0, 0.0], [0.3, 0.4]]),
    "last": np.array([[1, 3], [2, 2], [0, 4]]),
    "at_end": np.array([[False, False], [False, False], [True, True]]),
  }
  ts = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
  out = summarize_reach(reach, ts)
  assert out["rms"] == pytest.approx(0.3)
  assert out["changed_fraction"] == pytest.approx(0.1)
  assert out["coefficient"] == pytest.approx(1.0)  # median of 1, 1, 0, 0, 2, 2
  assert out["at_end"] == pytest.approx(2 / 6)


@pytest.mark.parametrize(
  "shape, labels, start, match",
  [
    ((3, 5), [0, 0, 0], 2, "N, T, P"),
    ((2, 5, 4), [0, 0, 0], 2, "labels"),
    ((2, 5, 4), [0, 0], 5, "start"),
    ((2, 5, 4), [0, 0], -1, "start"),
  ],
)
def test_bad_input_is_a_clear_error(shape, labels, start, match):
  with pytest.raises(ValueError, match=match):
    class_kept_reach(np.zeros(shape), np.array(labels), lambda im: im[:, 0], start)
