"""Atomic file writes: a reader sees the old file or the new one, never half.

Every file a run writes (``config.json``, ``dataset.npz``, ``summary.*``, the
figures, checkpoint checksums) goes through :func:`atomic_write`: the bytes
are written to a temporary file in the same folder, flushed to disk
(``fsync``) and renamed over the destination. A run killed mid-write, or a
write that fails (a full disk, ``RLIMIT_FSIZE``), leaves the previous file as
it was and no temporary file behind (on failure; a SIGKILL may leave one,
named ``.NAME.tmp-*``, which is never read).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import tempfile

__all__ = ["atomic_write", "atomic_write_text", "refuse_symlink"]


def refuse_symlink(path) -> None:
  """Raises ``ValueError`` if ``path`` is a symbolic link.

  A run writes or deletes only inside its workdir; a link planted there
  (``W/config.json -> ../elsewhere``) would redirect that outside.
  """
  if os.path.islink(path):
    raise ValueError(
      f"{path} is a symbolic link (to {os.readlink(path)}); a run does not "
      "write or delete through links: remove it or choose another workdir."
    )


@contextlib.contextmanager
def atomic_write(path, mode: str = "wb"):
  """Opens a temporary file that replaces ``path`` when the block succeeds.

  Refuses a ``path`` that is a symbolic link (:func:`refuse_symlink`). On an
  exception the temporary file is removed and ``path`` is left unchanged.
  """
  path = pathlib.Path(path)
  refuse_symlink(path)
  fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
  try:
    with os.fdopen(fd, mode) as f:
      yield f
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(OSError):
      os.unlink(tmp)
    raise
  with contextlib.suppress(OSError):  # make the rename itself durable
    folder = os.open(path.parent, os.O_RDONLY)
    try:
      os.fsync(folder)
    finally:
      os.close(folder)


def atomic_write_text(path, text: str) -> None:
  """Writes ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_write`)."""
  with atomic_write(path, "w") as f:
    f.write(text)
