"""benchmarks/device_run.sh, the device machine's whole run, on the CPU: a
call cut short by its time stops after a step with a checkpoint and sends
back only that checkpoint; the next call, given that archive, resumes there
and finishes with the evaluation."""

import json
import os
import pathlib
import subprocess
import sys
import tarfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _call(out, flags, **env):
  out.mkdir()
  env = (
    os.environ
    | {"OUT": str(out), "PYTHON": sys.executable, "JAX_PLATFORMS": "cpu"}
    | env
  )
  done = subprocess.run(
    [
      "bash",
      str(ROOT / "benchmarks/device_run.sh"),
      "--exp=concentric",
      "--config.population=1",
      *flags,
    ],
    env=env,
    capture_output=True,
    text=True,
    timeout=600,
  )
  call = json.loads((out / "call.json").read_text())
  with tarfile.open(out / "run.tgz") as archive:
    names = archive.getnames()
  return done, call, names


def _checkpoints(names):
  return sorted({n.split("/")[2] for n in names if n.startswith("./checkpoints/")})


@pytest.mark.whole_run
def test_device_run_stops_with_a_checkpoint_and_resumes_in_the_next_call(tmp_path):
  work = str(tmp_path / "work")
  # Far more steps than 30 s allow, and a checkpoint every 50 steps: the
  # archive holds the last one only.
  flags = ["--config.num_steps=10000000", "--config.checkpoint_every=50"]
  done, call, names = _call(tmp_path / "a", flags, RUN_SECONDS="30", WORK=work)
  assert call["exit_status"] == 143, done.stdout + done.stderr
  assert "SIGTERM received: stopped after step" in done.stdout + done.stderr
  reached = call["reached_step"]
  assert call["from_step"] == 0 and reached >= 1 and not call["evaluated"]
  assert _checkpoints(names) == [str(reached)]
  assert "./config.json" in names and "./dataset.npz" not in names

  flags = [f"--config.num_steps={reached + 5}"]
  done, call, names = _call(
    tmp_path / "b", flags, RUN_TGZ=str(tmp_path / "a/run.tgz"), WORK=work
  )
  assert call["exit_status"] == 0, done.stdout + done.stderr
  assert f"resuming from the checkpoint at step {reached}" in done.stdout
  assert (call["from_step"], call["reached_step"]) == (reached, reached + 5)
  assert call["evaluated"] and call["flags"][-1] == "--resume"
  assert _checkpoints(names) == [str(reached + 5)] and "./summary.json" in names
  assert call["seconds"] > 0 and "jaxlib" in call["environment"]
