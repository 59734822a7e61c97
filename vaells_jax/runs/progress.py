"""What a command prints while it runs: phases, a progress bar, a heartbeat.

:class:`Progress` is the ``log`` / ``progress`` pair that
:func:`vaells_jax.runs.runner.train_and_evaluate` reports to. Lines are
printed as they come; a line that ends in ``...`` starts a phase (building,
compiling, evaluating, figure k/n, writing). On a terminal the training steps
show as a bar with rate and ETA (tqdm); elsewhere (a log file, CI) the loop's
periodic lines carry the same numbers. Whenever nothing has been printed for
``heartbeat_s`` seconds (a compile, a long evaluation), a line says which
phase is still running and for how long, so a run is never silent for long;
while training steps keep ending, their periodic lines suffice, and only a
step that runs ``heartbeat_s`` or longer (one that compiles) is reported.
"""

from __future__ import annotations

import sys
import threading
import time

__all__ = ["Progress"]


class Progress:
  """Console progress of one run; use as a context manager.

  Args:
    stream: where lines go (default ``sys.stdout``).
    heartbeat_s: seconds of silence before a "still ..." line; 0: never.
    bar: show a tqdm bar for the steps; default: when ``stream`` is a terminal.
  """

  def __init__(self, stream=None, heartbeat_s: float = 10.0, bar: bool | None = None):
    self.stream = stream or sys.stdout
    self.heartbeat_s = heartbeat_s
    self.use_bar = self.stream.isatty() if bar is None else bar
    self._bar = None
    self._lock = threading.Lock()
    self._phase, self._phase_start = None, time.perf_counter()
    self._last = time.perf_counter()
    self._steps = None  # (done, total, when) of the phase's last step
    self._stop = threading.Event()
    self._thread = None

  def __enter__(self):
    if self.heartbeat_s > 0:
      self._thread = threading.Thread(target=self._beat, daemon=True)
      self._thread.start()
    return self

  def __exit__(self, *exc):
    self.close()

  def close(self) -> None:
    self._stop.set()
    if self._thread is not None:
      self._thread.join()
    with self._lock:
      if self._bar is not None:
        self._bar.close()
        self._bar = None

  def _write(self, line: str) -> None:
    if self._bar is not None:
      self._bar.write(line, file=self.stream)
    else:
      print(line, file=self.stream, flush=True)
    self._last = time.perf_counter()

  def log(self, line: str) -> None:
    """Prints ``line``; one ending in ``...`` names the phase now running."""
    with self._lock:
      if line.rstrip().endswith("..."):
        self._phase = line.rstrip().rstrip(".").strip()
        self._phase_start = time.perf_counter()
        self._steps = None
      self._write(line)

  def step(self, done: int, total: int) -> None:
    """``done`` of ``total`` training steps are finished."""
    if not self.use_bar:
      with self._lock:
        self._steps = (done, total, time.perf_counter())
      return
    with self._lock:
      if self._bar is None:
        from tqdm import tqdm  # only on a terminal

        self._bar = tqdm(
          total=total,
          initial=done,
          unit="step",
          file=self.stream,
          dynamic_ncols=True,
          leave=False,
        )
        self._phase = None  # the bar itself shows that training runs
      else:
        self._bar.update(done - self._bar.n)
      self._last = time.perf_counter()
      if done >= total:
        self._bar.close()
        self._bar = None

  def _beat(self) -> None:
    while not self._stop.wait(0.5):
      with self._lock:
        now = time.perf_counter()
        if self._bar is not None or now - self._last < self.heartbeat_s:
          continue
        if self._steps is None:
          what = self._phase or "working"
          self._write(f"  ... still {what} ({now - self._phase_start:.0f} s)")
        elif now - self._steps[2] >= self.heartbeat_s:
          done, total, when = self._steps
          self._write(
            f"  ... still running: {done} of {total} steps done, "
            f"the last {now - when:.0f} s ago"
          )
