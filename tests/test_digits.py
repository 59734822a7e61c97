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
  import scipy.linalg

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

  # benchmarks/ll_iterations.py at the run's own cap recomputes the run's
  # log-likelihood and ELBO from the saved run.
  sys.path.insert(0, str(ROOT / "benchmarks"))
  import ll_iterations

  result = ll_iterations.measure(tmp_path, config.eval_ll_points, [3, 20])
  own, longer = result["rows"]
  assert result["run_cap"] == 3 and result["points"] == config.eval_ll_points
  assert own["log_likelihood"] == pytest.approx(summary["log_likelihood"], rel=1e-9)
  assert own["elbo"] == pytest.approx(summary["elbo"], rel=1e-9)
  # A pair the longer cap stops was stopped by the shorter one too.
  for part in ("posterior", "prior"):
    assert own[f"{part}_pairs_at_cap"] >= longer[f"{part}_pairs_at_cap"]
  assert longer["log_likelihood"] != own["log_likelihood"]
  for row in result["rows"]:
    for part in ("posterior", "prior"):
      assert 0 <= row[f"{part}_pairs_at_cap"] <= 1
  with pytest.raises(ValueError, match="--points"):
    ll_iterations.measure(tmp_path, 0, [3])
  # benchmarks/ll_terms.py's parts add up to the run's ELBO and give its
  # log-likelihood; M = 4 operators move an anchor on at most 4 of the 6
  # latent dimensions.
  import ll_terms

  terms = ll_terms.measure(tmp_path)
  assert terms["points"] == config.eval_ll_points
  assert terms["log_likelihood"] == pytest.approx(summary["log_likelihood"], rel=1e-6)
  assert terms["elbo"] == pytest.approx(summary["elbo"], rel=1e-6)
  parts = terms["parts"]
  assert -np.log(2) <= parts["prior_mixture"] <= 0  # anchors_per_class=2
  for part in ("prior_residual", "prior_l1", "posterior_residual", "posterior_l1"):
    assert parts[part] <= 0, part
  assert 1 <= terms["median_prior_orbit_dim"] <= config.num_ops < config.latent_dim
  assert 0 <= terms["median_prior_tangent_share"] <= 1
  wider = ll_terms.measure(tmp_path, num_restarts=2, init_range=(-1.0, 1.0))
  assert wider["solver"] == {
    "num_restarts": 2,
    "init_range": [-1.0, 1.0],
    "inference_max_iter": config.inference_max_iter,
  }
  assert wider["parts"]["decoder"] == terms["parts"]["decoder"]  # same samples
  assert wider["parts"]["prior_residual"] != terms["parts"]["prior_residual"]
  from vaells_jax import api

  trained = api.load(tmp_path)
  mlp = dataclasses.replace(trained.config, network="mlp")
  monkeypatch.setattr(api, "load", lambda _: dataclasses.replace(trained, config=mlp))
  with pytest.raises(ValueError, match="not a VAELLS run on digits"):
    ll_iterations.measure(tmp_path, 1, [3])
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

  # Evaluated again (benchmarks/rot_regrid.py) by the same rules, the run
  # gives the numbers its evaluation gave; a rerun reads them from --out.
  sys.path.insert(0, str(ROOT / "benchmarks"))
  import rot_regrid

  out = tmp_path / "regrid.json"
  (row,) = rot_regrid.regrid([workdir], out).values()
  assert row["new"] == row["old"]
  assert row["metrics"]["reference_cosine"] == summary["reference_cosine"]

  def evaluated(*args):
    raise AssertionError("evaluated again")

  monkeypatch.setattr(image_report, "rotation_report", evaluated)
  assert rot_regrid.regrid([workdir], out)[str(workdir)] == row
  assert "| the other 1: rot | unchanged |" in rot_regrid.table({str(workdir): row})
  moved = row | {"new": row["new"] | {"rotation_gated_span_degrees": 400.0}}
  assert "→ **400° (" in rot_regrid.table({str(workdir): moved})

  # benchmarks/rot_operator_parts.py measures the run's own operators as its
  # evaluation did, and the objective at psi = L differs from itself by 0.
  import rot_operator_parts

  parts = rot_operator_parts.analyse(workdir, batches=2)
  learned, reference = parts["spans"]["learned"], parts["spans"]["reference"]
  assert learned["gated"] == summary["rotation_gated_span_degrees"]
  assert learned["quartiles"] == summary["rotation_gated_span_quartiles"]
  assert reference["gated"] == summary["reference_rotation_gated_span_degrees"]
  assert learned["cos"] == pytest.approx(summary["reference_cosine"], rel=1e-6)
  assert reference["cos"] == pytest.approx(1.0)
  assert set(parts["spans"]) == {
    "learned",
    "reference",
    *rot_operator_parts.FIT_LAGS,
    "learned_turning_part",
    *(f"mix_{s:g}" for s in rot_operator_parts.MIXES),
  }
  objective = parts["objective"]
  assert objective["learned"]["diff"] == 0 == objective["learned"]["diff_se"]
  assert all(np.isfinite(v["value"]) for v in objective.values())
  assert len(objective) == 2 + len(rot_operator_parts.MIXES) + 2 * len(
    rot_operator_parts.SCALES
  )
  runs = {workdir: parts}
  assert rot_operator_parts.table(runs).count("\n") == 1 + len(parts["spans"])
  assert "| reference | " in rot_operator_parts.objective_table(runs)

  # benchmarks/rot_prior_terms.py: its terms with samples along psi add up to
  # the objective rot_operator_parts measured through the training step.
  import rot_prior_terms

  terms = rot_prior_terms.analyse(workdir, batches=2)
  for name in ("learned", "mix_0.5", "reference"):
    assert terms["grid"][name][name]["value"] == pytest.approx(
      objective[name]["value"], rel=1e-4, abs=1e-5
    )
  reach = terms["reach"]["reference"]
  assert set(reach) == {str(a) for a in rot_prior_terms.ANGLES}
  assert all(0 <= v["long_way"] <= 1 for v in reach.values())
  runs = {workdir: terms}
  assert rot_prior_terms.table(runs).count("\n") == 1 + 9
  assert rot_prior_terms.reach_table(runs).count("\n") == 1 + 3


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


def test_rot_operator_parts_turning_part_and_mixtures():
  sys.path.insert(0, str(ROOT / "benchmarks"))
  import rot_operator_parts as parts

  damped = np.array([[-0.1, -2.0], [2.0, -0.1]])  # turns and decays
  basis = np.array([[1.0, 0.5], [0.2, 1.0]])
  op = basis @ damped @ np.linalg.inv(basis)
  turning = parts.turning_part(op)
  lam = np.linalg.eigvals(turning)
  np.testing.assert_allclose(np.sort(lam.imag), [-2.0, 2.0], atol=1e-12)
  np.testing.assert_allclose(lam.real, 0.0, atol=1e-12)
  # no decay left: a full turn (t = pi) brings every point back
  np.testing.assert_allclose(scipy.linalg.expm(np.pi * turning), np.eye(2), atol=1e-9)
  reference = np.array([[0.0, -3.0], [3.0, 0.0]])
  mixes = parts.mixtures(op, reference, (0.0, 1.0))
  np.testing.assert_allclose(mixes["mix_0"], op)
  # s = 1: op's projection onto the reference's line
  assert np.sum((op - mixes["mix_1"]) * reference) == pytest.approx(0.0, abs=1e-12)
  assert rotation.operator_cosine(mixes["mix_1"], reference) == pytest.approx(1.0)
  assert rotation.operator_cosine(-op, op) == pytest.approx(1.0)  # sign-blind


def test_rot_prior_terms_add_up_to_the_steps_log_q_and_log_p(digits):
  # benchmarks/rot_prior_terms.py splits log q and log p into fit and
  # sparsity terms; with samples along psi they are the step's own.
  sys.path.insert(0, str(ROOT / "benchmarks"))
  import rot_prior_terms

  from vaells_jax.training.step import train_step_fn

  config = dataclasses.replace(
    ROT, warmup_steps=0, alternate=True, zeta5=0.5, zeta_p=1e-6
  )
  model = Model.create(config, 784)
  state = init_state(jax.random.PRNGKey(0), config, np.zeros((1, 1, 784)), 784)
  psi = jax.random.normal(jax.random.PRNGKey(4), state.params["psi"].shape)
  state = state.replace(params={**state.params, "psi": psi})
  batch = {"x": digits.x_train[:4], "label": np.zeros(4, np.int32)}
  key, at = jax.random.PRNGKey(2), 30  # a Psi step of the schedule
  _, metrics = jax.jit(train_step_fn(model, warmup=False))(
    state.replace(step=jnp.asarray(at, jnp.int32)), batch, key
  )
  terms = jax.jit(rot_prior_terms.terms_fn(model))(
    state.params, psi, psi, batch, key, at
  )
  assert float(terms["p_l1"]) > 0.01 and float(terms["p_fit"]) > 1e-4
  np.testing.assert_allclose(
    -float(terms["q_fit"] + terms["q_l1"]), float(metrics["log_q"]), rtol=1e-5
  )
  np.testing.assert_allclose(
    -float(terms["p_fit"] + terms["p_l1"]), float(metrics["log_p"]), rtol=1e-5
  )
  # Samples along another operator: the fit terms are no longer ~0 at psi.
  other = jnp.flip(psi, axis=-1)
  moved = jax.jit(rot_prior_terms.terms_fn(model))(
    state.params, other, psi, batch, key, at
  )
  assert float(moved["travel"]) != pytest.approx(float(terms["travel"]))


def test_rot_levers_change_one_setting_each_and_tabulate(tmp_path):
  sys.path.insert(0, str(ROOT / "benchmarks"))
  import rot_levers

  from vaells_jax.config import override
  from vaells_jax.experiments import rot_mnist

  base = rot_mnist.get_config("cpu")
  for lever, flags in rot_levers.LEVERS.items():
    pairs = dict(f.removeprefix("--config.").split("=") for f in flags)
    changed = override(base, pairs)
    differ = {k for k in vars(base) if getattr(base, k) != getattr(changed, k)}
    assert differ == set(pairs), lever
    cmd = rot_levers._command(lever, 3, tmp_path / "w", "DATA")
    assert cmd[2:] == [
      "--exp=rot_mnist",
      "--budget=cpu",
      "--data-dir=DATA",
      f"--workdir={tmp_path / 'w'}",
      "--config.seed=3",
      *flags,
    ]
  summary = {k: 1.0 for k in rot_levers.KEYS}
  for seed, span in ((0, 40.0), (1, 60.0), (2, 50.0)):
    (tmp_path / f"latent20_s{seed}").mkdir()
    row = summary | {
      "rotation_gated_span_degrees": span,
      "rotation_gated_span_quartiles": [span - 10, span + 10],
    }
    (tmp_path / f"latent20_s{seed}" / "summary.json").write_text(json.dumps(row))
  runs = [("latent20", s) for s in range(3)] + [("base", 0)]  # base: not run
  levers = rot_levers.collect(runs, tmp_path)
  assert list(levers) == ["latent20"] and len(levers["latent20"]["seeds"]) == 3
  (line,) = rot_levers.table(levers).splitlines()[2:]
  assert "40° (30°–50°); 60° (50°–70°); 50° (40°–60°) | **50°**" in line


def _fake_runs(monkeypatch, finish) -> list:
  """``rot_levers.run_all`` without processes: each start calls
  ``finish(workdir)`` and is listed (its command) in the returned list."""
  sys.path.insert(0, str(ROOT / "benchmarks"))
  import rot_levers

  started = []

  class Done:
    returncode = 0

    def poll(self):
      return 0

  def fake_start(cmd, log, core):
    started.append(cmd)
    finish(pathlib.Path(next(a for a in cmd if a.startswith("--workdir="))[10:]))
    return Done()

  monkeypatch.setattr(rot_levers, "_start", fake_start)
  monkeypatch.setattr(rot_levers.time, "sleep", lambda s: None)
  return started


def test_rot_levers_continue_a_finished_shorter_run(tmp_path, monkeypatch):
  """A longer lever resumes a copy of its shorter lever's finished run (its
  summary and figures left behind); a finished run is not started again."""
  sys.path.insert(0, str(ROOT / "benchmarks"))
  import rot_levers

  base = tmp_path / "base_s0"
  (base / "checkpoints" / "2200").mkdir(parents=True)
  for name in ("config.json", "summary.json", "summary.md", "figure.png"):
    (base / name).write_text("{}")

  def finish(workdir):
    assert sorted(p.name for p in workdir.iterdir()) == ["checkpoints", "config.json"]
    (workdir / "summary.json").write_text("{}")

  started = _fake_runs(monkeypatch, finish)
  rot_levers.run_all([("base", 0), ("base_long", 0)], tmp_path, "D", 1)
  (cmd,) = started
  assert cmd[-2:] == ["--config.num_steps=2800", "--resume"]


def test_rot_levers_longer_lever_waits_for_its_shorter_run(tmp_path, monkeypatch):
  """Two at a time, a longer lever listed before another seed's run waits
  for its shorter run of the same seed and then resumes a copy of it."""
  sys.path.insert(0, str(ROOT / "benchmarks"))
  import rot_levers

  def finish(workdir):
    workdir.mkdir(exist_ok=True)
    (workdir / "config.json").write_text("{}")
    (workdir / "summary.json").write_text("{}")

  started = _fake_runs(monkeypatch, finish)
  runs = [("base", 0), ("base_long", 0), ("base", 1)]
  rot_levers.run_all(runs, tmp_path, "D", 2)
  workdirs = [next(a for a in c if a.startswith("--workdir=")) for c in started]
  names = [pathlib.Path(w[10:]).name for w in workdirs]
  assert names == ["base_s0", "base_s1", "base_long_s0"]
  assert started[-1][-1] == "--resume"


def test_rot_levers_add_to_the_levers_measured_before(tmp_path):
  """New levers and seeds join an existing results file; a lever whose
  flags changed is refused rather than mixed."""
  sys.path.insert(0, str(ROOT / "benchmarks"))
  import rot_levers

  before = {
    "base": {"flags": [], "seeds": {"0": {"a": 1}, "1": {"a": 2}}},
    "latent20": {"flags": ["--config.latent_dim=20"], "seeds": {"0": {"a": 3}}},
  }
  found = {
    "base": {"flags": [], "seeds": {"1": {"a": 5}}},
    "psi_cap": {"flags": ["--x=1"], "seeds": {"0": {"a": 4}}},
  }
  merged = rot_levers.merge(before, found)
  assert list(merged) == ["base", "latent20", "psi_cap"]
  assert merged["base"]["seeds"] == {"0": {"a": 1}, "1": {"a": 5}}
  assert before["base"]["seeds"]["1"] == {"a": 2}  # the input is left as it was
  with pytest.raises(SystemExit, match="latent20"):
    rot_levers.merge(before, {"latent20": {"flags": [], "seeds": {}}})


def test_nat_seeds_runs_each_seed_once_and_tabulates(tmp_path, monkeypatch):
  """Each seed runs the CPU-budget command with the extra config arguments
  (an interrupted one resumes, a finished one is read), the results keep
  what the docs' table renders, and a non-config argument is refused."""
  sys.path.insert(0, str(ROOT / "benchmarks"))
  import docs_numbers
  import nat_seeds

  (tmp_path / "nat_s1").mkdir()
  (tmp_path / "nat_s1" / "config.json").write_text("{}")  # stopped: resumes

  def finish(workdir):
    workdir.mkdir(exist_ok=True)
    seed = int(workdir.name.removeprefix("nat_s"))
    summary = {k: 1.0 for k in nat_seeds.KEYS} | {
      "mse": 0.02 + seed / 1000,
      "log_likelihood": -3000.0 - seed,
      "operator_reach_rms": [0.1, 0.2],
      "operator_reach_at_end": [0.8, 0.9],
      "psi_rejected_steps": seed,
      "psi_attempted_steps": 300,
      "log_likelihood_points": 100,
      "log_likelihood_samples": 20,
    }
    (workdir / "summary.json").write_text(json.dumps(summary))

  started = _fake_runs(monkeypatch, finish)
  out = tmp_path / "seeds.json"
  data_dir = ROOT.parent / "shared" / "data" / "mnist-full"
  argv = ["--seeds=0-2", f"--root={tmp_path}", f"--out={out}", f"--data-dir={data_dir}"]
  result = nat_seeds.main([*argv, "--config.num_ops=8"])
  assert [c[2:] for c in started] == [
    [
      "--exp=nat_mnist",
      "--budget=cpu",
      f"--data-dir={data_dir}",
      f"--workdir={tmp_path / f'nat_s{s}'}",
      f"--config.seed={s}",
      "--config.num_ops=8",
      *["--resume"] * (s == 1),
    ]
    for s in range(3)
  ]
  assert result["run"] == (
    "python experiments/run.py --exp=nat_mnist --budget=cpu "
    "--data-dir=../shared/data/mnist-full --config.seed=S --config.num_ops=8"
  )
  assert list(result["seeds"]) == ["0", "1", "2"]
  nat_seeds.main(argv)  # all finished: nothing starts again
  assert len(started) == 3
  with pytest.raises(SystemExit):
    nat_seeds.main([*argv, "--num_ops=8"])

  monkeypatch.setattr(docs_numbers, "RESULTS", tmp_path)
  lines = docs_numbers.nat_seeds_table("seeds").strip().splitlines()
  assert lines[0].startswith("| seed | MSE | log-likelihood (100 × 20) |")
  assert lines[3].startswith("| 1 | 0.0210 | −3 001 |")
  assert lines[-1].startswith(
    "| median (lowest – highest) | **0.0210 (0.0200 – 0.0220)** | "
    "**−3 001 (−3 002 – −3 000)** |"
  )
  assert "| 0.15 (0.10 – 0.20) | 85% (80% – 90%) | 1 of 300 |" in lines[-1]
  medians = docs_numbers.nat_seeds_medians("seeds").strip().splitlines()
  assert medians[2] == lines[-1].replace(
    "median (lowest – highest)", "`M = 2`, seeds 0–2"
  )
