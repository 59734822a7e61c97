"""Population training: the batched step, member 0, selection, the study."""

import dataclasses
import json
import pathlib
import subprocess
import sys

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tiny import TINY, TINY_DATA

from vaells_jax import api
from vaells_jax.runs.runner import train_and_evaluate
from vaells_jax.runs.sensitivity import auc, summarise_study
from vaells_jax.training import coverage, population, selection
from vaells_jax.training.step import init_state

DATA = TINY_DATA
SMALL = dataclasses.replace(
  TINY,
  num_steps=8,
  checkpoint_every=100,
  population=3,
  select_at=0.5,
  eval_ll_points=4,
  eval_ll_samples=2,
)
BATCH = {
  "x": jnp.asarray(DATA.x_train[:8], jnp.float32),
  "label": jnp.asarray(DATA.labels_train[:8]),
}


def test_member_0_is_the_single_run_and_members_differ_in_the_dictionary():
  key = jax.random.PRNGKey(0)
  pop = population.init_population(key, SMALL, DATA)
  single = init_state(key, SMALL, DATA.anchors, DATA.data_dim)
  chex.assert_trees_all_equal(population.member(pop, 0), single)
  for k in (1, 2):
    other = population.member(pop, k)
    same = {n: v for n, v in other.params.items() if n != "psi"}
    chex.assert_trees_all_equal(
      same, {n: v for n, v in single.params.items() if n != "psi"}
    )
    assert not np.array_equal(other.psi, single.psi)
  every = dataclasses.replace(SMALL, population_init="all")
  other = population.member(population.init_population(key, every, DATA), 1)
  assert not np.array_equal(
    other.params["encoder"]["Dense_0"]["kernel"],
    single.params["encoder"]["Dense_0"]["kernel"],
  )


@pytest.mark.parametrize("vectorize", [True, False])
def test_population_step_equals_each_member_stepped_alone(vectorize):
  # Same batch and key for every member; rtol 1e-5 / atol 1e-6 covers the
  # rounding of the batched arithmetic (the map is exact in practice). With
  # "fista": vmapped, "gauss_newton" (what "auto" picks here) rounds the
  # anchors apart by up to 2e-5 relative in two steps.
  config = dataclasses.replace(SMALL, warmup_steps=0, inference_method="fista")
  pop = population.init_population(jax.random.PRNGKey(0), config, DATA)
  step = population.make_population_step(config, DATA.data_dim, vectorize=vectorize)
  single = api.MODELS["vaells"].make_step(config, DATA.data_dim, None)
  key = jax.random.PRNGKey(5)
  new_pop, metrics = step(pop, BATCH, key)
  new_pop, metrics = step(new_pop, BATCH, jax.random.fold_in(key, 1))
  assert int(new_pop.step) == 2
  for k in range(config.population):
    alone = population.member(pop, k)
    alone, alone_metrics = single(alone, BATCH, key)
    alone, alone_metrics = single(alone, BATCH, jax.random.fold_in(key, 1))
    chex.assert_trees_all_close(
      population.member(new_pop, k), alone, rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(metrics["loss"][k], alone_metrics["loss"], rtol=1e-5)


def test_member_groups_from_threads_step_as_the_whole_population(
  tiny_config, tiny_data
):
  # On one CPU device the members run as groups, one host thread each, so a
  # process whose jax started with one device still uses its cores.
  config = dataclasses.replace(tiny_config, population=4, warmup_steps=0)
  pop = population.init_population(jax.random.PRNGKey(0), config, tiny_data)
  results = []
  for groups in (1, 2, 4):
    step = population.make_population_step(
      config,
      tiny_data.data_dim,
      vectorize=False,
      devices=jax.devices()[:1],
      groups=groups,
    )
    state, metrics = step(pop, BATCH, jax.random.PRNGKey(5))
    state, metrics = step(state, BATCH, jax.random.PRNGKey(6))
    results.append((state, metrics))
  assert int(results[1][0].step) == 2
  for other in results[1:]:
    chex.assert_trees_all_close(other, results[0], rtol=1e-6, atol=1e-7)


def _circle_codes(n=60):
  t = np.linspace(0, 2 * np.pi, n, endpoint=False)
  ring = np.stack([np.cos(t), np.sin(t)], axis=1)
  return np.concatenate([0.5 * ring, ring]), np.repeat([0, 1], n)


def test_latent_coverage_tells_a_rotation_from_other_operators():
  codes, labels = _circle_codes()
  rotation = np.asarray([[[0.0, -1.0], [1.0, 0.0]]])
  scaling = np.asarray([[[0.3, 0.0], [0.0, 0.3]]])
  shear = np.asarray([[[0.0, 1.0], [0.0, 0.0]]])
  assert coverage.latent_coverage(codes, labels, rotation) == 1.0
  assert coverage.latent_coverage(codes, labels, scaling) < 0.1
  assert coverage.latent_coverage(codes, labels, shear) < 0.2
  assert coverage.latent_coverage(codes, labels, np.full((1, 2, 2), np.nan)) == 0.0


def test_the_wide_radius_credits_a_spiral_that_follows_a_roll_roughly():
  # An Archimedean roll (the swiss roll's shape) and the log-spiral with its
  # growth: the orbit drifts off the roll by more than 3 spacings, not 20.
  rng = np.random.default_rng(0)
  t = np.sort(rng.uniform(1.5 * np.pi, 4.5 * np.pi, 500))
  codes = np.stack([t * np.cos(t), t * np.sin(t)], 1) / 10
  codes += 0.01 * rng.normal(size=codes.shape)
  labels = np.zeros(len(codes), int)
  growth = np.log(3.0) / (3 * np.pi)
  spiral = np.asarray([[[growth, -1.0], [1.0, growth]]])
  wide = coverage.COVERAGE_RADII["latent_coverage_wide"]
  assert coverage.latent_coverage(codes, labels, spiral) < 0.4
  assert coverage.latent_coverage(codes, labels, spiral, radius=wide) > 0.8
  for other in ([[0.0, -1.0], [1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]):
    other = np.asarray([other])  # a rotation, a scaling
    assert coverage.latent_coverage(codes, labels, other, radius=wide) < 0.5


def test_selection_picks_what_the_signal_names():
  signals = {
    "latent_coverage": [0.2, 0.9, 0.9, float("nan")],
    "psi_rejected": [3.0, 9.0, 1.0, 0.0],
    "loss": [-1.0, -0.5, -0.7, -3.0],
    "log_p": [0.0, 1.0, 2.0, 3.0],
  }
  assert selection.select(signals, "latent_coverage")[0] == 2  # tie: lower loss
  assert selection.select(signals, "psi_rejected")[0] == 3
  assert selection.select(signals, "loss")[0] == 3
  assert selection.select(signals, "log_p")[0] == 3
  best, reason = selection.select(signals, "latent_coverage")
  assert "member 2" in reason and "highest latent_coverage" in reason
  dead = {k: [float("nan")] * 4 for k in signals}
  assert selection.select(dead, "loss")[0] == 0


def test_auc_and_study_summary():
  assert auc([3, 2, 1, 0], [True, True, False, False]) == 1.0
  assert auc([0, 1], [True, False]) == 0.0
  assert auc([1, 1], [True, False]) == 0.5
  assert np.isnan(auc([1, 2], [True, True]))
  members = lambda ok: [
    {
      "success": s,
      "orbit_coverage": 1.0 * s,  # noqa: E731
      "sample_manifold_distance": 5.0,
    }
    for s in ok
  ]
  signals = lambda cov: {
    "latent_coverage": cov,
    "psi_rejected": [1.0, 2.0],  # noqa: E731
    "loss": [0.0, 0.0],
    "log_p": [0.0, 0.0],
  }
  studies = [
    {
      "seed": 0,
      "select_step": 2,
      "signals": signals([0.9, 0.1]),
      "members": members([True, False]),
    },
    {
      "seed": 1,
      "select_step": 2,
      "signals": signals([0.1, 0.8]),
      "members": members([False, True]),
    },
  ]
  summary = summarise_study(studies)
  assert summary["single_run_success_rate"] == 0.5
  assert summary["member0_success_rate"] == 0.5
  assert summary["oracle_success_rate"] == 1.0
  assert summary["signals"]["latent_coverage"]["population_success_rate"] == 1.0
  assert summary["signals"]["latent_coverage"]["auc"] == 1.0
  assert summary["signals"]["psi_rejected"]["population_success_rate"] == 0.5


@pytest.mark.whole_run
@pytest.mark.parametrize(  # 1.0: kept at the end, as the swiss roll's default
  "select_at, signal", [(0.5, "latent_coverage"), (1.0, "data_coverage")]
)
def test_population_run_selects_continues_and_loads_the_winner(
  tmp_path, select_at, signal
):
  lines = []
  config = dataclasses.replace(SMALL, select_at=select_at, select_signal=signal)
  trained, summary = train_and_evaluate(config, DATA, tmp_path, log=lines.append)
  selection = json.loads((tmp_path / "population" / "selection.json").read_text())
  winner = selection["selected_member"]
  assert summary["population"]["selected_member"] == winner
  assert summary["population"]["select_step"] == round(select_at * SMALL.num_steps)
  signals = selection["signals"]
  assert set(signals) >= {"latent_coverage", "psi_rejected", "loss", signal}
  assert ("sample_distance" in signals) == (signal == "data_coverage")
  np.testing.assert_allclose(
    signals["latent_coverage_both"],
    np.add(signals["latent_coverage"], signals["latent_coverage_wide"]),
  )
  assert all(len(v) == 3 for v in selection["signals"].values())
  assert any(line.startswith("selected member") for line in lines)
  first = json.loads(
    (tmp_path / "population" / "metrics.jsonl").read_text().splitlines()[0]
  )
  assert len(first["loss"]) == 3  # one value per member
  loaded = api.load(tmp_path)
  chex.assert_trees_all_equal(loaded.params, trained.params)
  assert int(summary["steps"]) == SMALL.num_steps


@pytest.mark.whole_run
def test_cooldown_counts_the_whole_runs_steps(tmp_path):
  """With the rates' cooldown over the second half, the population half
  trains at full rates (the same members and signals as without it) and
  only the kept member's continuation cools down."""
  runs = {}
  for fraction in (0.0, 0.5):
    config = dataclasses.replace(SMALL, lr_net_cooldown=fraction)
    trained, _ = train_and_evaluate(
      config, DATA, tmp_path / str(fraction), log=lambda _: None
    )
    selection = tmp_path / str(fraction) / "population" / "selection.json"
    runs[fraction] = (json.loads(selection.read_text())["signals"], trained.params)
  assert runs[0.5][0] == runs[0.0][0]
  assert not np.allclose(
    runs[0.5][1]["decoder"]["Dense_0"]["kernel"],
    runs[0.0][1]["decoder"]["Dense_0"]["kernel"],
  )


ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run_cli(*flags, timeout=600):
  """``python experiments/run.py FLAGS`` from the repository root."""
  return subprocess.run(
    [sys.executable, "experiments/run.py", *flags],
    capture_output=True,
    text=True,
    timeout=timeout,
    cwd=ROOT,
  )


@pytest.mark.whole_run
def test_sensitivity_study_runs_end_to_end(tmp_path):
  result = _run_cli(
    "--exp=sensitivity",
    "--base=concentric",
    "--seeds=1",
    "--first-seed=5",
    f"--workdir={tmp_path}",
    "--config.population=2",
    "--config.num_steps=8",
    "--config.hidden=(16,)",
    "--config.inference_max_iter=5",
    "--config.log_every=4",
  )
  assert result.returncode == 0, result.stderr[-2000:]
  assert "single run (every member)" in result.stdout
  summary = json.loads((tmp_path / "sensitivity.json").read_text())
  assert summary["population"] == 2 and summary["seeds"] == [5]
  assert set(summary["signals"]) >= {"latent_coverage", "latent_coverage_both"}
  assert (tmp_path / "population_orbits.png").stat().st_size > 0


@pytest.mark.whole_run
def test_anchor_study_runs_end_to_end(tmp_path):
  """``--anchors`` runs the study once per count, anchors at random places."""
  result = _run_cli(
    "--exp=sensitivity",
    "--base=swiss_roll",
    "--anchors=2,3",
    "--seeds=1",
    f"--workdir={tmp_path}",
    "--config.population=2",
    "--config.num_steps=4",
    "--config.hidden=(16,)",
    "--config.inference_max_iter=5",
    "--config.log_every=2",
  )
  assert result.returncode == 0, result.stderr[-2000:]
  rows = json.loads((tmp_path / "anchors.json").read_text())["rows"]
  assert [(r["anchors"], r["trials"]) for r in rows] == [(2, 2), (3, 2)]
  assert "| 3 | 2 |" in result.stdout
  for count in (2, 3):
    study = json.loads(
      (tmp_path / f"anchors{count}" / "seed0" / "study.json").read_text()
    )
    assert len(study["members"]) == 2
  bad = _run_cli("--exp=swiss_roll", "--anchors=3", timeout=120)
  assert bad.returncode == 2 and "--anchors goes with --exp=sensitivity" in bad.stderr


def test_coverage_ranks_weigh_both_radii_alike():
  narrow, wide = [0.1, 0.5, 0.3, 0.3], [0.9, 0.8, 0.85, 0.7]
  # narrow ranks 0, 3, 1.5, 1.5 (a tie shares its mean); wide 3, 1, 2, 0
  sums = np.array([3.0, 4.0, 3.5, 1.5]) + np.add(narrow, wide) / 10
  np.testing.assert_allclose(coverage.coverage_ranks(narrow, wide), sums)
  # Four members of a swiss-roll run (seed 125): the plain sum keeps the one
  # with the highest narrow score (member 0, which followed only part of
  # the roll); the ranks keep member 1 (a wide score above it too).
  narrow, wide = [0.549, 0.508, 0.446, 0.276], [0.866, 0.882, 0.890, 0.879]
  signals = {
    "latent_coverage_ranks": coverage.coverage_ranks(narrow, wide).tolist(),
    "latent_coverage_both": np.add(narrow, wide).tolist(),
    "loss": [0.0] * 4,
  }
  assert selection.select(signals, "latent_coverage_ranks")[0] == 1
  assert selection.select(signals, "latent_coverage_both")[0] == 0


def test_data_coverage_ties_go_to_the_prior_samples_nearest_the_data():
  # As on seed 163 of the swiss roll: members carry a point along the whole
  # roll (data_coverage 1); the loss would keep member 2, whose prior
  # samples lie far off the roll.
  signals = {
    "data_coverage": [0.9, 1.0, 1.0, 1.0, float("nan")],
    "sample_distance": [0.1, 1.2, 3.5, 0.8, 0.0],
    "loss": [-2.0, -0.5, -0.9, -0.4, -3.0],
  }
  best, reason = selection.select(signals, "data_coverage")
  assert best == 3
  assert "of the 3 tied, the lowest sample_distance (0.8)" in reason
  del signals["sample_distance"]  # a run that did not record it: the loss
  assert selection.select(signals, "data_coverage")[0] == 2
