"""Tests of MNIST loading (IDX files, tfds) and of batched rotation.

The IDX tests read real MNIST test digits: the first 1 000 committed in
``tests/data/mnist``, or the whole 10 000-digit test set where
``VAELLS_MNIST_DIR`` names its folder (CI; see ``conftest.py``). The tfds tests
use ``tfds.testing.mock_data`` and never touch the network.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import pathlib
import struct
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.ndimage
from conftest import FULL_TEST_SET, mnist_dir

from vaells_jax.data import mnist
from vaells_jax.data.augment import rotate_images
from vaells_jax.data.mnist import (
  MnistData,
  MnistUnavailable,
  load_mnist,
  read_idx,
)

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
# Per-class counts of the official MNIST test set.
TEST_LABEL_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
IMAGES_GZ = "t10k-images-idx3-ubyte.gz"
LABELS_GZ = "t10k-labels-idx1-ubyte.gz"


@pytest.fixture(scope="module")
def shared_dir() -> pathlib.Path:
  return mnist_dir()


@pytest.fixture(scope="module")
def test_set(shared_dir) -> tuple[np.ndarray, np.ndarray]:
  return read_idx(shared_dir / IMAGES_GZ), read_idx(shared_dir / LABELS_GZ)


def write_idx(path, array: np.ndarray, *, gz: bool = False, type_code: int = 0x08):
  """Writes ``array`` as an IDX file (optionally gzipped); returns the path."""
  header = bytes([0, 0, type_code, array.ndim]) + struct.pack(
    f">{array.ndim}I", *array.shape
  )
  data = header + np.ascontiguousarray(array).tobytes()
  pathlib.Path(path).write_bytes(gzip.compress(data, 1) if gz else data)
  return path


def rows_multiset(x: np.ndarray, y: np.ndarray) -> list:
  """Sorted (image bytes, label) pairs: equal iff the same images and labels."""
  pixels = np.rint(np.asarray(x) * 255).astype(np.uint8).reshape(len(x), -1)
  return sorted(zip([r.tobytes() for r in pixels], np.asarray(y).tolist(), strict=True))


# --- read_idx ---------------------------------------------------------------


def test_read_idx_shared_files(test_set):
  images, labels = test_set
  n = len(labels)
  assert n in (1000, FULL_TEST_SET)  # the committed digits, or all of them
  assert images.shape == (n, 28, 28) and images.dtype == np.uint8
  assert labels.shape == (n,) and labels.dtype == np.uint8
  if n == FULL_TEST_SET:
    assert np.bincount(labels, minlength=10).tolist() == TEST_LABEL_COUNTS
  else:
    assert np.all(np.bincount(labels, minlength=10) >= 80)
  assert images.max() == 255 and images.min() == 0


def test_shared_files_match_sha256sums(shared_dir):
  sums = {}
  for line in (shared_dir / "SHA256SUMS").read_text().splitlines():
    if line.strip():
      digest, name = line.split()
      sums[name.lstrip("*")] = digest
  assert set(sums) >= {IMAGES_GZ, LABELS_GZ}
  for name, digest in sums.items():
    assert hashlib.sha256((shared_dir / name).read_bytes()).hexdigest() == digest, name


def test_read_idx_gzip_detected_by_magic_not_name(shared_dir, test_set, tmp_path):
  for gz_name, expected in zip((IMAGES_GZ, LABELS_GZ), test_set, strict=True):
    raw = gzip.decompress((shared_dir / gz_name).read_bytes())
    (tmp_path / gz_name.removesuffix(".gz")).write_bytes(raw)
    (tmp_path / "raw_named.gz").write_bytes(raw)
    (tmp_path / "gz_named_raw").write_bytes((shared_dir / gz_name).read_bytes())
    for name in (gz_name.removesuffix(".gz"), "raw_named.gz", "gz_named_raw"):
      np.testing.assert_array_equal(read_idx(tmp_path / name), expected)


def test_read_idx_wrong_sizes(tmp_path):
  path = write_idx(tmp_path / "ok", np.arange(24, dtype=np.uint8).reshape(2, 3, 4))
  good = path.read_bytes()
  np.testing.assert_array_equal(read_idx(path), np.arange(24).reshape(2, 3, 4))
  for name, data in [
    ("short", good[:-1]),
    ("long", good + b"\x00"),
    ("header", good[:9]),
  ]:
    (tmp_path / name).write_bytes(data)
    with pytest.raises(ValueError, match=name) as info:
      read_idx(tmp_path / name)
    assert name == "header" or (
      "24" in str(info.value) and "(2, 3, 4)" in str(info.value)
    )
  (tmp_path / "cut.gz").write_bytes(gzip.compress(good)[:-10])
  with pytest.raises(ValueError, match="cut.gz"):
    read_idx(tmp_path / "cut.gz")


def test_read_idx_bad_magic_and_type(tmp_path):
  (tmp_path / "text").write_bytes(b"hello world")
  (tmp_path / "empty").write_bytes(b"")
  for name in ("text", "empty"):
    with pytest.raises(ValueError, match="not an IDX file"):
      read_idx(tmp_path / name)
  floats = write_idx(tmp_path / "floats", np.zeros((2, 2), np.float32), type_code=0x0D)
  with pytest.raises(ValueError, match=r"0x0d \(float32\).*only 0x08"):
    read_idx(floats)


# --- load_mnist from a directory ----------------------------------------------


def test_load_test_only_split(shared_dir, test_set):
  data = load_mnist(shared_dir, seed=0)
  assert isinstance(data, MnistData)
  images, labels = test_set
  n = len(labels)
  n_train, n_val = n * 8 // 10, n // 10
  sizes = [(data.x_train, n_train), (data.x_val, n_val), (data.x_test, n_val)]
  for x, k in sizes:
    assert x.shape == (k, 784) and x.dtype == np.float32
    assert 0.0 <= x.min() and x.max() <= 1.0
    np.testing.assert_array_equal(np.rint(x * 255) / 255, x)  # exactly uint8/255
  for y, k in [(data.y_train, n_train), (data.y_val, n_val), (data.y_test, n_val)]:
    assert y.shape == (k,) and y.dtype == np.int32
  assert "test-only" in data.split and "default_rng(0)" in data.split
  assert data.source == os.path.abspath(shared_dir)
  # A partition: every test digit lands in exactly one part, by the documented
  # permutation.
  perm = np.random.default_rng(0).permutation(n)
  np.testing.assert_array_equal(data.y_train, labels[perm[:n_train]])
  np.testing.assert_array_equal(
    data.x_test, images[perm[n_train + n_val :]].reshape(-1, 784) / np.float32(255)
  )
  parts_x = np.concatenate([data.x_train, data.x_val, data.x_test])
  parts_y = np.concatenate([data.y_train, data.y_val, data.y_test])
  assert rows_multiset(parts_x, parts_y) == rows_multiset(images / 255, labels)


def test_load_test_only_split_is_deterministic(shared_dir):
  a, b = load_mnist(shared_dir, seed=3), load_mnist(shared_dir, seed=3)
  c = load_mnist(shared_dir, seed=4)
  np.testing.assert_array_equal(a.x_train, b.x_train)
  np.testing.assert_array_equal(a.y_test, b.y_test)
  assert not np.array_equal(a.y_train, c.y_train)


@pytest.fixture(scope="module")
def full_dir(tmp_path_factory, test_set) -> pathlib.Path:
  """60 000 fake training digits, pixel (0, 0..1) coding the index, + real test."""
  path = tmp_path_factory.mktemp("full_mnist")
  index = np.arange(60000)
  images = np.zeros((60000, 28, 28), np.uint8)
  images[:, 0, 0], images[:, 0, 1] = index % 251, index // 251
  write_idx(path / "train-images-idx3-ubyte", images)
  write_idx(path / "train-labels-idx1-ubyte.gz", (index % 10).astype(np.uint8), gz=True)
  write_idx(path / "t10k-images-idx3-ubyte.gz", test_set[0], gz=True)
  write_idx(path / "t10k-labels-idx1-ubyte", test_set[1])
  return path


def test_load_full_set_uses_paper_split(full_dir, test_set):
  data = load_mnist(full_dir)
  assert data.x_train.shape == (50000, 784) and data.x_val.shape == (10000, 784)
  assert data.x_test.shape == (len(test_set[1]), 784)
  code = lambda x: np.rint(x[:, 0] * 255) + 251 * np.rint(x[:, 1] * 255)
  np.testing.assert_array_equal(code(data.x_train), np.arange(50000))
  np.testing.assert_array_equal(code(data.x_val), np.arange(50000, 60000))
  np.testing.assert_array_equal(data.y_val, np.arange(50000, 60000) % 10)
  np.testing.assert_array_equal(data.y_test, test_set[1])
  assert "paper split" in data.split and "[50000, 60000) validation" in data.split


@pytest.mark.parametrize(
  "present",
  [
    [],
    ["t10k-labels-idx1-ubyte.gz"],
    ["train-images-idx3-ubyte"],
    [IMAGES_GZ, LABELS_GZ, "train-images-idx3-ubyte"],
  ],
)
def test_load_incomplete_dir_is_unavailable(tmp_path, present):
  for name in present:
    write_idx(
      tmp_path / name,
      np.zeros((1, 28, 28) if "images" in name else (1,), np.uint8),
      gz=name.endswith(".gz"),
    )
  with pytest.raises(MnistUnavailable) as info:
    load_mnist(tmp_path)
  message = str(info.value)
  assert str(tmp_path) in message and "--data-dir" in message
  assert "t10k-images-idx3-ubyte" in message
  assert (
    ("it is empty" in message)
    if not present
    else all(name in message for name in present)
  )


def test_load_missing_dir_is_unavailable(tmp_path):
  with pytest.raises(MnistUnavailable, match="does not exist.*--data-dir"):
    load_mnist(tmp_path / "nowhere")
  (tmp_path / "file").write_bytes(b"")
  with pytest.raises(MnistUnavailable, match="not a directory"):
    load_mnist(tmp_path / "file")
  assert issubclass(MnistUnavailable, RuntimeError)


@pytest.mark.parametrize(
  "images, labels, match",
  [
    (np.zeros((5, 28, 28)), np.zeros(4), "5 images but .* 4 labels"),
    (np.zeros((5, 28, 27)), np.zeros(5), r"\[N, 28, 28\]"),
    (np.zeros((5, 28, 28)), np.full(5, 10), "0..9"),
  ],
)
def test_load_bad_contents(tmp_path, images, labels, match):
  write_idx(tmp_path / "t10k-images-idx3-ubyte", images.astype(np.uint8))
  write_idx(tmp_path / "t10k-labels-idx1-ubyte", labels.astype(np.uint8))
  with pytest.raises(ValueError, match=match):
    load_mnist(tmp_path)


@pytest.mark.parametrize("seed", [-1, 1.5, True, "0"])
def test_load_bad_seed(shared_dir, seed):
  with pytest.raises(ValueError, match="seed"):
    load_mnist(shared_dir, seed=seed)


# --- load_mnist through tensorflow-datasets ----------------------------------


@pytest.fixture
def tfds(monkeypatch):
  tfds = pytest.importorskip(
    "tensorflow_datasets", reason='the optional extra: pip install -e ".[tfds]"'
  )
  from tensorflow_datasets.testing import mocking

  original = mocking._getitems

  def getitems(self, record_keys=None, generator=None, serialized=False):
    # tfds 4.9.10's mock sets __getitems__ as a plain attribute (MagicMock does
    # not treat it as a magic method), so it is called without ``self``.
    if record_keys is None:
      self, record_keys = None, self
    return original(self, record_keys, generator, serialized)

  monkeypatch.setattr(mocking, "_getitems", getitems)
  monkeypatch.setattr(mnist, "_internet_reachable", _must_not_call)
  return tfds


def _must_not_call(*args, **kwargs):
  raise AssertionError("the network must not be touched")


def test_load_tfds_mock(tfds, monkeypatch):
  from tensorflow_datasets.core.data_sources import base

  monkeypatch.setattr(tfds.core.DatasetBuilder, "is_prepared", lambda self: True)
  monkeypatch.setattr(base.BaseDataSource, "__getitem__", _must_not_call)  # bulk
  calls = []
  data_source = tfds.data_source
  monkeypatch.setattr(
    tfds,
    "data_source",
    lambda name, **kw: (calls.append((name, kw)), data_source(name, **kw))[1],
  )
  with tfds.testing.mock_data(num_examples=12):
    data = load_mnist()
  assert calls == [
    ("mnist", {"split": ["train[:50000]", "train[50000:]", "test"], "download": True})
  ]
  for part in ("train", "val", "test"):  # the mock gives every split 12 examples
    x, y = getattr(data, f"x_{part}"), getattr(data, f"y_{part}")
    assert x.shape == (12, 784) and x.dtype == np.float32
    assert 0.0 <= x.min() and x.max() <= 1.0 and x.max() > 0.0
    assert y.shape == (12,) and y.dtype == np.int32
    assert 0 <= y.min() and y.max() <= 9
  assert "tensorflow-datasets" in data.source and "train[:50000]" in data.split


def test_load_tfds_offline_fails_fast(tfds, monkeypatch):
  monkeypatch.setattr(tfds.core.DatasetBuilder, "is_prepared", lambda self: False)
  monkeypatch.setattr(mnist, "_internet_reachable", lambda: False)
  monkeypatch.setattr(tfds, "data_source", _must_not_call)
  start = time.perf_counter()
  with pytest.raises(MnistUnavailable, match="internet.*--data-dir=DIR"):
    load_mnist()
  assert time.perf_counter() - start < 2.0


def test_load_tfds_needs_tensorflow_to_prepare(tfds, monkeypatch):
  monkeypatch.setattr(tfds.core.DatasetBuilder, "is_prepared", lambda self: False)
  monkeypatch.setattr(mnist, "_internet_reachable", lambda: True)
  monkeypatch.setattr(mnist, "_tensorflow_installed", lambda: False)
  monkeypatch.setattr(tfds, "data_source", _must_not_call)
  with pytest.raises(MnistUnavailable, match="TensorFlow.*--data-dir"):
    load_mnist()


def test_load_tfds_errors_become_unavailable(tfds, monkeypatch):
  monkeypatch.setattr(tfds.core.DatasetBuilder, "is_prepared", lambda self: True)

  def broken(*args, **kwargs):
    raise OSError("disk on fire")

  monkeypatch.setattr(tfds, "data_source", broken)
  with pytest.raises(MnistUnavailable, match="disk on fire.*--data-dir") as info:
    load_mnist()
  assert isinstance(info.value.__cause__, OSError)


def test_load_tfds_not_installed(monkeypatch):
  monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)
  with pytest.raises(MnistUnavailable, match="not installed.*--data-dir"):
    load_mnist()


def test_internet_check_is_quick_and_quiet(monkeypatch):
  calls = []

  def refuse(address, timeout):
    calls.append((address, timeout))
    raise OSError("no route")

  monkeypatch.setattr(mnist.socket, "create_connection", refuse)
  assert mnist._internet_reachable() is False
  assert calls == [(("storage.googleapis.com", 443), 3.0)]


# --- rotate_images ------------------------------------------------------------


@pytest.fixture(scope="module")
def random_images() -> np.ndarray:
  return np.random.default_rng(0).random((3, 28, 28)).astype(np.float32)


def test_rotate_four_quarter_turns_is_identity(random_images):
  x = jnp.asarray(random_images)
  for _ in range(4):
    x = rotate_images(x, 90.0)
  np.testing.assert_allclose(x, random_images, atol=1e-5)


def test_rotate_quarter_turn_is_rot90(random_images):
  np.testing.assert_allclose(
    rotate_images(random_images, 90.0),
    np.rot90(random_images, 1, axes=(1, 2)),
    atol=1e-5,
  )
  np.testing.assert_allclose(
    rotate_images(random_images, -90.0),
    np.rot90(random_images, -1, axes=(1, 2)),
    atol=1e-5,
  )
  np.testing.assert_array_equal(rotate_images(random_images, 0.0), random_images)


@pytest.mark.parametrize("shape, angle", [((28, 28), 30.0), ((20, 32), -50.0)])
def test_rotate_matches_scipy(shape, angle):
  image = np.random.default_rng(1).random(shape)
  # JAX's mode="constant" is SciPy's "grid-constant" (zero outside, interpolated
  # up to the edge); SciPy's "constant" differs only where a source point lies
  # within one pixel outside the image.
  expected = scipy.ndimage.rotate(
    image, angle, reshape=False, order=1, mode="grid-constant"
  )
  got = rotate_images(image[None].astype(np.float32), angle)[0]
  np.testing.assert_allclose(got, expected, atol=1e-5)


def test_rotate_digit_matches_scipy_constant(test_set):
  digits = test_set[0][:4] / np.float32(255)  # zero margins: modes agree
  angles = np.array([30.0, -45.0, 120.0, 7.5], np.float32)
  got = rotate_images(digits.reshape(4, 784), angles)
  expected = [
    scipy.ndimage.rotate(
      d.astype(np.float64), a, reshape=False, order=1, mode="constant"
    )
    for d, a in zip(digits, angles, strict=True)
  ]
  np.testing.assert_allclose(got.reshape(4, 28, 28), expected, atol=1e-5)


def test_rotate_layouts_jit_vmap_and_per_image_angles(random_images):
  angles = jnp.array([0.0, 90.0, 33.0])
  expected = jnp.stack(
    [
      rotate_images(img[None], a)[0]
      for img, a in zip(random_images, angles, strict=True)
    ]
  )
  flat = rotate_images(random_images.reshape(3, 784), angles)
  assert flat.shape == (3, 784) and flat.dtype == jnp.float32
  np.testing.assert_allclose(flat.reshape(3, 28, 28), expected, atol=1e-5)
  jitted = jax.jit(rotate_images)(random_images, angles)
  np.testing.assert_allclose(jitted, expected, atol=1e-5)
  vmapped = jax.vmap(lambda img, a: rotate_images(img[None], a)[0])(
    jnp.asarray(random_images), angles
  )
  np.testing.assert_allclose(vmapped, expected, atol=1e-5)
  as_uint8 = rotate_images(np.zeros((2, 784), np.uint8), 10.0)
  assert as_uint8.dtype == jnp.float32


@pytest.mark.parametrize(
  "shape, angles, match",
  [
    ((2, 100), 0.0, "784"),
    ((784,), 0.0, r"\[N, 784\] or \[N, H, W\]"),
    ((2, 28, 28, 1), 0.0, r"\[N, 784\] or \[N, H, W\]"),
    ((2, 28, 28), np.zeros(3), r"scalar or \[2\]"),
    ((2, 28, 28), np.zeros((2, 1)), r"scalar or \[2\]"),
  ],
)
def test_rotate_bad_shapes(shape, angles, match):
  with pytest.raises(ValueError, match=match):
    rotate_images(np.zeros(shape, np.float32), angles)
