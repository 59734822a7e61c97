"""Training loop and run outputs: ``train_and_evaluate(config, data, workdir)``."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np

from vaells_jax.api import CONFIG_NAME, DATA_NAME, TrainedVAELLS
from vaells_jax.checkpoint import save_checkpoint
from vaells_jax.config import Config
from vaells_jax.data.synthetic import SyntheticData, save_synthetic
from vaells_jax.report import evaluate_and_report
from vaells_jax.train import Model, init_state, make_train_step

__all__ = ["train", "train_and_evaluate"]

METRICS_NAME = "metrics.jsonl"


def _check_data(config: Config, data: SyntheticData) -> None:
  if not np.all(np.isfinite(data.x_train)):
    raise ValueError("The training data contain non-finite values.")
  if data.x_train.shape[0] < config.batch_size:
    raise ValueError(f"config.batch_size={config.batch_size} is larger than the "
                     f"{data.x_train.shape[0]} training points.")
  labels = data.labels_train
  if labels.min() < 0 or labels.max() >= data.anchors.shape[0]:
    raise ValueError(f"Training labels must be in [0, {data.anchors.shape[0]}) "
                     "(one anchor set per class).")


def batch_indices(seed: int, step: int, num_points: int, batch_size: int):
  """The indices of the batch at ``step``: a pure function of ``(seed, step)``."""
  rng = np.random.default_rng([seed, step])
  return rng.choice(num_points, batch_size, replace=False)


def _log_line(step, metrics, rate):
  return (f"step {step:6d}  loss {metrics['loss']:+.4f}  recon {metrics['recon']:.4f}"
          f"  log_q {metrics['log_q']:+.4f}  log_p {metrics['log_p']:+.4f}"
          f"  lr_psi {metrics['lr_psi']:.2e}"
          f"  psi_rejected {int(metrics['psi_rejected'])}"
          f"  inf_iters {metrics['inference_iters']:.1f}  {rate:.1f} steps/s")


def train(config: Config, data: SyntheticData, workdir, log=print):
  """Trains from scratch, logging to ``workdir/metrics.jsonl`` and checkpointing.

  Returns:
    ``(state, info)`` with ``info = {"steps", "train_time_s", "compile_time_s"}``.
  """
  _check_data(config, data)
  workdir = pathlib.Path(workdir)
  model = Model.create(config, data.data_dim)
  state = init_state(jax.random.PRNGKey(config.seed), config, data.anchors,
                     data.data_dim)
  step_fn = make_train_step(model)
  x = jnp.asarray(data.x_train, jnp.float32)
  labels = jnp.asarray(data.labels_train, jnp.int32)
  step_key = jax.random.PRNGKey(config.seed + 1)
  start = last_time = time.perf_counter()
  compile_time, last_step = 0.0, 0
  with open(workdir / METRICS_NAME, "w") as metrics_file:
    for step in range(config.num_steps):
      idx = batch_indices(config.seed, step, x.shape[0], config.batch_size)
      state, metrics = step_fn(state, {"x": x[idx], "label": labels[idx]},
                               jax.random.fold_in(step_key, step))
      if step == 0:
        jax.block_until_ready(state)
        compile_time = time.perf_counter() - start
        last_time = time.perf_counter()
      done = step + 1
      if done % config.log_every == 0 or done == config.num_steps:
        metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
        now = time.perf_counter()
        rate = (done - max(last_step, 1)) / max(now - last_time, 1e-9)
        last_time, last_step = now, done
        metrics_file.write(json.dumps({"step": done, **metrics,
                                       "steps_per_s": rate}) + "\n")
        metrics_file.flush()
        log(_log_line(done, metrics, rate))
      if done % config.checkpoint_every == 0 and done < config.num_steps:
        save_checkpoint(workdir, state)
  save_checkpoint(workdir, state)
  train_time = time.perf_counter() - start
  return state, {"steps": config.num_steps, "train_time_s": train_time,
                 "compile_time_s": compile_time}


def train_and_evaluate(config: Config, data: SyntheticData, workdir,
                       log=print) -> tuple[TrainedVAELLS, dict]:
  """Trains VAELLS on ``data`` and writes every output into ``workdir``.

  Outputs: ``config.json``, ``dataset.npz``, ``metrics.jsonl``,
  ``checkpoint.msgpack``, ``summary.json``, ``summary.md`` and the figures.

  Returns:
    ``(trained model, summary dict)``.
  """
  start = time.perf_counter()
  workdir = pathlib.Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  _check_data(config, data)
  (workdir / CONFIG_NAME).write_text(json.dumps(dataclasses.asdict(config), indent=2))
  save_synthetic(workdir / DATA_NAME, data)
  state, info = train(config, data, workdir, log)
  trained = TrainedVAELLS(config, state.params, state.psi, data)
  summary = {
      **info,
      "psi_rejected_steps": int(state.psi_rejected),
      "psi_attempted_steps": int(state.psi_attempted),
      "final_lr_psi": float(state.lr_psi),
  }
  summary.update(evaluate_and_report(trained, workdir, summary))
  summary["wall_time_s"] = time.perf_counter() - start
  (workdir / "summary.json").write_text(json.dumps(summary, indent=2))
  return trained, summary
