"""vaells_jax.fit on a user's own arrays: outputs, the returned model, bad input."""

import dataclasses
import json
import os
import subprocess
import sys
import types

import jax
import numpy as np
import pytest

import vaells_jax
from vaells_jax.config import Config

CONFIG = Config(
  num_steps=4, batch_size=8, hidden=(16,), num_ops=2, inference_max_iter=10, log_every=2
)


def _two_rings(n=40, dim=5, seed=0):
  rng = np.random.default_rng(seed)
  labels = np.arange(n) % 2
  angle = rng.uniform(0, 2 * np.pi, n)
  pos = (0.5 + 0.5 * labels)[:, None] * np.c_[np.cos(angle), np.sin(angle)]
  return pos @ rng.uniform(-1, 1, (dim, 2)).T, labels


@pytest.mark.whole_run
def test_fit_with_labels_returns_a_model_and_writes_outputs(tmp_path):
  x, labels = _two_rings()
  model = vaells_jax.fit(x, labels, config=CONFIG, workdir=tmp_path, log=lambda _: None)
  assert model.anchors_latent.shape == (2, 3, 2)
  assert model.encode(x[:3]).shape == (3, 2)
  summary = json.loads((tmp_path / "summary.json").read_text())
  assert summary["steps"] == 4 and 0 <= summary["knn_class_accuracy"] <= 1
  assert "sample_manifold_distance" not in summary  # no ground truth known
  assert (tmp_path / "latent_by_class.png").exists()
  assert not (tmp_path / "ground_truth.png").exists()
  loaded = vaells_jax.load(tmp_path)
  np.testing.assert_array_equal(loaded.encode(x[:3]), model.encode(x[:3]))
  # Anchors were drawn from the training points of their own class.
  anchors = np.asarray(loaded.data.anchors)
  for c in range(2):
    train = loaded.data.x_train[loaded.data.labels_train == c]
    assert all(np.any(np.all(np.isclose(train, a), axis=1)) for a in anchors[c])


@pytest.mark.whole_run
def test_fit_without_labels_and_with_explicit_anchors(tmp_path):
  x, _ = _two_rings()
  model = vaells_jax.fit(
    x, anchors=x[:4], config=CONFIG, workdir=tmp_path, log=lambda _: None
  )
  assert model.anchors_latent.shape == (1, 4, 2)


def _configs_trained(monkeypatch, verdict: str, coverage: float) -> list:
  """The configs fit trains from now on (in the list returned), each try
  mocked to end with ``verdict`` and ``latent_coverage``, nothing evaluated."""
  from vaells_jax.runs import runner

  seen = []
  said = types.SimpleNamespace(
    verdict={"verdict": verdict, "signals": {"latent_coverage": coverage}}
  )
  monkeypatch.setattr(
    runner,
    "train_and_evaluate",
    lambda config, *a, **k: (seen.append(config) or said, None),
  )
  monkeypatch.setattr(runner, "evaluate_run", lambda *a: None)
  return seen


def test_fit_without_a_config_trains_the_population(tmp_path, monkeypatch):
  from vaells_jax.runs import fit as fit_module

  seen = _configs_trained(monkeypatch, "learned", 1.0)
  x, labels = _two_rings()
  vaells_jax.fit(x, labels, workdir=tmp_path)
  assert seen == [fit_module.FIT_CONFIG]
  assert fit_module.FIT_CONFIG.population == fit_module.FIT_POPULATION > 1


def test_fit_picks_its_defaults_from_the_data(tmp_path, monkeypatch):
  from vaells_jax.runs import fit as fit_module

  seen = _configs_trained(monkeypatch, "not learned", 0.0)
  monkeypatch.setattr(fit_module, "_warm_start", lambda plan, *a: plan)
  x, labels = _two_rings(n=120)
  vaells_jax.fit(x[labels == 0], workdir=tmp_path / "one")  # one curve, one try
  vaells_jax.fit(x, np.zeros(len(x), int), workdir=tmp_path / "zeros")
  assert seen == [fit_module.curve_config()] * 2
  (tmp_path / "two").mkdir()  # where the mocked tries leave tries.json
  vaells_jax.fit(x, labels, workdir=tmp_path / "two")  # up to FIT_TRIES tries
  assert len(seen[2:]) == fit_module.FIT_TRIES and seen[2] == fit_module.FIT_CONFIG
  retry = dataclasses.replace(seen[2], seed=1, **fit_module.FIT_RETRY_CHANGES)
  assert seen[3] == retry


def test_curves_given_without_labels_train_as_classes(tmp_path, monkeypatch):
  from vaells_jax.runs import fit as fit_module
  from vaells_jax.runs import runner

  trained = []
  said = types.SimpleNamespace(
    verdict={"verdict": "learned", "signals": {"latent_coverage": 1.0}}
  )
  monkeypatch.setattr(
    runner,
    "train_and_evaluate",
    lambda config, data, *a, **k: (trained.append((config, data)) or said, None),
  )
  monkeypatch.setattr(runner, "evaluate_run", lambda *a: None)
  rng = np.random.default_rng(0)  # rings of radius 1 and 2 in 10-D, noise 0.01
  labels = np.arange(200) % 2
  angle = rng.uniform(0, 2 * np.pi, 200)
  pos = (1.0 + labels)[:, None] * np.c_[np.cos(angle), np.sin(angle)]
  x = pos @ rng.uniform(-1, 1, (10, 2)).T + 0.01 * rng.normal(size=(200, 10))
  lines = []
  vaells_jax.fit(x, workdir=tmp_path, log=lines.append)
  ((config, data),) = trained
  assert config == fit_module.FIT_CONFIG  # several classes' defaults
  assert "2 separate pieces" in lines[0]
  counts = np.bincount(np.r_[data.labels_train, data.labels_test])
  assert counts.tolist() == [100, 100]  # a ring each (separate_pieces's tests)


def test_a_one_class_fit_trains_the_operators_from_the_warm_start(tmp_path):
  from vaells_jax.models import saved_networks
  from vaells_jax.runs.fit import WARM_START_NAME, curve_config

  rng = np.random.default_rng(0)
  t = rng.uniform(-1, 1, 60)  # an open curve that bends both ways, in 6-D
  x = np.c_[t, np.sin(3 * t)] @ rng.uniform(-1, 1, (6, 2)).T
  config = dataclasses.replace(
    curve_config(), num_steps=4, batch_size=8, hidden=(64,), log_every=2
  )
  model = vaells_jax.fit(x, config=config, workdir=tmp_path, log=lambda _: None)
  networks = {k: model.params[k] for k in ("encoder", "decoder")}
  start = saved_networks.read(
    tmp_path / WARM_START_NAME, {**networks, "psi": model.psi}
  )
  start.pop("psi")
  for got, want in zip(jax.tree.leaves(networks), jax.tree.leaves(start), strict=True):
    np.testing.assert_array_equal(got, want)  # held
  codes = np.asarray(model.encode(x))  # on three quarters of a circle
  radius = np.linalg.norm(codes, axis=1)
  assert np.all(np.abs(radius - radius.mean()) < 0.25 * radius.mean())
  assert np.ptp(np.arctan2(codes[:, 1], codes[:, 0])) > np.pi


@pytest.mark.whole_run
def test_fit_does_not_depend_on_the_data_units(tmp_path):
  x, labels = _two_rings()
  moved = x * 100 + 1000
  # fista: "gauss_newton" (what "auto" picks) stops each pair on its own, so
  # rounding apart moves the log-likelihoods by up to 1.5e-4 relative.
  kw = dict(
    config=dataclasses.replace(CONFIG, inference_method="fista"), log=lambda _: None
  )
  a = vaells_jax.fit(x, labels, workdir=tmp_path / "a", **kw)
  b = vaells_jax.fit(moved, labels, workdir=tmp_path / "b", **kw)
  # The same training in the model's units: the same codes and operators.
  np.testing.assert_allclose(b.encode(moved[:6]), a.encode(x[:6]), atol=2e-4)
  np.testing.assert_allclose(b.psi, a.psi, atol=1e-5)
  # Everything the user sees is in the user's units.
  z = a.encode(x[:6])
  np.testing.assert_allclose(b.decode(z), a.decode(z) * 100 + 1000, rtol=1e-5)
  np.testing.assert_allclose(b.anchors, np.asarray(a.anchors) * 100 + 1000, rtol=1e-5)
  np.testing.assert_allclose(b.data.x_train, a.data.x_train * 100 + 1000, rtol=1e-9)
  assert np.abs(a.decode(z) - x[:6]).max() < 10  # near the user's data, not 1000 off
  key = jax.random.PRNGKey(0)
  ll_a, _ = a.log_likelihood(key, x[:4], labels[:4], num_samples=3)
  ll_b, _ = b.log_likelihood(key, moved[:4], labels[:4], num_samples=3)
  np.testing.assert_allclose(ll_b, ll_a - 5 * np.log(100), rtol=1e-4)  # x * 100
  for name in ("latent_coverage", "operator_norm"):
    assert b.verdict["signals"][name] == pytest.approx(
      a.verdict["signals"][name], abs=1e-3
    )
  loaded = vaells_jax.load(tmp_path / "b")
  np.testing.assert_array_equal(loaded.encode(moved[:3]), b.encode(moved[:3]))
  assert loaded.verdict == b.verdict


@pytest.mark.whole_run
def test_fit_with_a_population_returns_the_selected_member(tmp_path):
  x, labels = _two_rings()
  config = dataclasses.replace(CONFIG, population=2, select_at=0.5)
  model = vaells_jax.fit(x, labels, config=config, workdir=tmp_path, log=lambda _: None)
  summary = json.loads((tmp_path / "summary.json").read_text())
  chosen = summary["population"]["selected_member"]
  assert chosen in (0, 1)
  assert len(summary["population"]["signals"]["latent_coverage"]) == 2
  assert model.psi.shape == (2, 2, 2)  # one member's dictionary, not the stack
  np.testing.assert_array_equal(vaells_jax.load(tmp_path).psi, model.psi)


@pytest.mark.parametrize(
  "change, message",
  [
    (
      lambda x, y: (np.where(np.arange(x.size).reshape(x.shape) == 3, np.nan, x), y),
      "finite",
    ),
    (lambda x, y: (x, y[:-1]), "labels"),
    (lambda x, y: (x, y + 1), "no points"),
    (lambda x, y: (x[:9], y[:9]), "batch_size"),
  ],
)
def test_fit_rejects_bad_input(tmp_path, change, message):
  x, labels = change(*_two_rings())
  with pytest.raises(ValueError, match=message):
    vaells_jax.fit(x, labels, config=CONFIG, workdir=tmp_path)
  assert not (tmp_path / "config.json").exists()


def test_fit_rejects_anchors_of_the_wrong_shape(tmp_path):
  x, labels = _two_rings()
  with pytest.raises(ValueError, match="anchors must be"):
    vaells_jax.fit(x, labels, anchors=x[:3], config=CONFIG, workdir=tmp_path)


@pytest.mark.whole_run
def test_compare_models_on_your_own_data(tmp_path):
  from vaells_jax.api import TrainedBaseline
  from vaells_jax.runs.compare import run_comparison
  from vaells_jax.runs.fit import user_dataset

  x, labels = _two_rings()
  config = Config(
    num_steps=3,
    batch_size=8,
    hidden=(16,),
    num_ops=2,
    inference_max_iter=5,
    num_pseudo=8,
    eval_ll_samples=3,
  )
  result = run_comparison(
    config,
    lambda c: user_dataset(x, labels, seed=c.seed, batch_size=c.batch_size),
    tmp_path,
    seeds=1,
    models=("vae", "vampprior"),
    log=lambda _: None,
  )
  for model in ("vae", "vampprior"):
    assert np.isfinite(result["models"][model]["knn_class_accuracy"]["mean"])
    assert "sample_manifold_distance" not in result["models"][model]
  assert isinstance(vaells_jax.load(tmp_path / "vampprior" / "seed0"), TrainedBaseline)
  assert (tmp_path / "latent_embeddings.png").exists()


LIBRARY_CORES_SCRIPT = """
import numpy as np
import jax  # imported, not started: fit can still give the members the cores
import vaells_jax
from vaells_jax.config import Config
STARTED
rng = np.random.default_rng(0)
labels = np.arange(40) % 2
x = rng.normal(size=(40, 5))
config = Config(num_steps=4, batch_size=8, hidden=(16,), num_ops=2,
                inference_max_iter=5, population=2, select_at=0.5)
vaells_jax.fit(x, labels, config=config)
print("devices", len(jax.devices()))
"""


@pytest.mark.whole_run
@pytest.mark.skipif(
  len(os.sched_getaffinity(0)) < 2, reason="needs 2 or more CPU cores"
)
@pytest.mark.parametrize("started", [False, True])
def test_fit_spreads_a_population_over_the_cores_from_a_library_call(started):
  script = LIBRARY_CORES_SCRIPT.replace(
    "STARTED", "jax.numpy.zeros(1).block_until_ready()" if started else ""
  )
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  result = subprocess.run(
    [sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env
  )
  assert result.returncode == 0, result.stderr[-3000:]
  if started:  # too late to make devices: said, and groups from threads
    assert "run on one device, in 2 groups from 2 threads" in result.stdout
    assert "population of 2 in 2 groups from threads" in result.stdout
    assert "devices 1" in result.stdout
  else:
    assert "population of 2 split over 2 devices" in result.stdout
    assert "devices 2" in result.stdout


@pytest.mark.whole_run
def test_a_run_whose_operators_blew_up_says_so(tmp_path):
  x, labels = _two_rings()
  lines = []
  config = dataclasses.replace(CONFIG, psi_init_std=3.0)  # far beyond any run's
  model = vaells_jax.fit(x, labels, config=config, workdir=tmp_path, log=lines.append)
  assert model.verdict["verdict"] == "not learned"
  assert any("operators blew up" in r for r in model.verdict["reasons"])
  assert any(line.startswith("verdict: not learned") for line in lines)
  summary = json.loads((tmp_path / "summary.json").read_text())
  assert summary["verdict"] == model.verdict
  markdown = (tmp_path / "summary.md").read_text()
  assert markdown.index("Verdict: **not learned**") < markdown.index("## Metrics")


@pytest.mark.parametrize(
  "first, second, later",
  [
    (40.0, 20.0, "retry"),  # the retry's samples closer: it trains on
    (5.0, 8.0, "config"),
    (9.0, 9.0, "config"),  # a tie
    (float("nan"), 20.0, "retry"),  # a signal that is not finite counts as far
    (20.0, None, "config"),  # no signal (no verdict)
  ],
)
def test_later_tries_train_the_config_whose_samples_lay_closer(first, second, later):
  from vaells_jax.runs.fit import config_of_try

  config, retry = CONFIG, dataclasses.replace(CONFIG, prior_weight_net=30.0)
  record = [{"sample_noise_levels": first}, {"sample_noise_levels": second}]
  assert config_of_try(0, [], config, retry) is config
  assert config_of_try(1, record[:1], config, retry) is retry
  for k in (2, 3, 4):
    assert config_of_try(k, record, config, retry) is {"retry": retry}.get(
      later, config
    )


@pytest.mark.whole_run
def test_fit_trains_again_while_the_verdict_is_not_learned(tmp_path):
  x, labels = _two_rings()
  lines = []
  model = vaells_jax.fit(
    x,
    labels,
    config=CONFIG,
    workdir=tmp_path,
    log=lines.append,
    tries=2,
    retry_changes={"prior_weight_net": 30.0, "decoder_polish_steps": 3},
  )
  assert model.verdict["verdict"] != "learned"  # 4 steps learn nothing
  tries = json.loads((tmp_path / "tries.json").read_text())
  assert [t["folder"] for t in tries["tries"]] == [".", "try1"]
  configs = [
    json.loads((tmp_path / f / "config.json").read_text()) for f in (".", "try1")
  ]
  assert [(c["prior_weight_net"], c["decoder_polish_steps"]) for c in configs] == [
    (1.0, 0),
    (30.0, 3),
  ]
  assert any("try 2 of 2" in line for line in lines)
  kept = tmp_path / tries["kept"]
  assert json.loads((kept / "config.json").read_text())["seed"] == (
    CONFIG.seed + (tries["kept"] == "try1")
  )
  loaded = vaells_jax.load(tmp_path)
  np.testing.assert_array_equal(loaded.psi, model.psi)
  for folder in (".", "try1"):  # each try on its own
    one = vaells_jax.load(tmp_path / folder, kept=False)
    assert one.config.seed == CONFIG.seed + (folder == "try1")
  assert (tmp_path / "summary.md").read_text().startswith("# fit: tries")
  # Only the returned try is evaluated; the other keeps its verdict.
  other = tmp_path / {"try1": ".", ".": "try1"}[tries["kept"]]
  assert "eval_time_s" in json.loads((kept / "summary.json").read_text())
  assert (kept / "orbits.png").exists() and not (other / "orbits.png").exists()
  unevaluated = json.loads((other / "summary.json").read_text())
  assert unevaluated["evaluated"] is False and "verdict" in unevaluated
  # Starting over removes the old tries; one try writes no tries.json.
  vaells_jax.fit(
    x,
    labels,
    config=CONFIG,
    workdir=tmp_path,
    log=lines.append,
    overwrite=True,
    tries=1,
  )
  assert not (tmp_path / "tries.json").exists() and not (tmp_path / "try1").exists()
  with pytest.raises(ValueError, match="tries must be"):
    vaells_jax.fit(x, labels, config=CONFIG, workdir=tmp_path / "b", tries=0)
  with pytest.raises(ValueError, match="retry_changes names no Config field"):
    vaells_jax.fit(x, labels, config=CONFIG, retry_changes={"prior_weight": 3})
