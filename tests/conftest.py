"""Shared fixtures for the ``vaells_jax`` tests.

Nothing here changes JAX's global configuration: float64 tests enter
``jax.enable_x64(True)`` themselves and create their arrays inside it. The
fixtures therefore return NumPy arrays (float64), which each test converts to
the dtype it needs.
"""

from __future__ import annotations

import os
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
