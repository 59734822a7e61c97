"""Atomic checkpoints of the training state (msgpack, flax.serialization; no pickle)."""

from __future__ import annotations

import os
import pathlib

from flax import serialization

__all__ = ["CHECKPOINT_NAME", "restore_checkpoint", "save_checkpoint"]

CHECKPOINT_NAME = "checkpoint.msgpack"


def save_checkpoint(workdir, state) -> pathlib.Path:
  """Writes ``state`` to ``workdir/checkpoint.msgpack`` atomically.

  The bytes go to a temporary file that is flushed, synced and then renamed
  over the old checkpoint, so a crash never leaves a half-written file.
  """
  path = pathlib.Path(workdir) / CHECKPOINT_NAME
  tmp = path.with_suffix(".tmp")
  with open(tmp, "wb") as f:
    f.write(serialization.to_bytes(state))
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)
  return path


def restore_checkpoint(workdir, target):
  """Restores a checkpoint into the structure of ``target``.

  Raises:
    FileNotFoundError: if there is no checkpoint in ``workdir``.
    ValueError: if the checkpoint does not match ``target`` (corrupt, or from
      a different configuration).
  """
  path = pathlib.Path(workdir) / CHECKPOINT_NAME
  if not path.exists():
    raise FileNotFoundError(f"No checkpoint at {path}.")
  try:
    return serialization.from_bytes(target, path.read_bytes())
  except Exception as e:  # msgpack and structure errors alike
    raise ValueError(f"Checkpoint {path} is corrupt or does not match this "
                     f"configuration: {e}") from None
