"""The user's units and the units a model trains in: ``x' = (x - shift) / scale``.

:func:`vaells_jax.fit` trains on data centred and scaled by one number to the
spread of the paper's synthetic sets (:data:`TARGET_RMS`), so its outcome
does not depend on how the user's data are shifted or scaled; the trained
model maps every input and output back (docs/fit.md). One scale for all
features keeps the data's geometry (distances up to a factor). Images
(``shape``) are flattened row-major on the way in and reshaped on the way out.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np

from vaells_jax.data.files import atomic_write_text

__all__ = ["INPUT_MAP_NAME", "TARGET_RMS", "InputMap"]

INPUT_MAP_NAME = "input_map.json"  # where a run saves its InputMap
# Root mean square distance of the points from their mean: the concentric
# and swiss-roll experiments' data have 1.9-2.1 and 2.3-2.7.
TARGET_RMS = 2.0


@dataclasses.dataclass(frozen=True)
class InputMap:
  """``to_model(x) = (x - shift) / scale`` and its inverse ``to_user``.

  Attributes:
    shift: ``[D]``, the data's mean.
    scale: a positive number (the same for every feature).
    shape: the user's shape of one sample, e.g. ``(H, W)`` or ``(H, W, C)``
      for images (its product is ``D``); None: vectors ``[D]``.
  """

  shift: np.ndarray
  scale: float
  shape: tuple[int, ...] | None = None

  @classmethod
  def of(cls, x, shape: tuple[int, ...] | None = None) -> InputMap:
    """The map that centres ``x [N, D]`` and scales it to :data:`TARGET_RMS`
    (a scale of 1 for data that are all one point)."""
    x = np.asarray(x, np.float64)
    shift = x.mean(axis=0)
    rms = float(np.sqrt(np.mean(np.sum((x - shift) ** 2, axis=-1))))
    return cls(shift, rms / TARGET_RMS if rms > 0 else 1.0, shape)

  def to_model(self, x, what: str = "the input"):
    """User units to the model's: ``(x - shift) / scale``, images
    ``[..., *shape]`` flattened to ``[..., D]``.

    Raises:
      ValueError: ``x`` does not end in ``shape``.
    """
    if self.shape is not None:
      x = x if hasattr(x, "reshape") and hasattr(x, "ndim") else np.asarray(x)
      k = len(self.shape)
      if x.ndim < k or tuple(x.shape[x.ndim - k :]) != self.shape:
        raise ValueError(
          f"{what} must be [..., {', '.join(map(str, self.shape))}] (the "
          f"model's image shape), got shape {tuple(x.shape)}."
        )
      x = x.reshape(x.shape[: x.ndim - k] + (math.prod(self.shape),))
    return (x - self.shift.astype(np.float32)) / np.float32(self.scale)

  def to_user(self, y):
    """The model's units to the user's: ``y * scale + shift`` (``[..., D]``
    reshaped to ``[..., *shape]`` for images)."""
    y = y * np.float32(self.scale) + self.shift.astype(np.float32)
    return y if self.shape is None else y.reshape(y.shape[:-1] + self.shape)

  def flat(self) -> InputMap:
    """The same map on flattened samples ``[..., D]`` (``shape`` None)."""
    return dataclasses.replace(self, shape=None)

  def user_data(self, data):
    """``data`` (a :class:`~vaells_jax.data.dataset.Dataset` in
    the model's units) in the user's: points, anchors, manifold and noise
    level mapped back."""

    def back(a):
      return None if a is None else np.asarray(a, np.float64) * self.scale + self.shift

    return dataclasses.replace(
      data,
      x_train=back(data.x_train),
      x_test=back(data.x_test),
      anchors=back(data.anchors),
      manifold=back(data.manifold),
      noise_std=data.noise_std * self.scale,
    )

  def model_data(self, data):
    """The inverse of :meth:`user_data`."""
    inverse = InputMap(-self.shift / self.scale, 1.0 / self.scale)
    return inverse.user_data(data)

  def save(self, path) -> None:
    """Writes the map as JSON (atomically)."""
    saved = {"shift": self.shift.tolist(), "scale": self.scale}
    if self.shape is not None:
      saved["shape"] = list(self.shape)
    text = json.dumps(saved)
    atomic_write_text(path, text)

  @classmethod
  def load(cls, path) -> InputMap:
    """Reads a map :meth:`save` wrote.

    Raises:
      ValueError: the file is not such a map.
    """
    try:
      saved = json.loads(open(path).read())
      shift, scale = np.asarray(saved["shift"], np.float64), float(saved["scale"])
      shape = saved.get("shape")
      shape = None if shape is None else tuple(int(n) for n in shape)
    except (OSError, ValueError, KeyError, TypeError) as e:
      raise ValueError(f"{path} is not an input map: {e}") from e
    if shift.ndim != 1 or not np.all(np.isfinite(shift)) or not scale > 0:
      raise ValueError(f"{path} is not an input map (bad shift or scale).")
    if shape is not None and math.prod(shape) != shift.shape[0]:
      raise ValueError(f"{path} is not an input map (shape {shape} is not [D]).")
    return cls(shift, scale, shape)
