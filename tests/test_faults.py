"""Hostile input and faults: every refusal one line with nothing written,
checkpoints that detect corruption, a workdir one run owns, signals and a
full disk mid-run resumable bit for bit, numbers never silently NaN.

Fast: command-line cases run ``experiments.run.main`` in-process; the one
subprocess is the SIGTERM test's.
"""

import dataclasses
import functools
import json
import os
import pathlib
import resource
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tiny import TINY

from vaells_jax import expm_small, infer_coefficients, load, transport, transport_path
from vaells_jax.config import ADDED_LATER, Config, config_from_json
from vaells_jax.data.dataset import save_dataset
from vaells_jax.data.synthetic import make_concentric
from vaells_jax.runs import fit as fit_module
from vaells_jax.runs import runner
from vaells_jax.runs.workdir import LOCK_NAME, WorkdirInUse, lock_workdir
from vaells_jax.training import loop
from vaells_jax.training.checkpoint import (
  CHECKPOINT_DIR,
  SUMS_NAME,
  CheckpointError,
  checkpoint_steps,
  restore_checkpoint,
)
from vaells_jax.training.step import init_state

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from vaells_jax import cli as run_cli  # noqa: E402

DATA = make_concentric(seed=0)  # the command line's data: resumable by it
N = len(DATA.x_train)
SMALL = TINY


@pytest.fixture(autouse=True, scope="module")
def _compile_the_step_once():
  """Every in-process run here shares one jitted step (compiling is slow)."""
  entry = runner.MODELS["vaells"]
  runner.MODELS["vaells"] = entry._replace(
    make_step=functools.lru_cache(maxsize=None)(entry.make_step)
  )
  yield
  runner.MODELS["vaells"] = entry


def _snapshot(folder: pathlib.Path) -> dict:
  """Every file under ``folder`` (links not followed) and its bytes."""
  if not folder.exists():
    return {}
  return {
    str(p.relative_to(folder)): p.read_bytes() if not p.is_symlink() else "link"
    for p in sorted(folder.rglob("*"))
    if p.is_file() or p.is_symlink()
  }


def _one_line_exit_2(capsys, argv, message):
  code = run_cli.main(argv)
  err = capsys.readouterr().err
  assert code == 2, err
  assert message in err, err
  assert len(err.strip().splitlines()) == 1, err
  assert "Traceback" not in err


# --- Config and flags. -------------------------------------------------------


@pytest.mark.parametrize(
  "kwargs, message",
  [
    ({"num_step": 3}, "Unknown config key 'num_step'. Did you mean 'num_steps'?"),
    ({"lr_net": float("inf")}, "config.lr_net must be finite"),
    ({"max_lr_psi": float("inf"), "lr_psi": float("inf")}, "must be finite"),
    ({"zeta3": 1e-320}, "config.zeta3 must be finite and 0 or of magnitude"),
    ({"inference_tol": float("nan")}, "config.inference_tol must be finite"),
    ({"init_range": (-float("inf"), float("inf"))}, "config.init_range"),
    ({"posterior_init_range": (0.0, float("inf"))}, "posterior_init_range"),
    ({"seed": 2**70}, "config.seed must be in [0, 2147483646]"),
    ({"seed": -1}, "config.seed must be in [0"),
    ({"num_steps": 10**30}, "config.num_steps must be <= 2147483647"),
    ({"latent_dim": 10**9}, "config.latent_dim must be <= 4096"),
    ({"hidden": (10**9,)}, "config.hidden must be <= 65536"),
    ({"psi_lr_decay_start": -7}, "config.psi_lr_decay_start must be >= 0, or -1"),
    ({"psi_seed": -2}, "config.psi_seed must be >= 0, or -1"),
    ({"lr_net_cooldown": 2.0}, "config.lr_net_cooldown must be in [0, 1]"),
  ],
)
def test_config_refuses_out_of_range_values(kwargs, message):
  with pytest.raises(ValueError) as error:
    Config(**kwargs)
  assert message in str(error.value)
  assert "\n" not in str(error.value)


def test_config_normalises_numpy_scalars():
  config = Config(
    num_steps=np.int64(3),
    lr_net=np.float32(0.5),
    alternate=np.bool_(True),
    hidden=(np.int32(8),),
  )
  assert type(config.num_steps) is int and type(config.lr_net) is float
  assert config.alternate is True and type(config.hidden[0]) is int
  assert config == Config(num_steps=3, lr_net=0.5, alternate=True, hidden=(8,))
  json.dumps(dataclasses.asdict(config))  # was a TypeError for np.int64


BAD_FLAGS = [
  (["--config.lr_net=inf"], "config.lr_net must be finite"),
  (["--config.seed=1180591620717411303424"], "config.seed must be in"),
  (["--config.latent_dim=1000000000"], "config.latent_dim must be <= 4096"),
  (["--config.max_lr_psi=inf", "--config.lr_psi=inf"], "must be finite"),
  (["--config.init_range=(-inf,inf)"], "config.init_range must be finite"),
  (["--config.init_range=1"], "config.init_range must be (lo, hi), two numbers"),
  (["--config.init_range=(0,1,2)"], "must be (lo, hi), two numbers, got (0.0, 1.0"),
  (["--config.zeta3=1e-320"], "config.zeta3 must be finite"),
  (["--config.inference_tol=inf"], "config.inference_tol must be finite"),
  (["--config.psi_lr_decay_start=-7"], "psi_lr_decay_start must be >= 0, or -1"),
  (
    [
      "--config.num_ops=4096",
      "--config.latent_dim=4096",
      "--config.inference_method=pgd",
    ],
    "needs about",
  ),
  (["--config.latent_dim=3"], 'inference_method="gauss_newton" solves 2-D codes'),
]


@pytest.mark.parametrize("flags, message", BAD_FLAGS)
def test_bad_config_flags_exit_2_and_write_nothing(tmp_path, capsys, flags, message):
  workdir = tmp_path / "run"
  _one_line_exit_2(
    capsys, ["--exp=concentric", f"--workdir={workdir}", *flags], message
  )
  assert not workdir.exists()


@pytest.mark.parametrize(
  "flags, message",
  [
    (["--seed=5"], "unrecognised argument '--seed'; did you mean '--seeds'"),
    (["--seeds=-3"], "--seeds and --first-seed apply to comparisons and the study"),
    (["--seeds=2"], "--seeds and --first-seed apply to comparisons and the study"),
    (["--first-seed=4"], "--seeds and --first-seed apply to comparisons and the"),
    (
      ["--exp=compare_concentric", "--first-seed=4"],
      "--first-seed goes with --exp=sensitivity",
    ),
    (
      ["--exp=sensitivity", "--base=concentric", "--first-seed=-1"],
      "--first-seed must be >= 0",
    ),
    (
      ["--exp=sensitivity", "--base=concentric", "--first-seed=2147483640"],
      "--seeds=10: config.seed must be in [0, 2147483646], got 2147483649",
    ),
    (["--workdir="], "--workdir is empty"),
    (["--data-dir=/tmp"], "--data-dir applies to rot_mnist, nat_mnist only"),
    (["--exp=compare_concentric", "--seeds=-3"], "--seeds must be >= 1 and <= 1000"),
  ],
)
def test_flags_that_do_not_apply_are_refused(tmp_path, capsys, flags, message):
  argv = [f"--workdir={tmp_path / 'run'}", *flags]
  argv = (
    argv if any(f.startswith("--exp") for f in flags) else ["--exp=concentric"] + argv
  )
  with pytest.raises(SystemExit) as exit_:
    run_cli.main(argv)
  assert exit_.value.code == 2
  assert message in capsys.readouterr().err
  assert not (tmp_path / "run").exists()


# --- Workdirs. ---------------------------------------------------------------


def _workdir_cases(tmp_path):
  (tmp_path / "a_file").write_text("x")
  outside = tmp_path / "outside"
  outside.mkdir()
  (outside / "victim.txt").write_text("keep me")
  linked = tmp_path / "linked"
  linked.mkdir()
  (linked / "config.json").symlink_to(outside / "victim.txt")
  ckpt_link = tmp_path / "ckpt_link"
  ckpt_link.mkdir()
  (ckpt_link / CHECKPOINT_DIR).symlink_to(outside)
  return {
    "file": (tmp_path / "a_file", "exists and is not a folder"),
    "under_file": (tmp_path / "a_file" / "run", "is a file, not a folder"),
    "symlinked_config": (linked, "is a symbolic link"),
    "symlinked_checkpoints": (ckpt_link, "is a symbolic link"),
  }


@pytest.mark.parametrize("overwrite", [False, True])
def test_impossible_or_linked_workdirs_are_refused(tmp_path, capsys, overwrite):
  cases = _workdir_cases(tmp_path)
  before = _snapshot(tmp_path)
  for workdir, message in cases.values():
    flags = ["--overwrite"] if overwrite else []
    _one_line_exit_2(
      capsys, ["--exp=concentric", f"--workdir={workdir}", *flags], message
    )
  assert _snapshot(tmp_path) == before  # the victim and the links untouched
  assert (tmp_path / "outside" / "victim.txt").read_text() == "keep me"
  with pytest.raises(ValueError, match="is a file, not a folder"):
    fit_module.fit(DATA.x_train, config=SMALL, workdir=tmp_path / "a_file" / "w")
  with pytest.raises(ValueError, match="workdir is an empty string"):
    fit_module.fit(DATA.x_train, config=SMALL, workdir="")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_unwritable_workdir_is_refused(tmp_path, capsys):
  tmp_path.chmod(0o500)
  try:
    _one_line_exit_2(
      capsys,
      ["--exp=concentric", f"--workdir={tmp_path / 'run'}"],
      "is not writable",
    )
  finally:
    tmp_path.chmod(0o700)


def test_a_second_run_is_refused_while_the_first_holds_the_workdir(tmp_path, capsys):
  workdir = tmp_path / "run"
  workdir.mkdir()
  # Another process holds the lock as a live run does, then dies by SIGKILL.
  holder = subprocess.Popen(
    [
      sys.executable,
      "-c",
      "import fcntl, os, sys, time\n"
      f"fd = os.open({str(workdir / LOCK_NAME)!r}, os.O_RDWR | os.O_CREAT)\n"
      "fcntl.flock(fd, fcntl.LOCK_EX)\n"
      "os.write(fd, str(os.getpid()).encode())\n"
      "print('locked', flush=True)\n"
      "time.sleep(60)\n",
    ],
    stdout=subprocess.PIPE,
    text=True,
  )
  assert holder.stdout.readline().strip() == "locked"
  flags = ["--exp=concentric", f"--workdir={workdir}", "--config.num_steps=2"]
  _one_line_exit_2(capsys, flags, f"in use by another run (pid {holder.pid})")
  assert sorted(p.name for p in workdir.iterdir()) == [LOCK_NAME]  # nothing else
  holder.send_signal(signal.SIGKILL)
  holder.wait()
  with lock_workdir(workdir):  # free again: the kernel released it
    with pytest.raises(WorkdirInUse, match="in use by another run"):
      with lock_workdir(workdir):
        pass


# --- Saved runs: config.json, dataset.npz, metrics.jsonl, checkpoints. -------


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """A tiny trained workdir (no evaluation), as ``load`` reads it."""
  workdir = tmp_path_factory.mktemp("trained")
  runner.train_run(SMALL, DATA, workdir, log=lambda line: None)
  (workdir / "config.json").write_text(json.dumps(dataclasses.asdict(SMALL)))
  save_dataset(workdir / "dataset.npz", DATA)
  return workdir


def _copy(trained, tmp_path):
  import shutil

  return pathlib.Path(shutil.copytree(trained, tmp_path / "run"))


CONFIG_FAULTS = {
  "list": ("[1, 2]", "must hold a JSON object of config fields, got a list"),
  "empty": ("", "is not a readable JSON file"),
  "not_json": ("{num_steps: 3", "is not a readable JSON file"),
  "foreign": ('{"lr": 3}', "is not a vaells_jax run configuration"),
  "directory": (None, "is not a readable JSON file"),
  "missing_key": ("drop:zeta3", "missing keys ['zeta3']"),
  "bad_value": ("set:lr_net=-1", "config.lr_net must be >= 0"),
}


def _break_config(workdir, fault):
  path = workdir / "config.json"
  text = CONFIG_FAULTS[fault][0]
  if text is None:
    path.unlink()
    path.mkdir()
  elif text.startswith(("drop:", "set:")):
    raw = json.loads(path.read_text())
    if text.startswith("drop:"):
      del raw[text[5:]]
    else:
      key, value = text[4:].split("=")
      raw[key] = float(value)
    path.write_text(json.dumps(raw))
  else:
    path.write_text(text)


@pytest.mark.whole_run
@pytest.mark.parametrize("fault", sorted(CONFIG_FAULTS))
def test_broken_config_json_is_refused_by_resume_and_load(
  trained, tmp_path, capsys, fault
):
  workdir = _copy(trained, tmp_path)
  _break_config(workdir, fault)
  before = _snapshot(workdir)
  message = CONFIG_FAULTS[fault][1]
  _one_line_exit_2(
    capsys, ["--exp=concentric", f"--workdir={workdir}", "--resume"], message
  )
  with pytest.raises(ValueError, match=message.replace("[", r"\[").split("(")[0]):
    load(workdir)
  assert _snapshot(workdir) == before


def test_a_run_saved_before_a_field_joined_the_config_still_loads(trained, tmp_path):
  """A config.json without a field of ``ADDED_LATER`` (an older run) loads
  with the value that reproduces it, and its checkpoints still verify."""
  workdir = _copy(trained, tmp_path)
  raw = json.loads((workdir / "config.json").read_text())
  for key in ADDED_LATER:  # the file of an older run
    del raw[key]
  (workdir / "config.json").write_text(json.dumps(raw))
  config = load(workdir).config
  assert {key: getattr(config, key) for key in ADDED_LATER} == ADDED_LATER


def test_truncated_dataset_is_refused_by_resume_and_load(trained, tmp_path, capsys):
  workdir = _copy(trained, tmp_path)
  data = workdir / "dataset.npz"
  data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
  with pytest.raises(ValueError, match="is not a readable data set"):
    load(workdir)
  # The CLI's saved config is SMALL on the concentric data: the data check
  # reads the saved data set first.
  flags = ["--exp=concentric", f"--workdir={workdir}", "--resume"]
  before = _snapshot(workdir)
  _one_line_exit_2(capsys, flags, "is not a readable data set")
  assert _snapshot(workdir) == before


def test_edited_config_no_longer_matches_the_checkpoint(trained, tmp_path):
  workdir = _copy(trained, tmp_path)
  raw = json.loads((workdir / "config.json").read_text())
  raw["latent_scale"] = 7.0
  (workdir / "config.json").write_text(json.dumps(raw))
  with pytest.raises(CheckpointError, match="latent_scale: checkpoint 1.0, now 7.0"):
    load(workdir)
  assert load(trained).config == SMALL  # the untouched copy loads


def test_a_flipped_byte_in_any_checkpoint_file_is_detected(trained, tmp_path):
  workdir = _copy(trained, tmp_path)
  latest = workdir / CHECKPOINT_DIR / str(checkpoint_steps(workdir)[-1])
  target = init_state(jax.random.PRNGKey(0), SMALL, DATA.anchors, DATA.data_dim)
  files = [p for p in sorted(latest.rglob("*")) if p.is_file()]
  assert len(files) > 5 and latest / SUMS_NAME in files
  for path in files:
    original = path.read_bytes()
    flipped = bytearray(original)
    flipped[len(original) // 2] ^= 0xFF
    path.write_bytes(bytes(flipped))
    with pytest.raises(CheckpointError) as error:
      restore_checkpoint(workdir, target)
    assert "corrupt" in str(error.value) and "\n" not in str(error.value)
    if path.name != SUMS_NAME:
      assert "step 8 is intact" in str(error.value), error.value  # the fallback
    path.write_bytes(original[: len(original) // 2])  # truncated
    with pytest.raises(CheckpointError):
      load(workdir)
    path.write_bytes(original)
  restore_checkpoint(workdir, target)  # all restored: loads again


def test_a_corrupt_checkpoint_exits_2_from_the_command_line(trained, tmp_path, capsys):
  workdir = _copy(trained, tmp_path)
  latest = workdir / CHECKPOINT_DIR / "12"
  biggest = max(
    (p for p in latest.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size
  )
  biggest.write_bytes(biggest.read_bytes()[:100])
  before = _snapshot(workdir)
  flags = ["--exp=concentric", f"--workdir={workdir}", "--resume"]
  _one_line_exit_2(capsys, flags, "does not match its SHA-256")
  assert _snapshot(workdir) == before


# --- Faults during training. -------------------------------------------------


def _interrupt_at(monkeypatch, at_step, signum):
  """Sends ``signum`` to this process while the step ``at_step`` runs."""
  entry = runner.MODELS["vaells"]

  def make(*args):
    step_fn = entry.make_step(*args)

    def step(state, batch, key):
      if int(state.step) == at_step:
        os.kill(os.getpid(), signum)
      return step_fn(state, batch, key)

    return step

  monkeypatch.setitem(runner.MODELS, "vaells", entry._replace(make_step=make))


def _params(workdir, config=SMALL):
  target = init_state(jax.random.PRNGKey(0), config, DATA.anchors, DATA.data_dim)
  return restore_checkpoint(workdir, target)


def _assert_same(a, b):
  for x, y in zip(
    jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True
  ):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_sigint_checkpoints_the_step_and_resumes_bit_for_bit(
  trained, tmp_path, monkeypatch
):
  workdir = tmp_path / "run"
  _interrupt_at(monkeypatch, 5, signal.SIGINT)
  handler = signal.getsignal(signal.SIGINT)
  with pytest.raises(loop.TrainingInterrupted) as error:
    runner.train_run(SMALL, DATA, workdir, log=lambda line: None)
  assert (error.value.signum, error.value.step) == (signal.SIGINT, 6)
  assert checkpoint_steps(workdir) == [4, 6]
  assert signal.getsignal(signal.SIGINT) is handler  # restored
  monkeypatch.undo()
  with open(workdir / loop.METRICS_NAME, "a") as f:
    f.write('{"step": 8, "loss": 0.1')  # a kill while appending a line
  lines = []
  runner.train_run(SMALL, DATA, workdir, log=lines.append, resume=True)
  assert any("dropped its half-written last line" in line for line in lines)
  _assert_same(_params(workdir), _params(trained))
  steps = [json.loads(x)["step"] for x in (workdir / "metrics.jsonl").open()]
  assert steps == [4, 8, 12]


@pytest.mark.whole_run
def test_full_disk_during_a_checkpoint_keeps_the_previous_one(
  trained, tmp_path, monkeypatch
):
  workdir = tmp_path / "run"
  real_save = loop.save_checkpoint
  limit = resource.getrlimit(resource.RLIMIT_FSIZE)
  ignored = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

  def save_on_a_full_disk(where, state, identity=None):
    if int(state.step) != 8:
      return real_save(where, state, identity)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, limit[1]))  # EFBIG
    try:
      return real_save(where, state, identity)
    finally:
      resource.setrlimit(resource.RLIMIT_FSIZE, limit)

  monkeypatch.setattr(loop, "save_checkpoint", save_on_a_full_disk)
  try:
    with pytest.raises(CheckpointError) as error:
      runner.train_run(SMALL, DATA, workdir, log=lambda line: None)
  finally:
    signal.signal(signal.SIGXFSZ, ignored)
  message = str(error.value)
  assert "Could not write the checkpoint of step 8" in message, message
  assert "previous checkpoints (steps [4]) are intact" in message
  assert "\n" not in message
  assert checkpoint_steps(workdir) == [4]
  assert not list((workdir / CHECKPOINT_DIR).glob("*tmp*"))
  monkeypatch.undo()
  runner.train_run(SMALL, DATA, workdir, log=lambda line: None, resume=True)
  _assert_same(_params(workdir), _params(trained))


@pytest.mark.whole_run
def test_sigterm_from_outside_exits_143_with_the_resume_command(tmp_path):
  workdir = tmp_path / "run"
  flags = [
    "--exp=concentric",
    f"--workdir={workdir}",
    "--config.num_steps=100000",
    "--config.hidden=(16,)",
    "--config.inference_max_iter=5",
    "--config.log_every=5",
    "--config.checkpoint_every=100000",
    "--config.population=1",  # a single run: its metrics.jsonl from step 1
  ]
  proc = subprocess.Popen(
    [sys.executable, str(ROOT / "experiments" / "run.py"), *flags],
    cwd=ROOT,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.PIPE,
    text=True,
  )
  metrics = workdir / loop.METRICS_NAME
  deadline = time.time() + 120
  while time.time() < deadline and not (metrics.exists() and metrics.stat().st_size):
    time.sleep(0.05)
  proc.send_signal(signal.SIGTERM)
  err = proc.communicate(timeout=120)[1]
  assert proc.returncode == 143, err[-2000:]
  assert "SIGTERM received: stopped after step" in err
  assert f"--workdir={workdir} --resume" in err and "Traceback" not in err
  assert len(err.strip().splitlines()) == 1, err
  (step,) = checkpoint_steps(workdir)
  assert step >= 5 and f"after step {step}," in err
  # That checkpoint resumes (the SIGINT test above checks the same path bit
  # for bit), and the ended run's lock is free.
  config = config_from_json(workdir / "config.json")
  target = init_state(jax.random.PRNGKey(0), config, DATA.anchors, DATA.data_dim)
  assert int(restore_checkpoint(workdir, target).step) == step
  with lock_workdir(workdir):
    pass


# --- Library inputs. ---------------------------------------------------------


@pytest.mark.parametrize(
  "kwargs, message",
  [
    ({"x": np.zeros((60, 0))}, "x is empty: x must be vectors [N, D] or images"),
    ({"x": np.zeros((0, 3)), "labels": None}, "x is empty: x must be"),
    ({"x": DATA.x_train.astype(complex)}, "complex data would lose"),
    ({"labels": np.r_[np.zeros(N - 1, int), 10**12]}, f"below the {N} points"),
    ({"anchors_per_class": 2.5}, "anchors_per_class must be an integer"),
    ({"test_fraction": float("nan")}, "test_fraction must be in (0, 1)"),
  ],
)
def test_fit_refuses_bad_arrays_and_arguments(tmp_path, kwargs, message):
  args = {"x": DATA.x_train, "config": SMALL, "workdir": tmp_path / "w", **kwargs}
  with pytest.raises(ValueError) as error:
    fit_module.fit(**args, log=lambda line: None)
  assert message in str(error.value)
  assert not (tmp_path / "w").exists()


# --- Numbers never silently NaN. ---------------------------------------------

PSI = jnp.asarray([[[0.0, 1.0], [0.0, 0.0]], [[1.0, 0.0], [0.0, -1.0]]])
Z0 = jnp.asarray([1.0, 1.0])


@pytest.mark.parametrize(
  "call, message",
  [
    (lambda c: transport(PSI, jnp.asarray([0.0, 1e4]), Z0, checked=c), "||A||_1"),
    (
      lambda c: transport(PSI.at[0, 0, 0].set(jnp.nan), jnp.ones(2), Z0, checked=c),
      "psi contains inf or NaN",
    ),
    (lambda c: transport(PSI, jnp.ones(2), Z0 * jnp.nan, checked=c), "z0 contains"),
    (
      lambda c: transport_path(PSI, jnp.asarray([0.0, 100.0]), Z0, [0, 1], checked=c),
      "transport_path is not finite",
    ),
    (lambda c: expm_small(jnp.eye(3) * 1e4, checked=c), "expm_small is not finite"),
    (lambda c: expm_small(jnp.eye(2) * 1e4, checked=c), "outside the valid range"),
  ],
)
def test_out_of_range_numbers_are_non_finite_or_raise_when_checked(call, message):
  assert not np.all(np.isfinite(np.asarray(call(False))))  # as documented
  with pytest.raises(ValueError, match=message.replace("|", r"\|")):
    call(True)


def test_valid_inputs_pass_the_check_unchanged():
  coeffs = jnp.asarray([0.3, -0.2])
  np.testing.assert_array_equal(
    transport(PSI, coeffs, Z0, checked=True), transport(PSI, coeffs, Z0)
  )
  with pytest.raises(ValueError, match="needs concrete arrays"):
    jax.jit(lambda c: transport(PSI, c, Z0, checked=True))(coeffs)


def test_inference_flags_overflowing_starts_and_refuses_bad_keys():
  key = jax.random.PRNGKey(0)
  # Every start's expm overflows: no gradient was followed, so not converged.
  result = infer_coefficients(
    PSI, Z0, Z0 * 2, l1_weight=0.01, key=key, init_range=(1e6, 1e6 + 1)
  )
  assert not bool(result.converged)
  result = infer_coefficients(PSI, Z0 * jnp.nan, Z0, l1_weight=0.01, key=key)
  assert not bool(result.converged) and np.isnan(result.objective)
  for bad in (None, 3, jnp.zeros(3)):
    with pytest.raises(ValueError, match="key must be a jax.random key"):
      infer_coefficients(PSI, Z0, Z0, l1_weight=0.01, key=bad)
  with pytest.raises(ValueError, match="init_range must be finite"):
    infer_coefficients(
      PSI, Z0, Z0, l1_weight=0.01, key=key, init_range=(0.0, float("inf"))
    )
