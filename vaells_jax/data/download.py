"""Downloads the four MNIST IDX files: ``python -m vaells_jax.data.mnist download DIR``.

The files come from the standard public mirrors (Google's CVDF bucket, which
tensorflow-datasets uses, then PyTorch's S3 copy), each checked against its
SHA-256. A file already in ``DIR`` with the right checksum is kept; a partial
download (``NAME.part``) is resumed with an HTTP range request where the
server supports it. Nothing but the standard library is needed (no
TensorFlow). Afterwards ``--data-dir=DIR`` (``load_mnist(DIR)``) reads them.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pathlib
import sys
import urllib.error
import urllib.request

__all__ = ["FILES", "MIRRORS", "MnistUnavailable", "download_mnist", "main"]

# The four IDX files (vaells_jax.data.mnist reads them).
TRAIN_IMAGES = "train-images-idx3-ubyte"
TRAIN_LABELS = "train-labels-idx1-ubyte"
TEST_IMAGES = "t10k-images-idx3-ubyte"
TEST_LABELS = "t10k-labels-idx1-ubyte"


class MnistUnavailable(RuntimeError):
  """MNIST cannot be had from the requested source; the message says why."""


MIRRORS = (
  "https://storage.googleapis.com/cvdf-datasets/mnist/",
  "https://ossci-datasets.s3.amazonaws.com/mnist/",
)
# name -> (bytes, SHA-256), as listed in tensorflow-datasets' MNIST checksums.
FILES = {
  f"{TRAIN_IMAGES}.gz": (
    9912422,
    "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
  ),
  f"{TRAIN_LABELS}.gz": (
    28881,
    "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
  ),
  f"{TEST_IMAGES}.gz": (
    1648877,
    "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
  ),
  f"{TEST_LABELS}.gz": (
    4542,
    "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
  ),
}
_CHUNK = 1 << 16


def _sha256(path: pathlib.Path) -> str:
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(_CHUNK), b""):
      digest.update(block)
  return digest.hexdigest()


def _fetch(url: str, part: pathlib.Path, size: int, timeout: float) -> None:
  """Appends the rest of ``url`` to ``part`` (a range request), or restarts it."""
  have = part.stat().st_size if part.exists() else 0
  if have >= size:
    if have == size:
      return
    part.unlink()
    have = 0
  headers = {"Range": f"bytes={have}-"} if have else {}
  request = urllib.request.Request(url, headers=headers)
  with urllib.request.urlopen(request, timeout=timeout) as response:
    # 206: the server sent the rest; 200: it ignored the range, start over.
    mode = "ab" if have and response.status == 206 else "wb"
    with open(part, mode) as out:
      for block in iter(lambda: response.read(_CHUNK), b""):
        out.write(block)


def download_mnist(
  directory, mirrors=MIRRORS, *, timeout: float = 30.0, log=print
) -> list[pathlib.Path]:
  """Downloads the four MNIST files into ``directory`` and checks them.

  Args:
    directory: where the ``.gz`` files go (created if missing).
    mirrors: base URLs tried in turn for each file.
    timeout: seconds to wait for a server.
    log: where the one line per file goes.

  Returns:
    The four file paths.

  Raises:
    MnistUnavailable: a file could be had from no mirror (offline, or every
      copy had the wrong checksum); the message names each URL and why.
  """
  directory = pathlib.Path(directory)
  directory.mkdir(parents=True, exist_ok=True)
  paths = []
  for name, (size, sha256) in FILES.items():
    target = directory / name
    paths.append(target)
    if target.is_file() and _sha256(target) == sha256:
      log(f"{name}: present, checksum ok")
      continue
    part = directory / (name + ".part")
    errors = []
    for mirror in mirrors:
      url = mirror.rstrip("/") + "/" + name
      try:
        _fetch(url, part, size, timeout)
      except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", None) or e
        errors.append(f"{url}: {reason}")
        continue
      if _sha256(part) == sha256:
        os.replace(part, target)
        log(f"{name}: downloaded from {mirror} ({size / 1e6:.1f} MB), checksum ok")
        break
      errors.append(f"{url}: wrong SHA-256 (expected {sha256[:12]}...)")
      part.unlink()
    else:
      raise MnistUnavailable(
        f"could not download {name} ({'; '.join(errors)}). Check the internet "
        f"connection and run the command again (it resumes), or copy the four "
        f"MNIST .gz files into {directory} by hand."
      )
  return paths


def main(argv=None) -> int:
  """``python -m vaells_jax.data.mnist download DIR [--mirror URL ...]``."""
  parser = argparse.ArgumentParser(
    prog="python -m vaells_jax.data.mnist",
    description="Download the four MNIST IDX files (SHA-256 checked, resumable).",
  )
  commands = parser.add_subparsers(dest="command", required=True)
  get = commands.add_parser("download", help="fetch the files into DIR")
  get.add_argument("dir", help="destination folder; then pass --data-dir=DIR")
  get.add_argument(
    "--mirror",
    action="append",
    help=f"base URL to try instead of the defaults ({', '.join(MIRRORS)})",
  )
  get.add_argument("--timeout", type=float, default=30.0, help="seconds per server")
  args = parser.parse_args(argv)
  try:
    download_mnist(args.dir, tuple(args.mirror or MIRRORS), timeout=args.timeout)
  except MnistUnavailable as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(f"MNIST is in {args.dir}; use it with --data-dir={args.dir}")
  return 0
