"""Shared fixtures for the ``vaells_jax`` tests.

Nothing here changes JAX's global configuration: float64 tests enter
``jax.enable_x64(True)`` themselves and create their arrays inside it. The
fixtures therefore return NumPy arrays (float64), which each test converts to
the dtype it needs.
"""

from __future__ import annotations

import os
import pathlib
import tempfile

# Compiled programs are cached on disk across the test processes (the tests
# start many command-line runs whose train step takes ~10 s to compile). Set
# before jax is imported; subprocesses inherit it.
os.environ.setdefault(
  "JAX_COMPILATION_CACHE_DIR",
  os.path.join(tempfile.gettempdir(), "vaells_jax_test_cache"),
)

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import scipy.linalg  # noqa: E402


@pytest.fixture(scope="session")
def rotation_psi():
  """The single generator of planar rotations, ``[1, 2, 2]``."""
  return np.array([[[0.0, -1.0], [1.0, 0.0]]])


@pytest.fixture(scope="session")
def random_problem():
  """A random inference problem with a known sparse-ish solution (seed 0).

  ``psi ~ N(0, 0.3^2)`` ``[4, 2, 2]``, ``z0 ~ N(0, 1)`` ``[60, 2]``, true
  coefficients ``~ Laplace(0, 0.5)`` ``[60, 4]`` and
  ``z1 = expm(sum_m c_m psi_m) z0 + 0.01 N(0, 1)``, all float64.

  Returns:
    A dict with keys ``psi``, ``z0``, ``z1``, ``coeffs``.
  """
  rng = np.random.default_rng(0)
  psi = 0.3 * rng.standard_normal((4, 2, 2))
  z0 = rng.standard_normal((60, 2))
  coeffs = rng.laplace(scale=0.5, size=(60, 4))
  z1 = np.stack(
    [
      scipy.linalg.expm(np.einsum("m,mij->ij", c, psi)) @ z
      for c, z in zip(coeffs, z0, strict=True)
    ]
  )
  z1 = z1 + 0.01 * rng.standard_normal(z1.shape)
  return {"psi": psi, "z0": z0, "z1": z1, "coeffs": coeffs}


# --- MNIST digits ---------------------------------------------------------------
# Without VAELLS_MNIST_DIR the tests read the first 1 000 digits of the official
# MNIST test set, committed in tests/data/mnist (same IDX format, same file
# names), so they pass on any machine. CI sets VAELLS_MNIST_DIR to the folder of
# the full 10 000-digit test set (.ci/run), which also runs the tests that need
# all of it; a VAELLS_MNIST_DIR without the files is an error, never a skip.
MNIST_FIXTURE_DIR = pathlib.Path(__file__).resolve().parent / "data" / "mnist"
MNIST_FILES = ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
FULL_TEST_SET = 10_000  # digits in the official MNIST test set


def mnist_dir() -> pathlib.Path:
  """The folder of the MNIST test digits the tests read (see above)."""
  chosen = os.environ.get("VAELLS_MNIST_DIR")
  path = pathlib.Path(chosen) if chosen else MNIST_FIXTURE_DIR
  missing = [name for name in MNIST_FILES if not (path / name).is_file()]
  if missing:
    pytest.fail(f"VAELLS_MNIST_DIR={path} lacks {missing}", pytrace=False)
  return path


def full_mnist_dir() -> pathlib.Path:
  """:func:`mnist_dir` when it holds the full test set, else skips the test."""
  if not os.environ.get("VAELLS_MNIST_DIR"):
    pytest.skip("needs the full MNIST test set: set VAELLS_MNIST_DIR")
  return mnist_dir()


@pytest.fixture(scope="session")
def tiny_data():
  """The shared tiny concentric data set (``tests/tiny.py``)."""
  from tiny import TINY_DATA

  return TINY_DATA


@pytest.fixture(scope="session")
def tiny_config():
  """The shared configuration of a run that trains in seconds."""
  from tiny import TINY

  return TINY
