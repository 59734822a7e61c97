"""MNIST digits for the rotated / natural MNIST experiments.

Get the files once with ``python -m vaells_jax.data.mnist download DIR``
(:mod:`vaells_jax.data.download`: the standard mirrors, SHA-256 checked), then
read them with ``load_mnist(DIR)`` / ``--data-dir=DIR``. Two sources:

* A directory of the standard IDX files (``train-images-idx3-ubyte``,
  ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``,
  ``t10k-labels-idx1-ubyte``, each raw or gzipped). With all four files the
  split is the paper's: the first 50 000 training digits train, the last
  10 000 validate and the official 10 000 test digits test. With the ``t10k``
  files alone the 10 000 test digits are
  split by a fixed permutation into 8 000 train / 1 000 validation / 1 000 test.
* ``tensorflow-datasets`` (``data_dir=None``; the optional extra
  ``pip install -e ".[tfds]"``), read through
  ``tfds.data_source`` so that reading needs no TensorFlow. Its ``"train"``
  split is cut 50 000 / 10 000 and ``"test"`` is the test set. Note: tfds
  4.9 needs TensorFlow to *prepare* MNIST the first time (its builder reads
  the downloads with ``tf.io.gfile`` and encodes PNGs with ``tf.image``); once
  prepared in the ``array_record`` format, reading needs neither TensorFlow nor
  the internet.

Images are returned flattened, ``[N, 784]`` float32 in ``[0, 1]`` (uint8 / 255),
labels ``[N]`` int32. :mod:`vaells_jax.data.augment` rotates them on the device.
"""

from __future__ import annotations

import dataclasses
import gzip
import importlib.util
import math
import os
import socket
import zlib

import numpy as np

from vaells_jax.data.augment import IMAGE_SHAPE
from vaells_jax.data.download import (
  TEST_IMAGES,
  TEST_LABELS,
  TRAIN_IMAGES,
  TRAIN_LABELS,
  MnistUnavailable,
)

__all__ = [
  "MnistData",
  "MnistUnavailable",
  "digits_experiment",
  "load_mnist",
  "read_idx",
]

NUM_CLASSES = 10
NUM_VALIDATION = 10_000  # the paper's validation set: the last 10 000 train digits
_IDX_TYPES = {
  0x08: "uint8",
  0x09: "int8",
  0x0B: "int16",
  0x0C: "int32",
  0x0D: "float32",
  0x0E: "float64",
}
_GZIP_MAGIC = b"\x1f\x8b"
_DOWNLOAD_HOST = ("storage.googleapis.com", 443)  # where tfds fetches MNIST
_ADVICE = (
  "Download MNIST once with `python -m vaells_jax.data.mnist download DIR`, "
  "then pass --data-dir=DIR (data_dir=DIR): a directory with the standard IDX "
  f"files ({TRAIN_IMAGES}, {TRAIN_LABELS}, {TEST_IMAGES}, {TEST_LABELS}, raw "
  "or .gz)."
)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class MnistData:
  """MNIST split into train, validation and test parts.

  Attributes:
    x_train: ``[N_train, 784]`` float32 images in ``[0, 1]``, row-major 28x28.
    y_train: ``[N_train]`` int32 labels in ``0..9``.
    x_val: ``[N_val, 784]`` validation images.
    y_val: ``[N_val]`` validation labels.
    x_test: ``[N_test, 784]`` test images.
    y_test: ``[N_test]`` test labels.
    source: where the digits came from (a directory or ``"tensorflow-datasets"``).
    split: one line saying how the three parts were made.
  """

  x_train: np.ndarray
  y_train: np.ndarray
  x_val: np.ndarray
  y_val: np.ndarray
  x_test: np.ndarray
  y_test: np.ndarray
  source: str
  split: str

  def __post_init__(self):
    for part in ("train", "val", "test"):
      x, y = getattr(self, f"x_{part}"), getattr(self, f"y_{part}")
      if x.ndim != 2 or x.shape[1] != math.prod(IMAGE_SHAPE) or x.dtype != np.float32:
        raise ValueError(f"x_{part} must be float32 [N, 784], got {x.dtype} {x.shape}")
      if y.shape != x.shape[:1] or y.dtype != np.int32:
        raise ValueError(
          f"y_{part} must be int32 [{x.shape[0]}], got {y.dtype} {y.shape}"
        )

  def __repr__(self) -> str:
    return (
      f"MnistData(train={len(self.y_train)}, val={len(self.y_val)}, "
      f"test={len(self.y_test)}, source={self.source!r})"
    )


def read_idx(path: str | os.PathLike) -> np.ndarray:
  """Reads an IDX file (the MNIST format), raw or gzipped.

  Gzip is recognised by its magic bytes, not by the file name.

  Args:
    path: the file.

  Returns:
    A uint8 array of the shape in the header, e.g. ``[10000, 28, 28]``.

  Raises:
    ValueError: the file is not an IDX file, holds another type than uint8,
      or its payload is shorter or longer than its header says.
  """
  path = os.fspath(path)
  with open(path, "rb") as f:
    raw = f.read()
  if raw[:2] == _GZIP_MAGIC:
    try:
      raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:
      raise ValueError(f"{path}: corrupt gzip stream ({e})") from e
  if len(raw) < 4 or raw[:2] != b"\x00\x00":
    raise ValueError(
      f"{path}: not an IDX file (magic {raw[:4].hex() or 'empty'}, "
      "expected 0000 followed by a type and a ndim byte)"
    )
  type_code, ndim = raw[2], raw[3]
  if type_code != 0x08:
    name = _IDX_TYPES.get(type_code, "unknown")
    raise ValueError(
      f"{path}: IDX data type 0x{type_code:02x} ({name}) is not "
      "supported, only 0x08 (uint8)"
    )
  header = 4 + 4 * ndim
  if ndim == 0 or len(raw) < header:
    raise ValueError(
      f"{path}: IDX header truncated or empty (ndim={ndim}, {len(raw)} bytes)"
    )
  dims = tuple(int(d) for d in np.frombuffer(raw, ">u4", count=ndim, offset=4))
  expected, actual = math.prod(dims), len(raw) - header
  if actual != expected:
    raise ValueError(
      f"{path}: header says shape {dims}, i.e. {expected} bytes of "
      f"data, but the file holds {actual}"
    )
  return np.frombuffer(bytearray(raw), np.uint8, offset=header).reshape(dims)


def load_mnist(
  data_dir: str | os.PathLike | None = None, *, seed: int = 0
) -> MnistData:
  """Loads MNIST from IDX files in ``data_dir``, or from tensorflow-datasets.

  Args:
    data_dir: a directory of the standard IDX files; None for tfds.
    seed: seeds the permutation of the test-only split (``t10k`` files only);
      the other splits are fixed.

  The tfds path decodes 70 000 PNGs on the CPU, about 30 s on 2 cores.

  Returns:
    The split data, see :class:`MnistData` and the module docstring.

  Raises:
    MnistUnavailable: the files or the download are not to be had; the
      message names what was expected and what was found.
    ValueError: a bad ``seed``, or files whose contents are not MNIST-shaped.
  """
  if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
    raise ValueError(f"seed must be a non-negative int, got {seed!r}")
  if data_dir is None:
    return _load_tfds()
  return _load_dir(os.fspath(data_dir), int(seed))


def _load_dir(data_dir: str, seed: int) -> MnistData:
  """Loads the IDX files in ``data_dir``, see :func:`load_mnist`."""
  found = {
    stem: _find(data_dir, stem)
    for stem in (TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS)
  }
  have_train = found[TRAIN_IMAGES] is not None and found[TRAIN_LABELS] is not None
  have_test = found[TEST_IMAGES] is not None and found[TEST_LABELS] is not None
  any_train = found[TRAIN_IMAGES] is not None or found[TRAIN_LABELS] is not None
  if not have_test or (any_train and not have_train):
    raise MnistUnavailable(_missing_message(data_dir))
  x_test, y_test = _read_pair(found[TEST_IMAGES], found[TEST_LABELS])
  if have_train:
    x_all, y_all = _read_pair(found[TRAIN_IMAGES], found[TRAIN_LABELS])
    parts, split = _paper_split(x_all, y_all, x_test, y_test)
  else:
    parts, split = _test_only_split(x_test, y_test, seed)
  return _make_data(parts, source=os.path.abspath(data_dir), split=split)


def _find(data_dir: str, stem: str) -> str | None:
  """Returns the path of ``stem`` or ``stem.gz`` in ``data_dir``, else None."""
  for name in (stem, stem + ".gz"):
    path = os.path.join(data_dir, name)
    if os.path.isfile(path):
      return path
  return None


def _missing_message(data_dir: str) -> str:
  """Says which IDX files ``data_dir`` lacks and what it holds instead."""
  if not os.path.exists(data_dir):
    found = "the directory does not exist"
  elif not os.path.isdir(data_dir):
    found = "it is not a directory"
  else:
    names = sorted(os.listdir(data_dir))
    shown = ", ".join(names[:20]) + (
      f", ... ({len(names)} in all)" if len(names) > 20 else ""
    )
    found = f"it holds: {shown}" if names else "it is empty"
  return (
    f"no usable MNIST IDX files in {data_dir}: expected {TEST_IMAGES} and "
    f"{TEST_LABELS} (raw or .gz), optionally with {TRAIN_IMAGES} and "
    f"{TRAIN_LABELS} (both or neither), but {found}. {_ADVICE}"
  )


def _read_pair(images_path: str, labels_path: str) -> tuple[np.ndarray, np.ndarray]:
  """Reads and checks one images/labels pair: ``[N, 28, 28]`` and ``[N]``."""
  images, labels = read_idx(images_path), read_idx(labels_path)
  if images.ndim != 3 or images.shape[1:] != IMAGE_SHAPE:
    raise ValueError(f"{images_path}: expected [N, 28, 28] images, got {images.shape}")
  if labels.ndim != 1:
    raise ValueError(f"{labels_path}: expected [N] labels, got {labels.shape}")
  if labels.shape[0] != images.shape[0]:
    raise ValueError(
      f"{images_path} holds {images.shape[0]} images but "
      f"{labels_path} holds {labels.shape[0]} labels"
    )
  _check_labels(labels, labels_path)
  return images, labels


def _check_labels(labels: np.ndarray, where: str) -> None:
  """Raises ValueError unless every label is in ``0..9``."""
  if labels.size and (labels.min() < 0 or labels.max() >= NUM_CLASSES):
    raise ValueError(
      f"{where}: labels must be in 0..9, found {labels.min()}..{labels.max()}"
    )


def _paper_split(x_all, y_all, x_test, y_test):
  """First ``N - 10 000`` training digits train, the last 10 000 validate."""
  n = len(y_all)
  if n <= NUM_VALIDATION:
    raise ValueError(
      f"the paper split needs more than {NUM_VALIDATION} training images, got {n}"
    )
  k = n - NUM_VALIDATION
  parts = (x_all[:k], y_all[:k], x_all[k:], y_all[k:], x_test, y_test)
  split = (
    f"paper split: training images [0, {k}) train, [{k}, {n}) validation, "
    f"the official {len(y_test)} test images test"
  )
  return parts, split


def _test_only_split(x, y, seed: int):
  """Splits the test set 80/10/10 by ``default_rng(seed).permutation``."""
  n = len(y)
  if n < 10:
    raise ValueError(f"the test-only split needs at least 10 images, got {n}")
  n_val = n_test = n // 10
  n_train = n - n_val - n_test
  perm = np.random.default_rng(seed).permutation(n)
  tr, va, te = np.split(perm, [n_train, n_train + n_val])
  parts = (x[tr], y[tr], x[va], y[va], x[te], y[te])
  split = (
    f"test-only split: the {n} official test images permuted by "
    f"numpy default_rng({seed}), then {n_train} train / {n_val} validation"
    f" / {n_test} test (no official training images available)"
  )
  return parts, split


def _make_data(parts, *, source: str, split: str) -> MnistData:
  """Flattens and scales ``(x_train, y_train, x_val, y_val, x_test, y_test)``."""
  arrays = []
  for i, a in enumerate(parts):
    if i % 2 == 0:
      arrays.append(a.reshape(len(a), -1).astype(np.float32) / np.float32(255))
    else:
      arrays.append(a.astype(np.int32))
  return MnistData(*arrays, source=source, split=split)


def _internet_reachable(timeout: float = 3.0) -> bool:
  """Whether a TCP connection to the MNIST download host opens in time."""
  try:
    socket.create_connection(_DOWNLOAD_HOST, timeout=timeout).close()
  except OSError:
    return False
  return True


def _tensorflow_installed() -> bool:
  """Whether TensorFlow is importable (tfds needs it to prepare MNIST)."""
  return importlib.util.find_spec("tensorflow") is not None


def _load_tfds() -> MnistData:
  """Loads MNIST through ``tfds.data_source``, see :func:`load_mnist`."""
  try:
    import tensorflow_datasets as tfds
  except ImportError as e:
    raise MnistUnavailable(
      "no --data-dir given, and tensorflow-datasets (the optional source: pip "
      'install -e ".[tfds]") is not installed. ' + _ADVICE
    ) from e
  try:
    prepared = tfds.builder("mnist").is_prepared()
  except Exception as e:  # any tfds failure means "unavailable"
    raise MnistUnavailable(f"tensorflow-datasets failed: {e}. {_ADVICE}") from e
  if not prepared:
    if not _internet_reachable():
      raise MnistUnavailable(
        "MNIST is not prepared in the tensorflow-datasets data dir and "
        f"{_DOWNLOAD_HOST[0]} cannot be reached (no internet?). {_ADVICE}"
      )
    if not _tensorflow_installed():
      raise MnistUnavailable(
        "MNIST is not prepared in the tensorflow-datasets data dir, and "
        "tensorflow-datasets needs TensorFlow to prepare it once (pip install "
        f"tensorflow; reading afterwards needs none). {_ADVICE}"
      )
  try:
    sources = tfds.data_source(
      "mnist", split=["train[:50000]", "train[50000:]", "test"], download=True
    )
    parts = [a for source in sources for a in _fetch_all(source)]
  except Exception as e:  # any tfds failure means "unavailable"
    raise MnistUnavailable(
      f"tensorflow-datasets could not load MNIST ({type(e).__name__}: {e}). " + _ADVICE
    ) from e
  for i in (1, 3, 5):
    _check_labels(parts[i], "tensorflow-datasets mnist")
  split = "paper split: tfds train[:50000] train, train[50000:] validation, test test"
  return _make_data(parts, source="tensorflow-datasets mnist", split=split)


def _fetch_all(source, chunk: int = 10_000) -> tuple[np.ndarray, np.ndarray]:
  """Reads a tfds data source in bulk: ``[N, 28, 28]`` uint8 and ``[N]`` labels."""
  images, labels = [], []
  for start in range(0, len(source), chunk):
    keys = list(range(start, min(start + chunk, len(source))))
    for record in source.__getitems__(keys):
      images.append(record["image"])
      labels.append(record["label"])
  if not images:
    return np.zeros((0, *IMAGE_SHAPE), np.uint8), np.zeros((0,), np.int64)
  x = np.stack(images)
  if x.shape[1:] not in ((*IMAGE_SHAPE, 1), IMAGE_SHAPE) or x.dtype != np.uint8:
    raise ValueError(f"expected uint8 [28, 28, 1] images, got {x.dtype} {x.shape[1:]}")
  return x.reshape(-1, *IMAGE_SHAPE), np.asarray(labels, np.int64).reshape(-1)


def _random_digits(x, y, per_class: int, seed: int) -> np.ndarray:
  """``per_class`` random training digits of each class, ``[10, A, 784]``
  (``nat_mnist``'s anchors)."""
  fewest = int(np.bincount(y, minlength=NUM_CLASSES).min())
  if not 1 <= per_class <= fewest:
    raise ValueError(
      f"anchors_per_class must be from 1 to {fewest} (the training digits of "
      f"the smallest class), got {per_class}."
    )
  rng = np.random.default_rng(seed)
  return np.stack(
    [
      x[rng.choice(np.flatnonzero(y == c), per_class, replace=False)]
      for c in range(NUM_CLASSES)
    ]
  )


def digits_experiment(
  name: str, mnist: MnistData, *, seed: int, anchors_per_class: int
):
  """The data set of the ``rot_mnist`` or ``nat_mnist`` experiment.

  Train and test digits are kept upright: ``rot_mnist`` rotates them inside
  the training step (``config.input_rotation``) and its evaluation rotates the
  test digits with a fixed key. Anchors (``[10, A, 784]``):

  * ``nat_mnist``: ``anchors_per_class`` random training digits of each class
    (paper appendix I), learned during training;
  * ``rot_mnist``: the first training digit of each class rotated by
    ``360 k / A`` degrees. Training uses each sample's own rotations
    (``config.rotation_anchors``); these anchors serve
    ``TrainedVAELLS.sample_prior`` and the figures.

  Args:
    name: ``"rot_mnist"`` or ``"nat_mnist"``.
    mnist: the loaded digits (:func:`load_mnist`).
    seed: seeds the choice of anchors.
    anchors_per_class: ``A``.

  Returns:
    A :class:`~vaells_jax.data.dataset.Dataset` without ground truth.
  """
  from vaells_jax.data.dataset import Dataset

  x, y = mnist.x_train, mnist.y_train
  missing = sorted(set(range(NUM_CLASSES)) - set(np.unique(y).tolist()))
  if missing:
    raise ValueError(f"The training digits lack classes {missing}.")
  if name == "nat_mnist":
    anchors = _random_digits(x, y, anchors_per_class, seed)
  elif name == "rot_mnist":
    firsts = x[[np.flatnonzero(y == c)[0] for c in range(NUM_CLASSES)]]
    anchors = _rotated_copies_host(firsts, anchors_per_class)
  else:
    raise ValueError(f"Unknown digits experiment {name!r}.")
  return Dataset(
    x_train=x,
    labels_train=y,
    pos_train=None,
    t_train=None,
    x_test=mnist.x_test,
    labels_test=mnist.y_test,
    pos_test=None,
    t_test=None,
    anchors=anchors.astype(np.float32),
    anchor_pos=None,
    mapping=None,
    noise_std=float("nan"),
    manifold=None,
    manifold_labels=None,
    name=name,
  )


if __name__ == "__main__":  # python -m vaells_jax.data.mnist download DIR
  import sys

  from vaells_jax.data.download import main

  sys.exit(main())


def _rotated_copies_host(images: np.ndarray, num: int) -> np.ndarray:
  """:func:`vaells_jax.data.augment.rotated_copies` on the host, in float64.

  The anchors enter the digest that ties a checkpoint to its data, so they
  must come out bit for bit alike on every device and jax version (a GPU's
  rotation differs from a CPU's by ~3e-6, enough to refuse resuming a GPU run
  on a CPU). ``scipy.ndimage.rotate`` with these settings is the rotation
  :func:`~vaells_jax.data.augment.rotate_images` computes on the device.
  """
  from scipy import ndimage

  grids = np.asarray(images, np.float64).reshape(-1, *IMAGE_SHAPE)
  return np.stack(
    [
      [
        ndimage.rotate(
          grid, 360.0 * k / num, reshape=False, order=1, mode="grid-constant"
        ).ravel()
        for k in range(num)
      ]
      for grid in grids
    ]
  ).astype(np.float32)
