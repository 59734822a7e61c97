"""The command line's manners: suggestions, ``--config.KEY VALUE``, a fast
``--help`` with the config keys, the progress output, ``vaells-run``, and the
report's summary.md. Nothing here trains (each test takes well under 1 s,
``--help`` in a subprocess a fraction of a second)."""

from __future__ import annotations

import configparser
import dataclasses
import io
import pathlib
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vaells_jax import cli as run  # noqa: E402
from vaells_jax.config import Config  # noqa: E402


def _error(capsys, argv) -> str:
  with pytest.raises(SystemExit) as info:
    run.parse_args(argv)
  assert info.value.code == 2
  return capsys.readouterr().err


@pytest.mark.parametrize(
  "argv, expected",
  [
    (["--exp=swissroll"], "did you mean 'swiss_roll'?"),
    (["--exp=concentric", "--bugdet=cpu"], "did you mean '--budget'?"),
    (["--exp=concentric", "--overwirte"], "did you mean '--overwrite'?"),
    (["--exp=concentric", "--config.seed"], "--config.seed needs a value"),
  ],
)
def test_misspellings_get_a_suggestion(capsys, argv, expected):
  assert expected in _error(capsys, argv)


def test_config_override_with_a_space():
  args, overrides = run.parse_args(
    ["--exp", "concentric", "--config.seed", "1", "--config.num_steps=20"]
  )
  assert args.exp == "concentric"
  assert overrides == {"seed": "1", "num_steps": "20"}


def test_help_lists_flags_and_config_keys_once_and_fast():
  start = time.perf_counter()
  result = subprocess.run(
    [sys.executable, str(ROOT / "experiments" / "run.py"), "--help"],
    capture_output=True,
    text=True,
    timeout=60,
  )
  elapsed = time.perf_counter() - start
  assert result.returncode == 0
  text = result.stdout
  for flag in ("--exp", "--budget", "--data-dir", "--resume", "--overwrite"):
    assert text.count(f"  {flag}") == 1, flag  # one entry per flag
  for field in dataclasses.fields(Config):
    assert f"{field.name}=" in text, field.name
  assert elapsed < 5, f"--help took {elapsed:.1f} s (it must not import JAX)"
  assert (
    "jax"
    not in subprocess.run(
      [
        sys.executable,
        "-c",
        "import sys; sys.argv=['run.py', '--help']\n"
        "sys.path.insert(0, '.')\n"
        "try:\n from vaells_jax import cli; cli.parse_args(['--help'])\n"
        "except SystemExit: pass\n"
        "print(' '.join(m for m in sys.modules if m.split('.')[0] == 'jax'))",
      ],
      capture_output=True,
      text=True,
      cwd=ROOT,
      timeout=60,
    ).stdout.split()
  )


@pytest.mark.parametrize(
  "population, cores, flags, added",
  [
    (8, 2, "", "--xla_force_host_platform_device_count=2"),
    (8, 16, "--a=1", "--xla_force_host_platform_device_count=8"),
    (6, 4, "", "--xla_force_host_platform_device_count=3"),
    (5, 2, "", None),  # no count of at least 2 cores divides 5 members
    (1, 2, "", None),
    (8, 2, "--xla_force_host_platform_device_count=1", None),  # the user's
  ],
)
def test_a_population_gets_a_cpu_device_per_core(
  monkeypatch, population, cores, flags, added
):
  monkeypatch.setenv("XLA_FLAGS", flags)
  monkeypatch.setattr(
    run.os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False
  )
  run._cores_for_members(population)
  assert run.os.environ["XLA_FLAGS"] == (f"{flags} {added}".strip() if added else flags)


def test_summary_numbers_have_four_significant_digits():
  assert run._number(65.9039418650002) == "65.9"
  assert run._number(0.003245879819809729) == "0.003246"
  assert run._number(4000) == "4000"


def test_vaells_run_is_the_same_command(capsys):
  """``vaells-run`` is the package's CLI (no checkout needed: .ci/run runs it
  from an installed wheel), and ``experiments/run.py`` calls the same."""
  scripts = configparser.ConfigParser()
  scripts.read(ROOT / "setup.cfg")
  entry = scripts["options.entry_points"]["console_scripts"].strip()
  assert entry == "vaells-run = vaells_jax.cli:main"
  assert "from vaells_jax.cli import main" in (ROOT / "experiments/run.py").read_text()
  with pytest.raises(SystemExit):
    run.main(["--exp=swissroll"])
  assert "did you mean 'swiss_roll'?" in capsys.readouterr().err


def test_progress_plain_lines_and_heartbeat():
  from vaells_jax.runs.progress import Progress

  out = io.StringIO()
  with Progress(stream=out, heartbeat_s=0.3) as progress:
    progress.log("compiling the training step ...")
    time.sleep(1.0)
    for done in range(1, 4):
      progress.step(done, 3)  # no bar off a terminal
    progress.log("done")
  lines = out.getvalue().splitlines()
  assert lines[0] == "compiling the training step ..."
  assert any("still compiling the training step" in line for line in lines[1:-1])
  assert lines[-1] == "done"


def test_progress_heartbeat_only_when_training_steps_stall():
  from vaells_jax.runs.progress import Progress

  out = io.StringIO()
  with Progress(stream=out, heartbeat_s=0.3, bar=False) as progress:
    progress.log("compiled in 1.0 s; training steps 1..40 ...")
    for done in range(1, 21):  # steps end every 0.05 s, printing nothing
      progress.step(done, 40)
      time.sleep(0.05)
    quiet = out.getvalue()
    time.sleep(1.0)  # step 21 runs for a second (a compile)
    progress.step(21, 40)
  assert quiet.splitlines() == ["compiled in 1.0 s; training steps 1..40 ..."]
  stalled = out.getvalue().splitlines()[1:]
  assert stalled and all(
    line.startswith("  ... still running: 20 of 40 steps done, the last")
    for line in stalled
  )


def test_short_run_warning():
  from vaells_jax.runs.runner import short_run_warning

  assert short_run_warning(Config(num_steps=30, warmup_steps=0)) is None
  warning = short_run_warning(Config(num_steps=30, warmup_steps=2000))
  assert "ends before Psi learning starts (step 2000" in warning
  alternating = Config(num_steps=25, warmup_steps=10, alternate=True, net_steps=20)
  assert "step 30" in short_run_warning(alternating)
  assert short_run_warning(Config(num_steps=30, warmup_steps=2000, model="vae")) is None


def test_summary_md_directions_references_and_marks(tmp_path):
  from vaells_jax.evaluation.summary_md import write_markdown
  from vaells_jax.evaluation.synthetic_report import FIGURES

  (tmp_path / "paths.png").write_bytes(b"")
  numbers = {
    "steps": 30,
    "path_manifold_distance": 1.23456789,
    "linear_path_manifold_distance": 5.5,
    "knn_class_accuracy": 1.0,
    "not_meaningful": ["path_manifold_distance"],
  }
  write_markdown(tmp_path, numbers, Config(), FIGURES)
  text = (tmp_path / "summary.md").read_text()
  assert "| path_manifold_distance | 1.235 (_not meaningful_) | lower | straight " in (
    text
  )
  assert "straight lines: 5.5 |" in text
  assert "| knn_class_accuracy | 1 | higher |" in text
  assert "ended before Psi learning started" in text
  assert "](paths.png)" in text  # figures embedded with relative links


def test_short_run_marks_its_structure_metrics(tmp_path, monkeypatch):
  """train_and_evaluate's bookkeeping, with training and evaluation faked."""
  import dataclasses
  import types

  from vaells_jax.data.synthetic import make_concentric
  from vaells_jax.evaluation import synthetic_report
  from vaells_jax.runs import runner
  from vaells_jax.runs.verdict import THRESHOLDS

  @dataclasses.dataclass
  class Trained:
    verdict: dict | None = None

    def flat(self):
      return self

  config = Config(num_steps=3, warmup_steps=5, hidden=(8,))
  state = types.SimpleNamespace(net_skipped=0)
  monkeypatch.setattr(runner, "train_run", lambda *a, **k: (state, {"steps": 3}))
  entry = types.SimpleNamespace(summary=lambda s: {}, trained=lambda c, s, d: Trained())
  monkeypatch.setitem(runner.MODELS, "vaells", entry)
  said = {
    "verdict": "not learned",
    "reasons": ["r"],
    "signals": {},
    "thresholds": THRESHOLDS,
  }
  monkeypatch.setattr(runner, "verdict", lambda trained, seed: said)

  def report(trained, workdir, summary, log=None):
    metrics = {"knn_class_accuracy": 1.0, "orbit_coverage": 0.5}
    synthetic_report.write_markdown(
      workdir, {**summary, **metrics}, config, synthetic_report.FIGURES
    )
    return metrics

  monkeypatch.setattr(synthetic_report, "evaluate_and_report", report)
  lines = []
  _, summary = runner.train_and_evaluate(
    config, make_concentric(seed=0), tmp_path, log=lines.append
  )
  assert "ends before Psi learning starts (step 5" in lines[0]
  assert summary["not_meaningful"] == ["orbit_coverage"]
  text = (tmp_path / "summary.md").read_text()
  assert "| orbit_coverage | 0.5 (_not meaningful_) |" in text
  assert "| knn_class_accuracy | 1 | higher |" in text
  assert '"not_meaningful"' in (tmp_path / "summary.json").read_text()
  assert text.startswith("# VAELLS run summary\n\n## Verdict: **not learned**")
