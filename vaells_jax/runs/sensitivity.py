"""Sensitivity studies (paper appendix F) and the choice of population selection.

:func:`population_study` trains, for each seed, a population of ``K``
members (dictionary draws of the same networks and anchors, paper appendix F
(a); member 0 is the single run of that seed) to the end of the budget in
one vmapped step, records every member's selection signals at the selection
step (no ground truth), and measures on the ground truth whether each member
learned the manifold (:func:`vaells_jax.evaluation.synthetic_report.
learned_structure`: orbit coverage >= 0.9 and prior samples within 15 noise
levels). From that it reports

* the single-run success rate (every member is an independent single run;
  also member 0 alone, the default run of each seed);
* for each signal, the success rate of a population that keeps the member
  that signal picks, and how well the signal ranks successes above failures
  (AUC over all members, 0.5 = chance);
* the oracle rate (a seed has at least one successful member).

A population run continues the chosen member alone after the selection
step; here it continues inside the population, the same arithmetic up to
the rounding of the batched step.

:func:`grid_study` is the paper's table 1 on natural MNIST: single runs over
dictionary sizes ``M`` and anchors per class ``N_a``, with the paper's
log-likelihood and MSE beside ours where the paper has the cell
(:data:`PAPER_TABLE1`).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import time

import numpy as np

from vaells_jax.api import TrainedVAELLS
from vaells_jax.config import CONFIG_NAME, SELECT_SIGNALS, Config, config_from_json
from vaells_jax.data.files import atomic_write_text
from vaells_jax.evaluation import plotting
from vaells_jax.evaluation.synthetic_report import (
  eval_keys,
  learned_structure,
  operator_orbits,
)
from vaells_jax.runs.compare import _run_one
from vaells_jax.training import loop, population, selection
from vaells_jax.training.guards import check_data

__all__ = [
  "GRID_METRICS",
  "PAPER_TABLE1",
  "anchor_study",
  "auc",
  "grid_study",
  "paper_cell",
  "population_study",
  "summarise_study",
]


def auc(scores, success) -> float:
  """P(a success scores higher than a failure), ties counted half; NaN if
  either class is empty."""
  scores, success = np.asarray(scores, float), np.asarray(success, bool)
  pos, neg = scores[success], scores[~success]
  if not len(pos) or not len(neg):
    return float("nan")
  greater = (pos[:, None] > neg[None, :]).mean()
  ties = (pos[:, None] == neg[None, :]).mean()
  return float(greater + 0.5 * ties)


CHECK_FRACTIONS = (0.1, 0.25, 0.5, 0.75, 1.0)  # where every member's signals are taken


def _seed_study(config: Config, data, workdir: pathlib.Path, log) -> dict:
  """One seed: the population to the end, every member's signals at each of
  :data:`CHECK_FRACTIONS` of the steps, then every member's ground truth."""
  k = selection.selection_step(config)
  step = population.make_population_step(config, data.data_dim)
  quiet = dict(
    init=population.init_population,
    make_step=lambda *_: step,
    log=log,
    describe=population.describe_members,
  )
  start = time.perf_counter()
  checks = sorted({k, *(max(1, round(f * config.num_steps)) for f in CHECK_FRACTIONS)})
  signals_at = {}
  for at in checks:
    state, _ = loop.train_loop(
      dataclasses.replace(config, num_steps=at), data, workdir, resume=True, **quiet
    )
    signals_at[str(at)] = selection.selection_signals(state, config, data, step)
  signals = signals_at[str(k)]
  key = eval_keys(config.seed)[0]
  members = []
  for m in range(config.population):
    single = population.member(state, m)
    trained = TrainedVAELLS(config, single.params, data)
    members.append(
      {
        **learned_structure(trained, key),
        "psi_rejected_final": int(single.psi_rejected),
        "latents": np.asarray(trained.encode(data.x_test)).tolist(),
        "psi": np.asarray(trained.psi).tolist(),
      }
    )
  return {
    "seed": config.seed,
    "select_step": k,
    "signals": signals,
    "signals_at": signals_at,
    "members": members,
    "wall_time_s": time.perf_counter() - start,
  }


def population_study(config: Config, make_data, seeds, workdir, log=print) -> dict:
  """Runs the study of the module docstring over ``seeds``.

  Args:
    config: the experiment's configuration; ``config.population`` members,
      ``config.select_at`` the selection step (``config.seed`` is replaced by
      each seed).
    make_data: ``config -> Dataset`` (with ground truth).
    seeds: the seeds.
    workdir: output folder: ``seedS/`` per seed (resumable; a finished seed's
      ``study.json`` is reused), ``sensitivity.json``, ``sensitivity.md`` and
      ``population_orbits.png``.
    log: where progress lines go.

  Returns:
    The summary (:func:`summarise_study`).
  """
  workdir = pathlib.Path(workdir)
  studies = []
  for seed in seeds:
    cfg = dataclasses.replace(config, seed=seed)
    folder = workdir / f"seed{seed}"
    done = folder / "study.json"
    if not done.exists():
      log(f"seed {seed}: population of {cfg.population}")
      result = _seed_study(cfg, make_data(cfg), folder, log=lambda line: None)
      done.write_text(json.dumps(result))
    studies.append(json.loads(done.read_text()))
  summary = summarise_study(studies)
  summary["config"] = dataclasses.asdict(config)
  (workdir / "sensitivity.json").write_text(json.dumps(summary, indent=2))
  (workdir / "sensitivity.md").write_text(_markdown(summary))
  _orbit_figure(workdir / "population_orbits.png", studies[0])
  return summary


def _orbit_figure(path, study: dict) -> None:
  """One panel per member of one seed: its test encodings (0) and the orbits
  of its strongest operator from 8 of them (1), as paper figs 14-16."""
  panels = []
  for m, mem in enumerate(study["members"]):
    latents, psi = np.asarray(mem["latents"]), np.asarray(mem["psi"])
    strongest = int(np.argmax(np.linalg.norm(psi, axis=(1, 2))))
    starts = latents[:: max(1, len(latents) // 8)][:8]
    max_norm = 1.5 * np.linalg.norm(latents, axis=-1).max()
    orbit = operator_orbits(psi[strongest : strongest + 1], starts, max_norm)
    orbit = orbit.reshape(-1, latents.shape[-1])
    orbit = orbit[np.all(np.isfinite(orbit), axis=-1)]
    panels.append(
      (
        f"seed {study['seed']} member {m}: coverage {mem['orbit_coverage']:.2f}, "
        f"samples {mem['sample_manifold_distance']:.0f}",
        np.concatenate([latents, orbit]),
        np.repeat([0, 1], [len(latents), len(orbit)]),
      )
    )
  plotting.plot_panels(path, panels, colour_label="orbit ")


def summarise_study(studies: list[dict]) -> dict:
  """Success rates and each signal's predictive power (module docstring)."""
  success = [[m["success"] for m in s["members"]] for s in studies]
  flat = np.concatenate([np.asarray(s, bool) for s in success])
  rows = {}
  for name in SELECT_SIGNALS:
    if not all(name in s["signals"] for s in studies):  # a study.json of before
      continue
    picks = [selection.select(s["signals"], name)[0] for s in studies]
    sign = selection.SIGN[name]
    scores = np.concatenate([-sign * np.asarray(s["signals"][name]) for s in studies])
    rows[name] = {
      "population_success_rate": float(
        np.mean([ok[p] for ok, p in zip(success, picks, strict=True)])
      ),
      "auc": auc(scores, flat),
      "picked_members": picks,
    }
  return {
    "seeds": [s["seed"] for s in studies],
    "population": len(success[0]),
    "select_step": studies[0]["select_step"],
    "single_run_success_rate": float(flat.mean()),
    "member0_success_rate": float(np.mean([ok[0] for ok in success])),
    "oracle_success_rate": float(np.mean([any(ok) for ok in success])),
    "signals": rows,
    "members": [
      {
        "seed": s["seed"],
        "success": ok,
        "orbit_coverage": [m["orbit_coverage"] for m in s["members"]],
        "sample_manifold_distance": [
          m["sample_manifold_distance"] for m in s["members"]
        ],
        "signals": s["signals"],
      }
      for s, ok in zip(studies, success, strict=True)
    ],
  }


def anchor_study(config: Config, make_data, counts, seeds, workdir, log=print) -> dict:
  """Paper appendix F (b): the population study with ``A`` anchors at random
  places, for each ``A`` in ``counts``.

  Args:
    config: as for :func:`population_study`.
    make_data: ``(config, A) -> Dataset`` with ``A`` randomly placed
      anchors (per class).
    counts: the anchor counts, e.g. ``(3, 4, 6, 8)``.
    seeds: the seeds (each seed also places the anchors).
    workdir: output folder: ``anchorsA/`` holds each count's population study;
      ``anchors.json`` and ``anchors.md`` the success rates per count.
    log: where progress lines go.

  Returns:
    ``{"rows": [...]}``, one row of success rates per anchor count.
  """
  workdir = pathlib.Path(workdir)
  rows = []
  for count in counts:
    log(f"{count} anchors at random places")
    summary = population_study(
      config,
      lambda c, count=count: make_data(c, count),
      seeds,
      workdir / f"anchors{count}",
      log,
    )
    rows.append(
      {
        "anchors": count,
        "trials": len(summary["seeds"]) * summary["population"],
        "single_run_success_rate": summary["single_run_success_rate"],
        "oracle_success_rate": summary["oracle_success_rate"],
        "population_success_rate": summary["signals"][config.select_signal][
          "population_success_rate"
        ],
      }
    )
  result = {"select_signal": config.select_signal, "rows": rows}
  (workdir / "anchors.json").write_text(json.dumps(result, indent=2))
  lines = [
    "# Anchor points at random places (paper appendix F)",
    "",
    "Success: orbit coverage >= 0.9 and prior samples within 15 noise levels.",
    "",
    f"| anchors | trials | single run | population ({config.select_signal}) "
    "| any member |",
    "|---|---|---|---|---|",
  ] + [
    f"| {r['anchors']} | {r['trials']} | {r['single_run_success_rate']:.2f} "
    f"| {r['population_success_rate']:.2f} | {r['oracle_success_rate']:.2f} |"
    for r in rows
  ]
  (workdir / "anchors.md").write_text("\n".join(lines) + "\n")
  return result


def _markdown(summary: dict) -> str:
  lines = [
    f"# Population study: {len(summary['seeds'])} seeds x "
    f"{summary['population']} members",
    "",
    f"Selection at step {summary['select_step']}. Success: orbit coverage >= 0.9 "
    "and prior samples within 15 noise levels of the true manifold.",
    "",
    f"- single run (every member): {summary['single_run_success_rate']:.2f}",
    f"- single run (member 0, the default run): {summary['member0_success_rate']:.2f}",
    f"- oracle (any member): {summary['oracle_success_rate']:.2f}",
    "",
    "| selection signal | population success rate | AUC |",
    "|---|---|---|",
  ]
  for name, row in summary["signals"].items():
    lines.append(
      f"| {name} | {row['population_success_rate']:.2f} | {row['auc']:.2f} |"
    )
  return "\n".join(lines) + "\n"


# --- Paper table 1: dictionary size M x anchors per class N_a (natural MNIST).

# (M, N_a) -> the paper's estimated log-likelihood and MSE (full MNIST: 50 000
# training digits; LL over 500 test digits x 100 importance samples).
PAPER_TABLE1 = {
  (2, 8): {"log_likelihood": -4.026e6, "mse": 0.0315},
  (4, 8): {"log_likelihood": -1.169e6, "mse": 0.0232},
  (8, 8): {"log_likelihood": -731.91, "mse": 0.0244},
  (4, 12): {"log_likelihood": -9.248e5, "mse": 0.0221},
  (4, 16): {"log_likelihood": -7.523e5, "mse": 0.0232},
}
GRID_METRICS = (
  "mse",
  "log_likelihood",
  "elbo",
  "class_consistency",
  "knn_class_accuracy",
  "train_time_s",
  "wall_time_s",
)


def paper_cell(num_ops: int, anchors_per_class: int) -> dict | None:
  """The paper's ``{"log_likelihood", "mse"}`` for ``(M, N_a)``, or None
  where table 1 has no such cell."""
  cell = PAPER_TABLE1.get((int(num_ops), int(anchors_per_class)))
  return dict(cell) if cell is not None else None


def _cell_stats(summaries: list[dict]) -> dict:
  """Mean, std (ddof 0) and per-seed values of each of :data:`GRID_METRICS`;
  None for a metric that some seed lacks."""
  stats = {}
  for key in GRID_METRICS:
    if not all(key in s for s in summaries):
      stats[key] = None
      continue
    values = [float(s[key]) for s in summaries]
    stats[key] = {
      "mean": float(np.mean(values)),
      "std": float(np.std(values)),
      "values": values,
    }
  return stats


def _check_cell_folder(config: Config, run_dir: pathlib.Path, overwrite) -> None:
  """What :func:`_run_one` refuses, checked before any cell trains."""
  saved = run_dir / CONFIG_NAME
  if not overwrite and saved.exists() and config_from_json(saved) != config:
    raise ValueError(
      f"{run_dir} holds a run of another configuration; use "
      "--overwrite to replace it, or another --workdir."
    )


def grid_study(
  config: Config,
  make_data,
  ops,
  anchors,
  seeds,
  workdir,
  log=print,
  overwrite: bool = False,
) -> dict:
  """Paper table 1: one run per dictionary size, anchor count and seed.

  Every configuration, run folder and anchor count (on the first seed's
  data) is checked before anything trains. Runs live in
  ``workdir/M{M}_Na{N_a}/seed{s}``; a finished run's ``summary.json`` is
  reused and a stopped one resumes from its checkpoint
  (:func:`vaells_jax.runs.compare._run_one`), so the same call again
  finishes the grid.

  Args:
    config: the natural-MNIST configuration and budget (``num_ops`` and
      ``seed`` are set per run).
    make_data: ``(config, anchors_per_class) -> data set``; called once per
      anchor count and seed (the anchors depend on both, not on ``M``).
    ops: the dictionary sizes ``M``, e.g. ``(2, 4, 8)``.
    anchors: the anchors per class ``N_a``, e.g. ``(8, 12, 16)``.
    seeds: the seeds.
    workdir: output folder; ``grid.json`` and ``grid.md`` hold the table.
    log: where progress lines go.
    overwrite: retrain runs that exist.

  Returns:
    ``{"num_steps", "warmup_steps", "eval_ll_points", "eval_ll_samples",
    "seeds", "cells"}``; each cell holds ``num_ops``, ``anchors_per_class``,
    ``train_digits``, ``metrics`` (:func:`_cell_stats`) and ``paper``
    (:func:`paper_cell`).

  Raises:
    ValueError: empty or repeated ``ops``/``anchors``/``seeds``, a cell's
      configuration that :class:`Config` refuses, or a run folder of another
      configuration (without ``overwrite``).
  """
  ops, anchors, seeds = tuple(ops), tuple(anchors), tuple(seeds)
  workdir = pathlib.Path(workdir)
  cell_dir = lambda m, a, s: workdir / f"M{m}_Na{a}" / f"seed{s}"  # noqa: E731
  grid = (ops, anchors, seeds)
  configs = _check_grid(config, make_data, grid, cell_dir, overwrite)
  summaries, digits = _train_grid(configs, make_data, grid, cell_dir, log, overwrite)
  result = _grid_result(config, grid, summaries, digits)
  atomic_write_text(workdir / "grid.json", json.dumps(result, indent=2))
  atomic_write_text(workdir / "grid.md", _grid_markdown(result))
  return result


def _check_grid(config: Config, make_data, grid, cell_dir, overwrite) -> dict:
  """:func:`grid_study`'s checks before anything trains; returns each
  ``(M, seed)``'s configuration (which :class:`Config` validates)."""
  ops, anchors, seeds = grid
  for name, values in (("ops", ops), ("anchors", anchors), ("seeds", seeds)):
    if not values or len(set(values)) != len(values):
      raise ValueError(f"{name} must be distinct values, at least one: {values}")
  configs = {  # Config validates each one here, before any training
    (m, s): dataclasses.replace(config, num_ops=m, seed=s) for m in ops for s in seeds
  }
  for m in ops:
    for a in anchors:
      for s in seeds:
        _check_cell_folder(configs[m, s], cell_dir(m, a, s), overwrite)
  for a in anchors[1:]:  # e.g. more anchors than a class has digits
    check_data(configs[ops[0], seeds[0]], make_data(configs[ops[0], seeds[0]], a))
  return configs


def _train_grid(configs, make_data, grid, cell_dir, log, overwrite):
  """Every cell's runs: ``(summaries {(M, N_a): [summary per seed]},
  training digits {N_a: count})``."""
  ops, anchors, seeds = grid
  summaries = {(m, a): [] for m in ops for a in anchors}
  digits = {}
  for a in anchors:
    for s in seeds:
      data = make_data(configs[ops[0], s], a)
      digits[a] = int(data.x_train.shape[0])
      for m in ops:
        log(f"== M={m}, N_a={a}, seed {s}")
        summaries[m, a].append(
          _run_one(configs[m, s], data, cell_dir(m, a, s), log, overwrite)
        )
  return summaries, digits


def _grid_result(config: Config, grid, summaries, digits) -> dict:
  """:func:`grid_study`'s result: the budget, the seeds and every cell."""
  ops, anchors, seeds = grid
  cells = [
    {
      "num_ops": m,
      "anchors_per_class": a,
      "train_digits": digits[a],
      "metrics": _cell_stats(summaries[m, a]),
      "paper": paper_cell(m, a),
    }
    for m in ops
    for a in anchors
  ]
  return {
    "num_steps": config.num_steps,
    "warmup_steps": config.warmup_steps,
    "eval_ll_points": config.eval_ll_points,
    "eval_ll_samples": config.eval_ll_samples,
    "seeds": list(seeds),
    "cells": cells,
  }


def _number(x) -> str:
  """4 significant digits; a dash for None."""
  return "–" if x is None else f"{x:.4g}"


def _mean_std(stat) -> str:
  if stat is None:
    return "–"
  if len(stat["values"]) == 1:
    return _number(stat["mean"])
  return f"{_number(stat['mean'])} ± {_number(stat['std'])}"


def _grid_markdown(result: dict) -> str:
  lines = [
    "# Natural MNIST: dictionary size M x anchors per class N_a (paper table 1)",
    "",
    "| M | N_a | seeds | LL ours | LL paper | MSE ours | MSE paper "
    "| class consistency | train time (s) |",
    "|---|---|---|---|---|---|---|---|---|",
  ]
  for cell in result["cells"]:
    ours, paper = cell["metrics"], cell["paper"] or {}
    lines.append(
      f"| {cell['num_ops']} | {cell['anchors_per_class']} "
      f"| {len(result['seeds'])} | {_mean_std(ours['log_likelihood'])} "
      f"| {_number(paper.get('log_likelihood'))} | {_mean_std(ours['mse'])} "
      f"| {_number(paper.get('mse'))} | {_mean_std(ours['class_consistency'])} "
      f"| {_mean_std(ours['train_time_s'])} |"
    )
  digits = sorted({c["train_digits"] for c in result["cells"]})
  lines += [
    "",
    f"Ours: {result['num_steps']} steps per run ({result['warmup_steps']} of "
    f"them warm-up), {', '.join(map(str, digits))} training digits, LL over "
    f"{result['eval_ll_points']} test digits x {result['eval_ll_samples']} "
    "importance samples; mean ± std over the seeds "
    f"{', '.join(map(str, result['seeds']))}. The paper's numbers are full "
    "MNIST (50 000 training digits) with LL over 500 x 100; a dash: the "
    "paper has no such cell.",
  ]
  return "\n".join(lines) + "\n"
