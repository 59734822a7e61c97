"""``python -m vaells_jax.data.mnist download DIR`` against a local HTTP server.

The server (127.0.0.1, no internet) serves the MNIST test files the other
tests read (``conftest.mnist_dir``); the committed 1 000 digits have their own
checksums, so :data:`download.FILES` is narrowed to the served files and
their SHA256SUMS. With the real files (VAELLS_MNIST_DIR) the built-in
checksums are checked against them too.
"""

from __future__ import annotations

import functools
import http.server
import os
import pathlib
import socket
import subprocess
import sys
import threading

import numpy as np
import pytest
from conftest import MNIST_FILES, mnist_dir

from vaells_jax.data import download
from vaells_jax.data.mnist import MnistUnavailable, load_mnist

ROOT = pathlib.Path(__file__).resolve().parents[1]


class _RangeHandler(http.server.SimpleHTTPRequestHandler):
  """Serves files, honouring ``Range: bytes=N-`` (the standard library's does not)."""

  ranges = True
  sent: list  # (path, bytes sent), class attribute set per server

  def log_message(self, *args):
    pass

  def do_GET(self):
    path = pathlib.Path(self.translate_path(self.path))
    if not path.is_file():
      self.send_error(404)
      return
    data = path.read_bytes()
    start, status = 0, 200
    header = self.headers.get("Range", "")
    if self.ranges and header.startswith("bytes="):
      start, status = int(header[6:].split("-")[0]), 206
    self.send_response(status)
    self.send_header("Content-Length", str(len(data) - start))
    self.end_headers()
    self.wfile.write(data[start:])
    self.sent.append((path.name, len(data) - start))


@pytest.fixture
def server():
  """``(base_url, handler class)`` of a server of :func:`mnist_dir`'s files."""
  handler = type("Handler", (_RangeHandler,), {"sent": [], "ranges": True})
  httpd = http.server.ThreadingHTTPServer(
    ("127.0.0.1", 0), functools.partial(handler, directory=str(mnist_dir()))
  )
  thread = threading.Thread(target=httpd.serve_forever, daemon=True)
  thread.start()
  yield f"http://127.0.0.1:{httpd.server_address[1]}/", handler
  httpd.shutdown()
  httpd.server_close()


@pytest.fixture
def served_files(monkeypatch):
  """Narrows ``download.FILES`` to the served files, with their checksums."""
  source = mnist_dir()
  sums = dict(
    reversed(line.split()) for line in (source / "SHA256SUMS").read_text().splitlines()
  )
  files = {name: ((source / name).stat().st_size, sums[name]) for name in MNIST_FILES}
  monkeypatch.setattr(download, "FILES", files)
  return files


def _dead_url() -> str:
  """A local URL nothing listens on (connection refused at once)."""
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
  return f"http://127.0.0.1:{port}/"


def test_builtin_checksums_match_the_real_files():
  source = mnist_dir()
  if not os.environ.get("VAELLS_MNIST_DIR"):
    pytest.skip("needs the full MNIST test set: set VAELLS_MNIST_DIR")
  for name in MNIST_FILES:
    size, sha256 = download.FILES[name]
    assert (source / name).stat().st_size == size
    assert download._sha256(source / name) == sha256


def test_download_checks_and_loads(server, served_files, tmp_path):
  url, handler = server
  lines = []
  paths = download.download_mnist(tmp_path / "mnist", (url,), log=lines.append)
  assert [p.name for p in paths] == list(served_files)
  for name in served_files:
    assert (tmp_path / "mnist" / name).read_bytes() == (mnist_dir() / name).read_bytes()
  assert all("checksum ok" in line for line in lines)
  assert not list((tmp_path / "mnist").glob("*.part"))
  data = load_mnist(tmp_path / "mnist")
  reference = load_mnist(mnist_dir())
  np.testing.assert_array_equal(data.x_train, reference.x_train)
  # A second run keeps the checked files and asks the server for nothing.
  handler.sent.clear()
  download.download_mnist(tmp_path / "mnist", (url,), log=lines.append)
  assert handler.sent == [] and lines[-1].endswith("present, checksum ok")


@pytest.mark.parametrize("ranges", [True, False])
def test_download_resumes_a_partial_file(server, served_files, tmp_path, ranges):
  url, handler = server
  handler.ranges = ranges
  name = MNIST_FILES[0]
  whole = (mnist_dir() / name).read_bytes()
  (tmp_path / (name + ".part")).write_bytes(whole[: len(whole) // 2])
  download.download_mnist(tmp_path, (url,), log=lambda _: None)
  assert (tmp_path / name).read_bytes() == whole
  sent = dict(handler.sent)[name]
  # With ranges only the missing half travels; without, the server restarts.
  assert sent == (len(whole) - len(whole) // 2 if ranges else len(whole))


def test_download_falls_back_to_the_next_mirror(server, served_files, tmp_path):
  url, _ = server
  download.download_mnist(tmp_path, (_dead_url(), url), log=lambda _: None)
  assert all((tmp_path / name).is_file() for name in served_files)


def test_download_rejects_a_wrong_checksum(server, served_files, tmp_path, monkeypatch):
  url, _ = server
  name = MNIST_FILES[1]
  monkeypatch.setitem(download.FILES, name, (served_files[name][0], "0" * 64))
  with pytest.raises(MnistUnavailable, match=f"{name}.*wrong SHA-256"):
    download.download_mnist(tmp_path, (url,), log=lambda _: None)
  assert not (tmp_path / name).exists() and not (tmp_path / (name + ".part")).exists()


def test_download_command_offline_is_one_line(tmp_path):
  result = subprocess.run(
    [
      sys.executable,
      "-m",
      "vaells_jax.data.mnist",
      "download",
      str(tmp_path / "mnist"),
      f"--mirror={_dead_url()}",
    ],
    capture_output=True,
    text=True,
    timeout=120,
    cwd=ROOT,
    env={**os.environ, "PYTHONPATH": str(ROOT)},
  )
  assert result.returncode == 2, result.stderr
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: could not download")
  assert "internet" in lines[0] and "Traceback" not in result.stderr
