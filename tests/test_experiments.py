"""Tiny-budget runs of the experiments through the command line; load() round trip."""

import dataclasses
import json
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vaells_jax import transport
from vaells_jax.api import load
from vaells_jax.evaluation import synthetic_report as report

# Every test here starts the command line or a benchmark script.
pytestmark = pytest.mark.whole_run

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUTPUTS = (
  "config.json",
  "dataset.npz",
  "metrics.jsonl",
  "checkpoints",
  "summary.json",
  "summary.md",
  "latent_by_class.png",
  "orbits.png",
  "prior_samples.png",
  "paths.png",
  "posterior_contour.png",
  "operator_magnitudes.png",
  "ground_truth.png",
  "orbit_traversal.png",
)
SUMMARY_KEYS = (
  "steps",
  "wall_time_s",
  "psi_rejected_steps",
  "knn_class_accuracy",
  "sample_manifold_distance",
  "orbit_manifold_distance",
  "path_manifold_distance",
  "linear_path_manifold_distance",
  "orbit_coverage",
)


def _run(*args):
  return subprocess.run(
    [sys.executable, str(ROOT / "experiments" / "run.py"), *args],
    capture_output=True,
    text=True,
    timeout=600,
    cwd=ROOT,
  )


@pytest.fixture(scope="module")
def concentric_run(tmp_path_factory):
  workdir = tmp_path_factory.mktemp("concentric")
  result = _run(
    "--exp=concentric",
    f"--workdir={workdir}",
    "--config.num_steps=6",
    "--config.log_every=3",
    "--config.hidden=(32,)",
  )
  assert result.returncode == 0, result.stderr[-3000:]
  return workdir, result


def test_concentric_outputs(concentric_run):
  workdir, result = concentric_run
  for name in OUTPUTS:
    assert (workdir / name).stat().st_size > 0, name
  summary = json.loads((workdir / "summary.json").read_text())
  for key in SUMMARY_KEYS:
    assert np.isfinite(summary[key]), key
  assert summary["steps"] == 6 and 0 <= summary["orbit_coverage"] <= 1
  lines = (workdir / "metrics.jsonl").read_text().splitlines()
  # The population trains to step 3 (select_at=0.5); metrics.jsonl holds the
  # kept member's steps after it.
  assert [json.loads(line)["step"] for line in lines] == [6]
  assert "step      3" in result.stdout and "lr_psi" in result.stdout


def test_load_round_trip(concentric_run):
  workdir, _ = concentric_run
  model = load(workdir)
  data = model.data
  assert model.config.num_steps == 6 and model.config.hidden == (32,)
  z = model.encode(data.x_test[:5])
  assert z.shape == (5, 2)
  assert model.decode(z).shape == (5, data.data_dim)
  assert model.anchors_latent.shape == (2, 3, 2)
  key = jax.random.PRNGKey(0)
  assert model.sample_prior(key, 7).shape == (7, 2)
  assert model.sample_prior(key, 7, label=1).shape == (7, 2)
  assert model.sample_posterior(key, data.x_test[:3], 4).shape == (3, 4, 2)
  path = model.infer_path(z[:2], z[2:4], np.linspace(0, 1, 5))
  assert path.shape == (5, 2, 2)
  np.testing.assert_allclose(path[0], z[:2], rtol=1e-5, atol=1e-6)
  with pytest.raises(ValueError, match="label"):
    model.sample_prior(key, 3, label=2)
  # A point 1.25 turns along a spiral orbit: the config's starts stop at a
  # local minimum a turn short; restarts spread over the turns (the report's)
  # arrive.
  spiral = dataclasses.replace(
    model,
    params={
      **model.params,
      "psi": jnp.asarray(
        [[[0.01, -0.1], [0.1, 0.01]]] + [[[0.0, 0.0], [0.0, 0.0]]] * 3
      ),
    },
  )
  z0 = jnp.asarray([[1.0, 0.0]])
  z1 = transport(spiral.psi, jnp.asarray([2 * np.pi * 1.25 / 0.1, 0, 0, 0]), z0)
  short = spiral.infer_path(z0, z1, [1.0])[-1]
  assert np.linalg.norm(short - z1) > 0.5
  num_restarts, init_range = report.spread_restarts(spiral.psi)
  reached = spiral.infer_path(
    z0, z1, [1.0], num_restarts=num_restarts, init_range=init_range
  )[-1]
  np.testing.assert_allclose(reached, z1, atol=1e-3)
  # The loaded encoder is the trained one: same codes as a second load.
  np.testing.assert_array_equal(load(workdir).encode(data.x_test[:5]), z)


def test_swiss_roll_runs(tmp_path):
  result = _run(
    "--exp=swiss_roll",
    f"--workdir={tmp_path}",
    "--config.num_steps=4",
    "--config.log_every=2",
    "--config.hidden=(32,)",
  )
  assert result.returncode == 0, result.stderr[-3000:]
  summary = json.loads((tmp_path / "summary.json").read_text())
  assert summary["steps"] == 4 and (tmp_path / "orbits.png").exists()


def test_bad_override_is_a_clear_error(tmp_path):
  result = _run("--exp=concentric", f"--workdir={tmp_path}", "--config.num_step=3")
  assert result.returncode == 2
  assert "Did you mean 'num_steps'" in result.stderr
  assert "Traceback" not in result.stderr
  assert not (tmp_path / "config.json").exists()
