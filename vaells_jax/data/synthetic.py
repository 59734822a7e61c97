"""Synthetic 2-D manifolds embedded in ``R^D`` with a known ground truth.

Both data sets follow paper section 5 / appendix E-F: 2-D ground-truth points
``p`` (two concentric circles, or a swiss roll) are mapped to the input space
by a random linear map ``A ~ U[-1, 1]^{D x 2}`` and Gaussian noise of standard
deviation ``noise_std`` is added in the input space, ``x = A p + noise``.

Random draws always happen in the same order (map, train curve parameters,
test curve parameters, train noise, test noise, shuffles) and the noise is
always drawn, so the same seed with ``noise_std=0`` gives the same map and
positions and exactly the noise-free points ``pos @ mapping.T``.

All arrays are float64 NumPy arrays; cast to float32 where a model needs it.
"""

from __future__ import annotations

import numpy as np

from vaells_jax.data.dataset import Dataset

ANCHOR_PLACEMENTS = ("even", "random")

__all__ = ["make_concentric", "make_swiss_roll", "swiss_roll_arc_length"]


def _check_placement(placement) -> None:
  if placement not in ANCHOR_PLACEMENTS:
    raise ValueError(
      f"anchor_placement must be one of {ANCHOR_PLACEMENTS}, got {placement!r}."
    )


def _anchor_fractions(seed, placement, shape, offset=0.0):
  """Anchor positions as fractions of a curve, ``shape = [..., A]``: evenly
  spaced (``(j + offset) / A``) or uniformly random, sorted, from their own
  generator so that the data points do not change with the placement."""
  if placement == "even":
    count = shape[-1]
    return np.broadcast_to((np.arange(count) + offset) / count, shape)
  return np.sort(np.random.default_rng([seed, 1]).uniform(size=shape), axis=-1)


def _check_positive(**counts) -> None:
  """Raises ValueError naming any argument that is not a positive integer."""
  for arg, value in counts.items():
    if int(value) != value or value <= 0:
      raise ValueError(f"{arg} must be a positive integer, got {value!r}")


def _check_noise(noise_std) -> None:
  if not np.isfinite(noise_std) or noise_std < 0:
    raise ValueError(f"noise_std must be finite and >= 0, got {noise_std!r}")


def _random_mapping(rng: np.random.Generator, data_dim: int) -> np.ndarray:
  """The random linear map ``A ~ U[-1, 1]^{D x 2}``, shape ``[D, 2]``."""
  return rng.uniform(-1.0, 1.0, size=(data_dim, 2))


def _embed(rng, pos, mapping, noise_std):
  """Maps ``pos [N, 2]`` to ``[N, D]`` and adds (always drawn) noise."""
  noise = rng.standard_normal((pos.shape[0], mapping.shape[0]))
  return pos @ mapping.T + noise_std * noise


def _circle(radius, angles):
  """Points at ``angles [N]`` on a circle: ``[N, 2]``."""
  return radius * np.stack([np.cos(angles), np.sin(angles)], axis=-1)


def _shuffled(rng, *arrays):
  """The arrays (same leading length) permuted by one random permutation."""
  perm = rng.permutation(arrays[0].shape[0])
  return tuple(a[perm] for a in arrays)


def _circles_split(rng, radii, num_per_circle):
  """Uniform random angles on each circle: (labels [N], pos [N, 2], t [N])."""
  angles = rng.uniform(0.0, 2.0 * np.pi, size=(len(radii), num_per_circle))
  labels = np.repeat(np.arange(len(radii)), num_per_circle)
  pos = np.concatenate([_circle(r, a) for r, a in zip(radii, angles, strict=True)])
  return labels, pos, angles.reshape(-1)


def make_concentric(
  seed: int = 0,
  num_per_circle: int = 200,
  num_test_per_circle: int = 100,
  radii=(0.5, 1.0),
  data_dim: int = 20,
  noise_std: float = 0.01,
  anchors_per_class: int = 3,
  grid_per_class: int = 4000,
  anchor_placement: str = "even",
) -> Dataset:
  """Concentric circles mapped to ``R^data_dim`` (paper appendix F).

  Class ``k`` lies on the circle of radius ``radii[k]``; points sit at
  uniformly random angles in ``[0, 2 pi)``. The anchors of each circle are
  evenly spaced in angle, at ``2 pi j / anchors_per_class``, or (``anchor_placement
  ="random"``) at uniformly random angles drawn from ``(seed, 1)``, so the
  points are the same either way. Train and test points are shuffled (classes
  interleaved).

  Args:
    seed: seed of ``np.random.default_rng``.
    num_per_circle, num_test_per_circle: training and test points per circle.
    radii: circle radii, one class per radius.
    data_dim, noise_std: input dimension ``D``; the standard deviation of
      the input-space noise.
    anchors_per_class: anchors per circle ``A``.
    grid_per_class: points per circle in the dense ``manifold`` grid.
    anchor_placement: ``"even"`` or ``"random"`` (paper appendix F).

  Returns:
    A :class:`Dataset` with ``C = len(radii)`` classes.

  Raises:
    ValueError: for non-positive counts or radii, negative noise, an unknown
      ``anchor_placement``."""
  _check_placement(anchor_placement)
  _check_positive(
    num_per_circle=num_per_circle,
    num_test_per_circle=num_test_per_circle,
    data_dim=data_dim,
    anchors_per_class=anchors_per_class,
    grid_per_class=grid_per_class,
  )
  _check_noise(noise_std)
  radii = _checked_radii(radii)
  rng = np.random.default_rng(seed)
  mapping = _random_mapping(rng, data_dim)
  train, test = [
    _circles_split(rng, radii, n) for n in (num_per_circle, num_test_per_circle)
  ]
  x_train, x_test = [_embed(rng, xs[1], mapping, noise_std) for xs in (train, test)]
  train, test = [_shuffled(rng, *xs) for xs in ((x_train, *train), (x_test, *test))]
  anchor_pos = _circle_anchors(seed, anchor_placement, radii, anchors_per_class)
  grid_angles = 2.0 * np.pi * np.arange(grid_per_class) / grid_per_class
  grid_pos = np.concatenate([_circle(r, grid_angles) for r in radii])
  manifold_labels = np.repeat(np.arange(radii.size), grid_per_class)
  return _dataset(
    "concentric", mapping, noise_std, train, test, anchor_pos, grid_pos, manifold_labels
  )


def _checked_radii(radii) -> np.ndarray:
  """``radii`` as a float64 ``[C]`` array, all positive."""
  radii = np.asarray(radii, dtype=np.float64).reshape(-1)
  if radii.size == 0 or np.any(~(radii > 0)):
    raise ValueError(f"radii must be a non-empty list of positive numbers: {radii}")
  return radii


def _circle_anchors(seed, placement, radii, per_class) -> np.ndarray:
  """Each circle's anchors ``[C, A, 2]``: evenly spaced in angle, or at
  uniformly random angles drawn from ``(seed, 1)``."""
  if placement == "even":
    angles = 2.0 * np.pi * np.arange(per_class) / per_class
    angles = np.broadcast_to(angles, (radii.size, per_class))
  else:
    angles = 2.0 * np.pi * _anchor_fractions(seed, placement, (radii.size, per_class))
  return np.stack([_circle(r, a) for r, a in zip(radii, angles, strict=True)])


def _dataset(
  name, mapping, noise_std, train, test, anchor_pos, grid_pos, manifold_labels
) -> Dataset:
  """A synthetic :class:`Dataset`: ``train`` and ``test`` are ``(x [N, D],
  labels [N], pos [N, 2], t [N])``; anchors and the manifold grid are
  mapped from their 2-D positions."""
  return Dataset(
    x_train=train[0],
    labels_train=train[1],
    pos_train=train[2],
    t_train=train[3],
    x_test=test[0],
    labels_test=test[1],
    pos_test=test[2],
    t_test=test[3],
    anchors=anchor_pos @ mapping.T,
    anchor_pos=anchor_pos,
    mapping=mapping,
    noise_std=float(noise_std),
    manifold=grid_pos @ mapping.T,
    manifold_labels=manifold_labels,
    name=name,
  )


_T_MIN = 1.5 * np.pi
_T_MAX = 4.5 * np.pi


def _swiss_pos(t):
  """Swiss-roll positions ``(t cos t, t sin t) / 10`` for ``t [N]``: ``[N, 2]``."""
  return np.stack([t * np.cos(t), t * np.sin(t)], axis=-1) / 10.0


def swiss_roll_arc_length(t):
  """Arc length of the swiss roll ``p(t) = (t cos t, t sin t) / 10`` from 0 to t.

  ``|p'(t)| = sqrt(1 + t^2) / 10``, whose integral is
  ``(t sqrt(1 + t^2) + asinh(t)) / 20``.

  Args:
    t: curve parameters, any shape.

  Returns:
    Arc lengths, the shape of ``t``.
  """
  t = np.asarray(t, dtype=np.float64)
  return (t * np.sqrt(1.0 + t**2) + np.arcsinh(t)) / 20.0


def _t_at_arc_fractions(fractions):
  """Curve parameters ``t`` at the given fractions ``[K]`` of the roll's length."""
  t_dense = np.linspace(_T_MIN, _T_MAX, 100_001)
  s_dense = swiss_roll_arc_length(t_dense)
  s = s_dense[0] + np.asarray(fractions) * (s_dense[-1] - s_dense[0])
  return np.interp(s, s_dense, t_dense)


def _swiss_split(rng, num):
  """``t = 3 pi / 2 (1 + 2 u)``, ``u ~ U[0, 1]``: (pos [N, 2], t [N])."""
  t = _T_MIN * (1.0 + 2.0 * rng.uniform(size=num))
  return _swiss_pos(t), t


def make_swiss_roll(
  seed: int = 0,
  num_train: int = 1000,
  num_test: int = 300,
  data_dim: int = 20,
  noise_std: float = 0.01,
  num_anchors: int = 4,
  grid_size: int = 10_000,
  anchor_placement: str = "even",
) -> Dataset:
  """The swiss roll mapped to ``R^data_dim`` (paper appendix E).

  ``t = 3 pi / 2 (1 + 2 u)`` with ``u ~ U[0, 1]`` and
  ``p = (t cos t, t sin t) / 10``. One class (all labels 0). The anchors are
  evenly spaced in *arc length*: anchor ``j`` sits at the fraction
  ``(j + 1/2) / num_anchors`` of the roll's length, the middle of the ``j``-th
  of ``num_anchors`` equal-length pieces; with ``anchor_placement="random"``
  at uniformly random fractions of its length drawn from ``(seed, 1)``, so the
  points are the same either way. The ``manifold`` grid is evenly
  spaced in arc length too, including both ends.

  Args:
    seed: seed of ``np.random.default_rng``.
    num_train, num_test: training and test points.
    data_dim, noise_std: input dimension ``D``; the standard deviation of
      the input-space noise.
    num_anchors: anchors ``A`` (``anchors`` has shape ``[1, A, D]``).
    grid_size: points in the dense ``manifold`` grid.
    anchor_placement: ``"even"`` or ``"random"`` (paper appendix F).

  Returns:
    A :class:`Dataset` with one class.

  Raises:
    ValueError: for non-positive counts, negative noise, an unknown
      ``anchor_placement``."""
  _check_placement(anchor_placement)
  _check_positive(
    num_train=num_train,
    num_test=num_test,
    data_dim=data_dim,
    num_anchors=num_anchors,
    grid_size=grid_size,
  )
  _check_noise(noise_std)
  rng = np.random.default_rng(seed)
  mapping = _random_mapping(rng, data_dim)
  (pos_train, t_train), (pos_test, t_test) = [
    _swiss_split(rng, num) for num in (num_train, num_test)
  ]
  x_train, x_test = [_embed(rng, p, mapping, noise_std) for p in (pos_train, pos_test)]
  fractions = _anchor_fractions(seed, anchor_placement, (num_anchors,), offset=0.5)
  anchor_pos = _swiss_pos(_t_at_arc_fractions(fractions))[None]
  grid_pos = _swiss_pos(_t_at_arc_fractions(np.linspace(0.0, 1.0, grid_size)))
  train = (x_train, np.zeros(num_train, dtype=np.int64), pos_train, t_train)
  test = (x_test, np.zeros(num_test, dtype=np.int64), pos_test, t_test)
  labels = np.zeros(grid_size, dtype=np.int64)
  return _dataset(
    "swiss_roll", mapping, noise_std, train, test, anchor_pos, grid_pos, labels
  )
