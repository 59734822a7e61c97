"""What a training run checks and guards, apart from the loop itself.

The data validated against the config before anything runs
(:func:`check_data`), batches as a pure function of ``(seed, step)``
(:func:`batch_indices`), the exceptions that stop a run
(:class:`TrainingDiverged`, :class:`TrainingInterrupted`), deferring SIGTERM
and SIGINT to the end of a step, and what a checkpoint records of its run
(:func:`run_identity`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import signal
import threading

import jax
import numpy as np

from vaells_jax.config import ADDED_LATER, Config
from vaells_jax.data.dataset import Dataset

__all__ = [
  "TrainingDiverged",
  "TrainingInterrupted",
  "batch_indices",
  "check_data",
  "deferred_signals",
  "likely_cause",
  "run_identity",
]


def check_data(config: Config, data: Dataset) -> None:
  """Validates a data set against ``config`` before anything runs or is written.

  Raises:
    ValueError: naming the problem (shapes, non-finite values, labels out of
      range, a class without anchors, fewer points than the batch).
  """
  x, labels, anchors = data.x_train, data.labels_train, data.anchors
  _check_points(config, x)
  _check_labels_and_anchors(x, labels, anchors)
  _check_run_fits(config, x)


def _check_points(config: Config, x) -> None:
  """The training points ``[N, D]``: shape, dtype, finite, images where the
  config needs them."""
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
  if config.network == "image" and x.shape[1] != math.prod(config.image_shape):
    raise ValueError(
      f"config.image_shape={config.image_shape} makes images of "
      f"{math.prod(config.image_shape)} values; the data have D={x.shape[1]}."
    )
  if (
    config.network == "conv" or config.input_rotation or config.rotation_anchors
  ) and x.shape[1] != 28 * 28:
    raise ValueError(
      f"config.network='conv' and image rotation need 28 x 28 "
      f"images flattened to [N, 784], got D={x.shape[1]}."
    )


def _check_labels_and_anchors(x, labels, anchors) -> None:
  """One label per point, anchors ``[C, A, D]`` for every label's class."""
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


def _check_run_fits(config: Config, x) -> None:
  """What the run needs of the data and the machine: processes, devices,
  enough points for the batch and the pseudo-inputs, memory."""
  if jax.process_count() > 1 and not config.data_parallel:
    raise ValueError(
      f"This run has {jax.process_count()} processes: they train one model "
      "together only with config.data_parallel=true."
    )
  if jax.process_count() > 1 and config.population > 1:
    raise ValueError(
      f"config.population={config.population}: a population trains in one "
      "process; across processes use config.population=1."
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
def deferred_signals():
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


def run_identity(config: Config, data: Dataset) -> dict:
  """What a checkpoint records of its run: the config and a digest of the data.

  ``{"config": {field: value, ...}, "data_sha256": hex}`` as JSON values;
  the digest covers the training points, labels and anchors. The config
  leaves out some fields that do not change the state at a given step
  (:data:`_NOT_IDENTITY`: the run's length, how often it logs and
  checkpoints, and ``eval_rotation_digits``), so a run can be resumed to
  train longer. The other evaluation settings (``eval_ll_points``,
  ``eval_ll_samples``, ``num_pseudo``) stay in it: a resumed run evaluates
  as it was configured.
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
    k: v
    for k, v in dataclasses.asdict(config).items()
    if k not in _NOT_IDENTITY and (k not in ADDED_LATER or v != ADDED_LATER[k])
  }
  return {"config": json.loads(json.dumps(fields)), "data_sha256": digest.hexdigest()}


# eval_rotation_digits joined the config after checkpoints were written
# without it; leaving it out keeps those loadable.
_NOT_IDENTITY = ("num_steps", "log_every", "checkpoint_every", "eval_rotation_digits")


def likely_cause(state, config: Config) -> str:
  """Names what most likely made the loss non-finite, from the state's
  parameters (the default of
  :func:`vaells_jax.training.loop.train_loop`)."""
  params_finite = all(
    np.all(np.isfinite(a)) for a in jax.tree_util.tree_leaves(state.params)
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
