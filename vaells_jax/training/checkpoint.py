"""Atomic, resumable checkpoints of the training state (orbax; no pickle).

Checkpoints live in ``workdir/checkpoints/<step>/``. Orbax writes each one
into a temporary folder and renames it when complete, so a run killed while
saving (even with SIGKILL) leaves the previous checkpoint as the latest and
never a half-written one. The arrays are stored with tensorstore, the tree
layout as JSON metadata.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import logging
import os
import pathlib
import sys
import time

import jax
import numpy as np
import orbax.checkpoint as ocp

__all__ = [
  "CHECKPOINT_DIR",
  "CheckpointError",
  "checkpoint_steps",
  "restore_checkpoint",
  "save_checkpoint",
]

CHECKPOINT_DIR = "checkpoints"
KEEP = 2  # the latest and the one before it

# Orbax logs every save and restore at INFO level through absl.
logging.getLogger("absl").setLevel(logging.WARNING)


class CheckpointError(ValueError):
  """A checkpoint is missing, corrupt, or does not match the configuration."""


def _manager(workdir, create: bool) -> ocp.CheckpointManager:
  options = ocp.CheckpointManagerOptions(
    max_to_keep=KEEP, create=create, enable_async_checkpointing=False
  )
  return ocp.CheckpointManager(
    pathlib.Path(workdir).absolute() / CHECKPOINT_DIR, options=options
  )


def checkpoint_steps(workdir) -> list[int]:
  """Steps of the complete checkpoints in ``workdir``, ascending.

  Safe to call while a run is writing to ``workdir`` (e.g. to watch it):
  a listing that races with the deletion of an old checkpoint is retried.
  """
  for attempt in range(10):
    if not (pathlib.Path(workdir) / CHECKPOINT_DIR).is_dir():
      return []
    try:
      with _manager(workdir, create=False) as manager:
        return sorted(manager.all_steps())
    except OSError:  # a step folder vanished between listing and reading
      if attempt == 9:
        raise
      time.sleep(0.05)


def save_checkpoint(workdir, state) -> int:
  """Saves ``state`` (a pytree with a scalar ``step``) and returns that step.

  Blocks until the checkpoint is complete on disk. Saving a step that is
  already saved does nothing. Older checkpoints beyond the last ``KEEP`` are
  deleted only after the new one is complete.
  """
  step = int(state.step)
  with _manager(workdir, create=True) as manager:
    if step not in manager.all_steps():
      manager.save(step, args=ocp.args.StandardSave(state))
      manager.wait_until_finished()
  return step


def _drop_unretrieved_futures(record: logging.LogRecord) -> bool:
  return not record.getMessage().startswith(
    ("Future exception was never retrieved", "Task exception was never retrieved")
  )


@contextlib.contextmanager
def _quiet_stderr():
  """Discards what is written to file descriptor 2 inside the block.

  A failed orbax restore leaves its read coroutines pending; as they are
  collected (from orbax's threads) each prints an "Event loop is closed"
  traceback that carries no information. The error itself is re-raised as a
  :class:`CheckpointError` after the block.
  """
  sys.stderr.flush()
  saved = os.dup(2)
  try:
    with open(os.devnull, "w") as null:
      os.dup2(null.fileno(), 2)
      try:
        yield
      except BaseException:
        # Futures and tasks of the abandoned reads that are collected later
        # would log "... exception was never retrieved" (with a traceback)
        # through asyncio's logger.
        logging.getLogger("asyncio").addFilter(_drop_unretrieved_futures)
        gc.collect()
        time.sleep(0.1)  # let orbax's threads finish writing
        raise
      finally:
        sys.stderr.flush()
  finally:
    os.dup2(saved, 2)
    os.close(saved)


def _first_words(error: Exception, limit: int = 160) -> str:
  """The start of an error message (tensorstore's run to kilobytes)."""
  text = " ".join(str(error).split()).split(" [tensorstore_spec")[0]
  text = f"{type(error).__name__}: {text}"
  return text if len(text) <= limit else text[:limit] + "..."


def _describe(tree) -> list[tuple[str, tuple, str]]:
  return [
    (jax.tree_util.keystr(path), tuple(np.shape(leaf)), str(np.asarray(leaf).dtype))
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree)
  ]


def _check_layout(folder: pathlib.Path, target) -> None:
  """Refuses a checkpoint whose top-level state fields are not ``target``'s.

  A checkpoint of another layout of the training state (e.g. one that kept
  ``psi`` and its rate beside ``params`` and ``opt_state``) is not
  reinterpreted.
  """
  try:
    saved = json.loads((folder / "default" / "_METADATA").read_text())
    keys = saved["tree_metadata"]
  except (OSError, ValueError, KeyError, TypeError):
    return  # unreadable: the restore below reports it
  found = sorted({key.strip("()").split(",")[0].strip(" '\"") for key in keys})
  expected = sorted(f.name for f in dataclasses.fields(target))
  if found != expected:
    raise CheckpointError(
      f"Checkpoint {folder} was written by another version of vaells_jax "
      f"(its state holds {found}; this version's holds {expected}); it "
      "cannot be resumed or loaded here: retrain, or use the version that "
      "wrote it."
    )


def restore_checkpoint(workdir, target, step: int | None = None):
  """Restores the checkpoint at ``step`` (default: the latest) like ``target``.

  Args:
    workdir: the run's folder.
    target: a state with the expected structure, shapes and dtypes (e.g. a
      freshly initialised one).
    step: which checkpoint; None for the latest.

  Raises:
    CheckpointError: if there is no checkpoint, or it cannot be read, or its
      structure, shapes or dtypes differ from ``target``'s (a checkpoint of a
      different configuration) — never a silent fresh start.
  """
  steps = checkpoint_steps(workdir)
  folder = pathlib.Path(workdir) / CHECKPOINT_DIR
  if not steps:
    raise CheckpointError(f"No checkpoint in {folder}.")
  step = steps[-1] if step is None else step
  if step not in steps:
    raise CheckpointError(
      f"No checkpoint for step {step} in {folder}; there are: {steps}."
    )
  _check_layout(folder / str(step), target)
  try:
    with _quiet_stderr(), _manager(workdir, create=False) as manager:
      restored = manager.restore(step, args=ocp.args.StandardRestore(target))
  except Exception as e:  # tensorstore, JSON and tree errors alike
    raise CheckpointError(
      f"Checkpoint {folder / str(step)} is corrupt or was written by a "
      f"different configuration ({_first_words(e)})."
    ) from None
  expected, found = _describe(target), _describe(restored)
  if expected != found:
    diff = next(
      (e, f) for e, f in zip(expected + [None], found + [None], strict=False) if e != f
    )
    raise CheckpointError(
      f"Checkpoint {folder / str(step)} does not match this configuration: "
      f"expected {diff[0]}, found {diff[1]}."
    )
  if int(restored.step) != step:
    raise CheckpointError(
      f"Checkpoint {folder / str(step)} holds step {int(restored.step)}; it is corrupt."
    )
  return restored
