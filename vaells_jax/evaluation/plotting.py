"""Figures of a trained model, written as PNG files (spec section 5).

Every function takes arrays (NumPy or JAX) and an output path, writes one PNG
and returns the :class:`matplotlib.figure.Figure`. Figures are built with
matplotlib's object API (``Figure()``, ``fig.savefig``), which needs no
backend and leaves pyplot alone: no display is needed, the caller's backend
is never changed and no figure is left open in pyplot.
"""

from __future__ import annotations

import pathlib

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from vaells_jax.data.files import atomic_write

__all__ = [
  "save_figure",
  "plot_ground_truth",
  "plot_latent_embedding",
  "plot_operator_magnitudes",
  "plot_orbits",
  "plot_panels",
  "plot_paths",
  "plot_posterior_contour",
  "plot_prior_samples",
  "plot_samples_on_manifold",
]

DPI = 110
PANEL = 4.2  # inches per panel side


def _tab10(count: int) -> np.ndarray:
  """``count`` RGBA colours ``[count, 4]``, cycling through ``tab10``."""
  return matplotlib.colormaps["tab10"](np.arange(count) % 10)


def save_figure(fig: Figure, path) -> Figure:
  """Writes ``fig`` to ``path`` atomically (creating parent folders); returns it."""
  path = pathlib.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  with atomic_write(path) as f:  # a killed run leaves no half a figure
    fig.savefig(
      f, format=path.suffix.lstrip(".") or "png", dpi=DPI, bbox_inches="tight"
    )
  return fig


def _encodings(ax, latents, size=6, colour="0.7") -> None:
  """Scatters the first two dims of ``latents [N, d]`` as small grey dots."""
  latents = np.asarray(latents)
  ax.scatter(
    latents[:, 0],
    latents[:, 1],
    s=size,
    c=colour,
    linewidths=0,
    label="encodings",
    zorder=1,
  )


def _anchors(ax, anchors, colour="k", size=80) -> None:
  """Marks anchors ``[..., d]`` (first two dims) with crosses."""
  anchors = np.asarray(anchors)
  anchors = anchors.reshape(-1, anchors.shape[-1])
  ax.scatter(
    anchors[:, 0],
    anchors[:, 1],
    marker="x",
    s=size,
    c=colour,
    linewidths=2,
    label="anchors",
    zorder=5,
  )


def _is_discrete(colour) -> bool:
  return np.issubdtype(colour.dtype, np.integer) or colour.dtype == bool


def _coloured_scatter(fig, ax, points, colour, colour_label) -> None:
  """Scatter of ``points [N, >=2]``: discrete legend or continuous colour bar."""
  colour = np.asarray(colour).reshape(-1)
  if _is_discrete(colour):
    cmap = matplotlib.colormaps["tab10"]
    for k in np.unique(colour):
      sel = colour == k
      ax.scatter(
        points[sel, 0],
        points[sel, 1],
        s=8,
        color=cmap(int(k) % 10),
        linewidths=0,
        label=f"{colour_label or 'class'} {k}",
      )
    ax.legend(loc="best", fontsize=8, markerscale=2)
  else:
    sc = ax.scatter(
      points[:, 0], points[:, 1], s=8, c=colour, cmap="viridis", linewidths=0
    )
    fig.colorbar(sc, ax=ax, label=colour_label, fraction=0.046, pad=0.04)


def plot_latent_embedding(
  path, latents, colour, anchors_latent=None, title="", colour_label=""
) -> Figure:
  """Latent codes coloured by class (integer ``colour``) or by a real value.

  Args:
    path: output PNG path.
    latents: ``[N, d]`` latent codes; the first two dims are shown.
    colour: ``[N]`` integer class labels (legend) or floats (colour bar), e.g.
      the ground-truth curve parameter.
    anchors_latent: ``[K, d]`` (or ``[C, A, d]``) encoded anchors, black x's;
      None for none.
    title: figure title.
    colour_label: legend prefix or colour-bar label.

  Returns:
    The figure, written to ``path``.
  """
  latents = np.asarray(latents)
  fig = Figure(figsize=(PANEL + 1, PANEL))
  ax = fig.subplots()
  _coloured_scatter(fig, ax, latents, colour, colour_label)
  if anchors_latent is not None:
    _anchors(ax, anchors_latent)
  ax.set(title=title, xlabel="z[0]", ylabel="z[1]", aspect="equal")
  return save_figure(fig, path)


def plot_ground_truth(
  path, pos, colour, title="ground truth", colour_label=""
) -> Figure:
  """The ground-truth 2-D latent structure, coloured by class or position.

  Args:
    path: output PNG path.
    pos: ``[N, 2]`` ground-truth positions.
    colour: ``[N]`` integer classes or real values (e.g. the curve parameter).
    title: figure title.
    colour_label: legend prefix or colour-bar label.

  Returns:
    The figure, written to ``path``.
  """
  pos = np.asarray(pos)
  fig = Figure(figsize=(PANEL + 1, PANEL))
  ax = fig.subplots()
  _coloured_scatter(fig, ax, pos, colour, colour_label)
  ax.set(title=title, xlabel="p[0]", ylabel="p[1]", aspect="equal")
  return save_figure(fig, path)


def _orbit_limits(latents, orbits, max_zoom_out=0.5):
  """Square view ``(lo [2], hi [2])`` around the encodings, grown toward the orbits.

  The view covers the encodings' box padded by 10% and extends to cover the
  orbits ``[..., 2]``, but never past that box padded by ``max_zoom_out``
  times its span, so one diverging orbit cannot shrink the data to a dot.
  """
  latents = np.asarray(latents)[:, :2]
  lo, hi = latents.min(axis=0), latents.max(axis=0)
  span = np.max(hi - lo) + 1e-9
  mid = (lo + hi) / 2
  points = np.asarray(orbits).reshape(-1, 2)
  points = points[np.all(np.isfinite(points), axis=1)]
  reach = np.max(np.abs(points - mid), initial=0.0)
  half = np.clip(reach * 1.05, 0.55 * span, (0.5 + max_zoom_out) * span)
  return mid - half, mid + half


def plot_orbits(path, latents, orbits, magnitudes=None, title=None) -> Figure:
  """The orbit of each transport operator from several start points.

  Each orbit is a coloured line with a dot at its first point. The view is
  centred on the encodings; orbits that run far away are clipped (see
  ``_orbit_limits``).

  Args:
    path: output PNG path.
    latents: ``[N, 2]`` encodings (grey dots).
    orbits: ``[M, S, T, 2]`` orbit points: operator ``m``, start point ``s``,
      step ``t``; ``orbits[m, s, 0]`` is marked as the start.
    magnitudes: optional ``[M]`` operator magnitudes (Frobenius norms) shown in
      the panel titles.
    title: optional panel title instead of the operator's.

  Returns:
    The figure, written to ``path``.
  """
  orbits = np.asarray(orbits)
  num_ops, num_starts = orbits.shape[:2]
  fig = Figure(figsize=(PANEL * num_ops, PANEL))
  axes = fig.subplots(1, num_ops, squeeze=False)
  colours = _tab10(num_starts)
  lo, hi = _orbit_limits(latents, orbits)
  for m, ax in enumerate(axes[0]):
    _encodings(ax, latents)
    for s, colour in enumerate(colours):
      orbit = orbits[m, s]
      ax.plot(orbit[:, 0], orbit[:, 1], "-", lw=1.5, color=colour, zorder=3)
      ax.plot(*orbit[0], "o", ms=5, color=colour, mec="k", zorder=4)
    label = f"operator {m}"
    if magnitudes is not None:
      label += f"  |Psi|_F = {float(np.asarray(magnitudes)[m]):.3g}"
    ax.set(
      title=title or label, xlim=(lo[0], hi[0]), ylim=(lo[1], hi[1]), aspect="equal"
    )
  return save_figure(fig, path)


def plot_prior_samples(
  path, latents, samples, anchors_latent, title="prior samples from each anchor"
) -> Figure:
  """Samples from the prior around each anchor, one colour per anchor.

  Args:
    path: output PNG path.
    latents: ``[N, 2]`` encodings (grey dots).
    samples: ``[K, S, 2]`` ``S`` samples around each of ``K`` anchors.
    anchors_latent: ``[K, 2]`` encoded anchors (black x's).
    title: the panel's title.

  Returns:
    The figure, written to ``path``.
  """
  samples = np.asarray(samples)
  fig = Figure(figsize=(PANEL, PANEL))
  ax = fig.subplots()
  _encodings(ax, latents)
  colours = _tab10(samples.shape[0])
  for k in range(samples.shape[0]):
    ax.scatter(
      samples[k, :, 0], samples[k, :, 1], s=8, color=colours[k], linewidths=0, zorder=3
    )
  _anchors(ax, anchors_latent)
  ax.set(title=title, aspect="equal")
  return save_figure(fig, path)


def plot_paths(
  path, latents, paths, title="transport paths (solid) vs straight lines (dashed)"
) -> Figure:
  """Inferred transport paths next to the straight line between their ends.

  Args:
    path: output PNG path.
    latents: ``[N, 2]`` encodings (grey dots).
    paths: ``[P, T, 2]`` paths; ``paths[p, 0]`` is the start (cyan circle) and
      ``paths[p, -1]`` the end (red x).
    title: the panel's title.

  Returns:
    The figure, written to ``path``.
  """
  paths = np.asarray(paths)
  fig = Figure(figsize=(PANEL, PANEL))
  ax = fig.subplots()
  _encodings(ax, latents)
  colours = _tab10(paths.shape[0])
  for p, colour in zip(paths, colours, strict=True):
    ax.plot(p[:, 0], p[:, 1], "-", lw=2, color=colour, zorder=3)
    ax.plot(p[[0, -1], 0], p[[0, -1], 1], "--", lw=1, color=colour, zorder=2)
    ax.plot(*p[0], "o", ms=9, mfc="cyan", mec="k", zorder=4)
    ax.plot(*p[-1], "x", ms=10, mew=2.5, color="red", zorder=4)
  ax.set(title=title, aspect="equal")
  return save_figure(fig, path)


def plot_posterior_contour(
  path, grid_x, grid_y, data_term, coeff_term, total, center, latents
) -> Figure:
  """Contours of the variational posterior's terms (paper appendix C).

  Args:
    path: output PNG path.
    grid_x: ``[G1]`` grid abscissae.
    grid_y: ``[G2]`` grid ordinates.
    data_term: ``[G2, G1]`` data-fidelity term ``-zeta2/2 |z - T(c) f(x)|^2``.
    coeff_term: ``[G2, G1]`` coefficient prior term ``-zeta3 |c|_1``.
    total: ``[G2, G1]`` their sum, ``log q(z | x)`` up to a constant.
    center: ``[2]`` the encoded point ``f(x)`` (red x).
    latents: ``[N, 2]`` encodings (black dots).

  Returns:
    The figure, written to ``path``.
  """
  panels = (
    ("data fidelity", data_term),
    ("coefficient prior", coeff_term),
    ("total log q(z|x)", total),
  )
  latents, center = np.asarray(latents), np.asarray(center)
  grid_x, grid_y = np.asarray(grid_x), np.asarray(grid_y)
  fig = Figure(figsize=(3 * (PANEL + 0.8), PANEL), layout="constrained")
  axes = fig.subplots(1, 3)
  for ax, (title, values) in zip(axes, panels, strict=True):
    cs = ax.contourf(grid_x, grid_y, np.asarray(values), levels=20, cmap="viridis")
    fig.colorbar(cs, ax=ax, shrink=0.8)
    ax.scatter(latents[:, 0], latents[:, 1], s=3, c="k", linewidths=0)
    ax.plot(center[0], center[1], "x", ms=12, mew=3, color="red")
    ax.set(
      title=title,
      xlim=(grid_x[0], grid_x[-1]),
      ylim=(grid_y[0], grid_y[-1]),
      aspect="equal",
    )
  return save_figure(fig, path)


def plot_operator_magnitudes(path, magnitudes) -> Figure:
  """Bar chart of the Frobenius norms of the transport operators.

  Args:
    path: output PNG path.
    magnitudes: ``[M]`` Frobenius norms ``|Psi_m|_F``.

  Returns:
    The figure, written to ``path``.
  """
  magnitudes = np.asarray(magnitudes).reshape(-1)
  fig = Figure(figsize=(max(3.0, 0.5 * magnitudes.size + 2), 3.2))
  ax = fig.subplots()
  ax.bar(np.arange(magnitudes.size), magnitudes, color="tab:blue")
  ax.set(
    title="operator magnitudes",
    xlabel="operator m",
    ylabel="|Psi_m|_F",
    xticks=np.arange(magnitudes.size),
  )
  return save_figure(fig, path)


def plot_panels(path, panels, colour_label="") -> Figure:
  """Point sets side by side, e.g. each model's latent codes (paper figs 2, 4).

  Args:
    path: output PNG path.
    panels: ``[(title, points [N, 2], colour [N])]``; ``colour`` holds
      integer classes (legend) or floats (colour bar).
    colour_label: legend prefix or colour-bar label.

  Returns:
    The figure, written to ``path``.
  """
  fig = Figure(figsize=((PANEL + 1.2) * len(panels), PANEL))
  axes = fig.subplots(1, len(panels), squeeze=False)
  for ax, (title, points, colour) in zip(axes[0], panels, strict=True):
    _coloured_scatter(fig, ax, np.asarray(points), colour, colour_label)
    ax.set(title=title, aspect="equal")
  fig.tight_layout()
  return save_figure(fig, path)


def plot_samples_on_manifold(path, manifold, panels) -> Figure:
  """Points (e.g. decoded prior samples) over the true manifold, one panel each.

  Args:
    path: output PNG path.
    manifold: ``[G, 2]`` the true manifold (or the data) in the same
      coordinates as the points (grey).
    panels: ``[(title, points [P, 2])]`` in the same coordinates.

  Returns:
    The figure, written to ``path``.
  """
  manifold = np.asarray(manifold)
  lo, hi = manifold.min(axis=0), manifold.max(axis=0)
  pad = 0.5 * (hi - lo)
  fig = Figure(figsize=(PANEL * len(panels), PANEL))
  axes = fig.subplots(1, len(panels), squeeze=False)
  for ax, (title, points) in zip(axes[0], panels, strict=True):
    points = np.asarray(points)
    ax.scatter(manifold[:, 0], manifold[:, 1], s=2, c="0.6", linewidths=0, zorder=1)
    ax.scatter(
      points[:, 0], points[:, 1], s=5, c="tab:red", alpha=0.5, linewidths=0, zorder=2
    )
    ax.set(
      title=title,
      aspect="equal",
      xlim=(lo[0] - pad[0], hi[0] + pad[0]),
      ylim=(lo[1] - pad[1], hi[1] + pad[1]),
    )
  return save_figure(fig, path)
