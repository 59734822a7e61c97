"""Operator reach: how far an operator's path moves a digit while it keeps its
class (natural MNIST; issue 20).

A digit's code is moved along ``expm(t psi_m) f(x)`` and decoded at
increasing coefficients ``t``. From the decoded start frame (``t = 0``) the
path is followed in each direction of ``t`` separately; the last frame that a
digit classifier still gives the input's class (walking out from the start,
stopping at the first frame of another class) is the reach of that
direction. How far that frame is from the start frame is measured two ways:

* ``rms`` (the headline): the root-mean-square pixel difference
  ``sqrt(mean_p (frame_p - start_p)^2)``, intensities in ``[0, 1]``;
* ``changed_fraction``: the fraction of pixels whose intensity differs from
  the start frame's by more than :data:`CHANGED_THRESHOLD`.

A start frame that is not of the input's class has reach 0 both ways. A
digit's two-sided reach is the sum of its two directions' reaches (so the
two-sided changed fraction lies in ``[0, 2]``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["CHANGED_THRESHOLD", "class_kept_reach", "summarize_reach"]

CHANGED_THRESHOLD = 0.1  # a pixel "changed" by more than this (intensity)


def class_kept_reach(frames, labels, classify, start: int) -> dict:
  """Per path and direction, the last frame with the input's class, and how
  far it is from the start frame.

  Args:
    frames: ``[N, T, P]`` decoded frames along each path at increasing
      coefficients (``P`` pixels, intensities in ``[0, 1]``).
    labels: ``[N]`` the inputs' classes.
    classify: ``[K, P] images -> [K]`` classes.
    start: index of ``t = 0`` along the paths, ``0 <= start < T``.

  Returns:
    A dict of arrays; index 0 of the last axis is the direction of
    decreasing ``t`` (towards frame 0), index 1 that of increasing ``t``:

    * ``"last"`` ``[N, 2]``: index of the last frame that keeps the class
      (``start`` where the start frame does not);
    * ``"rms"`` ``[N, 2]``: RMS pixel difference of that frame from the
      start frame;
    * ``"changed_fraction"`` ``[N, 2]``: fraction of its pixels that differ
      from the start frame's by more than :data:`CHANGED_THRESHOLD`;
    * ``"at_end"`` ``[N, 2]``: the class is kept up to the path's end (frame
      0 or ``T - 1``), so the reach is cut by the coefficient range;
    * ``"classes"`` ``[N, T]``: the classifier's class of every frame;
    * ``"start_class_kept"`` ``[N]``: the start frame has the input's class.

  Raises:
    ValueError: for misshapen frames or labels, or ``start`` outside the
      paths.
  """
  frames = np.asarray(frames, np.float32)
  if frames.ndim != 3 or 0 in frames.shape:
    raise ValueError(f"frames must be [N, T, P] and non-empty, got {frames.shape}.")
  n, t, pixels = frames.shape
  labels = np.asarray(labels)
  if labels.shape != (n,):
    raise ValueError(f"labels must be [{n}] (one per path), got {labels.shape}.")
  if not 0 <= start < t:
    raise ValueError(f"start must index a frame in 0..{t - 1}, got {start}.")
  classes = np.asarray(classify(frames.reshape(-1, pixels))).reshape(n, t)
  kept = classes == labels[:, None]
  last = np.full((n, 2), start)
  for i in range(n):
    if not kept[i, start]:
      continue
    for side, step, end in ((0, -1, 0), (1, 1, t - 1)):
      j = start
      while j != end and kept[i, j + step]:
        j += step
      last[i, side] = j
  reached = frames[np.arange(n)[:, None], last]  # [N, 2, P]
  diff = reached - frames[:, start][:, None]
  return {
    "last": last,
    "rms": np.sqrt(np.mean(diff.astype(np.float64) ** 2, axis=-1)),
    "changed_fraction": np.mean(np.abs(diff) > CHANGED_THRESHOLD, axis=-1),
    "at_end": kept[:, start][:, None] & (last == np.array([0, t - 1])),
    "classes": classes,
    "start_class_kept": kept[:, start],
  }


def summarize_reach(reach: dict, ts) -> dict:
  """Medians over the paths of one operator's reach (see the module docstring).

  Args:
    reach: the output of :func:`class_kept_reach`.
    ts: ``[T]`` the coefficients of the frames.

  Returns:
    ``{"rms", "changed_fraction"}``: the median over paths of the two-sided
    reach (the sum of both directions'); ``"coefficient"``: the median over
    paths and both directions of ``|t|`` of the last frame that keeps the
    class; ``"at_end"``: the fraction of directions that keep the class up to
    the end of the coefficient range.
  """
  ts = np.asarray(ts, np.float64)
  return {
    "rms": float(np.median(reach["rms"].sum(axis=1))),
    "changed_fraction": float(np.median(reach["changed_fraction"].sum(axis=1))),
    "coefficient": float(np.median(np.abs(ts[reach["last"]]))),
    "at_end": float(np.mean(reach["at_end"])),
  }
