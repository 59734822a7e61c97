"""Baselines through the runner (--model) and the comparison (--exp=compare_*)."""

import dataclasses
import json
import pathlib
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vaells_jax.api import TrainedBaseline, great_circle, load
from vaells_jax.config import Config
from vaells_jax.data.synthetic import make_concentric
from vaells_jax.runs import compare
from vaells_jax.runs.runner import train_run
from vaells_jax.training.baseline_step import init_baseline_state, make_baseline_step

ROOT = pathlib.Path(__file__).resolve().parent.parent
FAST = ["--config.hidden=(32,)", "--config.eval_ll_samples=3", "--config.log_every=3"]
SMALL = Config(
  hidden=(16,),
  batch_size=8,
  num_steps=6,
  checkpoint_every=3,
  log_every=3,
  num_pseudo=10,
)
DATA = make_concentric(seed=0)


def _run(*args):
  return subprocess.run(
    [sys.executable, str(ROOT / "experiments" / "run.py"), *args],
    capture_output=True,
    text=True,
    timeout=900,
    cwd=ROOT,
  )


@pytest.mark.parametrize("model", ["vae", "vampprior", "svae"])
def test_baseline_step_trains_and_skips_a_poisoned_batch(model):
  config = dataclasses.replace(SMALL, model=model)
  state = init_baseline_state(jax.random.PRNGKey(0), config, DATA.x_train)
  step = make_baseline_step(config, DATA.data_dim)
  batch = {
    "x": jnp.asarray(DATA.x_train[:8], jnp.float32),
    "label": jnp.asarray(DATA.labels_train[:8]),
  }
  new, metrics = step(state, batch, jax.random.PRNGKey(1))
  assert np.isfinite(float(metrics["loss"])) and int(new.step) == 1
  for name in state.params:  # every group (incl. pseudo-inputs) moves
    before = jax.tree_util.tree_leaves(state.params[name])
    after = jax.tree_util.tree_leaves(new.params[name])
    assert any(not np.array_equal(a, b) for a, b in zip(before, after, strict=True)), (
      name
    )
  bad, _ = step(
    new, {**batch, "x": batch["x"].at[0, 0].set(jnp.nan)}, jax.random.PRNGKey(2)
  )
  jax.tree_util.tree_map(np.testing.assert_array_equal, bad.params, new.params)
  assert int(bad.net_skipped) == 1 and int(bad.bad_streak) == 1


def test_vampprior_pseudo_inputs_start_as_distinct_training_points():
  config = dataclasses.replace(SMALL, model="vampprior")
  pseudo = np.asarray(
    init_baseline_state(jax.random.PRNGKey(0), config, DATA.x_train).params[
      "pseudo_inputs"
    ]
  )
  assert pseudo.shape == (10, DATA.data_dim)
  assert len({tuple(p) for p in pseudo}) == 10
  rows = {tuple(x) for x in np.asarray(DATA.x_train, np.float32)}
  assert all(tuple(p) in rows for p in pseudo)


def test_baseline_run_resumes_to_the_same_parameters(tmp_path):
  config = dataclasses.replace(SMALL, model="vae")
  whole, _ = train_run(config, DATA, tmp_path / "whole", log=lambda _: None)
  shutil.copytree(tmp_path / "whole", tmp_path / "cut")
  shutil.rmtree(tmp_path / "cut" / "checkpoints" / "6")  # stopped after step 3
  lines = []
  resumed, _ = train_run(config, DATA, tmp_path / "cut", log=lines.append, resume=True)
  assert "resuming from the checkpoint at step 3" in lines
  jax.tree_util.tree_map(np.testing.assert_array_equal, resumed.params, whole.params)


def test_great_circle_is_the_geodesic():
  rng = np.random.default_rng(0)
  z0, z1 = rng.normal(size=(2, 5, 3))
  ts = np.linspace(-0.5, 1.5, 9)
  path = np.asarray(great_circle(z0, z1, ts[:, None, None]))
  u0 = z0 / np.linalg.norm(z0, axis=-1, keepdims=True)
  u1 = z1 / np.linalg.norm(z1, axis=-1, keepdims=True)
  np.testing.assert_allclose(np.linalg.norm(path, axis=-1), 1.0, atol=1e-6)
  np.testing.assert_allclose(path[2], u0, atol=1e-6)  # t = 0
  np.testing.assert_allclose(path[6], u1, atol=1e-6)  # t = 1
  # Constant angular speed: the angle from u0 grows as t * angle(u0, u1).
  angle = np.arccos(np.clip(np.sum(u0 * u1, -1), -1, 1))
  steps = np.arccos(np.clip(np.sum(path[1:] * path[:-1], -1), -1, 1))
  np.testing.assert_allclose(
    steps, np.broadcast_to(angle * 0.25, steps.shape), atol=1e-5
  )
  same = np.asarray(great_circle(z0, 2 * z0, ts[:, None, None]))
  np.testing.assert_allclose(same, np.broadcast_to(u0, same.shape), atol=1e-6)


@pytest.fixture(scope="module")
def svae_run(tmp_path_factory):
  workdir = tmp_path_factory.mktemp("svae")
  result = _run(
    "--exp=concentric",
    "--model=svae",
    f"--workdir={workdir}",
    "--config.num_steps=6",
    *FAST,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  return workdir, result


@pytest.mark.whole_run
def test_baseline_run_outputs(svae_run):
  workdir, result = svae_run
  assert "kl" in result.stdout and "lr_psi" not in result.stdout
  summary = json.loads((workdir / "summary.json").read_text())
  assert summary["model"] == "svae" and summary["steps"] == 6
  for key in (
    "knn_class_accuracy",
    "sample_manifold_distance",
    "path_manifold_distance",
    "linear_path_manifold_distance",
    "log_likelihood",
    "elbo",
    "mse",
  ):
    assert np.isfinite(summary[key]), key
  assert summary["log_likelihood"] >= summary["elbo"]
  for name in (
    "latent_by_class.png",
    "prior_samples.png",
    "paths.png",
    "summary.md",
    "ground_truth.png",
  ):
    assert (workdir / name).exists(), name
  assert not (workdir / "orbits.png").exists()


@pytest.mark.whole_run
def test_baseline_load_round_trip(svae_run):
  workdir, _ = svae_run
  model = load(workdir)
  assert isinstance(model, TrainedBaseline) and model.psi is None
  x = model.data.x_test[:5]
  z = np.asarray(model.encode(x))
  np.testing.assert_allclose(np.linalg.norm(z, axis=-1), 1.0, atol=1e-5)
  assert model.decode(z).shape == (5, model.data.data_dim)
  key = jax.random.PRNGKey(0)
  assert model.sample_prior(key, 7).shape == (7, 2)
  assert model.sample_posterior(key, x[:3], 4).shape == (3, 4, 2)
  path = np.asarray(model.infer_path(z[:2], z[2:4], np.linspace(0, 1, 5)))
  assert path.shape == (5, 2, 2)
  np.testing.assert_allclose(path[[0, -1]], [z[:2], z[2:4]], atol=1e-5)
  with pytest.raises(ValueError, match="one prior for all classes"):
    model.sample_prior(key, 3, label=0)
  np.testing.assert_array_equal(load(workdir).encode(x), z)


def test_vae_paths_are_straight_lines():
  model = TrainedBaseline(dataclasses.replace(SMALL, model="vae"), None, DATA)
  z0, z1 = np.zeros((3, 2)), np.ones((3, 2))
  path = np.asarray(model.infer_path(z0, z1, [0.0, 0.25, 2.0]))
  np.testing.assert_allclose(path[:, 0, 0], [0.0, 0.25, 2.0])


@pytest.mark.parametrize(
  "flags, message",
  [
    (["--exp=compare_concentric", "--model=vae"], "leave out --model"),
    (["--exp=compare_concentric", "--seeds=0"], "--seeds must be >= 1"),
    (["--exp=concentric", "--config.model=vae"], "with --model"),
    (
      ["--exp=concentric", "--model=vampprior", "--config.num_pseudo=5000"],
      "num_pseudo=5000 is more than",
    ),
    (
      ["--exp=concentric", "--model=svae", "--config.latent_dim=1"],
      "needs latent_dim >= 2",
    ),
  ],
)
@pytest.mark.whole_run
def test_bad_model_flags_exit_2_and_write_nothing(tmp_path, flags, message):
  result = _run(*flags, f"--workdir={tmp_path / 'w'}")
  assert result.returncode == 2 and message in result.stderr
  assert "Traceback" not in result.stderr
  assert not (tmp_path / "w").exists()


@pytest.mark.whole_run
def test_compare_command_runs_every_model_and_resumes(tmp_path):
  flags = [
    "--exp=compare_concentric",
    "--seeds=2",
    f"--workdir={tmp_path}",
    "--config.num_steps=3",
    *FAST,
  ]
  result = _run(*flags)
  assert result.returncode == 0, result.stderr[-3000:]
  table = json.loads((tmp_path / "comparison.json").read_text())
  assert table["seeds"] == 2 and set(table["models"]) == set(compare.MODEL_NAMES)
  for model, row in table["models"].items():
    for key in (
      "sample_manifold_distance",
      "path_manifold_distance",
      "linear_path_manifold_distance",
      "knn_class_accuracy",
      "log_likelihood",
      "mse",
      "wall_time_s",
    ):
      assert len(row[key]["values"]) == 2, (model, key)
      assert row[key]["mean"] == pytest.approx(np.mean(row[key]["values"]))
    assert (
      json.loads((tmp_path / model / "seed1" / "summary.json").read_text())["model"]
      == model
    )
  # Each seed's data set is generated from its seed; the models share it.
  x = [
    np.load(tmp_path / m / "seed1" / "dataset.npz")["x_train"]
    for m in compare.MODEL_NAMES
  ]
  assert all(np.array_equal(x[0], other) for other in x[1:])
  assert not np.array_equal(
    x[0], np.load(tmp_path / "vae" / "seed0" / "dataset.npz")["x_train"]
  )
  markdown = (tmp_path / "comparison.md").read_text()
  assert "| vaells |" in markdown and "| svae |" in markdown
  for name in ("latent_embeddings.png", "prior_samples.png"):
    assert (tmp_path / name).stat().st_size > 0
  # A second call reuses the finished runs instead of training again.
  again = _run(*flags)
  assert again.returncode == 0
  assert again.stdout.count("reusing its summary.json") == 8
  assert "step" not in again.stdout.split("reusing")[0]


@pytest.mark.whole_run
def test_compare_refuses_a_folder_of_another_configuration(tmp_path):
  config = dataclasses.replace(SMALL, num_steps=2)
  compare.run_comparison(
    config, lambda c: DATA, tmp_path, seeds=1, models=("vae",), log=lambda _: None
  )
  with pytest.raises(ValueError, match="another configuration"):
    compare.run_comparison(
      dataclasses.replace(config, lr_net=0.1),
      lambda c: DATA,
      tmp_path,
      seeds=1,
      models=("vae",),
      log=lambda _: None,
    )


def test_summarise_means_and_stds():
  table = compare.summarise(
    {"vae": [{"mse": 1.0, "knn_class_accuracy": 0.5}, {"mse": 3.0}]}
  )
  assert table["vae"]["mse"] == {"mean": 2.0, "std": 1.0, "values": [1.0, 3.0]}
  assert "knn_class_accuracy" not in table["vae"]  # missing in one seed


def test_baseline_step_rotates_inputs_for_rotated_mnist():
  # The same state, batch and key: only the input rotation differs, so the
  # loss differs only if the step rotates the images it trains on.
  plain = dataclasses.replace(SMALL, model="vae")
  rotating = dataclasses.replace(plain, input_rotation=350.0)
  x = np.random.default_rng(0).uniform(size=(8, 784)).astype(np.float32)
  state = init_baseline_state(jax.random.PRNGKey(0), plain, x)
  batch = {"x": jnp.asarray(x), "label": jnp.zeros(8, jnp.int32)}
  losses = [
    float(make_baseline_step(c, 784)(state, batch, jax.random.PRNGKey(1))[1]["loss"])
    for c in (plain, rotating)
  ]
  assert np.isfinite(losses).all() and losses[0] != losses[1]
