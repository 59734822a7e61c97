"""The training loop: batches, logging, checkpoints and stopping a diverged run.

:func:`train` runs any model's jitted step (VAELLS or a baseline: the caller
passes its initial state and step) for ``config.num_steps`` steps, writing
``metrics.jsonl`` and orbax checkpoints into the workdir, and resumes from
the latest checkpoint bit for bit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import pathlib
import signal
import threading
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from vaells_jax.config import Config
from vaells_jax.data.files import atomic_write_text
from vaells_jax.data.synthetic import SyntheticData
from vaells_jax.training.checkpoint import (
  CHECKPOINT_DIR,
  checkpoint_steps,
  restore_checkpoint,
  save_checkpoint,
  saved_steps,
)
from vaells_jax.training.step import data_parallel_mesh

__all__ = [
  "METRICS_NAME",
  "TrainingDiverged",
  "TrainingInterrupted",
  "batch_indices",
  "check_data",
  "run_identity",
  "train",
]

METRICS_NAME = "metrics.jsonl"
# Metrics that are state (counters, the current rate): logged as their last
# value; every other metric is averaged over the steps since the last line.
_LAST_VALUE = ("lr_psi", "psi_rejected", "net_skipped")


def check_data(config: Config, data: SyntheticData) -> None:
  """Validates a data set against ``config`` before anything runs or is written.

  Raises:
    ValueError: naming the problem (shapes, non-finite values, labels out of
      range, a class without anchors, fewer points than the batch).
  """
  x, labels, anchors = data.x_train, data.labels_train, data.anchors
  if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
    raise ValueError(
      f"The training data must be [N, D] with N >= 1 and D >= 1, got shape {x.shape}."
    )
  if not np.issubdtype(x.dtype, np.floating) and not np.issubdtype(x.dtype, np.integer):
    raise ValueError(
      f"The training data must be real numbers, got dtype {x.dtype} (complex "
      "data would lose its imaginary part)."
    )
  if not np.all(np.isfinite(x)):
    bad = np.argwhere(~np.isfinite(x))[0]
    raise ValueError(
      f"The training data contain non-finite values (first at "
      f"row {bad[0]}, column {bad[1]}: {x[tuple(bad)]})."
    )
  if (
    config.network == "conv" or config.input_rotation or config.rotation_anchors
  ) and x.shape[1] != 28 * 28:
    raise ValueError(
      f"config.network='conv' and image rotation need 28 x 28 "
      f"images flattened to [N, 784], got D={x.shape[1]}."
    )
  if labels.shape != (x.shape[0],):
    raise ValueError(
      f"Expected one label per training point, shape "
      f"({x.shape[0]},), got {labels.shape}."
    )
  if anchors.ndim != 3 or anchors.shape[2] != x.shape[1]:
    raise ValueError(
      f"Anchors must be [C, A, D] with D={x.shape[1]} (the data "
      f"dimension), got shape {anchors.shape}."
    )
  if anchors.shape[0] == 0 or anchors.shape[1] == 0:
    raise ValueError(
      f"Every class needs at least one anchor; anchors have "
      f"shape {anchors.shape} ([C, A, D])."
    )
  if not np.all(np.isfinite(anchors)):
    raise ValueError("The anchors contain non-finite values.")
  if labels.min() < 0 or labels.max() >= anchors.shape[0]:
    raise ValueError(
      f"Training labels must be in [0, {anchors.shape[0]}) (one "
      f"anchor set per class), got [{labels.min()}, "
      f"{labels.max()}]."
    )
  if config.data_parallel and config.batch_size % jax.device_count():
    raise ValueError(
      f"config.batch_size={config.batch_size} cannot be split evenly over "
      f"{jax.device_count()} devices (config.data_parallel=true); use a "
      f"multiple of {jax.device_count()}."
    )
  if config.model == "vampprior" and config.num_pseudo > x.shape[0]:
    raise ValueError(
      f"config.num_pseudo={config.num_pseudo} is more than the "
      f"{x.shape[0]} training points that initialise the "
      "VampPrior's pseudo-inputs."
    )
  if x.shape[0] < config.batch_size:
    raise ValueError(
      f"config.batch_size={config.batch_size} is larger than the "
      f"{x.shape[0]} training points."
    )
  needed, available = _memory_needed(config, x.shape[1]), _physical_memory()
  if needed > available:
    raise ValueError(
      f"The model of config.latent_dim={config.latent_dim}, config.hidden="
      f"{config.hidden}, config.num_ops={config.num_ops} on D={x.shape[1]} "
      f"needs about {needed / 2**30:.3g} GiB for its parameters, gradients and "
      f"optimiser state; this machine has {available / 2**30:.3g} GiB."
    )


def _memory_needed(config: Config, data_dim: int) -> int:
  """Bytes of parameters, gradients and Adam moments (float32), estimated.

  The MLP encoder and decoder (``D -> hidden -> d`` and back; the conv
  networks' dense layers are of the same order), the dictionary ``M d^2``
  and one anchor set, each held four times.
  """
  widths = (data_dim, *config.hidden, config.latent_dim)
  dense = sum(a * b + b for a, b in zip(widths[:-1], widths[1:], strict=True))
  psi = config.num_ops * config.latent_dim**2
  return 4 * 4 * (2 * dense + psi)


def _physical_memory() -> int:
  """Bytes of physical memory (``sysconf``); 2^40 where it is not known."""
  try:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  except (ValueError, OSError, AttributeError):
    return 2**40


def batch_indices(seed: int, step: int, num_points: int, batch_size: int):
  """The indices of the batch at ``step``: a pure function of ``(seed, step)``."""
  rng = np.random.default_rng([seed, step])
  return rng.choice(num_points, batch_size, replace=False)


class TrainingDiverged(RuntimeError):
  """Too many consecutive steps had a non-finite loss; the run was stopped."""


class TrainingInterrupted(Exception):
  """SIGTERM or SIGINT stopped training after a step; a checkpoint was written.

  Attributes:
    signum: the signal's number (``signal.SIGTERM`` or ``signal.SIGINT``).
    step: the step of the checkpoint written, from which ``resume`` continues.
  """

  def __init__(self, signum: int, step: int):
    super().__init__(
      f"{signal.Signals(signum).name} received: stopped after step {step}, "
      "checkpoint written"
    )
    self.signum, self.step = signum, step


@contextlib.contextmanager
def _deferred_signals():
  """SIGTERM and SIGINT set a flag instead of stopping the process at once.

  Yields a list that receives the signal numbers. Only the main thread can
  install handlers; elsewhere the signals keep their usual effect.
  """
  received = []
  if threading.current_thread() is not threading.main_thread():
    yield received
    return
  previous = {
    sig: signal.signal(sig, lambda signum, frame: received.append(signum))
    for sig in (signal.SIGTERM, signal.SIGINT)
  }
  try:
    yield received
  finally:
    for sig, handler in previous.items():
      signal.signal(sig, handler)


def run_identity(config: Config, data: SyntheticData) -> dict:
  """What a checkpoint records of its run: the config and a digest of the data.

  ``{"config": {field: value, ...}, "data_sha256": hex}`` as JSON values;
  the digest covers the training points, labels and anchors. The config
  leaves out the fields that do not change the state at a given step
  (:data:`_NOT_IDENTITY`: the run's length, how often it logs and
  checkpoints, and settings only the evaluation reads), so a run can be
  resumed to train longer.
  """
  digest = hashlib.sha256()
  for array, dtype in (
    (data.x_train, np.float64),
    (data.labels_train, np.int64),
    (data.anchors, np.float64),
  ):
    array = np.ascontiguousarray(array, dtype)
    digest.update(repr(array.shape).encode())
    digest.update(array.tobytes())
  fields = {
    k: v for k, v in dataclasses.asdict(config).items() if k not in _NOT_IDENTITY
  }
  return {"config": json.loads(json.dumps(fields)), "data_sha256": digest.hexdigest()}


# eval_rotation_digits joined the config after checkpoints were written
# without it; leaving it out keeps those loadable.
_NOT_IDENTITY = ("num_steps", "log_every", "checkpoint_every", "eval_rotation_digits")


def _duration(seconds: float) -> str:
  """``seconds`` as ``42s``, ``3m05s`` or ``1h02m``."""
  seconds = int(round(seconds))
  if seconds < 60:
    return f"{seconds}s"
  if seconds < 3600:
    return f"{seconds // 60}m{seconds % 60:02d}s"
  return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _log_line(step, metrics, rate, total):
  eta = f"  eta {_duration((total - step) / rate)}" if rate > 0 else ""
  return _metrics_text(step, metrics, rate) + f"  {100 * step / total:3.0f}%{eta}"


def _metrics_text(step, metrics, rate):
  if isinstance(metrics["loss"], list):  # a population: one value per member
    return (
      f"step {step:6d}  population  loss "
      + " ".join(f"{v:+.3f}" for v in metrics["loss"])
      + "  psi_rejected "
      + " ".join(str(int(v)) for v in metrics["psi_rejected"])
      + f"  {rate:.1f} steps/s"
    )
  if "kl" in metrics:  # a baseline
    return (
      f"step {step:6d}  loss {metrics['loss']:+.4f}  log_px "
      f"{metrics['log_px']:+.4f}  kl {metrics['kl']:.4f}  net_skipped "
      f"{int(metrics['net_skipped'])}  {rate:.1f} steps/s"
    )
  return (
    f"step {step:6d}  loss {metrics['loss']:+.4f}  recon {metrics['recon']:.4f}"
    f"  log_q {metrics['log_q']:+.4f}  log_p {metrics['log_p']:+.4f}"
    f"  lr_psi {metrics['lr_psi']:.2e}"
    f"  psi_rejected {int(metrics['psi_rejected'])}"
    f"  net_skipped {int(metrics['net_skipped'])}"
    f"  inf_iters {metrics['inference_iters']:.1f}  {rate:.1f} steps/s"
  )


def _likely_cause(state, config: Config) -> str:
  """Names what most likely made the loss non-finite, from the state."""
  params_finite = all(
    np.all(np.isfinite(a)) for a in jax.tree_util.tree_leaves(state.params)
  )
  psi = np.asarray(getattr(state, "psi", np.zeros((1, 1, 1))))
  if not np.all(np.isfinite(psi)) or np.abs(psi).sum(axis=1).max() > 100:
    return (
      f"the transport operators Psi exploded (largest 1-norm "
      f"{np.abs(psi).sum(axis=1).max():.3g}); lower lr_psi/max_lr_psi "
      f"(now {config.lr_psi}/{config.max_lr_psi}) or raise eta "
      f"(now {config.eta})"
    )
  if not params_finite:
    return (
      f"the network parameters became non-finite; lower lr_net (now {config.lr_net})"
    )
  return (
    "the parameters are finite but every batch gives a non-finite loss: "
    "check the data for extreme values, or lower lr_net "
    f"(now {config.lr_net}) and latent_scale (now {config.latent_scale})"
  )


def _batch_placement(mesh):
  """How a host batch goes to the devices: whole, or split over ``mesh``.

  Every process computes the same global batch (a function of seed and
  step), so with several hosts each one supplies the rows of its own
  devices' shards.
  """
  if mesh is None:
    return jax.device_put
  split = NamedSharding(mesh, PartitionSpec("data"))
  return lambda batch: {
    k: jax.make_array_from_callback(v.shape, split, lambda i, v=v: v[i])
    for k, v in batch.items()
  }


@jax.jit
def _accumulate(window, metrics):
  return jax.tree_util.tree_map(
    lambda a, b: a.astype(jnp.float32) + b.astype(jnp.float32), window, metrics
  )


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


def _first_line(error: Exception) -> str:
  return " ".join(str(error).split()) or type(error).__name__


def train(
  config: Config,
  data: SyntheticData,
  workdir,
  *,
  init: Callable[[Any, Config, SyntheticData], Any],
  make_step: Callable[[Config, int, Any], Callable],
  log=print,
  resume: bool = False,
  progress: Callable[[int, int], None] | None = None,
):
  """Trains, logging to ``workdir/metrics.jsonl`` and checkpointing.

  ``init(key, config, data)`` makes the initial state and
  ``make_step(config, data_dim, mesh)`` the jitted step (an entry of
  :data:`vaells_jax.api.MODELS`). Each line of ``metrics.jsonl`` holds the
  mean of each metric over the steps since the previous line (counters and
  the ``Psi`` rate: their value at the line's step).

  Checkpoints are written every ``config.checkpoint_every`` steps and at the
  end (``workdir/checkpoints``). Batches and noise are pure functions of
  ``(seed, step)``, so with ``resume=True`` a run continues from its latest
  checkpoint and reaches the same parameters as a run never interrupted.

  A step with a non-finite loss or gradient is skipped by the step itself
  (counted in ``state.net_skipped``, in a row in ``state.bad_streak``);
  after ``config.max_bad_steps`` such steps in a row the run stops with
  :class:`TrainingDiverged`, keeping its last checkpoint (none is written
  while steps are failing).

  ``log`` receives the phases (lines ending in ``...``) and a line every
  ``config.log_every`` steps with the rate, percentage and ETA;
  ``progress(done, num_steps)``, if given, is called after every step (a
  progress bar).

  Returns:
    ``(state, info)`` with ``info = {"steps", "train_time_s",
    "compile_time_s", "resumed_from_step"}``; ``train_time_s`` is the time
    spent stepping after the first step, ``compile_time_s`` that first step
    (compilation included), so their sum is the whole loop.

  Raises:
    ValueError: for data that do not fit ``config``, or a ``workdir`` that
      holds checkpoints when not resuming (they would be mixed with this run's).
    CheckpointError: for a checkpoint that is corrupt or of another
      configuration (when resuming).
    TrainingDiverged: as described above.
    TrainingInterrupted: after SIGTERM or SIGINT (received in the main
      thread): the step under way is finished and checkpointed first, so
      ``resume=True`` continues from it.
  """
  check_data(config, data)
  workdir = pathlib.Path(workdir)
  found = saved_steps(workdir)
  if found and not resume:
    raise ValueError(
      f"{workdir} already holds checkpoints (steps "
      f"{found}); resume that run or use an empty "
      "workdir."
    )
  workdir.mkdir(parents=True, exist_ok=True)
  identity = run_identity(config, data)
  log(f"building the {config.model} model ...")
  key = jax.random.PRNGKey(config.seed)
  state = init(key, config, data)
  if found:
    state = restore_checkpoint(workdir, state, identity=identity)
    log(f"resuming from the checkpoint at step {int(state.step)}")
  elif resume:
    log(f"no checkpoint in {workdir} yet: starting from step {int(state.step)}")
  first_step = int(state.step)
  metrics_path = workdir / METRICS_NAME
  _truncate_metrics(metrics_path, first_step if resume else -1, log)

  mesh = data_parallel_mesh() if config.data_parallel else None
  step_fn = make_step(config, data.data_dim, mesh)
  place = _batch_placement(mesh)
  if mesh is not None:
    state = jax.device_put(state, NamedSharding(mesh, PartitionSpec()))
  x = np.asarray(data.x_train, np.float32)
  labels = np.asarray(data.labels_train, np.int32)
  step_key = jax.random.PRNGKey(config.seed + 1)
  if first_step < config.num_steps:
    log("compiling the training step (the first step; 10-60 s on a CPU) ...")
  start = last_time = time.perf_counter()
  compile_time, last_step = 0.0, first_step
  streak = None  # bad_streak of the previous step, read one step late
  window = None  # metric sums since the last logged line, on the device
  with _deferred_signals() as signals, open(metrics_path, "a") as metrics_file:
    for step in range(first_step, config.num_steps):
      idx = batch_indices(config.seed, step, x.shape[0], config.batch_size)
      previous = state
      state, metrics = step_fn(
        state,
        place({"x": x[idx], "label": labels[idx]}),
        jax.random.fold_in(step_key, step),
      )
      # Reading the previous step's counter keeps the device one step ahead.
      # A population stops when every member is failing.
      if streak is not None:
        bad = int(np.min(streak))
        if bad == 1:
          log(f"step {step}: non-finite loss; network step skipped, Psi step rejected")
        if bad >= config.max_bad_steps:
          raise TrainingDiverged(
            f"{bad} consecutive steps up to step {step} had a non-finite "
            f"loss (config.max_bad_steps={config.max_bad_steps}). Likely "
            f"cause: {_likely_cause(previous, config)}. The last good "
            f"checkpoint is kept in {workdir / CHECKPOINT_DIR} (steps "
            f"{checkpoint_steps(workdir)})."
          )
      streak = state.bad_streak
      window = metrics if window is None else _accumulate(window, metrics)
      if step == first_step:
        jax.block_until_ready(state)
        compile_time = time.perf_counter() - start
        last_time = time.perf_counter()
        log(
          f"compiled in {compile_time:.1f} s; training steps {first_step + 1}.."
          f"{config.num_steps} ..."
        )
      done = step + 1
      if progress is not None:
        progress(done, config.num_steps)
      if done % config.log_every == 0 or done == config.num_steps:
        now = time.perf_counter()
        metrics = _window_means(window, metrics, done - max(last_step, first_step))
        rate = (done - max(last_step, first_step + 1)) / max(now - last_time, 1e-9)
        last_time, last_step, window = now, done, None
        metrics_file.write(
          json.dumps({"step": done, **metrics, "steps_per_s": rate}) + "\n"
        )
        metrics_file.flush()
        log(_log_line(done, metrics, rate, config.num_steps))
      if done == config.num_steps:
        # Failed steps change no parameters, so the final state is kept as is.
        if int(np.min(state.bad_streak)):
          log(
            f"warning: the last {int(np.min(state.bad_streak))} steps had a "
            "non-finite loss"
          )
        save_checkpoint(workdir, state, identity)
        if signals:
          raise TrainingInterrupted(signals[0], done)
      elif signals:
        # Failed steps change no parameters, so this state is resumable too.
        save_checkpoint(workdir, state, identity)
        raise TrainingInterrupted(signals[0], done)
      elif done % config.checkpoint_every == 0:
        if int(np.min(state.bad_streak)) == 0:
          save_checkpoint(workdir, state, identity)
        else:
          log(f"step {done}: checkpoint skipped while steps are failing")
  train_time = time.perf_counter() - start - compile_time
  return state, {
    "steps": config.num_steps,
    "train_time_s": train_time,
    "compile_time_s": compile_time,
    "resumed_from_step": first_step,
  }
