"""Figures of 28 x 28 digit images: posterior grids, operator paths, rotation.

Like :mod:`vaells_jax.evaluation.plotting`: each function writes one PNG and
returns its :class:`~matplotlib.figure.Figure`, built outside pyplot.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from vaells_jax.evaluation.plotting import PANEL, save_figure

__all__ = [
  "plot_image_rows",
  "plot_operator_paths",
  "plot_posterior_grids",
  "plot_rotation_fidelity",
]


def _image_tiles(images, side=28):
  """``[R, C, side*side]`` -> one ``[R*side, C*side]`` mosaic."""
  images = np.asarray(images)
  rows, cols = images.shape[:2]
  tiles = images.reshape(rows, cols, side, side)
  return tiles.transpose(0, 2, 1, 3).reshape(rows * side, cols * side)


def _box(ax, row, col, side=28, colour="limegreen"):
  ax.add_patch(
    Rectangle(
      (col * side - 0.5, row * side - 0.5),
      side,
      side,
      fill=False,
      edgecolor=colour,
      linewidth=2,
    )
  )


def plot_posterior_grids(path, centres, samples, title="") -> Figure:
  """Decoded posterior samples around inputs (paper figs 5, 6, 9, 10).

  Each panel is a 3 x 3 grid: the decoded input in the centre (green box),
  eight decoded posterior samples around it.

  Args:
    path: output PNG path.
    centres: ``[K, 784]`` decoded encodings of ``K`` inputs.
    samples: ``[K, 8, 784]`` decoded posterior samples.
    title: figure title.

  Returns:
    The figure, written to ``path``.
  """
  centres, samples = np.asarray(centres), np.asarray(samples)
  num = centres.shape[0]
  fig = Figure(figsize=(2.0 * num, 2.3))
  axes = fig.subplots(1, num, squeeze=False)
  for ax, centre, around in zip(axes[0], centres, samples, strict=True):
    grid = np.concatenate([around[:4], centre[None], around[4:8]]).reshape(3, 3, -1)
    ax.imshow(_image_tiles(grid), cmap="gray", vmin=0, vmax=1)
    _box(ax, 1, 1)
    ax.axis("off")
  fig.suptitle(title)
  return save_figure(fig, path)


def plot_operator_paths(path, frames, coeffs, title="") -> Figure:
  """Decoded paths ``g(expm(t psi_m) z0)`` of one operator (paper figs 7, 11, 12).

  Args:
    path: output PNG path.
    frames: ``[R, T, 784]``: one row per input, one column per coefficient.
    coeffs: ``[T]`` the coefficients ``t``; the column nearest ``t = 0`` (the
      decoded input) is boxed.
    title: figure title.

  Returns:
    The figure, written to ``path``.
  """
  frames, coeffs = np.asarray(frames), np.asarray(coeffs)
  rows, cols = frames.shape[:2]
  fig = Figure(figsize=(0.6 * cols + 0.5, 0.6 * rows + 0.8))
  ax = fig.subplots()
  ax.imshow(_image_tiles(frames), cmap="gray", vmin=0, vmax=1)
  centre = int(np.argmin(np.abs(coeffs)))
  for row in range(rows):
    _box(ax, row, centre)
  ax.set_xticks(np.arange(cols) * 28 + 13.5)
  ax.set_xticklabels([f"{c:.2g}" for c in coeffs], fontsize=6, rotation=90)
  ax.set_yticks([])
  ax.set(title=title, xlabel="coefficient")
  return save_figure(fig, path)


def plot_rotation_fidelity(path, coeffs, angles, spans, kept) -> Figure:
  """Angle of the best-matching rotated start frame along each operator path.

  Args:
    path: output PNG path.
    coeffs: ``[T]`` path coefficients.
    angles: ``[K, T]`` unwrapped matched angles (degrees, 0 at ``t = 0``)
      of ``K`` inputs.
    spans: ``[K]`` each path's gated span, in degrees (legend).
    kept: ``[K, T]`` the frames the gated span covers: drawn solid, the
      others (frames that are no longer the rotated digit) dotted.

  Returns:
    The figure, written to ``path``.
  """
  angles, kept = np.asarray(angles), np.asarray(kept, bool)
  fig = Figure(figsize=(PANEL + 1.5, PANEL))
  ax = fig.subplots()
  for k, (row, span) in enumerate(zip(angles, spans, strict=True)):
    (line,) = ax.plot(coeffs, row, ":", alpha=0.5)
    ax.plot(
      coeffs,
      np.where(kept[k], row, np.nan),
      marker=".",
      color=line.get_color(),
      label=f"input {k}: {span:.0f} deg",
    )
  ax.set(
    title="rotation fidelity (solid: frames within the gated span)",
    xlabel="operator coefficient",
    ylabel="matched rotation angle (deg, unwrapped, 0 at t=0)",
  )
  ax.legend(fontsize=6, ncol=2)
  return save_figure(fig, path)


def plot_image_rows(path, rows) -> Figure:
  """One row of 28 x 28 images per entry, titled on the left.

  Args:
    path: output PNG path.
    rows: ``[(title, images [K, 784])]``, the same ``K`` for every row.

  Returns:
    The figure, written to ``path``.
  """
  fig = Figure(figsize=(1.0 * len(rows[0][1]) + 1.2, 1.1 * len(rows)))
  axes = fig.subplots(len(rows), 1, squeeze=False)
  for ax, (title, images) in zip(axes[:, 0], rows, strict=True):
    ax.imshow(_image_tiles(np.asarray(images)[None]), cmap="gray", vmin=0, vmax=1)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_ylabel(title, rotation=0, ha="right", va="center")
  return save_figure(fig, path)
