"""Training across 2 processes (jax.distributed, gloo on CPU) equals 1 process.

Two subprocesses on this machine, 2 virtual CPU devices each, join through
``VAELLS_COORDINATOR`` / ``VAELLS_NUM_PROCESSES`` / ``VAELLS_PROCESS_ID`` and
train the concentric model data-parallel over the 4 devices of the global
mesh: 6 steps, with a crash at step 4 and a resume from process 0's
checkpoint of step 3 (the restored state reaches process 1 by broadcast).
Both must end with the parameters of a plain 1-device run of 6 steps in this
process.

Tolerance: rtol 1e-4, atol 1e-6, as ``tests/test_parallel.py``. The global
batch is the same, but each device sums its 2 rows and the gradients are
then summed across devices and processes, so float32 sums run in another
order (about 1e-7 relative each), as do the other fusions of the processes'
programs (compiled at -O0, below); 6 steps of Adam and the coefficient
solver carry that forward: measured 9e-8 at most. Process 1 feeding its rows
of the batch shifted by one changes the parameters by up to 3e-4 (measured),
which fails.
"""

import contextlib
import os
import pathlib
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
TIMEOUT_S = 240

SCRIPT = textwrap.dedent("""
    import dataclasses, functools, os, pathlib, sys, traceback
    def fail(*error):  # at once: jax's exit waits for the other process
      traceback.print_exception(*error)
      sys.stderr.flush()
      os._exit(1)
    sys.excepthook = fail
    import jax
    jax.config.update("jax_num_cpu_devices", 2)
    from vaells_jax.training import distributed
    assert distributed.initialize_from_env()
    import numpy as np
    from vaells_jax.api import MODELS
    from vaells_jax.config import Config
    from vaells_jax.data.synthetic import make_concentric
    from vaells_jax.runs import runner
    from vaells_jax.training import loop

    folder, pid = pathlib.Path(sys.argv[1]), sys.argv[2]
    assert (jax.process_count(), jax.device_count(), jax.local_device_count()) == (
      2, 4, 2), jax.devices()
    data = make_concentric(seed=0, num_per_circle=20, num_test_per_circle=5)
    config = Config(num_steps=6, batch_size=8, hidden=(16,), num_ops=2,
                    inference_max_iter=10, log_every=3, checkpoint_every=3,
                    data_parallel=True, inference_method="fista")
    for bad, words in ((dict(data_parallel=False), "data_parallel=true"),
                       (dict(population=2), "config.population=1")):
      try:
        runner.check_data(dataclasses.replace(config, **bad), data)
        sys.exit(f"no error for {bad} across processes")
      except ValueError as e:
        assert words in str(e), e

    class Crash(Exception):
      pass

    def crash_at_step_4(done, total):
      if done == 4:
        raise Crash

    # The resumed run reuses the compiled step (one compilation, not two).
    make_step = functools.cache(MODELS["vaells"].make_step)
    run = functools.partial(loop.train_loop, config, data, folder / "shared",
                            init=MODELS["vaells"].init, make_step=make_step)
    lines = []  # one workdir for both: process 1 writes nothing
    try:
      run(log=lines.append, progress=crash_at_step_4)
      sys.exit("no crash")
    except Crash:
      pass
    state, _ = run(log=lines.append, resume=True)
    assert bool(lines) == distributed.is_main(), lines
    resumed = "resuming from the checkpoint at step 3"
    assert pid == "1" or any(resumed in line for line in lines), lines
    assert int(state.step) == 6 and int(state.psi_attempted) == 6
    leaves = [np.asarray(a) for a in jax.tree_util.tree_leaves(state)]
    np.savez(folder / f"process{pid}.npz", *leaves)
""")


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


@contextlib.contextmanager
def _two_processes(tmp_path):
  """Starts SCRIPT as processes 0 and 1; the block runs meanwhile. Then
  waits for both, or fails with the output of both once one has failed."""
  port, procs = _free_port(), []
  logs = [tmp_path / f"process{pid}.log" for pid in range(2)]
  try:
    for pid, log in enumerate(logs):
      env = {
        **os.environ,
        "VAELLS_COORDINATOR": f"localhost:{port}",
        "VAELLS_NUM_PROCESSES": "2",
        "VAELLS_PROCESS_ID": str(pid),
        # Process 1 compiles the step every time (jax caches compiled CPU
        # programs of process 0 only): a third less compile time at -O0.
        "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} "
        "--xla_backend_optimization_level=0",
      }
      with open(log, "w") as f:
        procs.append(
          subprocess.Popen(
            [sys.executable, "-c", SCRIPT, str(tmp_path), str(pid)],
            stdout=f,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=env,
          )
        )
    deadline = time.monotonic() + TIMEOUT_S
    yield
    # The other process waits for a failed one in a collective: stop at the
    # first failure.
    while any(p.poll() is None for p in procs) and not any(p.poll() for p in procs):
      if time.monotonic() > deadline:
        pytest.fail(f"ran past {TIMEOUT_S} s:\n{_tails(logs)}")
      time.sleep(0.1)
    failed = [
      f"process {i} exited {p.returncode}" for i, p in enumerate(procs) if p.poll()
    ]
    if failed:
      pytest.fail(f"{'; '.join(failed)}:\n{_tails(logs)}")
  finally:
    for proc in procs:
      if proc.poll() is None:
        proc.kill()
        proc.wait()


def _tails(logs) -> str:
  return "\n".join(
    f"--- process {pid}:\n{log.read_text()[-3000:]}" for pid, log in enumerate(logs)
  )


@pytest.mark.whole_run
def test_two_process_training_matches_one_process(tmp_path):
  import jax

  from vaells_jax.config import Config
  from vaells_jax.data.synthetic import make_concentric
  from vaells_jax.runs import runner
  from vaells_jax.training.checkpoint import checkpoint_steps

  data = make_concentric(seed=0, num_per_circle=20, num_test_per_circle=5)
  config = Config(
    num_steps=6,
    batch_size=8,
    hidden=(16,),
    num_ops=2,
    inference_max_iter=10,
    log_every=3,
    checkpoint_every=100,
    inference_method="fista",  # as the processes' (gauss_newton rounds apart)
  )
  with _two_processes(tmp_path):  # the 1-process run meanwhile, here
    one, _ = runner.train_run(config, data, tmp_path / "one", log=lambda line: None)
  expected = [np.asarray(a) for a in jax.tree_util.tree_leaves(one)]
  worst = 0.0
  for pid in range(2):
    with np.load(tmp_path / f"process{pid}.npz") as saved:
      found = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    assert len(found) == len(expected)
    for a, b in zip(expected, found, strict=True):
      np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)
      diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
      worst = max(worst, float(np.max(diff, initial=0.0)))
  print(f"max abs difference {worst:.3g}")
  # Process 0 alone wrote: one metrics line per 3 steps, its checkpoints.
  workdir = tmp_path / "shared"
  lines = (workdir / "metrics.jsonl").read_text().splitlines()
  assert [line.split(",")[0] for line in lines] == ['{"step": 3', '{"step": 6']
  assert checkpoint_steps(workdir) == [3, 6]


@pytest.mark.parametrize(
  "environ, words",
  [
    ({"VAELLS_COORDINATOR": "h:1"}, "VAELLS_NUM_PROCESSES, VAELLS_PROCESS_ID not set"),
    (
      {"VAELLS_COORDINATOR": "h:1", "VAELLS_NUM_PROCESSES": "two"},
      "VAELLS_PROCESS_ID not set",
    ),
    (
      {
        "VAELLS_COORDINATOR": "h:1",
        "VAELLS_NUM_PROCESSES": "two",
        "VAELLS_PROCESS_ID": "0",
      },
      "VAELLS_NUM_PROCESSES must be an integer, got 'two'",
    ),
    (
      {
        "VAELLS_COORDINATOR": "h",
        "VAELLS_NUM_PROCESSES": "2",
        "VAELLS_PROCESS_ID": "0",
      },
      "HOST:PORT",
    ),
    (
      {
        "VAELLS_COORDINATOR": "h:1",
        "VAELLS_NUM_PROCESSES": "2",
        "VAELLS_PROCESS_ID": "2",
      },
      "process id must be in [0, 2), got 2",
    ),
    (
      {
        "VAELLS_COORDINATOR": "h:1",
        "VAELLS_NUM_PROCESSES": "0",
        "VAELLS_PROCESS_ID": "0",
      },
      "must be >= 1, got 0",
    ),
  ],
)
def test_bad_process_settings_are_refused(environ, words):
  from vaells_jax.training.distributed import initialize_from_env

  with pytest.raises(ValueError) as error:
    initialize_from_env(environ)
  assert words in str(error.value)


def test_no_process_settings_is_one_process():
  from vaells_jax.training.distributed import initialize_from_env

  assert initialize_from_env({"VAELLS_PROCESS_ID": " "}) is False


def test_bad_process_settings_exit_2_from_the_command_line(
  tmp_path, monkeypatch, capsys
):
  from vaells_jax import cli as run

  monkeypatch.setenv("VAELLS_NO_CACHE", "1")
  monkeypatch.setenv("VAELLS_COORDINATOR", "host0:12355")
  workdir = tmp_path / "w"
  assert run.main(["--exp=concentric", f"--workdir={workdir}"]) == 2
  assert "VAELLS_NUM_PROCESSES, VAELLS_PROCESS_ID not set" in capsys.readouterr().err
  assert not workdir.exists()
