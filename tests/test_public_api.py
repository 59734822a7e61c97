"""The public API: typed names at the top level, no global state changed that
the caller did not ask for, ``fit(..., evaluate=False)``, and ``model.save``
/ ``vaells_jax.load`` without the training data."""

import dataclasses
import inspect
import json
import os
import pathlib
import shutil
import subprocess
import sys

import jax
import numpy as np
import pytest

import vaells_jax
from vaells_jax.api import TrainedBaseline, TrainedVAELLS
from vaells_jax.config import Config
from vaells_jax.data.conditioning import InputMap
from vaells_jax.data.saved_model import NoTrainingData

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONFIG = Config(
  num_steps=4, batch_size=8, hidden=(16,), num_ops=2, inference_max_iter=10, log_every=2
)
SAVED_FILES = {"config.json", "params.npz", "input_map.json", "model.json"}


def _run(script: str, timeout: float) -> subprocess.CompletedProcess:
  """``script`` in a fresh interpreter in the checkout (its ``vaells_jax``)."""
  return subprocess.run(
    [sys.executable, "-c", script],
    capture_output=True,
    text=True,
    timeout=timeout,
    cwd=ROOT,
  )


# --- names and types ------------------------------------------------------------


def test_public_names_resolve_and_config_is_exported():
  assert sorted(vaells_jax.__all__) == sorted(vaells_jax._PUBLIC)
  for name in vaells_jax.__all__:
    assert getattr(vaells_jax, name) is not None, name
    assert name in dir(vaells_jax)
  assert vaells_jax.Config is Config
  assert (ROOT / "vaells_jax" / "py.typed").exists()


def _callable_names():
  """``fit``, ``TrainedVAELLS.encode``, ...: the public functions and methods."""
  for name in vaells_jax.__all__:
    value = getattr(vaells_jax, name)
    if name in ("Config", "InferenceResult"):  # dataclass, NamedTuple: fields
      continue
    if inspect.isclass(value):
      for attr, member in vars(value).items():
        if not attr.startswith("_") and inspect.isfunction(member):
          yield f"{name}.{attr}"
    else:
      yield name


@pytest.mark.parametrize("name", list(_callable_names()))
def test_every_public_function_and_method_is_annotated(name):
  owner, _, attr = name.rpartition(".")
  fn = getattr(getattr(vaells_jax, owner) if owner else vaells_jax, attr)
  signature = inspect.signature(fn)
  unannotated = [
    p.name
    for p in signature.parameters.values()
    if p.name != "self" and p.annotation is inspect.Parameter.empty
  ]
  assert not unannotated, f"{name}: {unannotated}"
  assert signature.return_annotation is not inspect.Signature.empty, name


def test_importing_the_config_does_not_load_jax():
  result = _run(
    "import sys, vaells_jax, vaells_jax.config\n"
    "assert vaells_jax.Config is vaells_jax.config.Config\n"
    "print(sorted(m for m in sys.modules if m.split('.')[0] == 'jax'))",
    timeout=60,
  )
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.strip() == "[]"


# --- no side effects ------------------------------------------------------------

BACKEND_SCRIPT = """
import logging
import matplotlib
matplotlib.use("svg")
import matplotlib.pyplot as plt
import numpy as np
root = logging.getLogger().level
import vaells_jax
from vaells_jax.evaluation import image_plots, plotting
BODY
assert matplotlib.get_backend() == "svg", matplotlib.get_backend()
assert plt.get_fignums() == [], plt.get_fignums()
assert logging.getLogger().level == root
print("ok")
"""


def test_plotting_keeps_the_callers_matplotlib_backend(tmp_path):
  body = (
    f"fig = plotting.plot_operator_magnitudes({str(tmp_path / 'm.png')!r}, [1.0, 2])\n"
    "assert fig.savefig  # the figure, outside pyplot"
  )
  result = _run(BACKEND_SCRIPT.replace("BODY", body), timeout=120)
  assert result.returncode == 0, result.stderr[-3000:]
  assert (tmp_path / "m.png").stat().st_size > 1000


@pytest.mark.whole_run
def test_fit_keeps_the_callers_matplotlib_backend(tmp_path):
  """A whole ``fit``, figures included, under the caller's ``svg`` backend."""
  body = f"""
from vaells_jax.config import Config
rng = np.random.default_rng(0)
x = rng.normal(size=(40, 5))
config = Config(num_steps=4, batch_size=8, hidden=(16,), num_ops=2,
                inference_max_iter=10, log_every=2)
vaells_jax.fit(x, np.arange(40) % 2, config=config, workdir={str(tmp_path)!r})
"""
  result = _run(BACKEND_SCRIPT.replace("BODY", body), timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  assert (tmp_path / "latent_by_class.png").exists()


# --- fit(..., evaluate=False) ---------------------------------------------------


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
  """A 4-step ``fit`` without the evaluation, its workdir and its log."""
  rng = np.random.default_rng(0)
  x = rng.normal(size=(40, 5)) * 10 + 3  # units the input map changes
  workdir = tmp_path_factory.mktemp("fit")
  lines = []
  model = vaells_jax.fit(
    x, np.arange(40) % 2, config=CONFIG, workdir=workdir, log=lines.append,
    evaluate=False,
  )  # fmt: skip
  return model, x, workdir, lines


def test_fit_without_evaluation_keeps_the_verdict(fitted):
  model, _, workdir, lines = fitted
  summary = json.loads((workdir / "summary.json").read_text())
  assert summary["evaluated"] is False
  assert "eval_time_s" not in summary and "knn_class_accuracy" not in summary
  assert not list(workdir.glob("*.png")) and not (workdir / "summary.md").exists()
  assert not any(line.startswith("evaluating") for line in lines)
  # The verdict comes from training signals: there either way.
  assert model.verdict == summary["verdict"]
  assert model.verdict["verdict"] in ("learned", "not learned", "uncertain")


# --- save and load --------------------------------------------------------------


def test_a_saved_model_loads_with_the_same_outputs_to_the_bit(fitted, tmp_path):
  model, x, _, _ = fitted
  path = model.save(tmp_path / "model")
  assert {p.name for p in path.iterdir()} == SAVED_FILES  # no data, no checkpoint
  assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
  loaded = vaells_jax.load(path)
  assert isinstance(loaded, TrainedVAELLS) and loaded.config == model.config
  z = model.encode(x[:7])
  np.testing.assert_array_equal(loaded.encode(x[:7]), z)
  np.testing.assert_array_equal(loaded.decode(z), model.decode(z))
  np.testing.assert_array_equal(loaded.anchors, model.anchors)
  key = jax.random.PRNGKey(3)
  np.testing.assert_array_equal(loaded.sample_prior(key, 5), model.sample_prior(key, 5))
  assert loaded.verdict == model.verdict
  np.testing.assert_array_equal(loaded.input_map.shift, model.input_map.shift)
  assert loaded.input_map.scale == model.input_map.scale
  # What needs the training data says so.
  assert isinstance(loaded.data, NoTrainingData)
  assert loaded.data.data_dim == 5
  with pytest.raises(ValueError, match="has no training data, so data.x_train"):
    loaded.data.x_train  # noqa: B018
  # A loaded model saves again, to the same files.
  again = loaded.save(tmp_path / "again")
  for name in SAVED_FILES:
    assert (again / name).read_bytes() == (path / name).read_bytes(), name


def test_save_refuses_to_overwrite_unless_asked(fitted, tmp_path):
  model = fitted[0]
  path = model.save(tmp_path / "m")
  with pytest.raises(ValueError, match="holds a saved model already"):
    model.save(path)
  model.save(path, overwrite=True)
  assert {p.name for p in path.iterdir()} == SAVED_FILES
  (tmp_path / "run").mkdir()
  (tmp_path / "run" / "notes.txt").write_text("mine")
  with pytest.raises(ValueError, match="holds files but no saved model"):
    model.save(tmp_path / "run", overwrite=True)
  assert (tmp_path / "run" / "notes.txt").read_text() == "mine"
  (tmp_path / "empty").mkdir()
  model.save(tmp_path / "empty")  # an empty folder is fine
  assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "m", "run"]


def test_a_saved_baseline_round_trips(tmp_path, tiny_data):
  from vaells_jax.training.baseline_step import init_baseline_state

  config = dataclasses.replace(CONFIG, model="vae")
  state = init_baseline_state(jax.random.PRNGKey(0), config, tiny_data.x_train)
  model = TrainedBaseline(config, state.params, tiny_data)
  loaded = vaells_jax.load(model.save(tmp_path / "vae"))
  assert isinstance(loaded, TrainedBaseline) and loaded.input_map is None
  x = tiny_data.x_test
  np.testing.assert_array_equal(loaded.encode(x), model.encode(x))
  z = model.encode(x)
  np.testing.assert_array_equal(loaded.decode(z), model.decode(z))


@pytest.fixture(scope="module")
def saved(tmp_path_factory, tiny_data):
  """A saved untrained VAELLS model with an input map."""
  from vaells_jax.training.step import init_state

  state = init_state(
    jax.random.PRNGKey(0), CONFIG, tiny_data.anchors, tiny_data.data_dim
  )
  model = TrainedVAELLS(CONFIG, state.params, tiny_data, InputMap.of(tiny_data.x_train))
  return model.save(tmp_path_factory.mktemp("saved") / "model")


def _remove(path):
  path.unlink()


def _flip_a_byte(path):
  data = bytearray(path.read_bytes())
  data[len(data) // 2] ^= 0xFF
  path.write_bytes(bytes(data))


@pytest.mark.parametrize(
  "name, damage, error, message",
  [
    ("params.npz", _remove, FileNotFoundError, "params.npz is missing"),
    ("input_map.json", _remove, FileNotFoundError, "input_map.json is missing"),
    ("params.npz", _flip_a_byte, ValueError, "params.npz is corrupt"),
    ("config.json", _flip_a_byte, ValueError, "config.json is corrupt"),
    ("model.json", _remove, FileNotFoundError, "model.json is missing"),
    ("model.json", _flip_a_byte, ValueError, "model.json is not"),
  ],
)
def test_a_damaged_saved_model_is_refused_in_one_line(
  saved, tmp_path, name, damage, error, message
):
  folder = shutil.copytree(saved, tmp_path / "model")
  damage(folder / name)
  with pytest.raises(error, match=message) as caught:
    vaells_jax.load(folder)
  assert "\n" not in str(caught.value)
  assert str(folder) in str(caught.value)


def test_a_saved_model_of_a_newer_format_is_refused(saved, tmp_path):
  folder = shutil.copytree(saved, tmp_path / "model")
  record = json.loads((folder / "model.json").read_text())
  (folder / "model.json").write_text(json.dumps({**record, "version": 99}))
  with pytest.raises(ValueError, match="format version 99"):
    vaells_jax.load(folder)


@pytest.mark.skipif(os.name != "posix", reason="POSIX rename semantics")
def test_a_failed_save_leaves_nothing_behind(saved, tmp_path, monkeypatch):
  from vaells_jax.data import saved_model

  model = vaells_jax.load(saved)

  def fail(*args, **kwargs):
    raise OSError("disk full")

  monkeypatch.setattr(saved_model, "_move_into_place", fail)
  with pytest.raises(OSError, match="disk full"):
    model.save(tmp_path / "m")
  assert list(tmp_path.iterdir()) == []
