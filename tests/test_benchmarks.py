"""Every script in ``benchmarks/`` runs in its tiny mode, as a user runs it:
a fresh process from the checkout's root, its results read from the JSON it
writes. Tests import nothing from ``benchmarks/``. Each start compiles its
programs anew, so most are marked ``whole_run`` (CI runs them too)."""

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
TINY_RUN = ["--config.num_steps=6", "--config.log_every=3", "--config.hidden=(32,)"]


def _bench(script: str, *args: str, out: pathlib.Path | None = None):
  """Runs ``benchmarks/<script>.py args``; the JSON it wrote to ``out``."""
  done = subprocess.run(
    [sys.executable, f"benchmarks/{script}.py", *args],
    cwd=ROOT,
    capture_output=True,
    text=True,
  )
  assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
  return json.loads(out.read_text()) if out else done.stdout


def test_every_benchmark_script_runs_here():
  scripts = {
    p.stem
    for p in (ROOT / "benchmarks").glob("*.py")
    if '__name__ == "__main__"' in p.read_text()
  }
  text = pathlib.Path(__file__).read_text()
  assert scripts and {s for s in scripts if f'"{s}"' not in text} == set()


@pytest.mark.whole_run
def test_inference_speed(tmp_path):
  out = tmp_path / "r.json"
  result = _bench(
    "inference_speed", "--quick", "--subset=1", "--repeats=1", f"--out={out}", out=out
  )
  rows = result["results"]
  assert {r["case"] for r in rows} == {"concentric", "swiss_roll", "rot_mnist"}
  for r in rows:
    assert r["pairs_per_s"]["batched"] > 0
    assert all(np.isfinite(v) for v in r["median_objective"].values())


@pytest.mark.whole_run
def test_train_step(tmp_path):
  out = tmp_path / "r.json"
  (row,) = _bench(
    "train_step", "--quick", "--experiments=concentric", f"--json={out}", out=out
  )
  # Batch of 4, 3 anchors, 1 restart: 4 (1 + 3) pairs for both methods.
  assert row["pair_solves_per_step"] == row["original_pair_solves_per_step"] == 16
  assert row["speedup"] > 1  # the batched solve beats a Python loop of scipy CG
  assert row["warmup_step_s"] == 0  # no warm-up in concentric
  np.testing.assert_allclose(
    row["estimated_training_s"]["vaells_jax"], 4000 * row["vaells_jax"]["min_s"]
  )


@pytest.mark.whole_run
def test_original_pairs(tmp_path):
  out = tmp_path / "r.json"
  (row,) = _bench(
    "original_pairs", "--quick", "--experiments=swiss_roll", f"--json={out}", out=out
  )
  # Batch of 4, 4 anchors, 2 restarts: 4 + 4 * 4 * 2 pair solves each.
  assert row["original_pair_solves"] == row["our_pair_solves"] == 36
  assert row["posterior"]["pairs"] == 4 and row["prior"]["pairs"] == 16
  assert 0 <= row["prior"]["as_good_fraction"] <= 1
  assert row["step_s"]["original"][0] > row["step_s"]["vaells_jax"][0] > 0


@pytest.mark.whole_run
def test_concentric_step_ends_as_low_as_the_original_method(tmp_path):
  """The concentric config's own solver (gauss_newton, 100 iterations) ends
  at or below the original method's objective on >= 95% of the pairs a
  training step solves at step 1000."""
  out = tmp_path / "r.json"
  (row,) = _bench(
    "original_pairs",
    "--experiments=concentric",
    "--at-step=1000",
    "--repeats=1",
    f"--json={out}",
    out=out,
  )
  post, prior = row["posterior"], row["prior"]
  as_good = post["as_good_fraction"] * post["pairs"]
  as_good += prior["as_good_fraction"] * prior["pairs"]
  assert post["pairs"] + prior["pairs"] == 120
  assert round(as_good) >= 114


@pytest.mark.whole_run
def test_whole_run(tmp_path):
  out = tmp_path / "r.json"
  (row,) = _bench(
    "whole_run",
    "--quick",
    "--experiments=concentric",
    "--cg-step-ms=concentric=3000",
    f"--json={out}",
    out=out,
  )
  assert row["steps"] == 50
  assert row["command_wall_s"] >= row["compile_s"] + row["training_s"] > 0


@pytest.mark.whole_run
def test_fit_battery(tmp_path):
  out = tmp_path / "battery.json"
  results = _bench(
    "fit_battery",
    "--quick",
    "--seeds=0",
    "--families=circles,s_curve",  # fit's defaults for several classes, one
    "--anchors=even",
    f"--out={out}",
    out=out,
  )
  rows = {row["family"]: row for row in results.values()}
  for row in rows.values():
    assert row["verdict"] in ("learned", "not learned", "uncertain")
    assert set(row["signals"]) >= {"latent_coverage", "data_coverage", "operator_norm"}
    assert 0 <= row["orbit_coverage"] <= 1 and row["wall_time_s"] > 0
  assert set(rows) == {"circles", "s_curve"}


@pytest.mark.whole_run
def test_fit_battery_scores_a_torus_and_curves_without_labels(tmp_path):
  out = tmp_path / "battery.json"
  results = _bench(
    "fit_battery",
    "--quick",
    "--seeds=0",
    "--families=torus,unlabelled",
    f"--out={out}",
    out=out,
  )
  rows = {row["family"]: row for row in results.values()}
  torus = rows["torus"]
  assert torus["signals"]["data_directions"] == 2
  assert 0 <= torus["signals"]["surface_coverage"] <= 1
  assert 0 <= torus["orbit_coverage"] <= 1 and "curve_coverage" in torus
  assert rows["unlabelled"]["signals"]["data_directions"] == 1


@pytest.mark.whole_run
def test_image_battery(tmp_path):
  out = tmp_path / "images.json"
  results = _bench(
    "image_battery",
    "--quick",
    "--seeds=0",
    "--families=turning_shapes,colour_sprites",
    f"--out={out}",
    out=out,
  )
  assert len(results) == 2
  for row in results.values():
    assert row["verdict"] in ("learned", "not learned", "uncertain")
    assert 0 <= row["orbit_coverage"] <= 1 and 0 <= row["sample_class"] <= 1
    assert row["wall_time_s"] > 0 and isinstance(row["success"], bool)


@pytest.mark.whole_run
def test_image_battery_reuses_a_kept_warm_start(tmp_path):
  args = ("image_battery", "--quick", "--seeds=0", "--families=rotated_digits")
  a, b, keep = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "keep"
  first = _bench(*args, f"--keep={keep}", f"--out={a}", out=a)
  again = _bench(*args, f"--warm-from={keep}", f"--out={b}", out=b)
  (one,), (two,) = first.values(), again.values()
  assert one["phases_s"]["warm_start_s"] > 0 and two["phases_s"]["warm_start_s"] is None
  for name in ("orbit_coverage", "orbit_purity", "sample_class", "sample_distance"):
    assert two[name] == pytest.approx(one[name], abs=1e-6), name


@pytest.mark.whole_run
def test_fit_mnist(tmp_path):
  out = tmp_path / "mnist.json"
  result = _bench(
    "fit_mnist",
    f"--data-dir={ROOT / 'tests/data/mnist'}",
    "--files=t10k",
    "--limit=200",
    "--steps=4",
    f"--out={out}",
    out=out,
  )
  assert result["images"] == [200, 28, 28] and result["peak_rss_gb"] > 0
  assert result["verdict"] in ("learned", "not learned", "uncertain")


@pytest.mark.whole_run
def test_inference_scaling(tmp_path):
  out = tmp_path / "r.json"
  results = _bench("inference_scaling", "--quick", f"--out={out}", out=out)["sweeps"]
  assert [r["N"] for r in results["pairs"]] == [10, 1000]
  assert [r["d"] for r in results["dim"]] == [2, 4]
  assert [r["M"] for r in results["ops"]] == [1, 2]
  for rows in results.values():
    assert all(r["min_s"] > 0 and r["memory_mb"] > 0 for r in rows)
  assert results["pairs"][1]["memory_mb"] > results["pairs"][0]["memory_mb"]


@pytest.mark.whole_run
def test_exact_inference(tmp_path):
  out = tmp_path / "r.json"
  cases = _bench("exact_inference", "--quick", f"--out={out}", out=out)["cases"]
  assert set(cases) == {"rotation", "small"}
  for rows in cases.values():
    assert set(rows) == {"exact", "fista", "lm", "scipy_cg"}
    for r in rows.values():
      assert r["step_ms"] > 0 and np.isfinite(r["median_objective"])
      # The global solver ends as low as every other (float64 evaluation).
      assert r["max_excess"] < 1e-9


@pytest.mark.whole_run
def test_pgd_quality(tmp_path):
  out = tmp_path / "r.json"
  result = _bench("pgd_quality", "--quick", f"--out={out}", out=out)
  assert result["rows"]
  for row in result["rows"]:
    assert 0 <= row["as_good"] <= row["within_2pc"] <= 1
    assert 0.9 < row["ratio_q"][1] < 1.1  # pgd's median objective / fista's


def test_population_step(tmp_path):
  out = tmp_path / "r.json"
  result = _bench(
    "population_step",
    "--population=2",
    "--warmup=1",
    "--steps=2",
    "--repeats=1",
    f"--out={out}",
    out=out,
  )
  assert result["population"] == 2
  assert all(ms > 0 for ms in result["ms_per_step"].values())


def test_step_phases(tmp_path):
  out = tmp_path / "r.json"
  result = _bench(
    "step_phases",
    "--experiments=concentric",
    "--forms=phased",
    "--repeats=1",
    f"--out={out}",
    out=out,
  )
  (phases,) = result["experiments"].values()
  assert all(t["phased"]["step_s"] > 0 for t in phases.values())


@pytest.mark.whole_run
def test_device_steps(tmp_path):
  # --tiny: the synthetic experiments' steps on the default device (a CPU here).
  out = tmp_path / "r.json"
  result = _bench(
    "device_steps",
    "--tiny",
    "--population=concentric",
    "--ll-points=0",
    "--experiments=concentric",
    f"--json={out}",
    out=out,
  )
  (row,) = result["steps"]
  assert row["experiment"] == "concentric" and row["initial"]["min_s"] > 0
  assert row["census"]["fusion"] > 0
  (pop,) = result["population"]
  assert pop["members"] == 8 and pop["population"]["min_s"] > 0


@pytest.mark.whole_run
def test_seed_rates(tmp_path):
  out = tmp_path / "r.json"
  result = _bench(
    "seed_rates",
    "--exp=concentric",
    "--seeds=0",
    f"--workdir={tmp_path / 'runs'}",
    f"--out={out}",
    *TINY_RUN,
    out=out,
  )
  (row,) = result["seeds"].values()
  assert isinstance(row["success"], bool) and 0 <= row["orbit_coverage"] <= 1
  assert row["verdict"] in ("learned", "uncertain", "not learned")
  again = _bench(  # the run is read, its verdict computed again
    "seed_rates",
    "--exp=concentric",
    "--seeds=0",
    f"--workdir={tmp_path / 'runs'}",
    f"--out={out}",
    "--reverdict",
    out=out,
  )
  assert again["seeds"]["0"]["verdict_signals"] == row["verdict_signals"]


@pytest.mark.whole_run
def test_eval_time(tmp_path):
  out = tmp_path / "r.json"
  result = _bench("eval_time", "--steps=4", "--repeats=1", f"--out={out}", out=out)
  (row,) = result["runs"]
  assert row["wall_s"] > 0 and row["programs"] > 0


@pytest.mark.whole_run
def test_fit_speed(tmp_path):
  out = tmp_path / "r.json"
  result = _bench("fit_speed", "--repeats=1", "--quick", f"--out={out}", out=out)
  (row,) = result["rounds"]
  assert row["fit_s"] > 0 and row["concentric_s"] > 0 and row["tries"] >= 1


@pytest.mark.whole_run
def test_first_command(tmp_path):
  out = tmp_path / "r.json"
  result = _bench("first_command", "--repeats=0", "--quick", f"--out={out}", out=out)
  (run,) = result["runs"]
  assert run["cache"] == "empty" and run["wall_s"] >= run["train_s"] > 0


def test_test_times(tmp_path):
  out = tmp_path / "r.json"
  result = _bench("test_times", "--quick", f"--out={out}", out=out)
  (run,) = result["runs"].values()
  assert run["wall_time_s"] > 0 and "passed" in run["pytest"]


@pytest.mark.whole_run
def test_population_members(tmp_path):
  run = tmp_path / "run"
  done = subprocess.run(
    [sys.executable, "experiments/run.py", "--exp=concentric", f"--workdir={run}"]
    + TINY_RUN,
    cwd=ROOT,
    capture_output=True,
    text=True,
  )
  assert done.returncode == 0, done.stderr[-3000:]
  out = tmp_path / "members.json"
  (row,) = _bench("population_members", str(run), f"--out={out}", out=out).values()
  selection = json.loads((run / "population" / "selection.json").read_text())
  assert row["selected_member"] == selection["selected_member"]
  assert len(row["members"]) == 8
  for k, member in enumerate(row["members"]):
    assert 0 <= member["orbit_coverage"] <= 1 and isinstance(member["success"], bool)
    assert (
      member["signals"]["latent_coverage"] == selection["signals"]["latent_coverage"][k]
    )
