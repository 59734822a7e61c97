"""The workdir a run owns: checked before anything is written, locked while used.

:func:`check_workdir` refuses a path that cannot become a run's folder (an
empty string, an existing file, a parent that is a file, a folder without
write permission) and a workdir holding symbolic links (a run never writes
or deletes through one). :func:`lock_workdir` holds an exclusive
``fcntl.flock`` on ``WORKDIR/.lock`` for the run's lifetime: a second run on
the same workdir is refused while the first is alive, and the kernel
releases the lock when the first ends or dies (even by SIGKILL), so there is
never a stale lock to clean up. The lock file holds the owner's PID, for the
message.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pathlib

from vaells_jax.data.files import refuse_symlink

__all__ = ["LOCK_NAME", "WorkdirInUse", "check_workdir", "lock_workdir"]

LOCK_NAME = ".lock"


class WorkdirInUse(ValueError):
  """Another live process holds the workdir's lock."""


def check_workdir(workdir) -> pathlib.Path:
  """Validates ``workdir`` without writing anything; returns it as a path.

  Raises:
    ValueError: one line naming the problem (see the module docstring).
  """
  if workdir is None or not str(workdir).strip():
    raise ValueError("The workdir is an empty string; give a folder.")
  workdir = pathlib.Path(workdir)
  if workdir.exists() and not workdir.is_dir():
    raise ValueError(f"The workdir {workdir} exists and is not a folder.")
  existing = workdir
  while not existing.exists():  # the nearest ancestor that exists
    if existing.is_symlink():
      raise ValueError(f"{existing} is a broken symbolic link; cannot create it.")
    existing = existing.parent
  if not existing.is_dir():
    raise ValueError(
      f"Cannot create the workdir {workdir}: {existing} is a file, not a folder."
    )
  if not os.access(existing, os.W_OK | os.X_OK):
    what = "The workdir" if existing == workdir else "Its parent"
    raise ValueError(
      f"Cannot write the workdir {workdir}: {what} {existing} is not writable."
    )
  if workdir.is_dir():
    for folder, dirs, files in os.walk(workdir):
      for name in dirs + files:
        refuse_symlink(os.path.join(folder, name))
  return workdir


@contextlib.contextmanager
def lock_workdir(workdir):
  """Holds the exclusive lock of ``workdir`` (which must exist) in the block.

  Raises:
    WorkdirInUse: while another live process holds it (naming its PID).
  """
  path = pathlib.Path(workdir) / LOCK_NAME
  refuse_symlink(path)
  fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
      raise WorkdirInUse(
        f"The workdir {workdir} is in use by another run (pid {owner}); wait "
        "for it to end, or choose another workdir."
      ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    yield
  finally:
    os.close(fd)  # releases the lock
