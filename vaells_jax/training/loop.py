"""The training loop: batches, logging, checkpoints and stopping a diverged run.

:func:`train_loop` runs any model's jitted step (VAELLS or a baseline: the caller
passes its initial state and step) for ``config.num_steps`` steps, writing
``metrics.jsonl`` and orbax checkpoints into the workdir, and resumes from
the latest checkpoint bit for bit.

Each line of ``metrics.jsonl`` holds the mean of each metric over the steps
since the previous line (counters and the ``Psi`` rate: their value at the
line's step). Checkpoints are written every ``config.checkpoint_every`` steps
and at the end (``workdir/checkpoints``). Batches and noise are pure
functions of ``(seed, step)``, so with ``resume=True`` a run continues from
its latest checkpoint and reaches the same parameters as a run never
interrupted.

A step with a non-finite loss or gradient is skipped by the step itself
(counted in ``state.net_skipped``, in a row in ``state.bad_streak``); after
``config.max_bad_steps`` such steps in a row the run stops with
:class:`TrainingDiverged`, keeping its last checkpoint (none is written
while steps are failing).

The log receives the phases (lines ending in ``...``) and a line every
``config.log_every`` steps with the rate, percentage and ETA; a model's own
``describe`` and ``diagnose`` come from its entry in
:data:`vaells_jax.api.MODELS`.

In a run across processes (:mod:`vaells_jax.training.distributed`) every
process calls :func:`train_loop` alike; process 0 alone logs and reads and
writes ``workdir``, and the others start from its (initial or resumed) state.

After SIGTERM or SIGINT (received in the main thread) the step under way is
finished and checkpointed, then :class:`TrainingInterrupted` is raised:
``resume=True`` continues from that step.
"""

from __future__ import annotations

import functools
import json
import os
import pathlib
import time
from typing import Any, Callable

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from vaells_jax.config import Config
from vaells_jax.data.dataset import Dataset
from vaells_jax.data.files import atomic_write_text
from vaells_jax.training.checkpoint import (
  CHECKPOINT_DIR,
  checkpoint_steps,
  restore_checkpoint,
  save_checkpoint,
  saved_steps,
)
from vaells_jax.training.distributed import (
  broadcast_from_main,
  checkpointable,
  host_local,
  is_main,
  replicate,
)
from vaells_jax.training.guards import (
  TrainingDiverged,
  TrainingInterrupted,
  batch_indices,
  check_data,
  deferred_signals,
  likely_cause,
  run_identity,
)
from vaells_jax.training.step import data_parallel_mesh

__all__ = ["METRICS_NAME", "describe_metrics", "train_loop"]

METRICS_NAME = "metrics.jsonl"
# Metrics that are state (counters, the current rate): logged as their last
# value; every other metric is averaged over the steps since the last line.
_LAST_VALUE = ("lr_psi", "psi_rejected", "net_skipped")
_KEY_BLOCK = 256  # the steps' keys are made this many at a time


def _duration(seconds: float) -> str:
  """``seconds`` as ``42s``, ``3m05s`` or ``1h02m``."""
  seconds = int(round(seconds))
  if seconds < 60:
    return f"{seconds}s"
  if seconds < 3600:
    return f"{seconds // 60}m{seconds % 60:02d}s"
  return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _log_line(step, metrics, rate, total, describe):
  eta = f"  eta {_duration((total - step) / rate)}" if rate > 0 else ""
  return (
    f"step {step:6d}  {describe(metrics)}  {rate:.1f} steps/s"
    f"  {100 * step / total:3.0f}%{eta}"
  )


def describe_metrics(metrics: dict) -> str:
  """A log line's metrics, every one as ``name value`` (``name v1 v2 ...``
  for a population's per-member lists); the default of :func:`train_loop`
  (a model's own comes from its registry entry)."""
  return "  ".join(
    f"{k} " + " ".join(f"{x:+.4g}" for x in (v if isinstance(v, list) else [v]))
    for k, v in metrics.items()
  )


def _batch_placement(mesh):
  """How a host batch goes to the devices: whole, or split over ``mesh``.

  Every process computes the same global batch (a function of seed and
  step), so with several hosts each one supplies the rows of its own
  devices' shards.
  """
  if mesh is None:  # as they are: the jitted step copies them in for less
    return lambda batch: batch  # than jax.device_put takes
  split = NamedSharding(mesh, PartitionSpec("data"))
  return lambda batch: {
    k: jax.make_array_from_callback(v.shape, split, lambda i, v=v: v[i])
    for k, v in batch.items()
  }


def _accumulate(window, metrics):
  """``window + metrics`` summed in float32 on the host (a device program
  here would wait for the step under way)."""
  metrics = {k: np.asarray(v, np.float32) for k, v in metrics.items()}
  return metrics if window is None else {k: window[k] + metrics[k] for k in window}


@jax.jit
def _fold_in_block(key, start, steps):
  """``jax.random.fold_in(key, s)`` for each ``s`` in ``start + steps``."""
  return jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, start + steps)


def _window_means(window, last, count: int) -> dict:
  """Per-step means of the summed ``window`` (``count`` steps); the
  :data:`_LAST_VALUE` metrics from ``last``, the line's own step. Floats, or
  lists of floats for a population (one per member)."""
  window, last = jax.device_get((window, last))
  means = {
    k: np.asarray(last[k] if k in _LAST_VALUE else window[k] / count, np.float64)
    for k in last
  }
  return {k: v.tolist() if v.ndim else float(v) for k, v in means.items()}


def _truncate_metrics(path: pathlib.Path, last_step: int, log=print) -> None:
  """Drops logged steps after ``last_step`` (a resumed run logs them again).

  A half-written last line (a run killed while appending it) is dropped and
  logged; an unreadable line before it is an error.

  Raises:
    ValueError: naming the line that is not a metrics record.
  """
  if not path.exists():
    return
  try:
    lines = path.read_text().splitlines(keepends=True)
  except (OSError, UnicodeDecodeError) as e:
    raise ValueError(f"{path} cannot be read ({_first_line(e)}).") from None
  kept = []
  for number, line in enumerate(lines, 1):
    if not line.strip():
      continue
    try:
      step = json.loads(line)["step"]
      if not isinstance(step, int):
        raise TypeError
    except (ValueError, KeyError, TypeError):
      if number == len(lines):
        log(f"{path}: dropped its half-written last line {line.strip()[:40]!r}")
        continue
      raise ValueError(
        f"{path} line {number} is not a metrics record: {line.strip()[:60]!r}."
      ) from None
    if step <= last_step:
      kept.append(line if line.endswith("\n") else line + "\n")
  atomic_write_text(path, "".join(kept))


def _quiet(line: str) -> None:
  """The log of processes other than 0."""


def _first_line(error: Exception) -> str:
  return " ".join(str(error).split()) or type(error).__name__


def train_loop(
  config: Config,
  data: Dataset,
  workdir,
  *,
  init: Callable[[Any, Config, Dataset], Any],
  make_step: Callable[[Config, int, Any], Callable],
  log=print,
  resume: bool = False,
  progress: Callable[[int, int], None] | None = None,
  describe: Callable[[dict], str] = describe_metrics,
  diagnose: Callable[[Any, Config], str] = likely_cause,
  already_checked: bool = False,
):
  """Trains, logging to ``workdir/metrics.jsonl`` and checkpointing (module
  docstring: the lines, checkpoints, resuming, divergence, processes).

  ``init(key, config, data)`` makes the initial state and
  ``make_step(config, data_dim, mesh)`` the jitted step (an entry of
  :data:`vaells_jax.api.MODELS`). ``log`` receives the phases and the
  lines; ``progress(done, num_steps)``, if given, is called after every step.
  ``describe(metrics)`` writes a line's metrics and ``diagnose(state,
  config)`` names the likely cause of a diverged run.
  ``already_checked=True``: the caller has checked the data and the workdir
  and verified the checkpoint this resumes from
  (:func:`vaells_jax.runs.runner.plan_run`); they are not checked again.

  Returns:
    ``(state, info)``: the state on this process's devices (across
    processes, a copy of the replicated state on its first device), and
    ``info = {"steps", "train_time_s", "compile_time_s", "resumed_from_step"}``
    (``compile_time_s``: the first step, compilation included;
    ``train_time_s``: the steps after it).

  Raises:
    ValueError: for data that do not fit ``config``, or a ``workdir`` that
      holds checkpoints when not resuming (they would be mixed with this run's).
    CheckpointError: for a resumed checkpoint, corrupt or of another config.
    TrainingDiverged, TrainingInterrupted: module docstring.
  """
  workdir = pathlib.Path(workdir)
  main = is_main()  # across processes, process 0 alone touches the workdir
  log = log if main else _quiet
  state, found, identity = _initial_state(
    config, data, workdir, init, resume, already_checked, main, log
  )
  first_step = int(state.step)
  metrics_path = _metrics_path(workdir, main, first_step if resume else -1, log)
  mesh = data_parallel_mesh() if config.data_parallel else None
  step_fn = make_step(config, data.data_dim, mesh)
  if mesh is not None:
    state = replicate(state, mesh)
  save = functools.partial(_save, workdir, identity) if main else _no_save
  run = _Run(config, step_fn, mesh, save, log, progress, diagnose, workdir)
  state, info = run.steps(state, data, first_step, metrics_path, describe)
  if not found and first_step >= config.num_steps:
    save(state)  # nothing to train (a population kept at its last step)
  return host_local(state), info


class _Run:
  """:func:`train_loop`'s steps, once the state, the step and the workdir
  are ready: what the steps need besides the state and the data."""

  def __init__(self, config, step_fn, mesh, save, log, progress, diagnose, workdir):
    self.config, self.step_fn, self.mesh, self.save = config, step_fn, mesh, save
    self.log, self.progress, self.diagnose = log, progress, diagnose
    self.workdir = workdir

  def steps(self, state, data, first_step, metrics_path, describe):
    """Steps ``first_step`` to ``config.num_steps``: ``(state, info)`` as
    :func:`train_loop`'s (module docstring)."""
    config, log = self.config, self.log
    x = np.asarray(data.x_train, np.float32)
    labels = np.asarray(data.labels_train, np.int32)
    step_key = jax.random.PRNGKey(config.seed + 1)
    place = _batch_placement(self.mesh)
    if first_step < config.num_steps:
      log("compiling the training step (the first step; 10-60 s on a CPU) ...")
    start = time.perf_counter()
    compile_time = 0.0
    streak = None  # bad_streak of the previous step, read one step late
    with deferred_signals() as signals, open(metrics_path, "a") as metrics_file:
      lines = _Lines(metrics_file, first_step, config.num_steps, log, describe)
      for step in range(first_step, config.num_steps):
        in_block = (step - first_step) % _KEY_BLOCK
        if in_block == 0:
          keys = np.asarray(_fold_in_block(step_key, step, np.arange(_KEY_BLOCK)))
        idx = batch_indices(config.seed, step, x.shape[0], config.batch_size)
        previous = state
        state, metrics = self.step_fn(
          state, place({"x": x[idx], "label": labels[idx]}), self._key(keys[in_block])
        )
        # Only the previous step's results are read here (its metrics and
        # counter, on the host), so the device runs the step just dispatched
        # meanwhile. A population stops when every member is failing.
        lines.add(metrics)
        if streak is not None:
          _stop_if_diverged(
            streak, step, previous, config, log, self.diagnose, self.workdir
          )
        streak = state.bad_streak
        if step == first_step:
          compile_time = self._compiled(state, start, first_step, lines)
        self._after_step(step + 1, state, metrics, lines, signals)
    return state, {
      "steps": config.num_steps,
      "train_time_s": time.perf_counter() - start - compile_time,
      "compile_time_s": compile_time,
      "resumed_from_step": first_step,
    }

  def _key(self, key):
    """A step's key, on the devices where the batch is split over a mesh."""
    return key if self.mesh is None else jax.device_put(key)

  def _compiled(self, state, start, first_step, lines) -> float:
    """After the first step: its time (compilation included), logged."""
    jax.block_until_ready(state)
    compile_time = time.perf_counter() - start
    lines.restart_clock()
    self.log(
      f"compiled in {compile_time:.1f} s; training steps {first_step + 1}.."
      f"{self.config.num_steps} ..."
    )
    return compile_time

  def _after_step(self, done, state, metrics, lines, signals) -> None:
    """Progress, the metrics line where due, a checkpoint where due."""
    config = self.config
    if self.progress is not None:
      self.progress(done, config.num_steps)
    if done % config.log_every == 0 or done == config.num_steps:
      lines.write(done, metrics)
    _save_or_stop(done, state, signals, self.save, config, self.log)


def _metrics_path(workdir, main: bool, last_step: int, log) -> pathlib.Path:
  """Where the lines go: ``workdir/metrics.jsonl``, its steps after
  ``last_step`` dropped (process 0), or nowhere (the others)."""
  if not main:
    return pathlib.Path(os.devnull)
  path = workdir / METRICS_NAME
  _truncate_metrics(path, last_step, log)
  return path


def _no_save(state) -> None:
  """The checkpoints of processes other than 0."""


def _save(workdir, identity, state) -> None:
  """Checkpoints ``state`` in ``workdir`` (process 0's)."""
  save_checkpoint(workdir, checkpointable(state), identity)


def _initial_state(config, data, workdir, init, resume, already_checked, main, log):
  """The state to train from, restored from the workdir's latest checkpoint
  where it has one, whether it had and the run's identity:
  ``(state, found, identity)``."""
  if not already_checked:
    check_data(config, data)
  identity = run_identity(config, data)
  found = saved_steps(workdir) if main else []
  if found and not resume and not already_checked:
    raise ValueError(
      f"{workdir} already holds checkpoints (steps "
      f"{found}); resume that run or use an empty "
      "workdir."
    )
  if main:
    workdir.mkdir(parents=True, exist_ok=True)
  log(f"building the {config.model} model ...")
  state = init(jax.random.PRNGKey(config.seed), config, data)
  if found:
    state = restore_checkpoint(
      workdir,
      checkpointable(state),
      identity=identity,
      verify=not already_checked,
    )
    log(f"resuming from the checkpoint at step {int(state.step)}")
  elif resume:
    log(f"no checkpoint in {workdir} yet: starting from step {int(state.step)}")
  return broadcast_from_main(state), bool(found), identity


class _Lines:
  """``metrics.jsonl``'s lines and the log's: each metric's mean over the
  steps since the previous line, summed on the host one step late."""

  def __init__(self, file, first_step: int, total: int, log, describe):
    self.file, self.first_step, self.total = file, first_step, total
    self.log, self.describe = log, describe
    self.window = None  # metric sums since the last line, on the host
    self.pending = None  # the previous step's metrics, summed once it finished
    self.last_step, self.last_time = first_step, time.perf_counter()

  def add(self, metrics) -> None:
    """The step just dispatched; the one before it is summed (it has finished)."""
    if self.pending is not None:
      self.window = _accumulate(self.window, self.pending)
    self.pending = metrics

  def restart_clock(self) -> None:
    """Rates count from now (after the first step's compilation)."""
    self.last_time = time.perf_counter()

  def write(self, done: int, metrics) -> None:
    """The line of step ``done`` (``metrics``: that step's own)."""
    now = time.perf_counter()
    window = _accumulate(self.window, self.pending)
    count = done - max(self.last_step, self.first_step)
    means = _window_means(window, metrics, count)
    steps = done - max(self.last_step, self.first_step + 1)
    rate = steps / max(now - self.last_time, 1e-9)
    self.last_time, self.last_step, self.window, self.pending = now, done, None, None
    self.file.write(json.dumps({"step": done, **means, "steps_per_s": rate}) + "\n")
    self.file.flush()
    self.log(_log_line(done, means, rate, self.total, self.describe))


def _stop_if_diverged(streak, step, previous, config, log, diagnose, workdir) -> None:
  """Logs the first failing step of a streak and raises
  :class:`TrainingDiverged` after ``config.max_bad_steps`` in a row."""
  bad = int(np.asarray(streak).min())  # on the host: np.min would run a program
  if bad == 1:
    log(f"step {step}: non-finite loss; network step skipped, Psi step rejected")
  if bad >= config.max_bad_steps:
    raise TrainingDiverged(
      f"{bad} consecutive steps up to step {step} had a non-finite "
      f"loss (config.max_bad_steps={config.max_bad_steps}). Likely "
      f"cause: {diagnose(previous, config)}. The last good "
      f"checkpoint is kept in {workdir / CHECKPOINT_DIR} (steps "
      f"{checkpoint_steps(workdir)})."
    )


def _save_or_stop(done, state, signals, save, config, log) -> None:
  """Checkpoints after step ``done`` where due; stops after a signal. Reads
  the state's failing streak (waiting for the step) only where it saves."""
  if done == config.num_steps:
    # Failed steps change no parameters, so the final state is kept as is.
    if failing := int(np.min(state.bad_streak)):
      log(f"warning: the last {failing} steps had a non-finite loss")
    save(state)
    if signals:
      raise TrainingInterrupted(signals[0], done)
  elif signals:
    # Failed steps change no parameters, so this state is resumable too.
    save(state)
    raise TrainingInterrupted(signals[0], done)
  elif done % config.checkpoint_every == 0:
    if int(np.min(state.bad_streak)) == 0:
      save(state)
    else:
      log(f"step {done}: checkpoint skipped while steps are failing")
