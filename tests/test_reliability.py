"""Reliability: validated inputs, exact resume after SIGKILL, numerical faults.

Covers what a new user would try from the command line (bad flags, configs,
data and workdirs: one-line message, exit status 2, nothing written), the
checkpoints (atomic, corrupt or mismatched ones are errors, a killed and
resumed run equals an uninterrupted one bit for bit), injected faults (a
poisoned batch, an exploding dictionary) and the health of a long run.
"""

import dataclasses
import json
import logging
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
import types

import jax
import jax.numpy as jnp
import numpy as np
import psutil
import pytest
from tiny import TINY, TINY_DATA

from vaells_jax.config import Config
from vaells_jax.models.vaells import Model
from vaells_jax.runs import runner
from vaells_jax.training.checkpoint import (
  CHECKPOINT_DIR,
  CheckpointError,
  checkpoint_steps,
  restore_checkpoint,
  save_checkpoint,
)
from vaells_jax.training.step import init_state, make_train_step

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from vaells_jax import cli as run_cli  # noqa: E402

DATA, SMALL = TINY_DATA, TINY
# Small and fast, for command-line runs of the concentric experiment.
FAST_FLAGS = (
  "--config.hidden=(16,)",
  "--config.inference_max_iter=10",
  "--config.batch_size=10",
)


def _cli(*args):
  return subprocess.run(
    [sys.executable, str(ROOT / "experiments" / "run.py"), *args],
    capture_output=True,
    text=True,
    timeout=600,
    cwd=ROOT,
  )


# --- Bad input: one line, exit status 2, nothing written. ---------------------

BAD_FLAGS = [
  (["--config.num_step=3"], "Did you mean 'num_steps'"),
  (["--config.num_steps=abc"], "config.num_steps"),
  (["--config.num_steps=2.5"], "config.num_steps"),
  (["--config.lr_net=-1"], "config.lr_net must be >= 0"),
  (["--config.num_ops=0"], "config.num_ops must be > 0"),
  (["--config.hidden=(0,)"], "config.hidden"),
  (["--config.alternate=maybe"], "config.alternate"),
  (["--config.batch_size=100000"], "larger than the 400 training points"),
  (["--resume"], "Nothing to resume"),
]


@pytest.mark.parametrize("flags, message", BAD_FLAGS)
def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, flags, message):
  workdir = tmp_path / "run"
  code = run_cli.main(["--exp=concentric", f"--workdir={workdir}", *flags])
  err = capsys.readouterr().err
  assert code == 2
  assert message in err
  assert len(err.strip().splitlines()) == 1, err
  assert not workdir.exists()


@pytest.mark.parametrize(
  "flags, message",
  [
    (["--exp=concentrc"], "unknown --exp='concentrc'"),
    (["--exp=concentric", "--resume", "--overwrite"], "exclude each other"),
    (["--exp=concentric", "--config.num_step=3"], "Did you mean 'num_steps'"),
  ],
)
def test_command_line_errors_have_no_traceback(tmp_path, flags, message):
  result = _cli(*flags, f"--workdir={tmp_path / 'run'}")
  assert result.returncode == 2
  assert message in result.stderr
  assert "Traceback" not in result.stderr
  assert not (tmp_path / "run").exists()


def _fields(**changes):
  """The fields ``check_data`` reads, from ``DATA`` with ``changes``.

  (A ``Dataset`` itself refuses inconsistent shapes when built.)
  """
  fields = {k: getattr(DATA, k) for k in ("x_train", "labels_train", "anchors")}
  return types.SimpleNamespace(**{**fields, **changes})


@pytest.mark.parametrize(
  "change, message",
  [
    (lambda d: d.x_train[:, :3], "Anchors must be [C, A, D] with D=3"),
    (
      lambda d: np.where(
        np.arange(d.x_train.size).reshape(d.x_train.shape) == 5, np.nan, d.x_train
      ),
      "non-finite values (first at row 0",
    ),
    (lambda d: d.x_train[0], "must be [N, D]"),
  ],
)
def test_bad_training_data_is_rejected(change, message):
  data = _fields(x_train=change(DATA))
  with pytest.raises(ValueError, match=re.escape(message)):
    runner.check_data(SMALL, data)


@pytest.mark.parametrize(
  "field, value, message",
  [
    ("labels_train", np.full(40, 2), r"labels must be in \[0, 2\)"),
    ("labels_train", np.zeros(39, int), "one label per training point"),
    ("anchors", np.zeros((2, 0, 20)), "at least one anchor"),
    ("anchors", np.full((2, 3, 20), np.inf), "anchors contain non-finite"),
  ],
)
def test_bad_labels_and_anchors_are_rejected(field, value, message):
  data = _fields(**{field: value})
  with pytest.raises(ValueError, match=message):
    runner.check_data(SMALL, data)


@pytest.mark.parametrize(
  "kwargs, message",
  [
    ({"num_steps": 1.5}, "config.num_steps must be int"),
    ({"lr_net": "0.1"}, "config.lr_net must be float"),
    ({"alternate": 1}, "config.alternate must be bool"),
    ({"init_range": (1.0, -1.0)}, "lo <= hi"),
    ({"max_bad_steps": 0}, "config.max_bad_steps must be > 0"),
  ],
)
def test_config_rejects_bad_types_and_ranges(kwargs, message):
  with pytest.raises(ValueError, match=message):
    Config(**kwargs)


# --- Checkpoints. ------------------------------------------------------------


def _state(config=SMALL, seed=0):
  return init_state(jax.random.PRNGKey(seed), config, DATA.anchors, DATA.data_dim)


def _assert_trees_equal(a, b):
  assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
  for x, y in zip(
    jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True
  ):
    assert np.asarray(x).dtype == np.asarray(y).dtype
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_checkpoint_round_trip_keeps_the_latest_two(tmp_path):
  state = _state()
  for step in (3, 6, 9):
    save_checkpoint(tmp_path, state.replace(step=jnp.asarray(step, jnp.int32)))
  assert checkpoint_steps(tmp_path) == [6, 9]
  restored = restore_checkpoint(tmp_path, _state(seed=1))
  _assert_trees_equal(restored, state.replace(step=jnp.asarray(9, jnp.int32)))
  assert int(restore_checkpoint(tmp_path, state, step=6).step) == 6
  assert not list(tmp_path.rglob("*.pkl")) and not list(tmp_path.rglob("*.pickle"))


def test_listing_checkpoints_survives_a_writer_deleting_old_ones(tmp_path, monkeypatch):
  # A run deletes checkpoints beyond the last two while another process may
  # list them (the killed-run test below watches a live run); orbax then
  # fails on the vanished step folder. The listing is retried.
  from vaells_jax.training import checkpoint

  for step in (3, 6):
    save_checkpoint(tmp_path, _state().replace(step=jnp.asarray(step, jnp.int32)))
  real, failures = checkpoint._manager, [FileNotFoundError, NotADirectoryError]

  def racing_manager(workdir, create):
    if failures:
      raise failures.pop(0)(f"{workdir}/{CHECKPOINT_DIR}/3")
    return real(workdir, create)

  monkeypatch.setattr(checkpoint, "_manager", racing_manager)
  assert checkpoint_steps(tmp_path) == [3, 6]
  failures.extend([FileNotFoundError] * 10)
  with pytest.raises(FileNotFoundError):  # a lasting fault still surfaces
    checkpoint_steps(tmp_path)


def test_mismatched_and_corrupt_checkpoints_are_errors(tmp_path):
  save_checkpoint(tmp_path, _state())
  other = dataclasses.replace(SMALL, num_ops=3)
  with pytest.raises(CheckpointError, match="different configuration"):
    restore_checkpoint(tmp_path, _state(other))
  with pytest.raises(CheckpointError, match="No checkpoint"):
    restore_checkpoint(tmp_path / "empty", _state())
  for path in (tmp_path / CHECKPOINT_DIR).rglob("*"):
    if path.is_file() and "ocdbt" in str(path):
      path.write_bytes(b"garbage")
  with pytest.raises(CheckpointError, match="corrupt"):
    restore_checkpoint(tmp_path, _state())


@pytest.mark.whole_run
def test_a_workdir_with_a_run_needs_resume_or_overwrite(tmp_path):
  workdir = tmp_path / "run"
  flags = [
    "--exp=concentric",
    f"--workdir={workdir}",
    "--config.num_steps=2",
    *FAST_FLAGS,
  ]
  assert run_cli.main(flags) == 0
  assert run_cli.main(flags) == 2  # would mix two runs
  assert run_cli.main([*flags, "--resume", "--config.seed=3"]) == 2  # other config
  assert run_cli.main([*flags, "--overwrite"]) == 0
  assert checkpoint_steps(workdir) == [2]
  # --resume alone takes the saved configuration (here: nothing left to train).
  assert run_cli.main(["--exp=concentric", f"--workdir={workdir}", "--resume"]) == 0
  for path in (workdir / CHECKPOINT_DIR).rglob("*"):
    if path.is_file() and "ocdbt" in str(path):
      path.write_bytes(b"garbage")
  result = _cli("--exp=concentric", f"--workdir={workdir}", "--resume")
  assert result.returncode == 2
  assert "is corrupt" in result.stderr and "Traceback" not in result.stderr
  assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.whole_run
def test_a_single_run_resumes_to_train_longer(tmp_path):
  workdir = tmp_path / "run"
  flags = ["--exp=concentric", *FAST_FLAGS]
  single = [*flags, f"--workdir={workdir}", "--config.population=1"]
  assert run_cli.main([*single, "--config.num_steps=2"]) == 0
  assert run_cli.main([*single, "--config.num_steps=4", "--resume"]) == 0
  assert checkpoint_steps(workdir)[-1] == 4
  summary = json.loads((workdir / "summary.json").read_text())
  assert (summary["resumed_from_step"], summary["steps"]) == (2, 4)
  assert json.loads((workdir / "config.json").read_text())["num_steps"] == 4
  # Fewer steps than the checkpoint holds: refused, nothing written.
  assert run_cli.main([*single, "--config.num_steps=3", "--resume"]) == 2
  assert checkpoint_steps(workdir)[-1] == 4
  # A population picks its member at a fraction of num_steps: fixed length.
  population = [*flags, "--config.population=2", f"--workdir={tmp_path / 'pop'}"]
  assert run_cli.main([*population, "--config.num_steps=2"]) == 0
  assert run_cli.main([*population, "--config.num_steps=4", "--resume"]) == 2


def _final_state(workdir, config):
  data = runner.load_dataset(workdir / "dataset.npz")
  target = init_state(jax.random.PRNGKey(0), config, data.anchors, data.data_dim)
  return restore_checkpoint(workdir, target)


def _metrics(workdir):
  lines = (workdir / "metrics.jsonl").read_text().splitlines()
  return [
    {k: v for k, v in json.loads(line).items() if k != "steps_per_s"} for line in lines
  ]


@pytest.mark.whole_run
def test_killed_run_resumes_to_the_same_parameters(tmp_path):
  steps = 160
  flags = [
    "--exp=concentric",
    f"--config.num_steps={steps}",
    "--config.checkpoint_every=20",
    "--config.log_every=20",
    *FAST_FLAGS,
  ]
  whole, killed = tmp_path / "whole", tmp_path / "killed"
  assert _cli(*flags, f"--workdir={whole}").returncode == 0

  proc = subprocess.Popen(
    [
      sys.executable,
      str(ROOT / "experiments" / "run.py"),
      *flags,
      f"--workdir={killed}",
    ],
    cwd=ROOT,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
  )
  deadline = time.time() + 300
  while time.time() < deadline and not [s for s in checkpoint_steps(killed) if s >= 60]:
    time.sleep(0.05)
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  interrupted_at = checkpoint_steps(killed)[-1]
  assert 60 <= interrupted_at < steps, interrupted_at
  assert not (killed / "summary.json").exists()

  result = _cli(*flags, f"--workdir={killed}", "--resume")
  assert result.returncode == 0, result.stderr[-2000:]
  assert f"resuming from the checkpoint at step {interrupted_at}" in result.stdout

  config = runner.config_from_json(whole / "config.json")
  _assert_trees_equal(_final_state(killed, config), _final_state(whole, config))
  assert _metrics(killed) == _metrics(whole)
  summaries = [json.loads((w / "summary.json").read_text()) for w in (whole, killed)]
  for key in (
    "knn_class_accuracy",
    "sample_manifold_distance",
    "path_manifold_distance",
    "psi_rejected_steps",
  ):
    assert summaries[0][key] == summaries[1][key], key


# --- Numerical faults. -------------------------------------------------------


def _poison(x):  # the loop's batches are host arrays, the test's jax arrays
  return jnp.asarray(x).at[0, 0].set(jnp.nan)


def test_poisoned_batch_skips_the_step_and_training_goes_on():
  model = Model.create(SMALL, DATA.data_dim)
  step = make_train_step(model)
  state = _state()
  batch = {
    "x": jnp.asarray(DATA.x_train[:8], jnp.float32),
    "label": jnp.asarray(DATA.labels_train[:8]),
  }
  bad, metrics = step(state, {**batch, "x": _poison(batch["x"])}, jax.random.PRNGKey(0))
  _assert_trees_equal(
    (bad.params, bad.opt_state.inner_state), (state.params, state.opt_state.inner_state)
  )
  assert (int(bad.net_skipped), int(bad.bad_streak)) == (1, 1)
  assert int(metrics["net_skipped"]) == 1
  good, _ = step(bad, batch, jax.random.PRNGKey(1))
  assert (int(good.net_skipped), int(good.bad_streak)) == (1, 0)
  assert all(np.all(np.isfinite(a)) for a in jax.tree_util.tree_leaves(good))
  assert not np.array_equal(
    good.params["decoder"]["Dense_0"]["kernel"],
    state.params["decoder"]["Dense_0"]["kernel"],
  )


def _patch_make_step(monkeypatch, wrap):
  """Makes the runner build VAELLS's step as ``wrap(make_step(...))``."""
  entry = runner.MODELS["vaells"]
  monkeypatch.setitem(
    runner.MODELS,
    "vaells",
    entry._replace(make_step=lambda *args: wrap(entry.make_step(*args))),
  )


def _inject(monkeypatch, fault):
  """Makes the runner's train step apply ``fault(step, state, batch)`` first."""

  def make_faulty(step_fn):
    def faulty(state, batch, key):
      state, batch = fault(int(state.step), state, batch)
      return step_fn(state, batch, key)

    return faulty

  _patch_make_step(monkeypatch, make_faulty)


def test_poisoned_batches_in_a_run_are_counted_and_logged(tmp_path, monkeypatch):
  _inject(
    monkeypatch, lambda i, s, b: (s, {**b, "x": _poison(b["x"])} if i in (3, 4) else b)
  )
  lines = []
  state, _ = runner.train_run(SMALL, DATA, tmp_path, log=lines.append)
  assert int(state.net_skipped) == 2 and int(state.bad_streak) == 0
  assert any("step 4: non-finite loss" in line for line in lines)
  assert all(np.all(np.isfinite(a)) for a in jax.tree_util.tree_leaves(state))
  assert checkpoint_steps(tmp_path) == [8, 12]
  with pytest.raises(ValueError, match="already holds checkpoints"):
    runner.train_run(SMALL, DATA, tmp_path, log=lines.append)


def test_exploding_dictionary_stops_the_run_and_keeps_the_last_good_checkpoint(
  tmp_path, monkeypatch
):
  config = dataclasses.replace(SMALL, num_steps=40, max_bad_steps=5)
  _inject(
    monkeypatch,
    lambda i, s, b: (
      s.replace(params={**s.params, "psi": s.psi * 1e9}) if i == 6 else s,
      b,
    ),
  )
  with pytest.raises(runner.TrainingDiverged, match="Psi exploded") as error:
    runner.train_run(config, DATA, tmp_path, log=lambda line: None)
  assert "5 consecutive steps" in str(error.value)
  assert checkpoint_steps(tmp_path) == [4]
  restored = restore_checkpoint(tmp_path, _state(config))
  assert all(np.all(np.isfinite(a)) for a in jax.tree_util.tree_leaves(restored))


@pytest.mark.whole_run
def test_a_diverging_run_exits_1_from_the_command_line(tmp_path):
  result = _cli(
    "--exp=concentric",
    f"--workdir={tmp_path}",
    *FAST_FLAGS,
    "--config.num_steps=30",
    "--config.max_bad_steps=3",
    "--config.lr_net=1e30",
    "--config.checkpoint_every=1",
  )
  assert result.returncode == 1, result.stderr[-2000:]
  assert "training diverged" in result.stderr and "lower lr_net" in result.stderr
  assert "Traceback" not in result.stderr


# --- Long runs. --------------------------------------------------------------


@pytest.mark.whole_run
def test_long_run_neither_recompiles_nor_grows_memory(tmp_path, monkeypatch):
  config = dataclasses.replace(
    SMALL,
    num_steps=3000,
    inference_max_iter=3,
    log_every=250,
    checkpoint_every=100000,
    warmup_steps=100,
    alternate=True,
  )
  made = []
  _patch_make_step(monkeypatch, lambda step_fn: made.append(step_fn) or step_fn)
  process = psutil.Process(os.getpid())
  samples = []

  def log(line):
    if line.startswith("step"):
      samples.append((process.memory_info().rss, len(jax.live_arrays())))

  runner.train_run(config, DATA, tmp_path, log=log)
  assert [program._cache_size() for program in made[0].programs] == [1, 1]
  rss, live = np.array(samples).T
  assert len(set(live[1:])) == 1, live  # no arrays pile up
  growth_mb = (rss[-1] - rss[1]) / 2**20
  assert growth_mb < 20, f"RSS grew {growth_mb:.1f} MB over 2750 steps"


def test_checkpoint_of_another_state_layout_is_refused(tmp_path):
  # A state that kept Psi and its accept/reject counters beside params and
  # opt_state (the layout before Psi joined the optax partition).
  import flax

  @flax.struct.dataclass
  class OldState:
    step: jax.Array
    params: dict
    opt_state: tuple
    psi: jax.Array
    lr_psi: jax.Array
    psi_rejected: jax.Array

  new = _state()
  old = OldState(
    step=jnp.asarray(5, jnp.int32),
    params={k: v for k, v in new.params.items() if k != "psi"},
    opt_state=(jnp.zeros(3),),
    psi=new.psi,
    lr_psi=jnp.asarray(0.1),
    psi_rejected=jnp.asarray(0),
  )
  save_checkpoint(tmp_path, old)
  with pytest.raises(
    CheckpointError,
    match="another version of vaells_jax.*'lr_psi'.*'opt_state', 'params', 'step'",
  ):
    restore_checkpoint(tmp_path, new)


def test_checkpoints_leave_the_absl_logger_level_alone(tmp_path):
  """Orbax logs each save at INFO; the checkpoint code holds the ``absl``
  logger at WARNING only while it saves or restores."""
  absl = logging.getLogger("absl")
  before = absl.level
  absl.setLevel(logging.DEBUG)
  try:
    state = _state()
    save_checkpoint(tmp_path, state)
    assert absl.level == logging.DEBUG
    restored = restore_checkpoint(tmp_path, state)
    assert absl.level == logging.DEBUG
    assert int(restored.step) == int(state.step)
  finally:
    absl.setLevel(before)
