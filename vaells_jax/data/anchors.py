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

__all__ = [
  "NEIGHBOURS",
  "geodesic_distances",
  "separate_pieces",
  "spread_anchors",
  "tangent_graph",
]

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
  euclid = _euclid(points, points)
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


# separate_pieces: a point's tangent space is spanned by the principal axes
# of its TANGENT_NEIGHBOURS nearest points that hold TANGENT_SHARE of the
# first axis's variance; a k-NN edge is kept when at most EDGE_OFF of its
# length leaves both ends' tangent spaces. Pieces under MIN_PIECE of the
# points join their nearest piece. At most PIECE_POINTS points build the
# graph (the rest take their nearest point's piece).
TANGENT_NEIGHBOURS = 5
TANGENT_SHARE = 0.2
EDGE_OFF = 0.8
END_SHARE = 0.02
MIN_PIECE = 0.05
PIECE_POINTS = 2000


def separate_pieces(x, neighbours: int = NEIGHBOURS) -> np.ndarray:
  """Classes for data given without labels: the separate curves (or
  surfaces) the data lie on, as labels ``[N]`` in ``0..C-1``, largest first.

  The pieces of the k-NN graph of ``x [N, D]`` whose edges run along the
  data: an edge between two curves that pass close leaves both points'
  tangent spaces and is cut. Two pieces whose ends meet (each end within
  :data:`END_SHARE` of its piece's geodesic length of the pair of points
  closest between them, at most twice their k-th neighbour's distance
  apart) are one curve that a gap in the sampling broke. Data on one curve
  or surface give one piece: all zeros. docs/studies/fit-shapes.md
  measures it on the battery's families.
  """
  from scipy.sparse.csgraph import connected_components, shortest_path

  points = np.asarray(x, np.float64).reshape(len(x), -1)
  n = len(points)
  if n > PIECE_POINTS:  # the graph of a subsample; the rest join the nearest
    some = np.random.default_rng(0).choice(n, PIECE_POINTS, replace=False)
    own = separate_pieces(points[some], neighbours)
    return own[_nearest(points, points[some])]
  k = min(neighbours, n - 1)
  if k < TANGENT_NEIGHBOURS:
    return np.zeros(n, np.int64)
  euclid = _euclid(points, points)
  np.fill_diagonal(euclid, np.inf)
  order = np.argsort(euclid, axis=1)
  near = order[:, :k]
  graph = _tangent_graph(points, euclid, order, k)
  _, piece = connected_components(graph, directed=False)
  geo = shortest_path(graph, directed=False)
  geo[~np.isfinite(geo)] = 0.0
  reach = euclid[np.arange(n), near[:, -1]]
  while _join_ends(piece, geo, euclid, reach):
    pass
  sizes = np.bincount(piece)
  while sizes[sizes > 0].min() < MIN_PIECE * n:  # the first small piece joins
    small = piece == np.flatnonzero((sizes > 0) & (sizes < MIN_PIECE * n))[0]
    gaps = euclid[np.ix_(small, ~small)]
    piece[small] = piece[~small][np.unravel_index(gaps.argmin(), gaps.shape)[1]]
    sizes = np.bincount(piece, minlength=len(sizes))
  rank = np.zeros(len(sizes), np.int64)  # the largest piece first
  rank[np.argsort(-sizes, kind="stable")] = np.arange(len(sizes))
  return rank[piece]


def _euclid(a, b):
  """Distances ``[P, Q]`` between the rows of ``a`` and ``b``, from inner
  products (no ``[P, Q, D]``)."""
  squared = (a**2).sum(1)[:, None] - 2 * a @ b.T + (b**2).sum(1)
  return np.sqrt(np.maximum(squared, 0))


def _nearest(points, reference):
  """Index of each point's nearest reference point (in chunks)."""
  return np.concatenate(
    [
      _euclid(chunk, reference).argmin(1)
      for chunk in np.array_split(points, max(1, len(points) // 1000))
    ]
  )


def tangent_graph(points, neighbours: int = NEIGHBOURS):
  """The symmetric k-NN graph of ``points [N, D]`` (edge weights: their
  lengths; a sparse ``[N, N]``) without the edges that leave both ends'
  tangent spaces (:data:`EDGE_OFF`): on curves that pass close (the
  strands of a knot, the turns of a spiral, concentric rings) the edges
  between them."""
  points = np.asarray(points, np.float64)
  euclid = _euclid(points, points)
  np.fill_diagonal(euclid, np.inf)
  order = np.argsort(euclid, axis=1)
  return _tangent_graph(points, euclid, order, min(neighbours, len(points) - 1))


def _tangent_graph(points, euclid, order, k):
  """:func:`tangent_graph` from the points' distances ``euclid`` (infinite
  on the diagonal) and their row-wise ``argsort`` ``order``."""
  from scipy.sparse import csr_matrix

  n, near = len(points), order[:, :k]
  local = points[order[:, :TANGENT_NEIGHBOURS]] - points[:, None]
  _, s, axes = np.linalg.svd(local, full_matrices=False)
  held = s**2 >= TANGENT_SHARE * s[:, :1] ** 2
  axes = axes * held[..., None]  # [N, L, D]: each point's tangent axes
  i, j = np.repeat(np.arange(n), k), near.ravel()
  edge = points[j] - points[i]
  length = np.linalg.norm(edge, axis=1)

  def off(end):
    along = np.einsum("eld,el->ed", axes[end], np.einsum("eld,ed->el", axes[end], edge))
    return np.linalg.norm(edge - along, axis=1)

  keep = np.maximum(off(i), off(j)) <= EDGE_OFF * length
  graph = csr_matrix((length[keep], (i[keep], j[keep])), shape=(n, n))
  return graph.maximum(graph.T)


def _join_ends(piece, geo, euclid, reach) -> bool:
  """Joins the first two pieces whose ends meet (:func:`separate_pieces`);
  whether it joined any."""
  ids = np.unique(piece)
  ends = {}
  for c in ids:
    members = np.flatnonzero(piece == c)
    inner = geo[np.ix_(members, members)]
    a, b = np.unravel_index(inner.argmax(), inner.shape)
    ends[c] = (members, members[[a, b]], max(inner.max(), 1e-12))
  for first, c in enumerate(ids):
    for d in ids[first + 1 :]:
      (mc, ec, lc), (md, ed, ld) = ends[c], ends[d]
      gap = euclid[np.ix_(mc, md)]
      p, q = np.unravel_index(gap.argmin(), gap.shape)
      p, q = mc[p], md[q]
      if (
        gap.min() <= 2 * max(reach[p], reach[q])
        and geo[p, ec].min() <= END_SHARE * lc
        and geo[q, ed].min() <= END_SHARE * ld
      ):
        piece[piece == d] = c
        return True
  return False


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
