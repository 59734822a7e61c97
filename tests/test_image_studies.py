"""The image study scripts (studies/images) run and write what the docs read."""

import importlib.util
import pathlib
import subprocess
import sys

import pytest

from vaells_jax.training import warm_start

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _study(name):
  spec = importlib.util.spec_from_file_location(
    name, ROOT / f"studies/images/{name}.py"
  )
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@pytest.mark.whole_run
def test_pretrain_loop(tmp_path):
  result = _study("pretrain_loop").main(["--steps=3", f"--out={tmp_path / 'p.json'}"])
  assert result["loop_steps_per_s"] > 0 and result["scan_steps_per_s"] > 0


@pytest.mark.whole_run
def test_latent_layout(tmp_path, monkeypatch):
  monkeypatch.setattr(warm_start, "STEPS", 3)
  rows = _study("latent_layout").main(["--seeds=0", f"--out={tmp_path / 'l.json'}"])
  assert sorted(r["latent_dim"] for r in rows.values()) == [2, 3]
  assert all(r["held_out_error"] > 0 for r in rows.values())


@pytest.mark.whole_run
def test_latent_scale(tmp_path):
  keep = tmp_path / "keep"
  battery = [sys.executable, "benchmarks/image_battery.py", "--quick", "--seeds=0"]
  battery += ["--families=rotated_digits", f"--keep={keep}"]
  battery += [f"--out={tmp_path / 'b.json'}"]
  subprocess.run(battery, cwd=ROOT, check=True, capture_output=True)
  rows = _study("latent_scale").main([f"--keep={keep}", f"--out={tmp_path / 's.json'}"])
  (row,) = rows.values()
  assert row["family"] == "rotated_digits" and row["seed"] == 0
  assert 0 < row["p99_entry"] <= row["max_entry"]
