"""Ground-truth-free signals of whether an operator follows its data.

The selection of a population's member (:mod:`vaells_jax.training.population`)
and the verdict on a trained model (:mod:`vaells_jax.runs.verdict`) score a
model with these; none needs the true manifold.

* :func:`latent_coverage`: in latent space, the fraction of each class's
  encodings that the strongest operator's orbits pass near.
* :func:`data_coverage`: in input space, the fraction of each class's
  training points that the decoded orbit of the strongest operator from one
  of the class's anchors passes, following the orbit only as long as it
  stays on the data: the data's counterpart of the experiments' ground-truth
  ``orbit_coverage`` (:func:`vaells_jax.evaluation.metrics.orbit_coverage`).
* :func:`data_directions` and :func:`surface_coverage`: how many
  directions the data extend in locally (1 on a curve, 2 on a surface), and
  the fraction of each class's points that the combined flows of the two
  strongest operators reach: the counterpart of ``orbit_coverage`` for a
  surface.
* :func:`member_sample_distance`: how far decoded prior samples lie from
  the data (the counterpart of the ground truth's sample distance).
"""

from __future__ import annotations

import jax
import numpy as np

from vaells_jax.core.laplace import sample_laplace
from vaells_jax.core.transport import transport, transport_path

__all__ = [
  "COVERAGE_RADII",
  "DATA_COVERAGE_NEIGHBOURS",
  "DATA_COVERAGE_REACHES",
  "combined_coverages",
  "coverage_points",
  "coverage_ranks",
  "coverage_signals",
  "coverage_subset",
  "data_coverage",
  "data_directions",
  "latent_coverage",
  "local_spectra",
  "member_data_coverage",
  "member_sample_distance",
  "orbit_data_coverage",
  "pairwise_distances",
  "surface_coefficients",
  "surface_coverage",
]

COVERAGE_POINTS = 500  # training points encoded for latent_coverage
COVERAGE_STARTS = 10  # orbit starts per class
COVERAGE_ORBIT_POINTS = 400
# The radius of each coverage signal, in median nearest-neighbour spacings of
# the encodings: 3 separates the concentric circles' draws; on the swiss roll,
# whose encodings an exponential orbit follows only roughly, 20 does
# (docs/studies/population-swiss-roll.md, "Which signal at the end").
COVERAGE_RADII = {"latent_coverage": 3.0, "latent_coverage_wide": 20.0}


def latent_coverage(
  latents, labels, psi, seed: int = 0, radius: float = COVERAGE_RADII["latent_coverage"]
) -> float:
  """How much of each class's encodings the dominant operator's orbits pass.

  From :data:`COVERAGE_STARTS` encodings of each class, the orbit
  ``expm(t Psi_m) z`` of the strongest operator ``m`` (largest Frobenius
  norm) is followed a full turn each way of its fastest rotation
  (``|t| <= 2 pi / max |Im eig Psi_m|``); the score is the fraction of the
  class's encodings within ``radius`` median nearest-neighbour
  spacings of the orbit, averaged over starts and classes: near 1 when one
  operator moves points along their class's manifold, near 0 otherwise. It
  needs the encodings and classes only, no ground truth: the latent-space
  counterpart of ``orbit_coverage`` (on the concentric circles, 10 seeds x
  8 dictionary draws, it separates the runs that learned the circles from the
  others completely at the end of training; docs/population.md, "Which signal").

  Args:
    latents: encodings ``[N, d]``.
    labels: classes ``[N]``.
    psi: operators ``[M, d, d]``.
    seed: picks the starts.
    radius: in median nearest-neighbour spacings (:data:`COVERAGE_RADII`).

  Returns:
    The score in ``[0, 1]``.
  """
  return _coverages(latents, labels, psi, seed, (radius,))[0]


def combined_coverages(signals: dict) -> dict:
  """``latent_coverage_both`` (the sum) and ``latent_coverage_ranks``."""
  narrow, wide = (signals[name] for name in COVERAGE_RADII)
  return {
    "latent_coverage_both": np.add(narrow, wide).tolist(),
    "latent_coverage_ranks": coverage_ranks(narrow, wide).tolist(),
  }


def coverage_ranks(narrow, wide) -> np.ndarray:
  """Each member's rank by ``latent_coverage`` plus its rank by
  ``latent_coverage_wide`` (0 the lowest, ties share their mean rank), plus a
  tenth of their sum (orders equal sums). Ranks weigh the two radii alike; in
  ``latent_coverage_both`` the narrow one, which varies more, mostly decides."""
  narrow, wide = np.asarray(narrow, np.float64), np.asarray(wide, np.float64)

  def ranks(x):
    below = (x[None, :] < x[:, None]).sum(axis=1)
    ties = (x[None, :] == x[:, None]).sum(axis=1) - 1
    return below + 0.5 * ties

  return ranks(narrow) + ranks(wide) + (narrow + wide) / 10


def coverage_subset(num_points: int, seed: int) -> np.ndarray:
  """The indices of the (at most :data:`COVERAGE_POINTS`) points encoded for
  the coverage signals, drawn by ``seed``."""
  return np.random.default_rng(seed).permutation(num_points)[:COVERAGE_POINTS]


def coverage_points(x, labels, seed: int) -> tuple[np.ndarray, np.ndarray]:
  """The points (float32) and classes (int32) of :func:`coverage_subset`."""
  subset = coverage_subset(len(x), seed)
  return np.asarray(x, np.float32)[subset], np.asarray(labels, np.int32)[subset]


def coverage_signals(latents, labels, psi, seed: int) -> dict:
  """:func:`latent_coverage` at every radius of :data:`COVERAGE_RADII`, by
  name, from one set of orbits."""
  scores = _coverages(latents, labels, psi, seed, tuple(COVERAGE_RADII.values()))
  return dict(zip(COVERAGE_RADII, scores, strict=True))


def _coverages(latents, labels, psi, seed: int, radii) -> list[float]:
  """:func:`latent_coverage` at each of the ``radii`` (one set of orbits)."""
  latents, psi = np.asarray(latents, np.float64), np.asarray(psi, np.float64)
  op = psi[int(np.argmax(np.linalg.norm(psi, axis=(1, 2))))]
  if not np.all(np.isfinite(op)) or not np.all(np.isfinite(latents)):
    return [0.0] * len(radii)
  rate = max(float(np.abs(np.linalg.eigvals(op).imag).max()), 1e-6)
  ts = np.linspace(-2 * np.pi / rate, 2 * np.pi / rate, COVERAGE_ORBIT_POINTS)
  eigval, eigvec = np.linalg.eig(op)
  inverse = np.linalg.pinv(eigvec)
  with np.errstate(all="ignore"):
    flows = np.real(  # expm(t op) from one eigendecomposition: [T, d, d]
      np.einsum("ij,tj,jk->tik", eigvec, np.exp(ts[:, None] * eigval), inverse)
    )
  gaps = np.linalg.norm(latents[:, None] - latents[None], axis=-1)
  np.fill_diagonal(gaps, np.inf)
  spacing = np.median(gaps.min(axis=1))
  rng = np.random.default_rng(seed)
  scores = [[] for _ in radii]
  for c in np.unique(labels):
    points = latents[labels == c]
    for i in rng.choice(len(points), min(COVERAGE_STARTS, len(points)), replace=False):
      with np.errstate(all="ignore"):
        orbit = flows @ points[i]  # [T, d]
        near = np.linalg.norm(points[:, None] - orbit[None], axis=-1).min(axis=1)
      near = np.nan_to_num(near, nan=np.inf)
      for score, radius in zip(scores, radii, strict=True):
        score.append(np.mean(near <= radius * spacing))
  return [float(np.mean(score)) for score in scores]


DATA_COVERAGE_TURNS = 2.0  # each orbit is followed this many turns each way
DATA_COVERAGE_POINTS = 2001  # points of each orbit
# The unit of data_coverage's distances: the median distance from a training
# point to its k-th nearest neighbour of the same class (the k of the anchors'
# neighbour graph, vaells_jax.data.anchors), which grows with the data's
# noise and with the gaps between its points along the manifold.
DATA_COVERAGE_NEIGHBOURS = 8
# How near the data an orbit must stay, and how near it a training point must
# lie to count as passed, in those units; the score is the mean over these
# reaches. One reach alone is sharp: on the swiss roll's seeds 120-159, 2
# kept a member that traverses the roll on 38, 1.5 and 3 on 29, the mean
# of 2, 3 and 4 on 39 (docs/studies/population-swiss-roll.md, "Which member is kept").
DATA_COVERAGE_REACHES = (2.0, 3.0, 4.0)


def data_coverage(decoded, start: int, x, labels, reaches=DATA_COVERAGE_REACHES):
  """How much of each class's data one decoded orbit passes without leaving it.

  For each class ``c`` and each of its anchors ``a``, the decoded orbit
  ``decoded[:, c, a]`` is followed from ``start`` in both directions while
  its points lie within a reach of the class's training points, and no
  nearer to another class's (an orbit that crosses to another class's
  curve has left its own); the
  anchor's score is the fraction of the class's points within the same
  reach of that stretch. The best anchor of each class counts, the classes
  are averaged, and so are the ``reaches`` (in units of the median distance
  from a training point to its :data:`DATA_COVERAGE_NEIGHBOURS`-th nearest
  neighbour of the same class, which grows with the data's noise and with
  the gaps between its points). Near 1 when an operator carries a point
  along its whole class; lower when its orbit leaves the data part of the
  way (spirals off, cuts across a roll's turns), even if it comes back. The
  experiments' success criterion scores the same orbits against the true
  curves (:func:`vaells_jax.evaluation.metrics.orbit_coverage`); this needs
  only the data, and does not change when the data are scaled or shifted.

  Args:
    decoded: ``[T, C, A, D]`` decoded orbits, in orbit order.
    start: index into ``T`` of the orbits' start (the anchors).
    x: training points ``[N, D]``; labels: their classes ``[N]`` in ``0..C-1``.
    reaches: in the unit above.

  Returns:
    The score in ``[0, 1]``; a class whose orbits are not on its data at
    their start (or not finite) scores 0.
  """
  decoded = np.asarray(decoded, np.float64)
  x, labels = np.asarray(x, np.float64), np.asarray(labels)
  classes = [x[labels == c] for c in range(decoded.shape[1])]
  unit = _spacing(classes)
  if not unit > 0:
    return 0.0
  scores = np.zeros((len(reaches), len(classes), decoded.shape[2]))
  for c, points in enumerate(classes):
    others = x[labels != c]
    for a in range(decoded.shape[2]):
      gaps = pairwise_distances(decoded[:, c, a], points)  # [T, N_c]
      to_data = gaps.min(axis=1, initial=np.inf)
      to_others = pairwise_distances(decoded[:, c, a], others).min(
        axis=1, initial=np.inf
      )
      for r, reach in enumerate(reaches):
        on = (to_data <= reach * unit) & (to_data <= to_others)
        if on[start]:
          off = np.flatnonzero(~on)
          lo = off[off < start].max(initial=-1) + 1
          hi = off[off > start].min(initial=len(on))
          scores[r, c, a] = np.mean(gaps[lo:hi].min(axis=0) <= reach * unit)
  return float(scores.max(axis=2).mean())


def _spacing(classes) -> float:
  """The median distance from a point to its
  :data:`DATA_COVERAGE_NEIGHBOURS`-th nearest neighbour of its class (NaN
  when no class has two points)."""
  nearest = []
  for points in classes:
    k = min(DATA_COVERAGE_NEIGHBOURS, len(points) - 1)
    if k > 0:  # column 0 of the sorted distances: the point itself
      nearest.append(np.sort(pairwise_distances(points, points), axis=1)[:, k])
  return float(np.median(np.concatenate(nearest))) if nearest else float("nan")


def pairwise_distances(a, b, chunk: int = 512):
  """Euclidean distances ``[len(a), len(b)]``, ``inf`` where not finite."""
  parts = []
  with np.errstate(all="ignore"):
    for i in range(0, len(a), chunk):
      rows = a[i : i + chunk]
      squared = (
        np.sum(rows**2, axis=1)[:, None] - 2 * rows @ b.T + np.sum(b**2, axis=1)[None]
      )
      parts.append(np.sqrt(np.maximum(squared, 0.0)))
  return np.nan_to_num(np.concatenate(parts), nan=np.inf, posinf=np.inf)


def member_data_coverage(model, params, x, labels, **kwargs) -> float:
  """:func:`orbit_data_coverage` of one model (``model``: a
  :class:`~vaells_jax.models.vaells.Model`; ``params`` its parameters, with
  ``psi`` and the input-space ``anchors [C, A, D]``)."""
  starts = model.encode(params, params["anchors"])  # [C, A, d]
  decode = lambda z: model.decode(params, z)  # noqa: E731
  return orbit_data_coverage(params["psi"], starts, decode, x, labels, **kwargs)


def orbit_data_coverage(psi, starts, decode, x, labels, **kwargs) -> float:
  """:func:`data_coverage` of the strongest operator's orbits from the
  encoded anchors ``starts [C, A, d]``, decoded by ``decode``, over
  :data:`DATA_COVERAGE_TURNS` turns of its fastest rotation each way."""
  psi = np.asarray(psi, np.float32)
  if not np.all(np.isfinite(psi)):
    return 0.0
  m = int(np.argmax(np.linalg.norm(psi, axis=(1, 2))))
  rate = max(float(np.abs(np.linalg.eigvals(psi[m].astype(np.float64))).max()), 1e-6)
  span = 2 * np.pi * DATA_COVERAGE_TURNS / rate
  ts = np.linspace(-span, span, DATA_COVERAGE_POINTS, dtype=np.float32)
  coeffs = np.eye(len(psi), dtype=np.float32)[m]
  decoded = decode(transport_path(psi, coeffs, starts, ts))
  return data_coverage(decoded, DATA_COVERAGE_POINTS // 2, x, labels, **kwargs)


# data_directions: of the principal axes of each point's DIRECTION_NEIGHBOURS
# nearest points (of its class), the last one that holds at least
# DIRECTION_SHARE of the first axis's variance and DIRECTION_GAP times the
# next axis's (above the noise), the median over points. On the battery's
# curves (benchmarks/fit_battery.py) a bend puts a few percent of the
# variance on a second axis, noise as much on each further one; on its
# torus the second circle holds a large share.
DIRECTION_NEIGHBOURS = 12
DIRECTION_SHARE = 0.1
DIRECTION_GAP = 3.0
SURFACE_STEPS = 41  # coefficients of each of surface_coverage's two operators
# surface_coverage's reaches, in data_coverage's unit (whose reaches are 2-4):
# on a surface the k-th neighbour lies across it, not along one line, and at
# 2-4 units the one circle of a torus that an operator turns passes half of
# its points (tests/test_verdict.py's torus: 0.56; at these 0.16).
SURFACE_REACHES = (0.5, 1.0, 1.5)


def local_spectra(x, labels, neighbours: int) -> list[np.ndarray]:
  """Each class's local principal variances: for every point, the squared
  singular values of its ``k`` nearest points of its class and itself,
  centred, zero beyond the dimension (``[N_c, k + 1]`` a class, ``k`` =
  ``neighbours`` or fewer in a small class; classes with fewer than 3
  points left out)."""
  x, labels = np.asarray(x, np.float64), np.asarray(labels)
  spectra = []
  for c in np.unique(labels):
    points = x[labels == c]
    k = min(neighbours, len(points) - 1)
    if k < 2:
      continue
    near = np.argsort(pairwise_distances(points, points), axis=1)[:, : k + 1]
    window = points[near] - points[near].mean(axis=1, keepdims=True)
    spectrum = np.linalg.svd(window, compute_uv=False) ** 2
    spectra.append(np.pad(spectrum, ((0, 0), (0, k + 1 - spectrum.shape[1]))))
  return spectra


def data_directions(x, labels) -> float:
  """How many directions the data extend in locally (:data:`DIRECTION_SHARE`,
  :data:`DIRECTION_GAP`): 1 on a curve, 2 on a surface such as a torus."""
  counts = []
  for spectrum in local_spectra(x, labels, DIRECTION_NEIGHBOURS):
    spectrum = np.concatenate([spectrum, np.zeros((len(spectrum), 1))], axis=1)
    held = (spectrum[:, :-1] >= DIRECTION_SHARE * spectrum[:, :1]) & (
      spectrum[:, :-1] >= DIRECTION_GAP * spectrum[:, 1:]
    )
    counts.append(np.max(np.where(held, np.arange(1, held.shape[1] + 1), 1), axis=1))
  return float(np.median(np.concatenate(counts))) if counts else 1.0


def surface_coefficients(psi, steps: int) -> np.ndarray:
  """Coefficients ``[steps, steps, M]`` of the two strongest operators
  (Frobenius norm) of ``psi [M, d, d]`` over a square grid spanning a turn
  of each one's fastest rotation each way; zero for the others."""
  psi = np.asarray(psi)
  two = np.argsort(np.linalg.norm(psi, axis=(1, 2)))[::-1][:2]
  rates = np.abs(np.linalg.eigvals(psi[two].astype(np.float64))).max(axis=-1)
  grid = np.linspace(-1.0, 1.0, steps)
  coeffs = np.zeros((steps, steps, len(psi)), np.float32)
  coeffs[..., two[0]] = (2 * np.pi / max(rates[0], 1e-6)) * grid[:, None]
  coeffs[..., two[1]] = (2 * np.pi / max(rates[1], 1e-6)) * grid[None, :]
  return coeffs


def surface_coverage(psi, starts, decode, x, labels, reaches=SURFACE_REACHES):
  """:func:`data_coverage` of the combined flows of the two strongest
  operators: the points ``expm(a Psi_1 + b Psi_2) z`` from each encoded
  anchor ``z`` (``starts [C, A, d]``), over a grid of ``(a, b)`` spanning a
  turn of each operator's fastest rotation each way, are decoded; those
  within a reach of the class's data and joined to the anchor through
  such grid points count, and the score is the fraction of the class's
  points within the reach of them (the best anchor, the mean over classes
  and :data:`SURFACE_REACHES`). A flow along one direction of a torus
  reaches a band of it; flows along both reach all of it."""
  from scipy import ndimage

  psi = np.asarray(psi, np.float32)
  if not np.all(np.isfinite(psi)) or len(psi) < 2:
    return 0.0
  coeffs = surface_coefficients(psi, SURFACE_STEPS)[:, :, None, None]
  starts = np.asarray(starts, np.float32)
  decoded = np.asarray(decode(transport(psi, coeffs, starts)), np.float64)
  x, labels = np.asarray(x, np.float64), np.asarray(labels)
  classes = [x[labels == c] for c in range(starts.shape[0])]
  unit = _spacing(classes)
  if not unit > 0 or not np.all(np.isfinite(decoded)):
    return 0.0
  centre = (SURFACE_STEPS // 2, SURFACE_STEPS // 2)
  scores = np.zeros((len(reaches), len(classes), starts.shape[1]))
  for c, points in enumerate(classes):
    for a in range(starts.shape[1]):
      flat = decoded[:, :, c, a].reshape(-1, x.shape[-1])
      gaps = pairwise_distances(flat, points)  # [G G, N_c]
      to_data = gaps.min(axis=1).reshape(SURFACE_STEPS, SURFACE_STEPS)
      for r, reach in enumerate(reaches):
        pieces, _ = ndimage.label(to_data <= reach * unit)
        if pieces[centre]:
          held = (pieces == pieces[centre]).reshape(-1)
          scores[r, c, a] = np.mean(gaps[held].min(axis=0) <= reach * unit)
  return float(scores.max(axis=2).mean())


SAMPLES_PER_ANCHOR = 200  # decoded prior samples of member_sample_distance


def member_sample_distance(model, params, x, labels, key, *, laplace_scale, gamma):
  """How far a model's decoded prior samples lie from its class's data.

  ``SAMPLES_PER_ANCHOR`` samples ``T(c) a + gamma eps`` around each encoded
  anchor ``a`` (Laplace coefficients of scale ``laplace_scale``, as the
  prior draws them) are decoded; the score is their mean distance to the
  nearest training point of the anchor's class, in the unit of
  :func:`data_coverage`. The experiments' success criterion measures the
  same samples against the true manifold.
  """
  x, labels = np.asarray(x, np.float64), np.asarray(labels)
  starts = model.encode(params, params["anchors"])  # [C, A, d]
  k_c, k_e = jax.random.split(key)
  shape = starts.shape[:-1] + (SAMPLES_PER_ANCHOR,)
  coeffs = sample_laplace(k_c, shape + (params["psi"].shape[0],), laplace_scale)
  eps = jax.random.normal(k_e, shape + (starts.shape[-1],))
  moved = transport(params["psi"], coeffs, starts[..., None, :]) + gamma * eps
  decoded = np.asarray(model.decode(params, moved), np.float64)  # [C, A, S, D]
  unit = _spacing([x[labels == c] for c in range(decoded.shape[0])])
  gaps = [
    pairwise_distances(decoded[c].reshape(-1, x.shape[-1]), x[labels == c]).min(axis=1)
    for c in range(decoded.shape[0])
  ]
  return float(np.mean(np.concatenate(gaps)) / unit)
