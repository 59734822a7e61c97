"""Anchors spread along each class's manifold, chosen from the data alone.

The experiments place their anchors evenly along the known curve; a user's
data come without one. :func:`spread_anchors` approximates the curve by a
k-nearest-neighbour graph of the class's points (geodesic distances, as
Isomap does) and places the anchors at the medoids of a geodesic k-medoids
clustering: on a closed curve they come out evenly spaced, on an open one at
the centres of equal stretches. ``benchmarks/fit_battery.py --anchors=...``
compares them with random points and with evenly spaced points of the true
curve (docs/fit.md).
"""

from __future__ import annotations

import numpy as np

__all__ = ["NEIGHBOURS", "geodesic_distances", "spread_anchors"]

NEIGHBOURS = 8  # neighbours of each point in the graph
# Points of a class the graph holds, at most (every k-th point beyond): the
# distances are quadratic in them (60 000 digits: 6 000 a class).
GRAPH_POINTS = 1000


def geodesic_distances(points, neighbours: int = NEIGHBOURS) -> np.ndarray:
  """Shortest-path distances ``[N, N]`` over the symmetric k-NN graph of
  ``points [N, D]``. Points in separate pieces of the graph are joined by
  their Euclidean distance plus the largest distance within a piece, so
  every distance is finite and pieces count as far apart."""
  from scipy.sparse import csr_matrix
  from scipy.sparse.csgraph import shortest_path

  points = np.asarray(points, np.float64)
  n = len(points)
  squared = np.sum(points**2, axis=1)  # from inner products: no [N, N, D]
  euclid = np.sqrt(np.maximum(squared[:, None] - 2 * points @ points.T + squared, 0))
  np.fill_diagonal(euclid, 0.0)
  k = min(neighbours, n - 1)
  if k < 1:
    return euclid
  near = np.argsort(euclid, axis=1)[:, 1 : k + 1]
  rows = np.repeat(np.arange(n), k)
  graph = csr_matrix((euclid[rows, near.ravel()], (rows, near.ravel())), shape=(n, n))
  geo = shortest_path(graph, directed=False)
  finite = np.isfinite(geo)
  if not finite.all():
    geo = np.where(finite, geo, euclid + geo[finite].max())
  return geo


def _k_medoids(geo, count: int, max_iter: int = 200) -> np.ndarray:
  """Medoids of ``count`` geodesic clusters, started by farthest-point
  sampling from the point farthest from all others (an end of an open
  curve), refined by alternating assignment and medoid updates."""
  medoids = [int(np.argmax(geo.sum(axis=1)))]
  for _ in range(count - 1):
    medoids.append(int(np.argmax(geo[:, medoids].min(axis=1))))
  medoids = np.asarray(medoids)
  for _ in range(max_iter):
    assign = np.argmin(geo[:, medoids], axis=1)
    new = medoids.copy()
    for j in range(count):
      members = np.flatnonzero(assign == j)
      if len(members):
        new[j] = members[np.argmin(geo[np.ix_(members, members)].max(axis=1))]
    if np.array_equal(new, medoids):
      break
    medoids = new
  return medoids


def spread_anchors(x, labels, per_class: int, neighbours: int = NEIGHBOURS):
  """``per_class`` training points of each class spread along its manifold.

  Args:
    x: points ``[N, D]``.
    labels: classes ``[N]`` in ``0..C-1``; of a class of more than
      :data:`GRAPH_POINTS` points, every k-th point is a candidate.
    per_class: anchors per class ``A``.
    neighbours: neighbours per point in the k-NN graph.

  Returns:
    ``[C, A, D]``: points of ``x``, the medoids of a geodesic k-medoids
    clustering of each class (deterministic: no random start).

  Raises:
    ValueError: a class with fewer than ``per_class`` points.
  """
  x, labels = np.asarray(x, np.float64), np.asarray(labels)
  chosen = []
  for c in range(int(labels.max()) + 1):
    points = x[labels == c]
    if len(points) < per_class:
      raise ValueError(
        f"class {c} has {len(points)} training points, fewer than "
        f"anchors_per_class={per_class}."
      )
    points = points[:: -(-len(points) // GRAPH_POINTS)]
    medoids = _k_medoids(geodesic_distances(points, neighbours), per_class)
    chosen.append(points[np.sort(medoids)])
  return np.stack(chosen)
