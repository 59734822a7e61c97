"""vaells_jax.fit on a user's own arrays: outputs, the returned model, bad input."""

import dataclasses
import json

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


def test_fit_without_labels_and_with_explicit_anchors(tmp_path):
  x, _ = _two_rings()
  model = vaells_jax.fit(
    x, anchors=x[:4], config=CONFIG, workdir=tmp_path, log=lambda _: None
  )
  assert model.anchors_latent.shape == (1, 4, 2)


def test_fit_without_a_config_trains_the_population(tmp_path, monkeypatch):
  from vaells_jax.runs import fit as fit_module
  from vaells_jax.runs import runner

  seen = []
  monkeypatch.setattr(
    runner, "train_and_evaluate", lambda config, *a, **k: (seen.append(config), None)
  )
  x, labels = _two_rings()
  vaells_jax.fit(x, labels, workdir=tmp_path)
  assert seen == [Config(population=fit_module.FIT_POPULATION)]
  assert fit_module.FIT_POPULATION > 1


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
