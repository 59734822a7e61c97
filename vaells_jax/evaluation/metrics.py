"""Metrics that measure whether a latent manifold model works (spec section 6).

Every metric is a pure function of arrays (NumPy or JAX; converted to float64
NumPy). Nearest-neighbour searches run over chunks of the query points so the
memory use is ``O(chunk_size * num_references)``, never ``O(P * G)``.
The nearest point is found with the expanded form
``|q|^2 + |r|^2 - 2 q.r`` and its distance then recomputed exactly as
``|q - r|``, so a query that equals a reference point gets distance 0.
"""

from __future__ import annotations

import numpy as np

__all__ = [
  "chunked",
  "knn_class_accuracy",
  "latent_path_distance",
  "manifold_distance",
  "nearest_neighbours",
  "orbit_coverage",
  "pca_2d",
]

_DEFAULT_CHUNK = 1024


def chunked(function, x, size: int) -> np.ndarray:
  """``function(x)`` a ``size`` of rows at a time (bounded memory); no rows
  make one call on none."""
  starts = range(0, max(len(x), 1), size)
  return np.concatenate([np.asarray(function(x[i : i + size])) for i in starts])


def _as_points(x, name: str) -> np.ndarray:
  """``x`` as a float64 ``[P, d]`` array; ``[..., d]`` inputs are flattened."""
  x = np.asarray(x, dtype=np.float64)
  if x.ndim < 2:
    raise ValueError(f"{name} must have shape [..., d], got {x.shape}")
  x = x.reshape(-1, x.shape[-1])
  if x.shape[0] == 0:
    raise ValueError(f"{name} is empty: shape {x.shape}")
  if not np.all(np.isfinite(x)):
    raise ValueError(f"{name} contains non-finite values")
  return x


def nearest_neighbours(
  queries, references, exclude_self: bool = False, chunk_size: int = _DEFAULT_CHUNK
):
  """Index of and Euclidean distance to the nearest reference of each query.

  Args:
    queries: ``[P, d]`` query points.
    references: ``[G, d]`` reference points.
    exclude_self: if True, ``queries`` must be ``references`` (same ``P = G``
      rows) and query ``i`` never matches reference ``i`` (leave-one-out).
    chunk_size: queries processed at once.

  Returns:
    ``(index [P] int, distance [P] float64)``.

  Raises:
    ValueError: on mismatched dimensions, or ``exclude_self`` with fewer than
      two points or different row counts.
  """
  q = _as_points(queries, "queries")
  r = _as_points(references, "references")
  if q.shape[1] != r.shape[1]:
    raise ValueError(f"dimension mismatch: queries {q.shape}, references {r.shape}")
  if exclude_self and (q.shape[0] != r.shape[0] or q.shape[0] < 2):
    raise ValueError(
      f"exclude_self needs the same >= 2 points twice, got {q.shape} and {r.shape}"
    )
  r_sq = np.sum(r**2, axis=1)
  index = np.empty(q.shape[0], dtype=np.int64)
  for start in range(0, q.shape[0], chunk_size):
    block = q[start : start + chunk_size]
    d2 = np.sum(block**2, axis=1)[:, None] + r_sq[None, :] - 2.0 * block @ r.T
    if exclude_self:
      rows = np.arange(block.shape[0])
      d2[rows, start + rows] = np.inf
    index[start : start + block.shape[0]] = np.argmin(d2, axis=1)
  distance = np.linalg.norm(q - r[index], axis=1)
  return index, distance


def knn_class_accuracy(latents, labels, chunk_size: int = _DEFAULT_CHUNK) -> float:
  """Leave-one-out 1-nearest-neighbour class accuracy of latent codes.

  Each point is classified by the label of its nearest *other* point.

  Args:
    latents: ``[N, d]`` latent codes, ``N >= 2``.
    labels: ``[N]`` integer class labels.
    chunk_size: points processed at once.

  Returns:
    The fraction of points whose nearest other point shares their label.

  Raises:
    ValueError: if ``labels`` is not ``[N]``.
  """
  latents = _as_points(latents, "latents")
  labels = np.asarray(labels).reshape(-1)
  if labels.shape[0] != latents.shape[0]:
    raise ValueError(f"labels {labels.shape} do not match latents {latents.shape}")
  index, _ = nearest_neighbours(latents, latents, True, chunk_size)
  return float(np.mean(labels[index] == labels))


def manifold_distance(
  points, manifold, noise_std, chunk_size: int = _DEFAULT_CHUNK
) -> float:
  """Mean distance to the true manifold, in units of the noise level.

  Args:
    points: ``[P, D]`` (or ``[..., D]``) points in input space, e.g. decoded
      prior samples.
    manifold: ``[G, D]`` dense noise-free grid of the true manifold.
    noise_std: the data's input-noise standard deviation, ``> 0``.
    chunk_size: points processed at once.

  Returns:
    ``mean_p min_g |points_p - manifold_g| / noise_std``. For reference, data
    with isotropic noise in ``D`` dimensions around a 1-D curve score about
    ``sqrt(D - 1)``.

  Raises:
    ValueError: if ``noise_std <= 0`` or the shapes disagree.
  """
  if not noise_std > 0:
    raise ValueError(f"noise_std must be > 0, got {noise_std!r}")
  _, distance = nearest_neighbours(points, manifold, chunk_size=chunk_size)
  return float(np.mean(distance) / noise_std)


def orbit_coverage(
  decoded, curve, noise_std, start: int, threshold: float = 40.0, bins: int = 50
) -> float:
  """How much of a true curve one orbit traverses without leaving it.

  Follows the orbit from its start point in both directions for as long as
  its decoded points stay within ``threshold`` noise levels of the curve,
  and reports the fraction of the curve's length that this stretch passes:
  ``bins`` equal-length pieces of the curve, each counted when it holds the
  nearest curve point of some orbit point on the stretch. An orbit that
  runs along the whole curve scores 1; one that leaves the curve, or jumps
  to another turn of a roll, stops counting there. The default threshold, 40
  noise levels, is a quarter of the gap between the swiss roll's turns in
  input space (about 160) and well above the decoder's own error on data
  (decoded test codes lie 4-18 noise levels off the curve).

  Args:
    decoded: ``[T, D]`` decoded orbit points, in orbit order.
    curve: ``[G, D]`` dense noise-free points of one true curve, ordered along
      it at equal arc length (e.g. ``Dataset.manifold`` of one class).
    noise_std: the data's input-noise standard deviation, ``> 0``.
    start: index into ``decoded`` of the orbit's start (e.g. an anchor).
    threshold: the largest distance to the curve, in noise levels, of an
      orbit point on the stretch.
    bins: pieces of the curve.

  Returns:
    A fraction in ``[0, 1]``; 0 when the start itself is off the curve.

  Raises:
    ValueError: on bad shapes, ``noise_std <= 0`` or ``start`` out of range.
  """
  decoded = _as_points(decoded, "decoded")
  if not noise_std > 0:
    raise ValueError(f"noise_std must be > 0, got {noise_std!r}")
  if not 0 <= start < len(decoded):
    raise ValueError(f"start must index decoded [{len(decoded)}], got {start}")
  index, distance = nearest_neighbours(decoded, curve)
  on = distance / noise_std <= threshold
  if not on[start]:
    return 0.0
  off = np.flatnonzero(~on)
  lo = off[off < start].max(initial=-1) + 1
  hi = off[off > start].min(initial=len(on))
  pieces = np.unique(index[lo:hi] * bins // len(curve))
  return float(len(pieces) / bins)


def latent_path_distance(points, encodings, chunk_size: int = _DEFAULT_CHUNK) -> float:
  """Mean distance of latent points to the encoded data, relative to its spacing.

  Args:
    points: ``[P, d]`` (or ``[..., d]``, e.g. paths ``[P, T, d]``) latent
      points along orbits, transport paths or straight lines.
    encodings: ``[N, d]`` encoded data, ``N >= 2``.
    chunk_size: points processed at once.

  Returns:
    ``mean_p min_n |points_p - encodings_n|`` divided by the median
    leave-one-out nearest-neighbour distance among the encodings.

  Raises:
    ValueError: if the median spacing is zero (e.g. collapsed encodings).
  """
  _, spacing = nearest_neighbours(encodings, encodings, True, chunk_size)
  scale = float(np.median(spacing))
  if not scale > 0:
    raise ValueError("median nearest-neighbour spacing of encodings is zero")
  _, distance = nearest_neighbours(points, encodings, chunk_size=chunk_size)
  return float(np.mean(distance) / scale)


def pca_2d(points, *others):
  """Projections onto the first two principal components of ``points [N, D]``.

  Returns:
    A list: ``points`` and each of ``others`` (``[..., D]``), centred on the
    mean of ``points`` and projected, ``[..., 2]``.
  """
  points = np.asarray(points)
  mean = points.mean(axis=0)
  _, _, vt = np.linalg.svd(points - mean, full_matrices=False)
  basis = vt[:2].T
  return [(np.asarray(a) - mean) @ basis for a in (points,) + others]
