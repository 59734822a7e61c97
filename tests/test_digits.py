"""Rotated / natural MNIST: data sets, the conv step with rotations, the image
report's measurements, and smoke runs of both experiments on real digits
(``conftest.mnist_dir``: the committed 1 000, or VAELLS_MNIST_DIR's)."""

import dataclasses
import json
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from conftest import mnist_dir

from vaells_jax.config import Config
from vaells_jax.data import augment, mnist
from vaells_jax.evaluation import image_report, rotation
from vaells_jax.models.vaells import Model
from vaells_jax.runs.runner import train_and_evaluate
from vaells_jax.training.step import init_state, make_train_step

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def digits():
  return mnist.load_mnist(mnist_dir())


def _small(data: mnist.MnistData, num_train=300, num_test=120):
  return dataclasses.replace(
    data,
    x_train=data.x_train[:num_train],
    y_train=data.y_train[:num_train],
    x_test=data.x_test[:num_test],
    y_test=data.y_test[:num_test],
  )


def test_digits_experiment_anchors(digits):
  nat = mnist.digits_experiment("nat_mnist", digits, seed=0, anchors_per_class=8)
  assert nat.anchors.shape == (10, 8, 784) and not nat.has_ground_truth
  for c in range(10):  # each class's anchors are training digits of that class
    rows = [np.flatnonzero((digits.x_train == a).all(axis=1)) for a in nat.anchors[c]]
    assert all(len(r) and digits.y_train[r[0]] == c for r in rows)
  rot = mnist.digits_experiment("rot_mnist", digits, seed=0, anchors_per_class=10)
  first = digits.x_train[np.flatnonzero(digits.y_train == 3)[0]]
  np.testing.assert_allclose(rot.anchors[3, 0], first, atol=1e-6)  # 0 degrees
  # Computed on the host (device-independent, for the run's data digest),
  # they are the rotation the training step computes on the device.
  np.testing.assert_allclose(
    rot.anchors[3],
    np.asarray(augment.rotated_copies(first[None], 10))[0],
    atol=1e-5,
  )
  with pytest.raises(ValueError, match="Unknown"):
    mnist.digits_experiment("svhn", digits, seed=0, anchors_per_class=2)


ROT = Config(
  network="conv",
  latent_dim=4,
  num_ops=1,
  batch_size=4,
  input_rotation=350.0,
  rotation_anchors=4,
  learn_anchors=False,
  closest_anchor=True,
  latent_scale=10.0,
  inference_max_iter=3,
  zeta1=1.0,
  gamma=1e-3,
)


def test_rotation_anchors_are_the_inputs_rotated(digits):
  model = Model.create(ROT, 784)
  state = init_state(jax.random.PRNGKey(0), ROT, np.zeros((1, 1, 784)), 784)
  x = digits.x_train[:3]
  codes = model.encode_anchors(state.params, {"x": x, "label": np.zeros(3, int)})
  assert codes.shape == (3, 4, 4)
  expect = model.encode(
    state.params,
    augment.rotate_images(
      np.repeat(x, 4, axis=0), np.tile([0.0, 90.0, 180.0, 270.0], 3)
    ),
  )
  np.testing.assert_allclose(codes, expect.reshape(3, 4, 4), rtol=1e-5, atol=1e-6)
  presented = model.present(jnp.asarray(x), jax.random.PRNGKey(1))
  assert not np.allclose(presented, x)  # rotated by random angles


def test_conv_rotation_step_trains_networks_and_psi_only(digits):
  config = dataclasses.replace(ROT, warmup_steps=1)
  model = Model.create(config, 784)
  anchors = np.zeros((1, 1, 784), np.float32)
  state = init_state(jax.random.PRNGKey(0), config, anchors, 784)
  step = make_train_step(model)
  batch = {"x": digits.x_train[:4], "label": np.zeros(4, np.int32)}
  for i in range(3):  # warm-up step, then steps with inference
    new, metrics = step(state, batch, jax.random.PRNGKey(i))
    assert np.isfinite(float(metrics["loss"]))
    if i:
      assert float(metrics["inference_iters"]) > 0
    state = new
  # The schedule never recompiles: one warm-up and one training program.
  assert [program._cache_size() for program in step.programs] == [1, 1]
  np.testing.assert_array_equal(state.params["anchors"], anchors)


def test_matched_angles_recover_rotations(digits):
  digit = digits.x_test[0]
  angles = np.array([0.0, 40.0, 120.0, 250.0, 355.0])
  frames = np.asarray(augment.rotate_images(np.repeat(digit[None], 5, axis=0), angles))
  found = rotation.matched_angles(frames, digit)
  assert np.all(np.abs((found - angles + 180) % 360 - 180) <= 1.0)


def test_rotation_path_stats():
  coeffs = np.linspace(-1, 1, 13)
  rising = (np.arange(13) * 25.0) % 360  # 300 degrees, wrapping once
  _, rise, rho = rotation.rotation_path_stats(coeffs, rising)
  assert rise == pytest.approx(300.0) and rho == pytest.approx(1.0)
  _, rise, rho = rotation.rotation_path_stats(coeffs, rising[::-1])
  assert rise == pytest.approx(300.0) and rho == pytest.approx(1.0)  # oriented
  jumps = np.asarray([0, 10, 20, 100, 110, 120, 130, 140, 150, 150, 150, 150, 150.0])
  _, rise, _ = rotation.rotation_path_stats(coeffs, jumps)
  assert rise == pytest.approx(50.0)  # the 80-degree jump breaks the run
  _, rise, _ = rotation.rotation_path_stats(coeffs, np.full(13, 90.0))
  assert rise == 0.0


def _generator(*blocks):
  """Block-diagonal ``[d, d]`` from ``(re, im)`` pairs: ``[[re, -im], [im, re]]``."""
  psi = np.zeros((2 * len(blocks),) * 2)
  for k, (re, im) in enumerate(blocks):
    psi[2 * k : 2 * k + 2, 2 * k : 2 * k + 2] = [[re, -im], [im, re]]
  return psi


def test_path_span_is_a_half_turn_of_the_orbits_slowest_rotation():
  # An orbit with its fundamental (0.2) and a stronger 2nd harmonic (0.4); a
  # slower rotation the starts barely have (0.05) and a decaying pair (0.01).
  psi = _generator((0.0, 0.2), (0.0, 0.4), (0.0, 0.05), (-0.3, 0.01))
  phases = np.random.default_rng(0).uniform(0, 2 * np.pi, (9, 4))
  starts = np.stack([np.cos(phases), np.sin(phases)], -1).reshape(9, 8)
  starts = starts * np.repeat([1.0, 3.0, 0.1, 5.0], 2)  # amplitude of each pair
  assert rotation.path_span(psi, starts, cap=100.0) == pytest.approx(np.pi / 0.2)
  # Not the fastest rotation (the former rule), and the cap holds.
  assert rotation.path_span(psi, starts, cap=3.0) == 3.0
  assert rotation.path_span(psi[2:6, 2:6], starts[:, 2:6], 100.0) == (
    pytest.approx(np.pi / 0.4)
  )
  # Without a rotation: the fastest growth or decay.
  assert rotation.path_span(np.diag([0.5, -2.0]), starts[:, :2], 100.0) == (
    pytest.approx(np.pi / 2.0)
  )


def test_gated_path_grid_steps_by_the_fastest_rotation():
  # Same orbit: the span is a half turn of the fundamental (0.2), the frames
  # a 36th of a half turn of the 2nd harmonic (0.4) apart: 72 a side.
  psi = _generator((0.0, 0.2), (0.0, 0.4), (0.0, 0.05), (-0.3, 0.01))
  phases = np.random.default_rng(0).uniform(0, 2 * np.pi, (9, 4))
  starts = np.stack([np.cos(phases), np.sin(phases)], -1).reshape(9, 8)
  starts = starts * np.repeat([1.0, 3.0, 0.1, 5.0], 2)
  ts = rotation.gated_path_grid(psi, starts, cap=100.0)
  assert len(ts) == 2 * 72 + 1 and ts[72] == 0.0
  np.testing.assert_allclose(np.diff(ts), np.pi / 0.4 / 36)
  assert ts[-1] == pytest.approx(np.pi / 0.2)
  # One rotation: 36 frames a side over its half turn (73 in all).
  one = rotation.gated_path_grid(psi[:2, :2], starts[:, :2], cap=100.0)
  assert len(one) == 73 and one[-1] == pytest.approx(np.pi / 0.2)
  # A fast rotation 40x the slow one: at most GATED_SIDE_FRAMES a side, the
  # step still set by the fast one; the cap bounds the range.
  fast = _generator((0.0, 0.01), (0.0, 0.4))
  both = starts[:, :4]
  ts = rotation.gated_path_grid(fast, both, cap=1e6)
  assert len(ts) == 2 * rotation.GATED_SIDE_FRAMES + 1
  np.testing.assert_allclose(np.diff(ts), np.pi / 0.4 / 36)
  assert rotation.gated_path_grid(fast, both, cap=3.0)[-1] == pytest.approx(3.0)


def test_gated_path_grid_steps_by_the_rotation_that_moves_the_starts():
  # The starts lie mostly in a plane turned at 0.0012 (amplitude 1); a plane
  # turned at 0.05 holds a fifth of that (below SPAN_MIN_SHARE of the
  # largest share) but moves them ~8x faster. Its half turn sets the step:
  # with the slow plane's step each frame would turn it ~210 degrees.
  psi = _generator((0.0, 0.0012), (0.0, 0.05))
  phases = np.random.default_rng(1).uniform(0, 2 * np.pi, (9, 2))
  starts = np.stack([np.cos(phases), np.sin(phases)], -1).reshape(9, 4)
  starts = starts * np.repeat([1.0, 0.2], 2)
  ts = rotation.gated_path_grid(psi, starts, cap=1e6)
  np.testing.assert_allclose(np.diff(ts), np.pi / 0.05 / 36)
  assert len(ts) == 2 * rotation.GATED_SIDE_FRAMES + 1
  # The span still follows the slowest rotation with a large share.
  assert rotation.path_span(psi, starts, cap=1e6) == pytest.approx(np.pi / 0.0012)
  # A fast plane with a negligible speed (share 1e-3, 4x the rate) does not.
  tiny = _generator((0.0, 0.05), (0.0, 0.2))
  small = starts * np.repeat([1.0, 1e-3 / 0.2], 2)
  np.testing.assert_allclose(
    np.diff(rotation.gated_path_grid(tiny, small, 1e6)), np.pi / 0.05 / 36
  )


def test_fit_orbit_operator_recovers_the_generator_of_closed_orbits():

  w = 2 * np.pi / 36  # one step = 10 degrees; a harmonic at 2 w
  psi = _generator((0.0, w), (0.0, 2 * w))
  rng = np.random.default_rng(1)
  starts = rng.normal(size=(20, 4))
  orbits = np.stack([starts @ scipy.linalg.expm(j * psi).T for j in range(36)], 1)
  fitted = np.asarray(rotation.fit_orbit_operator(orbits))
  np.testing.assert_allclose(fitted, psi, atol=2e-3)


@pytest.mark.whole_run
def test_nat_mnist_smoke_run(digits, tmp_path, monkeypatch):
  monkeypatch.setattr(image_report, "CLASSIFIER_STEPS", 30)
  data = mnist.digits_experiment(
    "nat_mnist", _small(digits), seed=0, anchors_per_class=2
  )
  sys.path.insert(0, str(ROOT))
  from vaells_jax.experiments import nat_mnist

  config = dataclasses.replace(
    nat_mnist.get_config("cpu"),
    num_steps=6,
    warmup_steps=3,
    net_steps=1,
    psi_steps=1,
    inference_max_iter=3,
    eval_ll_points=4,
    eval_ll_samples=3,
    log_every=3,
    eval_rotation_digits=30,
  )
  _, summary = train_and_evaluate(config, data, tmp_path, log=lambda _: None)
  written = json.loads((tmp_path / "summary.json").read_text())
  assert written["operator_reach_digits"] == 30
  for key in ("rms", "changed_fraction", "coefficient", "at_end"):
    values = written[f"operator_reach_{key}"]
    assert len(values) == config.num_ops, key
    assert all(np.isfinite(v) and v >= 0 for v in values), key
  assert all(f <= 2 for f in written["operator_reach_changed_fraction"])
  assert all(f <= 1 for f in written["operator_reach_at_end"])
  assert 0 <= written["operator_reach_start_class_kept"] <= 1
  assert written["operator_reach_eval_time_s"] > 0
  assert 0 < written["log_likelihood_eval_time_s"] < written["eval_time_s"]
  table = [
    row
    for row in (tmp_path / "summary.md").read_text().splitlines()
    if row.startswith("|")
  ]
  assert any(row.startswith("| operator_reach_rms |") for row in table)
  assert all(row.count("|") == 5 for row in table)  # four columns in every row
  for key in (
    "log_likelihood",
    "elbo",
    "mse",
    "knn_class_accuracy",
    "class_consistency",
    "classifier_test_accuracy",
  ):
    assert np.isfinite(summary[key]), key
  assert summary["log_likelihood"] >= summary["elbo"]

  for name in (
    "latent_by_class.png",
    "posterior_samples.png",
    "operator_path_3.png",
    "summary.md",
  ):
    assert (tmp_path / name).exists(), name


@pytest.mark.whole_run
def test_nat_mnist_comparison_smoke_run(digits, tmp_path, monkeypatch):
  from vaells_jax.runs import compare

  monkeypatch.setattr(image_report, "CLASSIFIER_STEPS", 30)
  sys.path.insert(0, str(ROOT))
  from vaells_jax.experiments import nat_mnist

  config = dataclasses.replace(
    nat_mnist.get_config("cpu"),
    num_steps=3,
    warmup_steps=2,
    net_steps=1,
    psi_steps=1,
    inference_max_iter=2,
    eval_ll_points=4,
    eval_ll_samples=3,
    num_pseudo=20,
    log_every=3,
  )
  made = []

  def make_data(c):
    made.append(c.seed)
    return mnist.digits_experiment(
      "nat_mnist", _small(digits), seed=c.seed, anchors_per_class=2
    )

  # VAELLS's nat_mnist run is smoke-tested above; the baselines' image
  # report (Gaussian and vMF posteriors, conv networks) here.
  models = ("vampprior", "svae")
  result = compare.run_comparison(
    config, make_data, tmp_path, seeds=1, models=models, log=lambda _: None
  )
  assert made == [0]
  for model in models:
    row = result["models"][model]
    for key in ("log_likelihood", "mse", "knn_class_accuracy", "class_consistency"):
      assert np.isfinite(row[key]["mean"]), (model, key)
    assert (tmp_path / model / "seed0" / "posterior_samples.png").exists()
  assert (tmp_path / "prior_samples.png").exists()
  assert "sample dist." not in result["markdown_table"]  # no true manifold


@pytest.mark.whole_run
def test_rot_mnist_command_line_smoke(tmp_path, monkeypatch):
  workdir = tmp_path / "rot"
  result = subprocess.run(
    [
      sys.executable,
      str(ROOT / "experiments" / "run.py"),
      "--exp=rot_mnist",
      "--budget=cpu",
      f"--data-dir={mnist_dir()}",
      f"--workdir={workdir}",
      "--config.num_steps=4",
      "--config.warmup_steps=2",
      "--config.net_steps=1",
      "--config.psi_steps=1",
      "--config.inference_max_iter=2",
      "--config.eval_ll_points=3",
      "--config.eval_ll_samples=2",
      "--config.log_every=2",
      "--config.eval_rotation_digits=30",
    ],
    capture_output=True,
    text=True,
    timeout=900,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  summary = json.loads((workdir / "summary.json").read_text())
  assert summary["steps"] == 4
  assert summary["rotation_gated_digits"] == 30
  q1, q3 = summary["rotation_gated_span_quartiles"]
  assert 0 <= q1 <= summary["rotation_gated_span_degrees"] <= q3
  assert len(summary["rotation_gated_span_per_class"]) == 10
  for key in ("correlation_gate_only", "class_gate_only"):  # each gate alone
    assert summary[f"rotation_{key}_span_degrees"] >= 0
  assert 0 < summary["rotation_gate_level"] <= 1
  assert summary["reference_rotation_gated_span_degrees"] >= 0
  assert summary["ungated_rotation_rise_degrees"] >= 0
  assert "rotation_span_degrees" not in summary
  assert 0 <= summary["reference_cosine"] <= 1
  headline = (workdir / "summary.md").read_text()
  assert "| rotation_gated_span_degrees |" in headline and "HEADLINE" in headline
  assert (workdir / "rotation_fidelity.png").exists()
  # The paper's figure 4: random test digits along the operator.
  assert (workdir / "rotation_grid.png").exists()
  assert "rotation_grid.png" in headline


def test_mnist_without_a_source_is_a_clear_error(tmp_path, monkeypatch, capsys):
  sys.path.insert(0, str(ROOT))
  from vaells_jax import cli as run

  monkeypatch.setattr(mnist, "_internet_reachable", lambda *a, **k: False)
  monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path / "tfds"))
  code = run.main(["--exp=nat_mnist", f"--workdir={tmp_path / 'w'}"])
  assert code == 2
  assert "--data-dir" in capsys.readouterr().err
  assert not (tmp_path / "w").exists()
  code = run.main(
    [
      "--exp=nat_mnist",
      f"--data-dir={tmp_path / 'none'}",
      f"--workdir={tmp_path / 'w'}",
    ]
  )
  assert code == 2 and not (tmp_path / "w").exists()
