"""Paper table 1 on natural MNIST (``--exp=sensitivity --base=nat_mnist
--grid``): the grid end to end at a tiny budget on the committed digits, its
reuse of finished runs, the paper lookup, and the flags it refuses."""

import dataclasses
import json
import math
import pathlib
import signal
import sys

import pytest
from conftest import mnist_dir

from vaells_jax.api import DATA_NAME
from vaells_jax.config import config_from_json
from vaells_jax.data import mnist
from vaells_jax.data.dataset import load_dataset
from vaells_jax.evaluation import image_report
from vaells_jax.runs import compare
from vaells_jax.runs.runner import TrainingInterrupted
from vaells_jax.runs.sensitivity import GRID_METRICS, PAPER_TABLE1, paper_cell

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from vaells_jax import cli as run  # noqa: E402

TINY = [
  "--budget=cpu",
  "--config.num_steps=3",
  "--config.warmup_steps=2",
  "--config.net_steps=1",
  "--config.psi_steps=1",
  "--config.inference_max_iter=2",
  "--config.eval_ll_points=3",
  "--config.eval_ll_samples=2",
  "--config.log_every=3",
  "--config.eval_rotation_digits=10",
  "--config.num_pseudo=20",
]


def _grid(workdir, *flags):
  return run.main(
    [
      "--exp=sensitivity",
      "--base=nat_mnist",
      "--grid",
      f"--data-dir={mnist_dir()}",
      f"--workdir={workdir}",
      *TINY,
      *flags,
    ]
  )


def _fake_runs(monkeypatch):
  """Stands in for training and evaluation: writes a run's config.json and a
  summary.json of made-up, cell-specific numbers; returns the calls."""
  calls = []

  def fake(config, data, workdir, log, resume, overwrite):
    calls.append((config.num_ops, data.anchors.shape, config.seed, resume))
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.json").write_text(json.dumps(dataclasses.asdict(config)))
    m, a = config.num_ops, data.anchors.shape[1]
    summary = {key: float(10 * m + a) for key in GRID_METRICS}
    (workdir / "summary.json").write_text(json.dumps(summary))
    return None, summary

  monkeypatch.setattr(compare, "train_and_evaluate", fake)
  return calls


def test_grid_trains_each_cell_once_and_reuses_it(tmp_path, monkeypatch, capsys):
  calls = _fake_runs(monkeypatch)
  workdir = tmp_path / "grid"
  flags = ["--ops=2,4", "--anchors=8,3", "--seeds=2"]
  assert _grid(workdir, *flags) == 0
  # Anchors of every class, N_a of each; the M of the cell; seeds 0 and 1.
  assert sorted(calls) == sorted(
    (m, (10, a, 784), s, False) for m in (2, 4) for a in (8, 3) for s in (0, 1)
  )
  result = json.loads((workdir / "grid.json").read_text())
  cells = {(c["num_ops"], c["anchors_per_class"]): c for c in result["cells"]}
  assert list(cells) == [(2, 8), (2, 3), (4, 8), (4, 3)]
  train_digits = len(mnist.load_mnist(mnist_dir(), seed=0).x_train)
  assert result["seeds"] == [0, 1]
  for (m, a), cell in cells.items():
    assert (workdir / f"M{m}_Na{a}" / "seed1" / "summary.json").exists()
    for key in GRID_METRICS:
      assert cell["metrics"][key] == {
        "mean": 10.0 * m + a,
        "std": 0.0,
        "values": [10.0 * m + a] * 2,
      }
    assert cell["train_digits"] == train_digits  # 800 of the committed 1 000
  assert cells[2, 8]["paper"] == {"log_likelihood": -4.026e6, "mse": 0.0315}
  assert cells[4, 8]["paper"]["mse"] == 0.0232 and cells[2, 3]["paper"] is None
  rows = (workdir / "grid.md").read_text()
  assert "| 2 | 8 | 2 | 28 ± 0 | -4.026e+06 | 28 ± 0 | 0.0315 | 28 ± 0 |" in rows
  assert "| 4 | 3 | 2 | 43 ± 0 | – | 43 ± 0 | – | 43 ± 0 | 43 ± 0 |" in rows
  assert "500 x 100" in rows and "3 steps per run" in rows
  capsys.readouterr()

  calls.clear()  # the same command again: nothing retrains
  assert _grid(workdir, *flags) == 0
  assert calls == []
  assert capsys.readouterr().out.count("done before, reusing its summary.json") == 8
  assert json.loads((workdir / "grid.json").read_text()) == result

  # Another budget in the same folders is refused before anything trains.
  assert _grid(workdir, *flags, "--config.num_steps=4") == 2
  assert "another configuration" in capsys.readouterr().err
  assert calls == []


def test_too_many_anchors_are_refused_before_training(tmp_path, monkeypatch, capsys):
  calls = _fake_runs(monkeypatch)
  workdir = tmp_path / "grid"
  assert _grid(workdir, "--ops=2", "--anchors=8,1000") == 2
  err = capsys.readouterr().err
  assert "anchors_per_class must be from 1 to" in err and "got 1000" in err
  assert calls == [] and not workdir.exists()


def test_a_stopped_grid_names_the_same_command(tmp_path, monkeypatch, capsys):
  calls = _fake_runs(monkeypatch)
  fake = compare.train_and_evaluate

  def stop_at_m4(config, *args, **kwargs):
    if config.num_ops == 4:
      raise TrainingInterrupted(signal.SIGTERM, 2)
    return fake(config, *args, **kwargs)

  monkeypatch.setattr(compare, "train_and_evaluate", stop_at_m4)
  workdir = tmp_path / "grid"
  assert _grid(workdir, "--ops=2,4", "--anchors=3") == 143
  err = capsys.readouterr().err
  assert "resume with: python experiments/run.py --exp=sensitivity" in err
  assert "--ops=2,4 --anchors=3" in err and f"--workdir={workdir}" in err
  assert "--resume" not in err  # the grid resumes by itself
  monkeypatch.setattr(compare, "train_and_evaluate", fake)
  calls.clear()
  assert _grid(workdir, "--ops=2,4", "--anchors=3") == 0
  assert [c[0] for c in calls] == [4]  # M = 2 was reused


def _real_grid(workdir, monkeypatch, capsys, ops, anchors):
  """A real tiny grid; checks grid.json and that a rerun reuses every cell."""
  monkeypatch.setattr(image_report, "CLASSIFIER_STEPS", 30)
  flags = [f"--ops={','.join(map(str, ops))}"]
  flags += [f"--anchors={','.join(map(str, anchors))}"]
  assert _grid(workdir, *flags) == 0
  capsys.readouterr()
  result = json.loads((workdir / "grid.json").read_text())
  cells = {(c["num_ops"], c["anchors_per_class"]): c for c in result["cells"]}
  assert list(cells) == [(m, a) for m in ops for a in anchors]
  assert result["seeds"] == [0] and result["num_steps"] == 3
  for (m, a), cell in cells.items():
    run_dir = workdir / f"M{m}_Na{a}" / "seed0"
    config = config_from_json(run_dir / "config.json")
    assert (config.num_ops, config.population) == (m, 1)
    assert load_dataset(run_dir / DATA_NAME).anchors.shape == (10, a, 784)
    for key in GRID_METRICS:
      assert math.isfinite(cell["metrics"][key]["mean"]), key
  table = (workdir / "grid.md").read_text()
  assert "3 test digits x 2 importance samples" in table
  mtimes = {p: p.stat().st_mtime_ns for p in workdir.rglob("summary.json")}
  assert len(mtimes) == len(cells)
  assert _grid(workdir, *flags) == 0
  out = capsys.readouterr().out
  assert out.count("done before, reusing its summary.json") == len(cells)
  assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes


@pytest.mark.whole_run
def test_one_real_cell_of_the_grid(tmp_path, monkeypatch, capsys):
  _real_grid(tmp_path / "grid", monkeypatch, capsys, (1,), (2,))


@pytest.mark.slow  # four nat_mnist runs, ~50 s each on 2 cores
def test_real_two_by_two_grid(tmp_path, monkeypatch, capsys):
  _real_grid(tmp_path / "grid", monkeypatch, capsys, (1, 2), (2, 3))


def test_paper_cells_of_table_1():
  assert paper_cell(2, 8) == {"log_likelihood": -4.026e6, "mse": 0.0315}
  assert paper_cell(8, 8) == {"log_likelihood": -731.91, "mse": 0.0244}
  assert paper_cell(4, 16) == {"log_likelihood": -7.523e5, "mse": 0.0232}
  assert paper_cell(2, 12) is None and paper_cell(8, 16) is None
  assert len(PAPER_TABLE1) == 5
  args, _ = run.parse_args(["--exp=sensitivity", "--base=nat_mnist", "--grid"])
  assert (args.ops, args.anchors, args.seeds) == ((2, 4, 8), (8, 12, 16), 1)
  cells = [paper_cell(m, a) for m in args.ops for a in args.anchors]
  assert sum(c is not None for c in cells) == 5  # the default grid holds table 1
  args, _ = run.parse_args(
    ["--exp=sensitivity", "--base=nat_mnist", "--grid", "--ops=2", "--anchors=8"]
  )
  assert paper_cell(args.ops[0], args.anchors[0])["mse"] == 0.0315


def test_grid_without_mnist_is_a_clear_error(tmp_path, capsys):
  workdir = tmp_path / "w"
  code = run.main(
    [
      "--exp=sensitivity",
      "--base=nat_mnist",
      "--grid",
      f"--data-dir={tmp_path / 'none'}",
      f"--workdir={workdir}",
    ]
  )
  err = capsys.readouterr().err
  assert code == 2 and err.startswith("error: ") and len(err.splitlines()) == 1
  assert not workdir.exists()


@pytest.mark.parametrize(
  "flags, message",
  [
    (["--base=concentric", "--grid"], "--grid goes with --exp=sensitivity --base="),
    (["--base=nat_mnist"], "--base=nat_mnist runs paper table 1: add --grid"),
    (["--base=nat_mnist", "--grid", "--ops=0"], "--ops must be counts from 1"),
    (["--base=nat_mnist", "--grid", "--ops=a"], "--ops must be counts like 2,4,8"),
    (["--base=nat_mnist", "--grid", "--ops=2,2"], "--ops repeats a count"),
    (["--base=nat_mnist", "--grid", "--anchors=8,x"], "--anchors must be counts"),
    (["--base=swiss_roll", "--ops=2"], "--ops goes with --grid, and only with it"),
    (["--base=nat_mnist", "--grid", "--config.num_ops=3"], "use --ops=M,M,..."),
    (["--base=concentric", "--data-dir=x"], "--data-dir applies to rot_mnist"),
  ],
)
def test_grid_flags_that_do_not_apply_are_refused(tmp_path, capsys, flags, message):
  with pytest.raises(SystemExit) as exit_:
    run.main(["--exp=sensitivity", f"--workdir={tmp_path / 'w'}", *flags])
  assert exit_.value.code == 2
  assert message in capsys.readouterr().err
  assert not (tmp_path / "w").exists()


def test_the_rerun_command_drops_overwrite_and_names_the_workdir():
  argv = ["--exp=compare_concentric", "--seeds=2", "--overwrite", "--workdir", "w"]
  assert run._rerun_flags(argv, "w") == [
    "--exp=compare_concentric",
    "--seeds=2",
    "--workdir=w",
  ]
  assert run._rerun_flags(["--workdir=a", "--config.seed_x=1"], "b") == [
    "--config.seed_x=1",
    "--workdir=b",
  ]
