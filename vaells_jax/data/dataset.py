"""A data set: training and test points, labels, anchors, and the ground
truth where one is known (the synthetic manifolds), saved to one ``.npz``.

The synthetic sets (:mod:`vaells_jax.data.synthetic`), MNIST
(:mod:`vaells_jax.data.mnist`) and a user's own arrays
(:func:`vaells_jax.fit`) are all a :class:`Dataset`.
"""

from __future__ import annotations

import dataclasses
import os
import zipfile
import zlib

import numpy as np

from vaells_jax.data.files import atomic_write

__all__ = ["Dataset", "load_dataset", "save_dataset"]

_REQUIRED_FIELDS = ("x_train", "labels_train", "x_test", "labels_test", "anchors")
# Ground truth: known for the synthetic sets, None for a user's own data.
_GROUND_TRUTH_FIELDS = (
  "pos_train",
  "t_train",
  "pos_test",
  "t_test",
  "anchor_pos",
  "mapping",
  "manifold",
  "manifold_labels",
)
_ARRAY_FIELDS = _REQUIRED_FIELDS + _GROUND_TRUTH_FIELDS


@dataclasses.dataclass(frozen=True, eq=False)
class Dataset:
  """A data set, with its ground-truth latent structure where one is known.

  The ground-truth fields (``pos_*``, ``t_*``, ``anchor_pos``, ``mapping``,
  ``manifold``, ``manifold_labels``) are None for data without one (see
  :func:`vaells_jax.runs.fit`); ``noise_std`` is then NaN.

  Attributes:
    x_train: ``[N, D]`` noisy inputs.
    labels_train: ``[N]`` integer class labels.
    pos_train: ``[N, 2]`` noise-free ground-truth 2-D latent positions.
    t_train: ``[N]`` curve parameter (angle for circles, ``t`` for the roll).
    x_test: ``[N_test, D]`` noisy test inputs.
    labels_test: ``[N_test]`` test labels.
    pos_test: ``[N_test, 2]`` test ground-truth positions.
    t_test: ``[N_test]`` test curve parameters.
    anchors: ``[C, A, D]`` noise-free anchor inputs, ``A`` per class.
    anchor_pos: ``[C, A, 2]`` ground-truth positions of the anchors.
    mapping: ``[D, 2]`` the random linear map, ``x = pos @ mapping.T``.
    noise_std: standard deviation of the input-space Gaussian noise.
    manifold: ``[G, D]`` dense noise-free grid of the true manifold.
    manifold_labels: ``[G]`` class of each grid point.
    name: data set name, e.g. ``"concentric"``.
  """

  x_train: np.ndarray
  labels_train: np.ndarray
  pos_train: np.ndarray | None
  t_train: np.ndarray | None
  x_test: np.ndarray
  labels_test: np.ndarray
  pos_test: np.ndarray | None
  t_test: np.ndarray | None
  anchors: np.ndarray
  anchor_pos: np.ndarray | None
  mapping: np.ndarray | None
  noise_std: float
  manifold: np.ndarray | None
  manifold_labels: np.ndarray | None
  name: str

  def __post_init__(self):
    _check_shapes(self)

  @property
  def num_classes(self) -> int:
    """Number of classes ``C`` (the leading dimension of ``anchors``)."""
    return int(self.anchors.shape[0])

  @property
  def data_dim(self) -> int:
    """Input dimension ``D``."""
    return int(self.x_train.shape[1])

  @property
  def has_ground_truth(self) -> bool:
    """Whether the true manifold (and positions) are known."""
    return self.manifold is not None


def _check_shapes(data: Dataset) -> None:
  """Raises ValueError if the fields of ``data`` have inconsistent shapes."""
  d = data.x_train.shape[1]
  if not data.has_ground_truth:
    _check_required_shapes(data, d)
    return
  if data.mapping.shape != (d, 2):
    raise ValueError(f"mapping must be [D, 2], got {data.mapping.shape}")
  for split in ("train", "test"):
    n = getattr(data, f"x_{split}").shape[0]
    expected = {
      f"x_{split}": (n, d),
      f"labels_{split}": (n,),
      f"pos_{split}": (n, 2),
      f"t_{split}": (n,),
    }
    for field, shape in expected.items():
      if getattr(data, field).shape != shape:
        raise ValueError(
          f"{field} must have shape {shape}, got {getattr(data, field).shape}"
        )
  c, a = data.anchors.shape[:2]
  if data.anchors.shape != (c, a, d) or data.anchor_pos.shape != (c, a, 2):
    raise ValueError(
      f"anchors [C, A, D] and anchor_pos [C, A, 2] disagree: "
      f"{data.anchors.shape} vs {data.anchor_pos.shape} (D={d})"
    )
  g = data.manifold.shape[0]
  if data.manifold.shape != (g, d) or data.manifold_labels.shape != (g,):
    raise ValueError(
      f"manifold must be [G, {d}] with labels [G], got {data.manifold.shape} "
      f"and {data.manifold_labels.shape}"
    )


def _check_required_shapes(data: Dataset, d: int) -> None:
  for split in ("train", "test"):
    x, labels = getattr(data, f"x_{split}"), getattr(data, f"labels_{split}")
    if x.ndim != 2 or x.shape[1] != d or labels.shape != (x.shape[0],):
      raise ValueError(
        f"x_{split} [N, {d}] and labels_{split} [N] disagree: "
        f"{x.shape} vs {labels.shape}"
      )
  if data.anchors.ndim != 3 or data.anchors.shape[2] != d:
    raise ValueError(f"anchors must be [C, A, {d}], got {data.anchors.shape}")


def save_dataset(path, data: Dataset) -> str:
  """Writes ``data`` to a single uncompressed ``.npz`` file (no pickling).

  The write is atomic (:func:`vaells_jax.data.files.atomic_write`): a run
  killed or out of disk space mid-write leaves the previous file intact.

  Args:
    path: destination file path; NumPy appends ``.npz`` if it is missing.
    data: the data set.

  Returns:
    The path written, as a string (with the ``.npz`` suffix).
  """
  path = os.fspath(path)
  if not path.endswith(".npz"):
    path += ".npz"
  arrays = {
    field: getattr(data, field)
    for field in _ARRAY_FIELDS
    if getattr(data, field) is not None
  }
  with atomic_write(path) as f:
    np.savez(
      f,
      noise_std=np.asarray(data.noise_std, dtype=np.float64),
      name=np.asarray(data.name, dtype=np.str_),
      **arrays,
    )
  return path


def load_dataset(path) -> Dataset:
  """Reads a data set written by :func:`save_synthetic`.

  Args:
    path: path of the ``.npz`` file.

  Returns:
    The :class:`Dataset`.

  Raises:
    ValueError: one line, if the file cannot be read (missing, a folder,
      truncated, not an ``.npz``), a field is missing or the shapes are
      inconsistent.
  """
  try:
    with np.load(os.fspath(path), allow_pickle=False) as npz:
      missing = set(_REQUIRED_FIELDS + ("noise_std", "name")) - set(npz.files)
      if missing:
        raise ValueError(f"{path} lacks fields {sorted(missing)}")
      arrays = {
        field: npz[field] if field in npz.files else None for field in _ARRAY_FIELDS
      }
      noise_std = float(npz["noise_std"])
      name = str(npz["name"])
    return Dataset(noise_std=noise_std, name=name, **arrays)
  except (OSError, EOFError, zipfile.BadZipFile, zlib.error, KeyError, IndexError) as e:
    reason = " ".join(str(e).split()) or type(e).__name__
    raise ValueError(
      f"{path} is not a readable data set (truncated or corrupt?): {reason}"
    ) from None
  except ValueError as e:
    if str(path) in str(e):
      raise
    raise ValueError(f"{path} is not a valid data set: {e}") from None
