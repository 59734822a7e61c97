"""Starting parameters in a file: what ``config.start_networks`` names.

:func:`write` saves ``{"encoder", "decoder", "psi"}`` parameters (msgpack,
written atomically); :func:`read` loads them for
:func:`vaells_jax.models.vaells.init_params`, checked against the config's
shapes: the networks start from them, the operators' random draw is added
to ``psi``.
"""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization

from vaells_jax.data.files import atomic_write

__all__ = ["read", "write"]


def write(path, networks: dict) -> None:
  """Writes ``{"encoder", "decoder", "psi"}`` to ``path`` (msgpack, atomically)."""
  with atomic_write(path) as f:
    f.write(serialization.msgpack_serialize(jax.device_get(networks)))


def read(path, like: dict) -> dict:
  """The networks :func:`write` wrote, checked against ``like``'s shapes.

  Raises:
    ValueError: the file is missing, unreadable or of other networks.
  """
  try:
    saved = serialization.msgpack_restore(pathlib.Path(path).read_bytes())
  except (OSError, ValueError, TypeError) as e:
    raise ValueError(f"config.start_networks={str(path)!r} is unreadable: {e}") from e
  shapes = jax.tree.map(np.shape, like)
  if not isinstance(saved, dict) or jax.tree.map(np.shape, saved) != shapes:
    raise ValueError(
      f"config.start_networks={str(path)!r} holds networks of other shapes than "
      "the config's."
    )
  return jax.tree.map(jnp.asarray, saved)
