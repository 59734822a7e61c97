"""Atomic, verified, resumable checkpoints of the training state (orbax; no pickle).

Checkpoints live in ``workdir/checkpoints/<step>/``. Orbax writes each one
into a temporary folder and renames it when complete; then the SHA-256 of
every file in it is written, atomically, to ``<step>/sha256sums.json``
together with what the run was (its config, a digest of its data). A
checkpoint counts as complete only once that file exists, so a run killed
while saving (even with SIGKILL) leaves the previous checkpoint as the latest
and never a half-written one; older checkpoints beyond the last ``KEEP`` are
deleted only after that. Every restore first checks every file against its
checksum: a flipped byte or a truncated file anywhere is a
:class:`CheckpointError`, never silently altered parameters. The arrays are
stored with tensorstore, the tree layout as JSON metadata.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import json
import logging
import os
import pathlib
import sys
import time

import jax
import numpy as np
import orbax.checkpoint as ocp

from vaells_jax.data.files import atomic_write_text

__all__ = [
  "CHECKPOINT_DIR",
  "CheckpointError",
  "checkpoint_steps",
  "restore_checkpoint",
  "save_checkpoint",
  "verify_checkpoint",
]

CHECKPOINT_DIR = "checkpoints"
KEEP = 2  # the latest and the one before it
SUMS_NAME = "sha256sums.json"  # in each step's folder; written last


class CheckpointError(ValueError):
  """A checkpoint is missing, corrupt, or does not match the configuration."""


def _manager(workdir, create: bool) -> ocp.CheckpointManager:
  # Old checkpoints are deleted here, once the new one's checksums are written.
  folder = pathlib.Path(workdir).absolute() / CHECKPOINT_DIR
  alone = {}
  if jax.process_count() > 1:
    # In a run across processes only process 0 saves (a host-local copy of
    # the replicated state) and restores: orbax must not wait for the others.
    me = jax.process_index()
    alone = {
      "multiprocessing_options": ocp.options.MultiprocessingOptions(
        primary_host=me, active_processes={me}
      )
    }
    if create:  # orbax refuses create=True with active_processes
      folder.mkdir(parents=True, exist_ok=True)
      create = False
  options = ocp.CheckpointManagerOptions(
    max_to_keep=None, create=create, enable_async_checkpointing=False, **alone
  )
  return ocp.CheckpointManager(folder, options=options)


def checkpoint_steps(workdir) -> list[int]:
  """Steps of the complete checkpoints in ``workdir`` (with checksums), ascending.

  Safe to call while a run is writing to ``workdir`` (e.g. to watch it):
  a listing that races with the deletion of an old checkpoint is retried.
  """
  folder = pathlib.Path(workdir) / CHECKPOINT_DIR
  return [s for s in saved_steps(workdir) if (folder / str(s) / SUMS_NAME).exists()]


def saved_steps(workdir) -> list[int]:
  """Steps of every checkpoint orbax finished, with or without checksums."""
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


def _file_sums(folder: pathlib.Path) -> dict[str, str]:
  """SHA-256 of every file under ``folder`` but the sums file, by relative path."""
  sums = {}
  for path in sorted(folder.rglob("*")):
    relative = path.relative_to(folder).as_posix()
    if path.is_symlink():
      raise CheckpointError(f"Checkpoint {folder} holds a symbolic link {relative}.")
    if path.is_file() and relative != SUMS_NAME:
      digest = hashlib.sha256()
      with open(path, "rb") as f:
        for block in iter(lambda f=f: f.read(1 << 20), b""):
          digest.update(block)
      sums[relative] = digest.hexdigest()
  return sums


def save_checkpoint(workdir, state, identity: dict | None = None) -> int:
  """Saves ``state`` (a pytree with a scalar ``step``) and returns that step.

  Blocks until the checkpoint is complete on disk, checksums included.
  Saving a step that is already complete does nothing; a folder of that step
  without checksums (a save that was interrupted) is replaced. Older
  checkpoints beyond the last ``KEEP`` are deleted only after the new one is
  complete.

  Args:
    workdir: the run's folder.
    state: the training state.
    identity: what the run is (e.g. ``{"config": {...}, "data_sha256": ...}``),
      stored with the checksums and compared by :func:`verify_checkpoint`.

  Raises:
    CheckpointError: one line, if the checkpoint cannot be written (a full
      disk, a file size limit); the previous checkpoints are left intact.
  """
  step = int(state.step)
  folder = pathlib.Path(workdir) / CHECKPOINT_DIR
  if step in checkpoint_steps(workdir):
    return step
  try:
    # Orbax's threads log a failed write (a full disk) with tracebacks.
    with _quiet_stderr(), _manager(workdir, create=True) as manager:
      if step in manager.all_steps():  # interrupted before its checksums
        manager.delete(step)
      manager.save(step, args=ocp.args.StandardSave(state))
      manager.wait_until_finished()
      record = {"files": _file_sums(folder / str(step)), **(identity or {})}
      atomic_write_text(folder / str(step) / SUMS_NAME, json.dumps(record, indent=1))
      complete = checkpoint_steps(workdir)
      for old in manager.all_steps():
        if old not in complete[-KEEP:]:
          manager.delete(old)
  except (CheckpointError, KeyboardInterrupt):
    raise
  except Exception as e:  # OSError from tensorstore or a write, wrapped or not
    _remove_temporary(folder)
    raise CheckpointError(
      f"Could not write the checkpoint of step {step} ({_first_words(e)}); "
      f"the previous checkpoints (steps {checkpoint_steps(workdir)}) are intact."
    ) from None
  return step


def _remove_temporary(folder: pathlib.Path) -> None:
  """Deletes orbax's temporary folders of a save that failed."""
  import shutil

  for tmp in folder.glob("*.orbax-checkpoint-tmp*"):
    if not tmp.is_symlink():
      shutil.rmtree(tmp, ignore_errors=True)


def verify_checkpoint(workdir, step: int, identity: dict | None = None) -> None:
  """Checks every file of checkpoint ``step`` against its SHA-256.

  With ``identity`` (as given to :func:`save_checkpoint`), also checks that
  the checkpoint was written by that run: each key of ``identity`` must equal
  the stored one (a ``config.json`` edited after training is refused, naming
  the fields that differ).

  Raises:
    CheckpointError: one line naming the first mismatching file or field, or
      a checkpoint without checksums; when an earlier intact checkpoint
      exists, the message says how to resume from it.
  """
  folder = pathlib.Path(workdir) / CHECKPOINT_DIR / str(step)
  problem = _integrity_problem(folder)
  if problem:
    raise CheckpointError(
      f"Checkpoint {folder} is corrupt: {problem}.{_fallback(workdir, step)}"
    )
  record = json.loads((folder / SUMS_NAME).read_text())
  for key, value in (identity or {}).items():
    stored = record.get(key)
    if stored == value:
      continue
    if isinstance(value, dict) and isinstance(stored, dict):
      fields = sorted(k for k in {*value, *stored} if value.get(k) != stored.get(k))
      what = "; ".join(
        f"{k}: checkpoint {stored.get(k)!r}, now {value.get(k)!r}" for k in fields
      )
    else:
      what = f"checkpoint {stored!r}, now {value!r}"
    raise CheckpointError(
      f"Checkpoint {folder} was written by another run than this {key} describes "
      f"({what}); was the workdir's {key} edited?"
    )


def _integrity_problem(folder: pathlib.Path) -> str | None:
  """What is wrong with the files of one checkpoint folder, or None."""
  try:
    record = json.loads((folder / SUMS_NAME).read_text())
    expected = record["files"]
    if not isinstance(expected, dict):
      raise TypeError
  except FileNotFoundError:
    return (
      f"it has no {SUMS_NAME} (written by an older vaells_jax, or its save was "
      "interrupted)"
    )
  except (OSError, ValueError, KeyError, TypeError):
    return f"its {SUMS_NAME} is unreadable"
  try:
    found = _file_sums(folder)
  except (OSError, CheckpointError) as e:
    return _first_words(e)
  for name in sorted({*expected, *found}):
    if name not in found:
      return f"file {name} is missing"
    if name not in expected:
      return f"file {name} is not in its checksums"
    if found[name] != expected[name]:
      size = (folder / name).stat().st_size
      return f"file {name} ({size} bytes) does not match its SHA-256"
  return None


def _fallback(workdir, step: int) -> str:
  """Names an earlier intact checkpoint and how to resume from it, if any."""
  folder = pathlib.Path(workdir) / CHECKPOINT_DIR
  for earlier in reversed([s for s in checkpoint_steps(workdir) if s < step]):
    if _integrity_problem(folder / str(earlier)) is None:
      return (
        f" The checkpoint of step {earlier} is intact: to resume from it, "
        f"delete {folder / str(step)} and resume again."
      )
  return ""


def _drop_unretrieved_futures(record: logging.LogRecord) -> bool:
  return not record.getMessage().startswith(
    ("Future exception was never retrieved", "Task exception was never retrieved")
  )


@contextlib.contextmanager
def _quiet_stderr():
  """Discards what is written to file descriptor 2 inside the block, and
  holds the ``absl`` logger at ``WARNING`` there (orbax logs every save and
  restore at ``INFO``; a notebook's stderr is not descriptor 2); the
  logger's level is restored after.

  A failed orbax restore leaves its read coroutines pending; as they are
  collected (from orbax's threads) each prints an "Event loop is closed"
  traceback that carries no information. The error itself is re-raised as a
  :class:`CheckpointError` after the block.
  """
  sys.stderr.flush()
  saved = os.dup(2)
  absl = logging.getLogger("absl")
  level = absl.level
  absl.setLevel(max(level, logging.WARNING))
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
    absl.setLevel(level)
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


def restore_checkpoint(
  workdir,
  target,
  step: int | None = None,
  identity: dict | None = None,
  verify: bool = True,
):
  """Restores the checkpoint at ``step`` (default: the latest) like ``target``.

  Every file is checked against its checksum first (:func:`verify_checkpoint`,
  with ``identity`` if given), unless ``verify=False``: the caller verified
  this checkpoint already (a run's plan, :func:`vaells_jax.runs.runner.plan_run`).

  Args:
    workdir: the run's folder.
    target: a state with the expected structure, shapes and dtypes (e.g. a
      freshly initialised one).
    step: which checkpoint; None for the latest.
    identity: what the run is, as given to :func:`save_checkpoint`.

  Raises:
    CheckpointError: if there is no checkpoint, or a file fails its checksum,
      or it cannot be read, or its structure, shapes or dtypes differ from
      ``target``'s (a checkpoint of a different configuration) — never a
      silent fresh start.
  """
  folder = pathlib.Path(workdir) / CHECKPOINT_DIR
  step = _checkpoint_step(workdir, step)
  if verify:
    verify_checkpoint(workdir, step, identity)
  _check_layout(folder / str(step), target)
  try:
    with _quiet_stderr(), _manager(workdir, create=False) as manager:
      restored = manager.restore(step, args=ocp.args.StandardRestore(target))
  except Exception as e:  # tensorstore, JSON and tree errors alike
    raise CheckpointError(
      f"Checkpoint {folder / str(step)} is corrupt or was written by a "
      f"different configuration ({_first_words(e)})."
    ) from None
  _check_restored(folder / str(step), target, restored, step)
  return restored


def _checkpoint_step(workdir, step: int | None) -> int:
  """The saved step ``step`` (None: the latest) in ``workdir``.

  Raises:
    CheckpointError: for none saved, or not that step.
  """
  steps = checkpoint_steps(workdir)
  folder = pathlib.Path(workdir) / CHECKPOINT_DIR
  if not steps:
    unverified = saved_steps(workdir)
    if unverified:
      verify_checkpoint(workdir, unverified[-1])  # raises: no checksums
    raise CheckpointError(f"No checkpoint in {folder}.")
  step = steps[-1] if step is None else step
  if step not in steps:
    raise CheckpointError(
      f"No checkpoint for step {step} in {folder}; there are: {steps}."
    )
  return step


def _check_restored(path, target, restored, step: int) -> None:
  """A restored state has ``target``'s structure, shapes and dtypes and the
  step of its folder ``path``.

  Raises:
    CheckpointError: naming the first difference.
  """
  expected, found = _describe(target), _describe(restored)
  if expected != found:
    diff = next(
      (e, f) for e, f in zip(expected + [None], found + [None], strict=False) if e != f
    )
    raise CheckpointError(
      f"Checkpoint {path} does not match this configuration: "
      f"expected {diff[0]}, found {diff[1]}."
    )
  if int(restored.step) != step:
    raise CheckpointError(
      f"Checkpoint {path} holds step {int(restored.step)}; it is corrupt."
    )
