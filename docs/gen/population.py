"""The numbers of the population pages: selection signals, draws, anchors."""

from __future__ import annotations

import statistics

import numpy as np

from .common import _and, _block, _load, _of


def _kept(signals: dict, name: str, members: int) -> int:
  """The member a population of the first ``members`` keeps by ``name``, as
  the command selects (:func:`vaells_jax.training.selection.select`)."""
  from vaells_jax.training.coverage import combined_coverages  # jax
  from vaells_jax.training.selection import select

  signals = {k: list(v[:members]) for k, v in signals.items()}
  return select({**signals, **combined_coverages(signals)}, name)[0]


def swiss_signal_table() -> str:
  """docs/studies/population-swiss-roll.md: seeds 100-119 whose kept member traverses
  the roll, by signal, for the first 8 and all 16 members."""
  seeds = _load("population_swiss_roll_k16.json")["seeds"]
  rows = ["| signal | 8 members (0–7) | 16 members |", "|---|---|---|"]
  for name, label in (
    ("latent_coverage_wide", "`latent_coverage_wide`"),
    ("latent_coverage", "`latent_coverage`"),
    ("latent_coverage_both", "`latent_coverage_both` (their sum)"),
  ):
    cells = []
    for members in (8, 16):
      failed = [
        seed
        for seed, run in seeds.items()
        if not run["success"][_kept(run["signals"], name, members)]
      ]
      cell = _of(len(seeds) - len(failed), len(seeds), 1.0)
      cells.append(cell + (f" ({', '.join(failed)} fail)" if failed else ""))
    rows.append(f"| {label} | " + " | ".join(cells) + " |")
  return _block(rows)


def swiss_eight_rate() -> str:
  """docs/studies/population-swiss-roll.md: seeds where 8 members (0-7) kept by
  ``latent_coverage_wide`` traverse the roll."""
  seeds = _load("population_swiss_roll_k16.json")["seeds"].values()
  wins = sum(
    r["success"][_kept(r["signals"], "latent_coverage_wide", 8)] for r in seeds
  )
  return f"{wins} of {len(seeds)} seeds"


def swiss_eight_failures() -> str:
  """docs/studies/population-swiss-roll.md: the seeds where 8 members (0-7) kept by
  ``latent_coverage_wide`` fail, and why."""
  seeds = _load("population_swiss_roll_k16.json")["seeds"]
  none, missed = [], []
  for seed, run in seeds.items():
    kept = _kept(run["signals"], "latent_coverage_wide", 8)
    if run["success"][kept]:
      continue
    learners = [m for m in range(8) if run["success"][m]]
    if learners:
      cover = run["orbit_coverage"][kept]
      names = _and(learners)
      missed.append(
        f"on {seed} members {names} do and it keeps member {kept} "
        f"(orbit coverage {cover:.2f})"
      )
    else:
      none.append(seed)
  cover = [c for s in none for c in seeds[s]["orbit_coverage"][:8]]
  text = (
    f"on seeds {_and(none)} none of members 0–7 traverses the roll (orbit "
    f"coverage {min(cover):.2f}–{max(cover):.2f}), so no signal could keep one"
  )
  return "; ".join([text, *missed])


def swiss_k16_members() -> str:
  """docs/studies/population-swiss-roll.md: the 16-member study's members that
  traverse the roll."""
  seeds = _load("population_swiss_roll_k16.json")["seeds"].values()
  counts = [sum(run["success"]) for run in seeds]
  members = sum(len(run["success"]) for run in seeds)
  return f"{min(counts)}–{max(counts)} of 16; {sum(counts)} of {members} members in all"


def swiss_k16_auc() -> str:
  """docs/studies/population-swiss-roll.md: how each signal ranks the 16-member
  study's members within a seed (the mean over seeds)."""
  from vaells_jax.runs.sensitivity import auc  # jax

  aucs = []
  for name in ("latent_coverage_wide", "latent_coverage", "latent_coverage_both"):
    per_seed = []
    for run in _load("population_swiss_roll_k16.json")["seeds"].values():
      signals = {k: np.asarray(v, np.float64) for k, v in run["signals"].items()}
      signals["latent_coverage_both"] = (
        signals["latent_coverage"] + signals["latent_coverage_wide"]
      )
      success = np.asarray(run["success"])
      if success.any() and not success.all():
        per_seed.append(auc(signals[name], success))
    aucs.append(f"{statistics.mean(per_seed):.3f}")
  return f"{aucs[0]}, {aucs[1]} and {aucs[2]}"


# Every member of the swiss roll's default runs, scored on the ground truth:
# the population study of seeds 100-119, and benchmarks/population_members.py
# on the command's runs of the fresh seeds.
SWISS_MEMBERS = {
  "100–119": "population_swiss_roll_k16.json",
  "120–139": "swiss_roll_members_120_139.json",
  "140–159": "swiss_roll_members_140_159.json",
  "160–179": "swiss_roll_members_160_179.json",
  "180–199": "swiss_roll_members_180_199.json",
}


SWISS_SIGNALS = {
  "data_coverage": "`data_coverage`, ties by `sample_distance` (the default)",
  "latent_coverage_ranks": "`latent_coverage_ranks` (the ranks)",
  "latent_coverage_both": "`latent_coverage_both` (the sum)",
  "latent_coverage_wide": "`latent_coverage_wide`",
  "latent_coverage": "`latent_coverage`",
}


def _swiss_members(name: str) -> dict[int, tuple[list[bool], dict]]:
  """``{seed: (each member's success, each member's signals)}``."""
  raw = _load(name)
  if "seeds" in raw:  # a population study
    return {int(s): (r["success"], r["signals"]) for s, r in raw["seeds"].items()}
  runs = {}
  for run in raw.values():
    members = run["members"]
    signals = {k: [m["signals"][k] for m in members] for k in members[0]["signals"]}
    runs[run["seed"]] = ([m["success"] for m in members], signals)
  return runs


def _swiss_failures(runs: dict, signal: str) -> list[int] | None:
  """The seeds whose member kept by ``signal`` does not traverse the roll
  (None where the runs did not record the signal)."""
  from vaells_jax.training.coverage import combined_coverages  # jax

  if any(
    signal not in {**signals, **combined_coverages(signals)}
    for _, signals in runs.values()
  ):
    return None
  return [
    seed
    for seed, (success, signals) in sorted(runs.items())
    if not success[_kept(signals, signal, len(success))]
  ]


def swiss_signals_by_seeds() -> str:
  """docs/studies/population-swiss-roll.md: seeds whose kept member traverses the
  roll, for each signal and range of seeds."""
  ranges = {r: _swiss_members(name) for r, name in SWISS_MEMBERS.items()}
  rows = [
    "| signal | " + " | ".join(f"seeds {r}" for r in ranges) + " |",
    "|---|" + "---|" * len(ranges),
  ]
  for signal, label in SWISS_SIGNALS.items():
    cells = []
    for runs in ranges.values():
      failed = _swiss_failures(runs, signal)
      if failed is None:
        cells.append("–")
        continue
      cell = _of(len(runs) - len(failed), len(runs))
      cells.append(cell + (f" ({', '.join(map(str, failed))} fail)" if failed else ""))
    rows.append(f"| {label} | " + " | ".join(cells) + " |")
  return _block(rows)


def _swiss_default_signal() -> str:
  from vaells_jax.experiments import swiss_roll

  return swiss_roll.get_config().select_signal


def swiss_reach_table() -> str:
  """docs/studies/population-swiss-roll.md: ``data_coverage`` at each reach alone
  and averaged over the default's reaches, seeds 120-159 (ties by the loss,
  as the reaches were compared)."""
  from vaells_jax.training.coverage import DATA_COVERAGE_REACHES
  from vaells_jax.training.selection import select

  scores = _load("swiss_roll_data_coverage_reaches.json")
  runs = {}
  for name in list(SWISS_MEMBERS.values())[1:3]:
    runs.update({f"s{seed}": run for seed, run in _swiss_members(name).items()})
  default = [f"{r:g}" for r in DATA_COVERAGE_REACHES]
  choices = {r: [r] for r in next(iter(scores.values()))[0]}
  choices[f"mean of {', '.join(default)} (the default)"] = default
  rows = ["| reach (spacings) | kept member traverses the roll |", "|---|---|"]
  for label, reaches in choices.items():
    failed = []
    for seed, members in scores.items():
      success, signals = runs[seed]
      value = [statistics.fmean(m[r] for r in reaches) for m in members]
      if not success[
        select({"data_coverage": value, "loss": signals["loss"]}, "data_coverage")[0]
      ]:
        failed.append(seed[1:])
    cell = _of(len(scores) - len(failed), len(scores))
    rows.append(
      f"| {label} | {cell}" + (f" ({', '.join(failed)} fail)" if failed else "") + " |"
    )
  return _block(rows)


# The seeds the default signal's rule was chosen on; the others were fresh.
SWISS_SEEN = ("120–139", "140–159", "160–179")


def swiss_default_rate() -> str:
  """README, docs: the swiss-roll default's rate on its fresh seeds and on
  the seeds its signal was chosen on."""
  signal = _swiss_default_signal()
  kept, total, fresh = 0, 0, []
  for seeds, name in SWISS_MEMBERS.items():
    runs = _swiss_members(name)
    failed = _swiss_failures(runs, signal)
    if failed is None:
      continue
    if seeds in SWISS_SEEN:
      kept, total = kept + len(runs) - len(failed), total + len(runs)
    else:
      fresh.append(f"{_of(len(runs) - len(failed), len(runs))} fresh seeds {seeds}")
  seen = f"{SWISS_SEEN[0].split('–')[0]}–{SWISS_SEEN[-1].split('–')[1]}"
  return (
    f"{', '.join(fresh)}; {kept} of {total} seeds {seen} (seen when the "
    "signal was chosen)"
  )


def swiss_default_failures() -> str:
  """docs/studies/population-swiss-roll.md: the seeds where the default's kept
  member does not traverse the roll, and what its population held."""
  signal = _swiss_default_signal()
  rows = [
    "| seed | members that traverse the roll | the kept member: orbit coverage,"
    " samples (noise levels) |",
    "|---|---|---|",
  ]
  for name in list(SWISS_MEMBERS.values())[1:]:
    runs = _swiss_members(name)
    members = {run["seed"]: run["members"] for run in _load(name).values()}
    for seed in _swiss_failures(runs, signal) or []:
      success, signals = runs[seed]
      kept = members[seed][_kept(signals, signal, len(success))]
      rows.append(
        f"| {seed} | {sum(success)} of {len(success)} | "
        f"{kept['orbit_coverage']:.2f}, {kept['sample_manifold_distance']:.1f} |"
      )
  return _block(rows)


def swiss_loss_ties(seeds: str) -> str:
  """docs/studies/population-swiss-roll.md: ``data_coverage`` with ties by the loss
  (before the ``sample_distance`` tie-break) on the seeds ``seeds`` (e.g.
  ``160-179``): where
  its kept member does not traverse the roll, and why."""
  rows = [
    "| seed | members that traverse the roll | members at the best "
    "`data_coverage` | the kept member: orbit coverage, samples (noise levels) "
    "| the members that traverse: rank by `data_coverage` |",
    "|---|---|---|---|---|",
  ]
  name = SWISS_MEMBERS[seeds.replace("-", "–")]
  members = {run["seed"]: run["members"] for run in _load(name).values()}
  for seed, (success, signals) in sorted(_swiss_members(name).items()):
    signals = {k: v for k, v in signals.items() if k != "sample_distance"}
    kept = members[seed][_kept(signals, "data_coverage", len(success))]
    if kept["success"]:
      continue
    coverage = signals["data_coverage"]
    ranks = [
      1 + sum(c > coverage[i] for c in coverage)
      for i, learned in enumerate(success)
      if learned
    ]
    rows.append(
      f"| {seed} | {len(ranks)} of {len(success)} | "
      f"{coverage.count(max(coverage))} ({max(coverage):.2f}) | "
      f"{kept['orbit_coverage']:.2f}, {kept['sample_manifold_distance']:.1f} | "
      f"{', '.join(map(str, sorted(ranks))) or '–'} |"
    )
  return _block(rows)


def swiss_verdict_fit() -> str:
  """docs/studies/population-swiss-roll.md: what the verdict's coverage thresholds
  say of the members of seeds 120-199."""
  from vaells_jax.runs.verdict import THRESHOLDS

  coverage, success = [], []
  for name in list(SWISS_MEMBERS.values())[1:]:
    for _, (learned, signals) in _swiss_members(name).items():
      coverage += signals["latent_coverage"]
      success += learned
  traversing = [c for c, ok in zip(coverage, success, strict=True) if ok]
  low = sum(c < THRESHOLDS["coverage_low"] for c in traversing)
  high = sum(c >= THRESHOLDS["coverage_learned"] for c in traversing)
  members = f"{len(coverage):,}".replace(",", " ")  # 1 280
  return (
    f"over the {members} members of seeds 120–199 its coverage "
    f"thresholds say `not learned` for {100 * low / len(traversing):.0f}% of "
    f"the {len(traversing)} that traverse the roll and `learned` for "
    f"{high or 'none'}"
  )


def concentric_default_rate() -> str:
  """README, docs: the concentric default's rate over its fresh seeds
  (``seed_rates.py``)."""
  seeds = _load("seeds_concentric_100_139.json")["seeds"]
  wins = sum(run["success"] for run in seeds.values())
  first, last = min(map(int, seeds)), max(map(int, seeds))
  return f"{_of(wins, len(seeds))} fresh seeds ({first}–{last})"


CONCENTRIC_SIGNALS = {
  "latent_coverage": "`latent_coverage`",
  "psi_rejected": "`psi_rejected` (fewest; the paper's health signal)",
  "loss": "`loss` (lowest)",
  "log_p": "`log_p` (highest)",
}


def concentric_signal_table() -> str:
  """docs/population.md: each signal's AUC and the seeds its pick learned,
  by step (4 dictionary draws a seed)."""
  study = _load("population_concentric_k4.json")
  steps = list(study["by_step"])
  seeds = len(study["members"])
  rows = [
    f"| signal at step | {' | '.join(steps)} |",
    "|---|" + "---|" * len(steps),
  ]
  for name, label in CONCENTRIC_SIGNALS.items():
    cells = []
    for step in steps:
      row = study["by_step"][step][name]
      k = round(row["population_success_rate"] * seeds)
      cells.append(f"{row['auc']:.2f} / {k}")
    rows.append(f"| {label} | {' | '.join(cells)} |")
  return _block(rows)


def concentric_signal_setup() -> str:
  """docs/population.md: the signal study's seeds and draws."""
  members = _load("population_concentric_k4.json")["members"]
  seeds = [m["seed"] for m in members]
  draws = {len(m["success"]) for m in members}
  return f"{len(seeds)} seeds ({min(seeds)}–{max(seeds)}) × {_and(sorted(draws))} draws"


def concentric_draws() -> str:
  """docs/population.md: the 4- and 8-draw studies' single draws."""
  k4, k8 = (_load(f"population_concentric_k{k}.json") for k in (4, 8))

  def draws(study):
    seeds = len(study["members"])
    draws = seeds * len(study["members"][0]["success"])
    return round(study["single_run_success_rate"] * draws), draws, seeds

  (a, n, seeds), (b, m, _) = draws(k4), draws(k8)
  signals, step = k8["signals"], k8["select_step"]
  picked = {k: round(v["population_success_rate"] * seeds) for k, v in signals.items()}
  return (
    f"Single runs: {a} of the {n} draws learned the circles (member 0, the "
    f"plain run of each seed: {round(k4['member0_success_rate'] * seeds)} of "
    f"{seeds}); on {round(k4['oracle_success_rate'] * seeds)} of {seeds} seeds "
    f"at least one draw did. With 8 draws a seed ([json](results/"
    f"population_concentric_k8.json)): {b} of {m} draws, member 0 "
    f"{round(k8['member0_success_rate'] * seeds)} of {seeds}; at step {step} "
    f"the fewest rejected `Psi` steps picked a learning draw on "
    f"{picked['psi_rejected']} of {seeds} seeds (AUC "
    f"{signals['psi_rejected']['auc']:.2f}), the lowest loss on "
    f"{picked['loss']} ({signals['loss']['auc']:.2f}); `latent_coverage` of "
    f"the final state separates the two kinds with AUC "
    f"{k8['latent_coverage_at_end_auc']:.2f}."
  )


SWISS_STUDIES = {
  "population_swiss_roll_k4_all.json": "4 members, `fista`",
  "population_swiss_roll_k8_all_pgd.json": "8 members, `pgd`",
}


def swiss_dictionary_draws() -> str:
  """docs/studies/population-swiss-roll.md: members that traverse the roll when only
  the dictionary is drawn anew (both coefficient starts)."""
  counts = []
  for name in ("k4_original_starts", "k4"):
    study = _load(f"population_swiss_roll_{name}.json")
    members = study.get("study", study)["members"]
    counts.append(
      (sum(sum(m["success"]) for m in members), sum(len(m["success"]) for m in members))
    )
  (a, n), (b, m) = counts
  return f"{a} of {n} draws with the original starts and {b} of {m} with U[−2.5, 2.5]"


def swiss_study_table() -> str:
  """docs/studies/population-swiss-roll.md: the whole-member studies (seeds 0-9)."""
  rows = [
    "| study (seeds 0–9, every member trained to 3 000 steps) | members that "
    "traverse the roll | seeds with one that does | picked at step 750 by "
    "`latent_coverage` | picked at the end by `latent_coverage` / "
    "`latent_coverage_wide` |",
    "|---|---|---|---|---|",
  ]
  for name, label in SWISS_STUDIES.items():
    runs = _load(name)
    study, end = runs["study"], runs["end_state"]
    seeds = len(study["members"])
    members = sum(len(m["success"]) for m in study["members"])
    learned = sum(sum(m["success"]) for m in study["members"])
    early = study["signals"]["latent_coverage"]
    rows.append(
      f"| {label} ([json](../results/{name})) | {learned} of {members} | "
      f"{round(study['oracle_success_rate'] * seeds)} of {seeds} | "
      f"{round(early['population_success_rate'] * seeds)} of {seeds} (AUC "
      f"{early['auc']:.2f}) | {end['picked_success']['3']} / "
      f"{end['picked_success']['20']} of {seeds} (AUC {end['auc']['3']:.2f} / "
      f"{end['auc']['20']:.2f}) |"
    )
  return _block(rows)


def swiss_anchor_table() -> str:
  """docs/studies/experiments-sensitivity.md: members and picks by random anchor
  count."""
  runs = _load("anchors_swiss_roll.json")
  rows = [
    "| anchors (random places) | members that traverse the roll | seeds where "
    "`latent_coverage_wide`'s pick does | seeds with a member that does |",
    "|---|---|---|---|",
  ]
  for row in runs["anchors"]["rows"]:
    count = runs["per_count"][str(row["anchors"])]
    seeds, trials = len(count["seeds"]), row["trials"]
    rows.append(
      f"| {row['anchors']} | {round(row['single_run_success_rate'] * trials)} of "
      f"{trials} | {round(row['population_success_rate'] * seeds)} of {seeds} | "
      f"{round(row['oracle_success_rate'] * seeds)} of {seeds} |"
    )
  even = _load("population_swiss_roll_k8_all_pgd.json")["study"]
  seeds = len(even["members"])
  members = sum(len(m["success"]) for m in even["members"])
  learned = sum(sum(m["success"]) for m in even["members"])
  rows.append(
    "| 4, evenly spaced (the config's placement; the 8-member `pgd` study of "
    "[the swiss roll's population](population-swiss-roll.md#dictionary-draws-"
    f"and-whole-members)) | {learned} of {members} | — | "
    f"{round(even['oracle_success_rate'] * seeds)} of {seeds} |"
  )
  return _block(rows)


RENDERERS = {
  "swiss-dictionary-draws": swiss_dictionary_draws,
  "swiss-k16-members": swiss_k16_members,
  "swiss-eight-failures": swiss_eight_failures,
  "swiss-eight-rate": swiss_eight_rate,
  "swiss-k16-auc": swiss_k16_auc,
  "concentric-signal-table": concentric_signal_table,
  "concentric-signal-setup": concentric_signal_setup,
  "concentric-draws": concentric_draws,
  "swiss-study-table": swiss_study_table,
  "swiss-anchor-table": swiss_anchor_table,
  "concentric-default-rate": concentric_default_rate,
  "swiss-default-rate": swiss_default_rate,
  "swiss-default-failures": swiss_default_failures,
  "swiss-loss-ties": swiss_loss_ties,
  "swiss-signals-by-seeds": swiss_signals_by_seeds,
  "swiss-signal-table": swiss_signal_table,
  "swiss-reach-table": swiss_reach_table,
  "swiss-verdict-fit": swiss_verdict_fit,
}
