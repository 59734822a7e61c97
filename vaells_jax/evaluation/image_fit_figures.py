"""Figures of a model ``fit`` trained on images, in the user's image shape.

* ``orbit_strips.png``: for each of the :data:`OPERATORS` strongest
  operators, one anchor of each class moved along the operator's orbit,
  ``FRAMES`` frames over ``|t| <= pi / ||Psi||_2`` (its spectral norm: a
  half turn each way of a rotation, as far along an open flow, whose
  eigenvalues are 0), the anchor itself in the middle (the paper's
  figure style); frames whose code lies farther from the origin than 1.5
  times the farthest held-out code are left blank (the decoder never saw
  such codes).
* ``prior_samples.png``: decoded prior samples, a row per class.
* ``reconstructions.png``: held-out images over their reconstructions.

Pixels are shown on the data's own range (its 0.5th to 99.5th percentile),
colour images as RGB.
"""

from __future__ import annotations

import pathlib

import jax
import numpy as np
from matplotlib.figure import Figure

from vaells_jax.core.transport import transport_path

__all__ = ["FIGURES", "FRAMES", "OPERATORS", "draw"]

OPERATORS = 2
FRAMES = 9
ROW_CLASSES = 10  # classes shown, at most
SAMPLES = 8  # prior samples a class, reconstructions a row
FIGURES = {
  "orbit_strips.png": "the strongest operators moving one anchor of each class "
  "(middle: the anchor; a half turn each way)",
  "prior_samples.png": "decoded prior samples, a row per class",
  "reconstructions.png": "held-out images (top) and their reconstructions (bottom)",
}


def draw(trained, workdir) -> list[str]:
  """Writes the figures of ``trained`` (a :class:`~vaells_jax.api.
  TrainedVAELLS` with an image input map) to ``workdir``; returns their
  names."""
  workdir = pathlib.Path(workdir)
  shape = trained.input_map.shape
  data = trained.data
  lo, hi = np.percentile(data.x_train, [0.5, 99.5])
  show = lambda images: _grid(images, shape, lo, hi)  # noqa: E731
  _save(show(_orbit_strips(trained, data.x_test)), workdir / "orbit_strips.png")
  keys = jax.random.split(jax.random.PRNGKey(trained.config.seed + 7), ROW_CLASSES)
  classes = range(min(data.anchors.shape[0], ROW_CLASSES))
  samples = [
    np.asarray(trained.decode(trained.sample_prior(keys[c], SAMPLES, c)))
    for c in classes
  ]
  _save(show(np.stack(samples)), workdir / "prior_samples.png")
  test = data.x_test[:SAMPLES].reshape(-1, *shape)
  rebuilt = np.asarray(trained.decode(trained.encode(test)))
  _save(show(np.stack([test, rebuilt])), workdir / "reconstructions.png")
  return list(FIGURES)


def _orbit_strips(trained, x_test) -> np.ndarray:
  """``[OPERATORS * classes, FRAMES, *shape]``: the first anchor of each
  class along each of the strongest operators (NaN beyond the codes)."""
  flat = trained.flat()
  reach = 1.5 * np.linalg.norm(np.asarray(flat.encode(x_test)), axis=-1).max()
  psi = np.asarray(trained.psi, np.float64)
  anchors = np.asarray(trained.anchors_latent, np.float64)[:ROW_CLASSES, 0]
  order = np.argsort(-np.linalg.norm(psi, axis=(1, 2)))[:OPERATORS]
  rows = []
  for m in order:
    rate = max(float(np.linalg.norm(psi[m], 2)), 1e-6)
    ts = np.linspace(-np.pi / rate, np.pi / rate, FRAMES)
    path = transport_path(psi[m : m + 1], np.ones((1, 1)), anchors, ts)  # [T, C, d]
    moved = np.swapaxes(np.asarray(path, np.float64), 0, 1)  # [C, T, d]
    images = np.asarray(trained.decode(moved.astype(np.float32)), np.float64)
    far = np.linalg.norm(moved, axis=-1) > reach
    images[far] = np.nan
    rows.append(images)
  return np.concatenate(rows)


def _grid(images: np.ndarray, shape, lo: float, hi: float) -> np.ndarray:
  """``[rows, cols, *shape]`` images as one ``[H', W', 3]`` picture in [0, 1]."""
  images = np.clip((np.asarray(images, np.float64) - lo) / max(hi - lo, 1e-12), 0, 1)
  images = np.nan_to_num(images, nan=1.0)  # blank frames: the page's white
  if len(shape) == 2 or shape[-1] == 1:
    images = np.repeat(
      images.reshape(images.shape[:2] + tuple(shape[:2]) + (1,)), 3, -1
    )
  rows, cols, height, width, _ = images.shape
  picture = np.ones((rows * (height + 1) + 1, cols * (width + 1) + 1, 3))
  for r in range(rows):
    for c in range(cols):
      top, left = 1 + r * (height + 1), 1 + c * (width + 1)
      picture[top : top + height, left : left + width] = images[r, c]
  return picture


def _save(picture: np.ndarray, path: pathlib.Path) -> None:
  scale = 0.06
  figure = Figure(
    figsize=(picture.shape[1] * scale + 0.2, picture.shape[0] * scale + 0.2)
  )
  axes = figure.add_axes((0, 0, 1, 1))
  axes.imshow(picture, interpolation="nearest")
  axes.set_axis_off()
  figure.savefig(path, dpi=100)
