"""One owner for a run: ``plan_run`` checks the data, the workdir and the
checkpoints once, and training follows the plan without checking again."""

import dataclasses

import pytest

from vaells_jax.runs import runner
from vaells_jax.training import checkpoint, guards, loop


@pytest.fixture
def counted(monkeypatch):
  """Counts every data check and checkpoint verification, wherever called;
  the evaluation and the verdict are faked (this is about training)."""
  calls = {"check_data": 0, "verify_checkpoint": 0}

  def counting(name, real):
    def wrapper(*args, **kwargs):
      calls[name] += 1
      return real(*args, **kwargs)

    return wrapper

  check = counting("check_data", guards.check_data)
  verify = counting("verify_checkpoint", checkpoint.verify_checkpoint)
  for module in (runner, loop):
    monkeypatch.setattr(module, "check_data", check)
  for module in (runner, checkpoint):
    monkeypatch.setattr(module, "verify_checkpoint", verify)
  from vaells_jax.evaluation import synthetic_report

  monkeypatch.setattr(synthetic_report, "evaluate_and_report", lambda *a, **k: {})
  said = {"verdict": "x", "reasons": []}
  monkeypatch.setattr(runner, "verdict", lambda trained, seed: said)
  return calls


def _run(config, data, workdir, **kwargs):
  lines = []
  runner.train_and_evaluate(config, data, workdir, log=lines.append, **kwargs)
  return lines


def test_a_resumed_run_checks_data_and_checkpoint_once(
  tmp_path, tiny_config, tiny_data, counted
):
  first = dataclasses.replace(tiny_config, num_steps=8)
  _run(first, tiny_data, tmp_path)
  assert counted == {"check_data": 1, "verify_checkpoint": 0}
  counted.update(check_data=0)
  lines = _run(tiny_config, tiny_data, tmp_path, resume=True)
  assert counted == {"check_data": 1, "verify_checkpoint": 1}
  assert "resuming from the checkpoint at step 8" in lines
  step_lines = [line for line in lines if line.startswith("step")]
  assert "inf_iters" in step_lines[-1] and "steps/s" in step_lines[-1]


def test_a_corrupt_checkpoint_is_refused_before_training(
  tmp_path, tiny_config, tiny_data, counted
):
  _run(dataclasses.replace(tiny_config, num_steps=8), tiny_data, tmp_path)
  (tmp_path / checkpoint.CHECKPOINT_DIR / "8" / checkpoint.SUMS_NAME).write_text("{}")
  with pytest.raises(checkpoint.CheckpointError, match="corrupt"):
    runner.plan_run(tiny_config, tiny_data, tmp_path, resume=True)


def test_a_population_run_checks_once_and_logs_its_members(
  tmp_path, tiny_config, tiny_data, counted
):
  config = dataclasses.replace(tiny_config, population=2, select_at=1.0)
  lines = _run(config, tiny_data, tmp_path)
  assert counted == {"check_data": 1, "verify_checkpoint": 0}
  assert any(line.startswith("step") and "population  loss" in line for line in lines)
  counted.update(check_data=0)
  _run(config, tiny_data, tmp_path, resume=True)  # finished: nothing to train
  assert counted == {"check_data": 1, "verify_checkpoint": 1}


def test_a_run_another_process_wrote_meanwhile_is_planned_again(
  tmp_path, tiny_config, tiny_data, counted
):
  plan = runner.plan_run(tiny_config, tiny_data, tmp_path)
  _run(dataclasses.replace(tiny_config, num_steps=4), tiny_data, tmp_path)
  with pytest.raises(ValueError, match="already holds a run"):
    runner.execute(plan, log=lambda line: None)


def test_a_run_whose_evaluation_fails_writes_no_summary(
  tmp_path, tiny_config, tiny_data, counted, monkeypatch
):
  # compare.py and seed_rates.py take summary.json as a finished run.
  from vaells_jax.evaluation import synthetic_report

  def broken(*args, **kwargs):
    raise RuntimeError("evaluation stopped")

  monkeypatch.setattr(synthetic_report, "evaluate_and_report", broken)
  with pytest.raises(RuntimeError, match="evaluation stopped"):
    _run(tiny_config, tiny_data, tmp_path)
  assert not (tmp_path / "summary.json").exists()
  # Without the evaluation, the summary holds the verdict, marked unevaluated.
  _run(tiny_config, tiny_data, tmp_path / "b", evaluate=False)
  summary = (tmp_path / "b" / "summary.json").read_text()
  assert '"evaluated": false' in summary and '"verdict"' in summary
