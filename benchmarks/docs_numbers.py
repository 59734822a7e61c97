"""The numbers in README.md and docs/ that come from docs/results/, rendered.

``python benchmarks/docs_numbers.py`` rewrites every generated span of the
README and the docs pages from the JSON in ``docs/results/``;
``--check`` only lists the spans that differ (exit status 1), as
``tests/test_docs.py`` does. A span is marked in the Markdown as

    <!-- gen:NAME -->...<!-- /gen -->

(inline, e.g. in a table cell, or around whole lines), and ``NAME`` is a key
of :data:`RENDERERS`: a function of the results that returns the span's
text. ``NAME:ARG:ARG`` passes the arguments to it (one renderer for every
cell of a kind, e.g. ``gen:inference-speedup:concentric:auto:cg``). The
renderers of each page family live in their own module: the inference
pages' in ``docs_inference.py``, those against the original method in
``docs_original.py``, the training step's and whole runs' in
``docs_training.py``, the baselines' in ``docs_baselines.py``, the GPU's in
``docs_gpu.py``. Change a number by rerunning its
measurement into its JSON, then this script; never by hand.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import statistics
import sys

import docs_baselines
import docs_gpu
import docs_inference
import docs_original
import docs_synthetic
import docs_training
import numpy as np
import rot_levers
import rot_operator_parts
import rot_prior_terms
import rot_regrid

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SPAN = re.compile(r"(<!-- gen:([\w:.-]+) -->)(.*?)(<!-- /gen -->)", re.S)

# fit_battery.py's families in the order and words the docs use.
FAMILIES = {
  "circles": "10-D circles",
  "circles_scaled": "scaled circles",
  "unequal": "unequal classes",
  "arc": "an open arc",
  "ellipses": "three ellipses",
  "circles_100d": "100-D circles",
  "wobbly_100d": "100-D wobbly curves",
  "knots_3d": "knotted 3-D curves",
}


def _load(name: str) -> dict:
  return json.loads((RESULTS / name).read_text())


def _fit_runs(key: str = "fit_defaults") -> dict[str, list[dict]]:
  """fit_battery.json's runs of fit's defaults (or of ``key``), by family."""
  runs: dict[str, list[dict]] = {family: [] for family in FAMILIES}
  for run in _load("fit_battery.json")[key].values():
    runs[run["family"]].append(run)
  return {family: group for family, group in runs.items() if group}


def _all_fit_runs(key: str = "fit_defaults") -> list[dict]:
  """fit_battery.json's runs of fit's defaults (or of ``key``), every family."""
  return [r for group in _fit_runs(key).values() for r in group]


def _of(k: int, n: int, bold_from: float | None = None) -> str:
  text = f"{k} of {n}"
  return f"**{text}**" if bold_from is not None and k >= bold_from * n else text


def _verdict_counts(runs):
  """(called learned, of those learned, learned, of those called learned)."""
  called = [r for r in runs if r["verdict"] == "learned"]
  learned = [r for r in runs if r["success"]]
  return (
    len(called),
    sum(r["success"] for r in called),
    len(learned),
    sum(r["verdict"] == "learned" for r in learned),
  )


def _block(rows: list[str]) -> str:
  """Lines as a span of their own (blank lines around: a table's end)."""
  return "\n\n" + "\n".join(rows) + "\n\n"


def _seconds(runs) -> str:
  times = [r["wall_time_s"] for r in runs]
  return f"{min(times):.0f}–{max(times):.0f} s"


def fit_battery_table() -> str:
  """docs/fit.md: the battery of fit's defaults, a row per family."""
  runs = _fit_runs()
  rows = [
    "| family | learned (ground truth) | verdict `learned` / `uncertain` / "
    "`not learned` | `learned` that learned (precision) | learned and called "
    "`learned` (recall) | wall time a call |",
    "|---|---|---|---|---|---|",
  ]
  for family, group in runs.items():
    learned = sum(r["success"] for r in group)
    verdicts = " / ".join(
      str(sum(r["verdict"] == v for r in group))
      for v in ("learned", "uncertain", "not learned")
    )
    called, right, truly, found = _verdict_counts(group)
    rows.append(
      f"| `{family}` | {_of(learned, len(group), 0.9)} | {verdicts} | "
      f"{f'{right} / {called}' if called else '–'} | "
      f"{f'{found} / {truly}' if truly else '–'} | {_seconds(group)} |"
    )
  everything = [r for group in runs.values() for r in group]
  called, right, truly, found = _verdict_counts(everything)
  median = statistics.median(r["wall_time_s"] for r in everything)
  rows.append(
    f"| all {len(everything)} fits | "
    f"{sum(r['success'] for r in everything)} of {len(everything)} | | "
    f"**{right} / {called} = {right / called:.2f}** | "
    f"**{found} / {truly} = {found / truly:.2f}** | median {median:.0f} s |"
  )
  return _block(rows)


def fit_tries() -> str:
  """docs/fit.md: the tries the battery's fits trained."""
  runs = _all_fit_runs()
  tries = sum(r["tries"] for r in runs)
  first = sum(r["tries"] == 1 and r["verdict"] == "learned" for r in runs)
  return (
    f"The fits trained {tries} tries in all ({tries / len(runs):.1f} a fit); "
    f"the first try was `learned` in {first} of the {len(runs)}"
  )


def fit_wobbly_tries() -> str:
  """docs/fit.md: the battery's wobbly tries, at the defaults and at
  FIT_RETRY_CHANGES (fit's rule: the second try, and later ones where its
  samples lay closer)."""
  from vaells_jax.runs.fit import _config_of_try

  retry, plain = [], []
  for run in _fit_runs()["wobbly_100d"]:
    record = [
      {"sample_noise_levels": t["signals"]["sample_noise_levels"]}
      for t in run["try_scores"]
    ]
    for k, t in enumerate(run["try_scores"]):
      (retry if _config_of_try(k, record, False, True) else plain).append(t)

  def learned(group):
    return f"{sum(t['success'] for t in group)} of {len(group)}"

  failed = [t for t in retry if not t["success"]]
  along = [t for t in failed if t["orbit_coverage"] >= 0.9]
  across = [t["orbit_coverage"] for t in failed if t not in along]
  return (
    f"of their tries at the defaults {learned(plain)} learned (orbit coverage "
    f"{docs_inference._span([t['orbit_coverage'] for t in plain], 2)}), of "
    f"those at `FIT_RETRY_CHANGES` {learned(retry)}; of the {len(failed)} "
    f"retries that failed, {len(across)} have operators that do "
    "not follow the curve (orbit coverage "
    f"{docs_inference._span(across, 2)})"
    + (
      f" and {len(along)} follow it with samples "
      f"{docs_inference._span([t['sample_manifold_distance'] for t in along], 1)} "
      "noise levels off"
      if along
      else ""
    )
  )


def fit_sample_check() -> str:
  """docs/fit.md: sample_noise_levels against the ground truth on every
  try of the battery."""
  from vaells_jax.runs.verdict import THRESHOLDS

  tries = [t for r in _all_fit_runs() for t in r["try_scores"]]
  near, far = _sample_signals(tries)
  limit = THRESHOLDS["sample_noise_levels_max"]
  return (
    f"on all {len(tries)} tries of the battery, those whose samples lay within "
    f"15 true noise levels scored {docs_inference._span(near, 1)} "
    f"({sum(v > limit for v in near)} of {len(near)} above {limit:g}), "
    f"those beyond {docs_inference._span(far, 1)} "
    f"({sum(v <= limit for v in far)} of {len(far)} at or below)"
  )


def _sample_signals(tries) -> tuple[list[float], list[float]]:
  """``sample_noise_levels`` of the tries whose prior samples lay within the
  success criterion's 15 true noise levels, and of those beyond."""
  near, far = [], []
  for t in tries:
    group = near if t["sample_manifold_distance"] <= 15 else far
    group.append(t["signals"]["sample_noise_levels"])
  return near, far


def fit_false_learned(key: str = "fit_defaults") -> str:
  """docs/fit.md: the battery's fits (of ``key``) called ``learned`` that
  did not learn."""
  runs = _all_fit_runs(key)
  wrong = [r for r in runs if r["verdict"] == "learned" and not r["success"]]
  return (
    "; ".join(
      f"`{r['family']}` seed {r['seed']} (orbit coverage {r['orbit_coverage']:.2f}, "
      f"samples {r['sample_manifold_distance']:.1f} noise levels off, "
      f"`latent_coverage` {r['signals']['latent_coverage']:.2f})"
      for r in wrong
    )
    or "none"
  )


def fit_scale_two_first_tries() -> str:
  """docs/fit.md: one try at latent scale 2 on the families it was chosen on."""
  runs: dict[str, list[dict]] = {}
  for r in _load("fit_battery.json")["latent_scale_2_first_tries"].values():
    runs.setdefault(r["family"], []).append(r)
  return ", ".join(
    f"{FAMILIES[family]} {_of(sum(r['success'] for r in group), len(group))}"
    for family, group in runs.items()
  )


def fit_scale_one_rates() -> str:
  """docs/fit.md: the battery's rates at latent scale 1."""
  return fit_rates("fit_latent_scale_1")


def fit_rates(key: str = "fit_defaults") -> str:
  """README: each family's rate and the verdict's precision and recall
  (the families ``key`` ran)."""
  runs = {family: group for family, group in _fit_runs(key).items() if group}
  by_rate: dict[tuple[int, int], list[str]] = {}
  for family, group in runs.items():
    rate = (sum(r["success"] for r in group), len(group))
    by_rate.setdefault(rate, []).append(FAMILIES[family])
  parts = []
  for (k, n), names in sorted(by_rate.items(), key=lambda kv: -kv[0][0] / kv[0][1]):
    each = " each" if len(names) > 1 else ""
    parts.append(f"{', '.join(names)}{':' if each else ''} {k} of {n}{each}")
  everything = [r for group in runs.values() for r in group]
  called, right, truly, found = _verdict_counts(everything)
  return (
    "; ".join(parts) + f"; verdict precision {right / called:.2f} "
    f"({right} of {called}), recall {found / truly:.2f}"
  )


def fit_family_rate(key: str, family: str) -> str:
  """docs/fit-levers.md: the rate on ``family`` in ``key``."""
  group = _fit_runs(key)[family]
  called, right, _, _ = _verdict_counts(group)
  learned = sum(r["success"] for r in group)
  return (
    f"{learned} of {len(group)} (verdict `learned` on {called}, "
    f"{right} of them learned)"
  )


def fit_alternating_retries() -> str:
  """docs/fit-levers.md: the wobbly retries of the battery that alternated
  the defaults with 4000-step retries (the 2nd and 4th tries)."""
  runs = _fit_runs("alternating_retries")["wobbly_100d"]
  retries = [
    t for r in runs for t in r["try_scores"] if t["folder"] in ("try1", "try3")
  ]
  return (
    f"{sum(t['success'] for t in retries)} of {len(retries)} tries, "
    f"{sum(r['success'] for r in runs)} of the {len(runs)} seeds"
  )


def fit_time() -> str:
  """README: the wall time of a fit call over the battery."""
  times = [r["wall_time_s"] for r in _all_fit_runs()]
  return (
    f"{min(times):.0f}–{max(times):.0f} s a call, median "
    f"{statistics.median(times):.0f} s"
  )


def fit_anchor_table() -> str:
  """docs/fit.md: learned runs by anchor choice (one try each)."""
  spread = _load("fit_battery.json")["first_tries_spread"].values()
  study = _load("fit_battery.json")["anchor_study"].values()
  choices = {"spread": spread, "random": study, "even": study}
  rows = [
    "| family | spread (the default) | random training points | evenly spaced "
    "on the true curve |",
    "|---|---|---|---|",
  ]
  totals = {c: [0, 0] for c in choices}
  for family in ("circles", "arc"):
    cells = []
    for choice, runs in choices.items():
      group = [r for r in runs if r["family"] == family and r["anchors"] == choice]
      group = [r for r in group if 100 <= r["seed"] <= 109]
      k = sum(r["success"] for r in group)
      totals[choice][0] += k
      totals[choice][1] += len(group)
      cells.append(_of(k, len(group)))
    rows.append(f"| `{family}` | " + " | ".join(cells) + " |")
  rows.append("| both | " + " | ".join(_of(*t) for t in totals.values()) + " |")
  return _block(rows)


def fit_ellipse_levers() -> str:
  """docs/fit.md: one try of each change on the ellipses' failing seeds."""
  levers = _load("fit_battery.json")["ellipse_levers"]
  rows = [
    "| change (`fit_battery.py --families=ellipses --seeds=100,101,103,104 "
    "--tries=1 --set latent_scale=1` and) | learned "
    "| orbit coverage, seeds 100 / 101 / 103 / 104 |",
    "|---|---|---|",
  ]
  for flags, runs in levers.items():
    runs = sorted(runs.values(), key=lambda r: r["seed"])
    coverage = " / ".join(f"{r['orbit_coverage']:.2f}" for r in runs)
    k = sum(r["success"] for r in runs)
    rows.append(f"| {flags or 'none'} | {_of(k, len(runs))} | {coverage} |")
  return _block(rows)


def fit_constant_rate(what: str) -> str:
  """docs/fit.md: the circles at constant network rates (``constant_net_rate``):
  ``errors``, their reconstruction errors; ``samples``, the 100-D prior samples."""
  runs = _fit_runs("constant_net_rate")
  if what == "errors":
    spans = []
    for family in ("circles", "circles_100d"):
      errors = [r["signals"]["reconstruction_error"] for r in runs[family]]
      spans.append(f"{min(errors):.2g}–{max(errors):.2g} on the {FAMILIES[family]}")
    return f"`reconstruction_error` {', '.join(spans)}"
  samples = [r["sample_manifold_distance"] for r in runs["circles_100d"]]
  k = sum(r["success"] for r in runs["circles_100d"])
  return (
    f"{min(samples):.0f}–{max(samples):.0f} noise levels off "
    f"({_of(k, len(samples))} learned)"
  )


# The fits the verdict's thresholds were set on (docs/fit.md, "The verdict").
CALIBRATION = ("first_tries_spread", "anchor_study", "lr_psi_4e-4_first_tries")


def fit_calibration(what: str) -> str:
  """docs/fit.md: what the verdict's thresholds were set on. ``count``: the
  coverage calibration's fits; ``coverage``: their ``latent_coverage`` by
  outcome; ``noise``: ``reconstruction_noise_levels`` at constant rates;
  ``samples``: ``sample_noise_levels`` by the samples' true distance."""
  battery = _load("fit_battery.json")
  if what == "noise":
    runs = _fit_runs("constant_net_rate")
    learned = [
      r["signals"]["reconstruction_noise_levels"]
      for family in ("circles", "arc", "circles_100d")
      for r in runs[family]
      if r["success"]
    ]
    wide = runs["circles_100d"]
    levels = [r["signals"]["reconstruction_noise_levels"] for r in wide]
    samples = [r["sample_manifold_distance"] for r in wide]
    return (
      f"the fits that learned ended at {min(learned):.0f}–{max(learned):.0f}, "
      f"the 100-D circles (prior samples {min(samples):.0f}–{max(samples):.0f} "
      f"true noise levels off) at {min(levels):.0f}–{max(levels):.0f}"
    )
  if what == "samples":
    tries = [t for r in battery["sample_calibration"].values() for t in r["try_scores"]]
    within, beyond = _sample_signals(tries)
    return (
      f"on the {len(tries)} calibration fits, those whose samples lay within "
      f"15 true noise levels scored {docs_inference._span(within, 1)}, those beyond "
      f"{docs_inference._span(beyond, 1)}"
    )
  runs = [r for key in CALIBRATION for r in battery[key].values()]
  if what == "count":
    return f"{len(runs)} fits"
  if what == "arc":
    arc = [
      r["signals"]["latent_coverage"]
      for r in runs
      if r["family"] == "arc" and r["success"]
    ]
    return f"fits that learned ended as low as {min(arc):.2f}"

  def coverage(rows):
    values = [r["signals"]["latent_coverage"] for r in rows]
    return min(values), max(values)

  failed = coverage([r for r in runs if not r["success"]])
  learned = coverage([r for r in runs if r["success"]])
  circles = coverage([r for r in runs if r["success"] and r["family"] == "circles"])
  return (
    f"the fits that failed ended at `latent_coverage` {failed[0]:.2f}–"
    f"{failed[1]:.2f}, those that learned at {learned[0]:.2f}–{learned[1]:.2f} "
    f"(on the circles {circles[0]:.2f} or more)"
  )


def fit_settled() -> str:
  """docs/fit.md: ``latent_coverage`` at the defaults against constant rates
  (100-D circles: every kept try; the arc: the fits that learned)."""

  def span(key, family, learned_only):
    values = [
      r["signals"]["latent_coverage"]
      for r in _fit_runs(key)[family]
      if r["success"] or not learned_only
    ]
    return docs_inference._span(values, 2)

  wide = _fit_runs()["circles_100d"]
  return (
    f"on the 100-D circles the kept try ends at `latent_coverage` "
    f"{span('fit_defaults', 'circles_100d', False)} on all {len(wide)} seeds "
    f"({span('constant_net_rate', 'circles_100d', False)} at constant rates), "
    f"and on the open arc the fits that learned at "
    f"{span('fit_defaults', 'arc', True)} "
    f"({span('constant_net_rate', 'arc', True)} at constant rates)"
  )


def fit_lever_table(group: str) -> str:
  """docs/fit.md, fit-levers.md: one try of each change (a run's
  ``change``) on the same seeds, from fit_battery.json's ``group``; the
  verdicts ``decide`` on the stored signals with the library's thresholds."""
  from vaells_jax.runs.verdict import decide

  changes: dict[str, list[dict]] = {}
  for run in _load("fit_battery.json")[group].values():
    changes.setdefault(run["change"], []).append(run)
  seeds = sorted({r["seed"] for runs in changes.values() for r in runs})
  each = " / ".join(map(str, seeds))
  rows = [
    f"| change | learned | orbit coverage, seeds {each} | prior samples "
    f"(noise levels) | `latent_coverage` | verdict |",
    "|---|---|---|---|---|---|",
  ]
  for change, runs in changes.items():
    runs = sorted(runs, key=lambda r: r["seed"])
    coverage = " / ".join(f"{r['orbit_coverage']:.2f}" for r in runs)
    samples = " / ".join(f"{r['sample_manifold_distance']:.1f}" for r in runs)
    latent = " / ".join(f"{r['signals']['latent_coverage']:.2f}" for r in runs)
    verdicts = " / ".join(decide(r["signals"])["verdict"] for r in runs)
    k = sum(r["success"] for r in runs)
    if len(runs) < len(seeds):
      listed = ", ".join(str(r["seed"]) for r in runs)
      change += f" (seed{'s' if len(runs) > 1 else ''} {listed})"
    rows.append(
      f"| {change} | {_of(k, len(runs))} | {coverage} | {samples} | {latent} "
      f"| {verdicts} |"
    )
  return _block(rows)


def fit_wobbly_levers() -> str:
  """docs/fit.md: one try of each change on two wobbly seeds."""
  parts = []
  for flags, runs in _load("fit_battery.json")["wobbly_levers"].items():
    runs = sorted(runs.values(), key=lambda r: r["seed"])
    coverage = " and ".join(f"{r['orbit_coverage']:.2f}" for r in runs)
    k = sum(r["success"] for r in runs)
    parts.append(f"{flags}: {_of(k, len(runs))} (orbit coverage {coverage})")
  return "; ".join(parts)


def fit_speed_table() -> str:
  """docs/fit.md: fit on the README's circles against the concentric command,
  round by round (fit_speed.py)."""
  rounds: dict[int, dict] = {}
  for row in _load("fit_speed.json")["rounds"]:
    rounds.setdefault(row["round"], {})[row["mode"]] = row
  modes = [m for m in ("fresh", "started", "one_thread") if m in rounds[min(rounds)]]
  head = ["round", "`experiments/run.py --exp=concentric`"]
  for mode in modes:
    head += [f"`fit`, {mode.replace('_', ' ')}: tries (verdict)", f"{mode} / command"]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for i, row in sorted(rounds.items()):
    cells = [str(i), f"{row[modes[0]]['concentric_s']:.1f} s"]
    for mode in modes:
      r = row[mode]
      cells += [
        f"{r['fit_s']:.1f} s: {r['tries']} (`{r['verdict']}`)",
        f"{r['ratio']:.2f}",
      ]
    lines.append("| " + " | ".join(cells) + " |")
  return _block(lines)


def fit_speed_fresh(name: str = "fit_speed.json") -> str:
  """docs/fit.md: the range of the fresh fit calls' ratios to the command."""
  ratios = [r["ratio"] for r in _load(name)["rounds"] if r["mode"] == "fresh"]
  return f"{min(ratios):.2f}–{max(ratios):.2f}×"


def fit_speed_modes(name: str = "fit_speed.json") -> str:
  """docs/devices.md: a started process's fit calls, members in groups
  from threads against all in one thread, and the same rounds' command."""
  rounds = _load(name)["rounds"]

  def span(mode: str, key: str = "fit_s") -> str:
    return docs_inference._span([r[key] for r in rounds if r["mode"] == mode], 1)

  return (
    f"the groups from threads took {span('started')} s a call against "
    f"{span('one_thread')} s with all members in one thread (the same rounds' "
    f"concentric command {span('started', 'concentric_s')} s)"
  )


def fit_time_by_tries() -> str:
  """docs/fit.md: the battery's wall time a call by its number of tries."""
  by_tries: dict[int, list[float]] = {}
  for run in _all_fit_runs():
    by_tries.setdefault(len(run["try_scores"]), []).append(run["wall_time_s"])
  return "; ".join(
    f"{k} {'try' if k == 1 else 'tries'}: {min(t):.0f}–{max(t):.0f} s ({len(t)} calls)"
    for k, t in sorted(by_tries.items())
  )


def first_command_table() -> str:
  """docs/benchmarks-evaluation.md: the README's first command, run by run."""
  rows = [
    "| compilation cache | whole command | compile | training | evaluation "
    "+ figures | longest silence (before the line) | orbit coverage |",
    "|---|---|---|---|---|---|---|",
  ]
  for r in _load("first_command.json")["runs"]:
    rows.append(
      f"| {r['cache']} | {r['wall_s']:.1f} s | {r['compile_s']:.1f} s "
      f"| {r['train_s']:.1f} s | {r['eval_s']:.1f} s "
      f"| {r['longest_silence_s']:.1f} s (`{r['silent_before']}`) "
      f"| {r['orbit_coverage']:.2f} |"
    )
  return _block(rows)


def eval_time_table() -> str:
  """docs/benchmarks-evaluation.md: the evaluation on an empty cache."""
  rows = [
    "| run | evaluation + figures | XLA compile | compiled programs "
    "| longest compiles | largest metric difference from run 1 |",
    "|---|---|---|---|---|---|",
  ]
  for i, r in enumerate(_load("eval_time.json")["runs"], 1):
    longest = ", ".join(
      f"`{name}` {secs:.1f} s" for name, secs in r["longest_compiles"][:3]
    )
    rows.append(
      f"| {i} | {r['wall_s']:.1f} s | {r['compile_s']:.1f} s | {r['programs']} "
      f"| {longest} | {r['max_metric_difference']:.3g} |"
    )
  return _block(rows)


def fit_ellipse_members() -> str:
  """docs/fit.md: the ellipses' members, each trained to the end."""
  runs = _load("fit_battery.json")["ellipse_members"].values()
  at_one = _fit_runs("fit_latent_scale_1")["ellipses"]
  failing = {r["seed"] for r in at_one if not r["success"]}
  failed = sorted((r for r in runs if r["seed"] in failing), key=lambda r: r["seed"])
  rest = sorted((r for r in runs if r["seed"] not in failing), key=lambda r: r["seed"])

  def learned(group):
    members = [m for r in group for m in r["members"]]
    return f"{sum(m['success'] for m in members)} of {len(members)}"

  best = max(m["orbit_coverage"] for r in failed for m in r["members"])
  kept = sum(r["members"][r["selected_member"]]["success"] for r in rest)

  return (
    f"{learned(failed)} members learned on seeds "
    f"{_and(r['seed'] for r in failed)}, the "
    f"battery's failures at latent scale 1 (the best orbit coverage "
    f"{best:.2f}), {learned(rest)} on seeds "
    f"{_and(r['seed'] for r in rest)}, "
    f"where the member `latent_coverage` keeps learned on {kept} of {len(rest)}"
  )


def _kept(signals: dict, name: str, members: int) -> int:
  """The member a population of the first ``members`` keeps by ``name``, as
  the command selects (:func:`vaells_jax.training.selection.select`)."""
  from vaells_jax.training.coverage import combined_coverages  # jax
  from vaells_jax.training.selection import select

  signals = {k: list(v[:members]) for k, v in signals.items()}
  return select({**signals, **combined_coverages(signals)}, name)[0]


def swiss_signal_table() -> str:
  """docs/population-swiss-roll.md: seeds 100-119 whose kept member traverses
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
  """docs/population-swiss-roll.md: seeds where 8 members (0-7) kept by
  ``latent_coverage_wide`` traverse the roll."""
  seeds = _load("population_swiss_roll_k16.json")["seeds"].values()
  wins = sum(
    r["success"][_kept(r["signals"], "latent_coverage_wide", 8)] for r in seeds
  )
  return f"{wins} of {len(seeds)} seeds"


def _and(items) -> str:
  """``["a", "b", "c"]`` as "a, b and c"."""
  items = [str(i) for i in items]
  return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def swiss_eight_failures() -> str:
  """docs/population-swiss-roll.md: the seeds where 8 members (0-7) kept by
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
  """docs/population-swiss-roll.md: the 16-member study's members that
  traverse the roll."""
  seeds = _load("population_swiss_roll_k16.json")["seeds"].values()
  counts = [sum(run["success"]) for run in seeds]
  members = sum(len(run["success"]) for run in seeds)
  return f"{min(counts)}–{max(counts)} of 16; {sum(counts)} of {members} members in all"


def swiss_k16_auc() -> str:
  """docs/population-swiss-roll.md: how each signal ranks the 16-member
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
  """docs/population-swiss-roll.md: seeds whose kept member traverses the
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
  """docs/population-swiss-roll.md: ``data_coverage`` at each reach alone
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
  """docs/population-swiss-roll.md: the seeds where the default's kept
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
  """docs/population-swiss-roll.md: ``data_coverage`` with ties by the loss
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
  """docs/population-swiss-roll.md: what the verdict's coverage thresholds
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


def rot_levers_table(name: str = "rot_mnist_levers") -> str:
  """docs/experiments-rot-mnist-levers.md: a lever study on the paper's split
  (``rot_levers.py --out=docs/results/NAME.json``)."""
  return _block(rot_levers.table(_load(f"{name}.json")["levers"]).split("\n"))


ROT_LEVER_KEYS = {  # rot-lever's keys: the summary's name and its format
  "span": ("rotation_gated_span_degrees", "{:g}°"),
  "reference": ("reference_rotation_gated_span_degrees", "{:g}°"),
  "cos": ("reference_cosine", "{:.2f}"),
  "rejected": ("psi_rejected_steps", "{:g}"),
  "mse": ("mse", "{:.4f}"),
  "correlation_gate": ("rotation_correlation_gate_only_span_degrees", "{:g}°"),
  "class_gate": ("rotation_class_gate_only_span_degrees", "{:g}°"),
}


def _lever_values(lever: str, key: str, name: str = "rot_mnist_levers") -> list:
  """A lever's ``key`` (:data:`ROT_LEVER_KEYS`) per seed, in seed order, in
  ``docs/results/NAME.json``."""
  seeds = _load(f"{name}.json")["levers"][lever]["seeds"]
  return [seeds[seed][ROT_LEVER_KEYS[key][0]] for seed in sorted(seeds, key=int)]


def rot_lever(lever: str, key: str, name: str = "rot_mnist_levers") -> str:
  """docs/experiments-rot-mnist-levers.md: a lever's lowest–highest ``key``
  over its seeds (:data:`ROT_LEVER_KEYS`)."""
  values, fmt = _lever_values(lever, key, name), ROT_LEVER_KEYS[key][1]
  low, high = fmt.format(min(values)), fmt.format(max(values))
  return low if low == high else f"{low}–{high}"


def rot_lever_each(lever: str, key: str, name: str = "rot_mnist_levers") -> str:
  """docs/experiments-rot-mnist-levers.md: a lever's ``key`` per seed, in seed
  order."""
  fmt = ROT_LEVER_KEYS[key][1]
  return ", ".join(fmt.format(v) for v in _lever_values(lever, key, name))


def rot_lever_vs(lever: str, base: str = "base", name: str = "rot_mnist_levers") -> str:
  """docs/experiments-rot-mnist-levers.md: each seed's gated span without and
  with the lever ("56.5° → 64°, ...")."""
  spans = [_lever_values(x, "span", name) for x in (base, lever)]
  pairs = zip(*spans, strict=True)
  return ", ".join(f"{a:g}° → {b:g}°" for a, b in pairs)


def rot_regrid_table() -> str:
  """docs/experiments-rot-mnist.md: finished runs by the frame grid's share
  rule and its speed rule (``rot_regrid.py``)."""
  return _block(rot_regrid.table(_load("rot_mnist_regrid.json")["runs"]).split("\n"))


def _operator_parts(name: str) -> dict:
  return _load(f"{name}.json")["runs"]


def rot_parts_table(name: str = "rot_operator_parts") -> str:
  """docs/experiments-rot-mnist-operator.md: spans of operators between the
  learned and the reference one (``rot_operator_parts.py --out=NAME``)."""
  return _block(rot_operator_parts.table(_operator_parts(name)).split("\n"))


def rot_parts_objective(name: str = "rot_operator_parts") -> str:
  """docs/experiments-rot-mnist-operator.md: the ``Psi`` objective at those
  operators, from the learned one's (``rot_operator_parts.py``)."""
  table = rot_operator_parts.objective_table(_operator_parts(name))
  return _block(table.split("\n"))


def rot_part(operator: str, key: str, name: str = "rot_operator_parts") -> str:
  """docs/experiments-rot-mnist-operator.md: an operator's lowest–highest
  ``key`` over the runs: ``gated`` span, ``cos`` with the reference, or its
  objective's ``diff`` from the learned operator's."""
  runs = _operator_parts(name).values()
  if key == "diff":
    values = [run["objective"][operator]["diff"] for run in runs]
    fmt = "{:.3f}"
  else:
    values = [run["spans"][operator][key] for run in runs]
    fmt = "{:g}°" if key == "gated" else "{:.3f}"
  low, high = fmt.format(min(values)), fmt.format(max(values))
  return low if low == high else f"{low}–{high}"


def rot_terms_table() -> str:
  """docs/experiments-rot-mnist-operator.md: the ``Psi`` objective's terms
  per operator and samples (``rot_prior_terms.py``)."""
  return _block(
    rot_prior_terms.table(_load("rot_prior_terms.json")["runs"]).split("\n")
  )


def rot_reach_table() -> str:
  """docs/experiments-rot-mnist-operator.md: the prior's coefficients from a
  digit's code to its turned codes (``rot_prior_terms.py``)."""
  runs = _load("rot_prior_terms.json")["runs"]
  return _block(rot_prior_terms.reach_table(runs).split("\n"))


def rot_term(samples: str, psi: str, key: str, name: str = "rot_prior_terms") -> str:
  """docs/experiments-rot-mnist-operator.md: lowest–highest over the runs of
  a cell's ``key`` (``diff``: from (``L``, ``L``); a term or distance)."""
  runs = _load(f"{name}.json")["runs"].values()
  values = [r["grid"][samples][psi][key] for r in runs]
  fmt = "{:.1f}" if key == "c_p" else "{:.3f}"
  low, high = fmt.format(min(values)), fmt.format(max(values))
  return low if low == high else f"{low}–{high}"


def rot_reach(psi: str, angle: str, key: str, name: str = "rot_prior_terms") -> str:
  """docs/experiments-rot-mnist-operator.md: lowest–highest over the runs of
  the prior's inference over a turn of ``angle`` degrees: the median ``c``
  or the share taken the ``long_way`` round."""
  runs = _load(f"{name}.json")["runs"].values()
  values = [r["reach"][psi][angle][key] for r in runs]
  fmt = "{:.0%}" if key == "long_way" else "{:.1f}"
  low, high = fmt.format(min(values)), fmt.format(max(values))
  return low if low == high else f"{low}–{high}"


def _scheduler_steps() -> dict:
  """``{(experiment, phase): {setting: fastest step s over rounds}}`` of
  ``step_phases.py --scheduler-rounds``."""
  out = {}
  for r in _load("xla_scheduler.json")["rounds"]:
    for name, phases in r["experiments"].items():
      for phase, forms in phases.items():
        best = out.setdefault((name, phase), {})
        t = forms["phased"]["step_s"]
        best[r["scheduler"]] = min(best.get(r["scheduler"], t), t)
  return out


def scheduler_step(name: str) -> str:
  """docs/reliability.md: an experiment's step with the package's scheduler
  setting (off), lowest–highest over its phases."""
  steps = _scheduler_steps()
  ms = [1e3 * t["false"] for (n, _), t in steps.items() if n == name]
  fmt = "{:.1f}" if max(ms) < 100 else "{:.0f}"
  return f"{fmt.format(min(ms))}–{fmt.format(max(ms))} ms"


def scheduler_ratio() -> str:
  """docs/reliability.md: the step with the scheduler on over the step with
  it off, lowest–highest over experiments and phases."""
  ratios = [t["true"] / t["false"] for t in _scheduler_steps().values()]
  return f"{min(ratios):.2f}–{max(ratios):.2f}×"


def concentric_default_rate() -> str:
  """README, docs: the concentric default's rate over its fresh seeds
  (``seed_rates.py``)."""
  seeds = _load("seeds_concentric_100_139.json")["seeds"]
  wins = sum(run["success"] for run in seeds.values())
  first, last = min(map(int, seeds)), max(map(int, seeds))
  return f"{_of(wins, len(seeds))} fresh seeds ({first}–{last})"


def rot_run(name: str) -> str:
  """docs/experiments-rot-mnist.md: one finished rot_mnist run's summary
  (``docs/results/<name>.json``)."""
  s = _load(f"{name}.json")["summary"]
  low, high = s["rotation_gated_span_quartiles"]
  per_class = s["rotation_gated_span_per_class"]
  worst, best = per_class.index(min(per_class)), per_class.index(max(per_class))
  ll = docs_baselines._fmt(s["log_likelihood"])
  refused = _of(s["psi_rejected_steps"], s["psi_attempted_steps"])
  return (
    f"gated span {s['rotation_gated_span_degrees']:g}° (quartiles {low:g}°–"
    f"{high:g}°, {s['rotation_gated_digits']} digits; correlation gate alone "
    f"{s['rotation_correlation_gate_only_span_degrees']:g}°, class gate alone "
    f"{s['rotation_class_gate_only_span_degrees']:g}°; gate level "
    f"{s['rotation_gate_level']:.3f}; per class from {per_class[worst]:g}° "
    f"({worst}) to {per_class[best]:g}° ({best})), the reference operator's "
    f"{s['reference_rotation_gated_span_degrees']:g}° (`|cos|` "
    f"{s['reference_cosine']:.3f} with it); MSE {s['mse']:.4f} on the test "
    f"digits, log-likelihood {ll} ({s['log_likelihood_points']} × "
    f"{s['log_likelihood_samples']}), knn accuracy "
    f"{s['knn_class_accuracy']:.3f}, {refused} `Psi` steps refused; "
    f"{_run_time(s)}"
  )


def _nat_label(name: str) -> str:
  """A nat_mnist run's operators, budget and data, read off its command."""
  run = _load(f"{name}.json")
  command, ops = run["command"], len(run["summary"]["operator_magnitudes"])
  budget = "CPU" if "--budget=cpu" in command else "paper"
  data = "the paper's split" if "mnist-full" in command else "8 000 test-set digits"
  return f"`M = {ops}`, {budget} budget, {data}"


def nat_runs_table(*names: str) -> str:
  """docs/experiments-nat-mnist.md: one row per finished nat_mnist run."""
  span = docs_inference._span
  rows = [
    "| run | MSE | log-likelihood | ELBO | knn acc. | class consistency "
    "(classifier's own accuracy) | reach, RMS (pixels changed > 0.1) | "
    "directions of the input's class at the range's end | `‖Psi_m‖_F` | "
    "`Psi` steps refused | time |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  for name in names:
    s = _load(f"{name}.json")["summary"]
    rows.append(
      f"| {_nat_label(name)} ([json](results/{name}.json)) | **{s['mse']:.4f}** | "
      f"{docs_baselines._fmt(s['log_likelihood'])} ({s['log_likelihood_points']} "
      f"× {s['log_likelihood_samples']}) | {docs_baselines._fmt(s['elbo'])} | "
      f"{s['knn_class_accuracy']:.3f} | {s['class_consistency']:.3f} "
      f"({s['classifier_test_accuracy']:.3f}) | "
      f"{span(s['operator_reach_rms'], 2)} "
      f"({span(s['operator_reach_changed_fraction'], 2)}) | "
      f"{span([100 * x for x in s['operator_reach_at_end']])}% | "
      f"{span(s['operator_magnitudes'], 3)} | "
      f"{_of(s['psi_rejected_steps'], s['psi_attempted_steps'])} | {_run_time(s)} |"
    )
  return _block(rows)


def _nat_seeds_header(first: str, s: dict) -> list[str]:
  return [
    f"| {first} | MSE | log-likelihood ({s['log_likelihood_points']} × "
    f"{s['log_likelihood_samples']}) | ELBO | knn acc. | class consistency | "
    "reach, RMS | directions of the input's class at the range's end | "
    "`Psi` steps refused | training |",
    "|---|---|---|---|---|---|---|---|---|---|",
  ]


def _nat_seeds_median(label: str, seeds: dict) -> str:
  """A table row: the median and range over ``seeds`` of each column."""
  fmt = docs_baselines._fmt

  def spread(key, digits=None, scale=1.0, unit=""):  # over seeds (and operators)
    values = [scale * v for s in seeds.values() for v in np.ravel(s[key])]
    mid, low, high = statistics.median(values), min(values), max(values)

    def show(v):
      return (fmt(v) if digits is None else f"{v:.{digits}f}") + unit

    return f"{show(mid)} ({show(low)} – {show(high)})"

  def median(key):
    return statistics.median(s[key] for s in seeds.values())

  return (
    f"| {label} | **{spread('mse', 4)}** | "
    f"**{spread('log_likelihood')}** | {spread('elbo')} | "
    f"{spread('knn_class_accuracy', 3)} | **{spread('class_consistency', 3)}** | "
    f"{spread('operator_reach_rms', 2)} | "
    f"{spread('operator_reach_at_end', 0, 100, '%')} | "
    f"{median('psi_rejected_steps'):g} of {median('psi_attempted_steps'):g} | "
    f"{median('train_time_s'):.0f} s |"
  )


def nat_seeds_table(name: str) -> str:
  """docs/experiments-nat-mnist.md: nat_mnist's numbers seed by seed
  (``benchmarks/nat_seeds.py``), then their median and range."""
  span, fmt = docs_inference._span, docs_baselines._fmt
  seeds = _load(f"{name}.json")["seeds"]
  rows = _nat_seeds_header("seed", next(iter(seeds.values())))
  for seed, s in seeds.items():
    rows.append(
      f"| {seed} | {s['mse']:.4f} | {fmt(s['log_likelihood'])} | {fmt(s['elbo'])} "
      f"| {s['knn_class_accuracy']:.3f} | {s['class_consistency']:.3f} | "
      f"{span(s['operator_reach_rms'], 2)} | "
      f"{span([100 * x for x in s['operator_reach_at_end']])}% | "
      f"{_of(s['psi_rejected_steps'], s['psi_attempted_steps'])} | "
      f"{s['train_time_s']:.0f} s |"
    )
  return _block(rows + [_nat_seeds_median("median (lowest – highest)", seeds)])


def nat_seeds_gap(name: str) -> str:
  """docs/experiments-nat-mnist.md: how far each seed's ELBO lies below its
  log-likelihood (``nat_seeds.py``), lowest to highest, in nats."""
  gaps = [
    s["log_likelihood"] - s["elbo"] for s in _load(f"{name}.json")["seeds"].values()
  ]
  low, high = (f"{round(g):,}".replace(",", " ") for g in (min(gaps), max(gaps)))
  return f"{low}–{high} nats"


def nat_seeds_medians(*names: str) -> str:
  """docs/experiments-nat-mnist.md: one row per ``nat_seeds.py`` results
  file (its operators and seeds), the median and range of each column."""
  rows = []
  for name in names:
    seeds = _load(f"{name}.json")["seeds"]
    first = next(iter(seeds.values()))
    rows = rows or _nat_seeds_header("operators, seeds", first)
    ids = [int(seed) for seed in seeds]
    runs = ", ".join(seeds)
    if ids == list(range(ids[0], ids[-1] + 1)):
      runs = f"{ids[0]}–{ids[-1]}"
    label = f"`M = {len(first['operator_reach_rms'])}`, seeds {runs}"
    rows.append(_nat_seeds_median(label, seeds))
  return _block(rows)


def nat_seeds_range(name: str, key: str, digits: str = "") -> str:
  """docs/experiments-nat-mnist.md: the lowest and highest of a number of
  ``nat_seeds.py``'s runs (``digits`` decimals, or the docs' own format)."""
  values = [s[key] for s in _load(f"{name}.json")["seeds"].values()]
  show = docs_baselines._fmt if digits == "" else (lambda v: f"{v:.{digits}f}")
  return f"{show(min(values))} to {show(max(values))}"


# ll_terms.py's numbers in the docs' table: (where in a run's record, words).
LL_TERMS = (
  (("parts", "decoder"), "decoder, `−ζ₁ ½‖x − g(w)‖²`"),
  (("parts", "prior_residual"), "prior: best anchor's `−½ γ⁻² ‖w − T(c_i) a_i‖²`"),
  (("parts", "prior_l1"), "prior: best anchor's `−‖c_i‖₁ / b`"),
  (("parts", "prior_mixture"), "prior: the other anchors (`−log N_a` to 0)"),
  (
    ("parts", "posterior_residual"),
    "posterior: `−½ γ⁻² ‖w − T(c_q) f(x)‖²` (subtracted)",
  ),
  (("parts", "posterior_l1"), "posterior: `−‖c_q‖₁ / b` (subtracted)"),
  (("parts", "constants"), "`C₁`"),
  (("elbo",), "**ELBO** (the sum)"),
  (("log_likelihood",), "log-likelihood"),
  (("median_distance_gamma", "prior"), "`w` to the best anchor's path, median (`γ`)"),
  (("median_distance_gamma", "posterior"), "`w` to its posterior path, median (`γ`)"),
  (("median_prior_orbit_dim",), "dimension of that anchor's orbit, median"),
  (
    ("median_prior_tangent_share",),
    "residual's share in the orbit's tangent space, median",
  ),
)


def _ll_terms(name: str) -> dict[int, list[dict]]:
  """``ll_terms.py``'s runs in ``docs/results/<name>.json`` by operators."""
  runs = _load(f"{name}.json")
  return {
    m: [r for r in runs if r["num_ops"] == m]
    for m in sorted({r["num_ops"] for r in runs})
  }


def _ll_term(runs: list[dict], path) -> list[float]:
  values = []
  for run in runs:
    for key in path:
      run = run[key]
    values.append(run)
  return values


def ll_terms_table(name: str) -> str:
  """docs/experiments-nat-mnist-likelihood.md: the importance weights' parts
  (``benchmarks/ll_terms.py``), a column per number of operators, the
  median and range over its seeds."""
  groups = _ll_terms(name)
  rows = [
    "| mean over points and samples (nats), or median | "
    + " | ".join(f"`M = {m}`, {len(g)} seeds" for m, g in groups.items())
    + " |",
    "|---|" + "---|" * len(groups),
  ]
  for path, words in LL_TERMS:
    cells = []
    for group in groups.values():
      values = _ll_term(group, path)
      mid, low, high = (
        docs_baselines._fmt(v)
        for v in (statistics.median(values), min(values), max(values))
      )
      cells.append(mid if low == high else f"{mid} ({low} – {high})")
    rows.append(f"| {words} | " + " | ".join(cells) + " |")
  return _block(rows)


def ll_terms_solvers(*names: str) -> str:
  """docs/experiments-nat-mnist-likelihood.md: runs' log-likelihoods with several
  solver settings (``ll_terms.py --solvers``), a row per setting, a column
  per run."""
  runs = [r for name in names for r in _load(f"{name}.json")]

  def setting(r):  # restart k starts in [low + k w, high + k w]
    s = r["solver"]
    low, high = s["init_range"]
    return (
      s["num_restarts"],
      low,
      high + (s["num_restarts"] - 1) * (high - low),
      s["inference_max_iter"],
    )

  columns = sorted({(r["num_ops"], r["seed"]) for r in runs})
  cells = {(setting(r), (r["num_ops"], r["seed"])): r for r in runs}
  rows = [
    "| anchors' starts (their windows' span), cap | "
    + " | ".join(f"`M = {m}`, seed {seed}" for m, seed in columns)
    + " |",
    "|---|" + "---|" * len(columns),
  ]
  for key in sorted({setting(r) for r in runs}, key=lambda k: (k[0], k[2], k[3])):
    restarts, low, high, cap = key
    span = f"[{low:g}, {high:g}]".replace("-", "−")
    row = [
      f"{docs_baselines._fmt(r['log_likelihood'])} "
      f"({r['median_distance_gamma']['prior']:.1f})"
      if (r := cells.get((key, column)))
      else "—"
      for column in columns
    ]
    rows.append(f"| {restarts} ({span}), {cap} | " + " | ".join(row) + " |")
  return _block(rows)


def ll_terms_solver_gain(num_ops: str, *names: str) -> str:
  """docs/experiments-nat-mnist-likelihood.md: how much the last solver setting of each
  ``M = num_ops`` run in ``names`` (``ll_terms.py --solvers``) raises its
  log-likelihood over the run's own (the first), lowest to highest (and the
  median over three or more runs), in percent."""
  by_run: dict[str, list[dict]] = {}
  for r in (r for name in names for r in _load(f"{name}.json")):
    if r["num_ops"] == int(num_ops):
      by_run.setdefault(r["run"], []).append(r)
  gains = [
    100
    * (rows[-1]["log_likelihood"] - rows[0]["log_likelihood"])
    / abs(rows[0]["log_likelihood"])
    for rows in by_run.values()
  ]
  show = lambda g: f"{g:+.1f}%".replace("-", "−")  # noqa: E731
  if len(gains) == 1:
    return show(gains[0])
  text = f"{show(min(gains))} to {show(max(gains))}"
  if len(gains) > 2:
    text = f"{text} (median {show(statistics.median(gains))}, {len(gains)} seeds)"
  return text


def ll_terms_share(name: str, part: str) -> str:
  """docs/experiments-nat-mnist-likelihood.md: ``part``'s share of the difference
  between the fewest and the most operators' median ELBO (``ll_terms.py``)."""
  groups = list(_ll_terms(name).values())
  few, most = groups[0], groups[-1]
  med = lambda runs, path: statistics.median(_ll_term(runs, path))  # noqa: E731
  gap = med(most, ("elbo",)) - med(few, ("elbo",))
  share = (med(most, ("parts", part)) - med(few, ("parts", part))) / gap
  return f"{share:.0%}"


def release_table(*names: str) -> str:
  """docs/experiments-nat-mnist.md: the authors' released model beside ours
  (``docs/results/<name>.json`` of ``original_release.py``; the release's
  row once)."""
  span = docs_inference._span
  rows = [
    "| model | `‖Psi_m‖_F` (initial draw) | symmetric share | cosine "
    "with the initial draw | `Psi` steps accepted / rejected | `Psi` rate "
    "start → end | anchor `‖c‖_1`: median, 95%, max | median `‖z‖` |",
    "|---|---|---|---|---|---|---|---|",
  ]
  loaded = [r for n in names for r in _load(f"{n}.json")]
  released = [r for r in loaded if "seed" not in r]
  if any(r != released[0] for r in released):
    raise ValueError(f"{names}: the authors' release differs between files")
  for r in released[:1] + [r for r in loaded if "seed" in r]:
    who = "ours" if "seed" in r else "the authors' release"
    source = f"{who}, `M = {len(r['norms'])}`, {docs_inference._n(r['steps'])} steps"
    cosine = span(r["start_cosine"], 4) if "start_cosine" in r else "—"
    rejected = 100 * r["rejected"] / (r["accepted"] + r["rejected"])
    rows.append(
      f"| {source} | {span(r['norms'], 3)} "
      f"({r['initial_norm']:.2f}) | {span(r['symmetric_share'], 2)} | {cosine} | "
      f"{r['accepted']} / {r['rejected']} ({rejected:.0f}% rejected) | "
      f"{r['rate_start']:.0e} → {r['rate_end']:.1e} | "
      f"{', '.join(f'{x:.3g}' for x in r['prior_l1'])} | {r['z_norm']:.2f} |"
    )
  return _block(rows)


def _run_time(s: dict) -> str:
  """A run's times; a resumed run's training time is that of its last part."""
  first = s["resumed_from_step"]
  steps = f" (steps {docs_inference._n(first + 1)}–{docs_inference._n(s['steps'])})"
  return (
    f"{s['train_time_s']:.0f} s training{steps if first else ''} + "
    f"{s['eval_time_s']:.0f} s evaluation"
  )


def _nat_paper(m: str) -> tuple[dict, dict]:
  """nat_mnist ``M = m`` at the paper's budget on the paper's split (its
  summary) and paper table 1's ``M = m``, ``N_a = 8`` entry."""
  from vaells_jax.runs.sensitivity import PAPER_TABLE1

  run = _load(f"nat_mnist_paper_m{m}_full_seed0.json")["summary"]
  return run, PAPER_TABLE1[(int(m), 8)]


def nat_paper(m: str) -> str:
  """README, docs: nat_mnist ``M = m`` at the paper's budget on the paper's
  split beside paper table 1 (``M = m``, ``N_a = 8``)."""
  s, paper = _nat_paper(m)
  ll = docs_baselines._fmt(s["log_likelihood"])
  mantissa, _, exponent = f"{paper['log_likelihood']:g}".partition("e+")
  if exponent:  # -1.169e+06 as paper table 1 prints it: −1.169 × 10⁶
    mantissa += " × 10" + str(int(exponent)).translate(
      str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
    )
  paper_ll = mantissa.replace("-", "−")
  return (
    f"MSE {s['mse']:.4f} (paper: {paper['mse']:g}); log-likelihood {ll} "
    f"(paper: {paper_ll}; "
    f"{s['log_likelihood_points']} × {s['log_likelihood_samples']}); seed 0"
  )


def nat_paper_ll_gap(m: str) -> str:
  """docs/experiments-nat-mnist.md: how far nat_mnist ``M = m``'s paper-budget
  log-likelihood lies from paper table 1's, in percent."""
  s, paper = _nat_paper(m)
  gap = (
    100 * (s["log_likelihood"] - paper["log_likelihood"]) / abs(paper["log_likelihood"])
  )
  return f"{abs(gap):.1f}% {'above' if gap > 0 else 'below'}"


def ll_iterations_table(name: str) -> str:
  """docs/experiments-nat-mnist-likelihood.md: a run's log-likelihood recomputed with
  several solver caps (``benchmarks/ll_iterations.py``)."""
  r = _load(f"{name}.json")
  first = r["rows"][0]
  rows = [
    f"| cap (`inference_max_iter`) | log-likelihood ({r['points']} × "
    f"{r['samples']}) | ELBO | posterior / prior pairs stopped by the cap "
    f"| time (× cap {first['cap']}) |",
    "|---|---|---|---|---|",
  ]
  for row in r["rows"]:
    own = " (the run's)" if row["cap"] == r["run_cap"] else ""
    rows.append(
      f"| {row['cap']}{own} | {docs_baselines._fmt(row['log_likelihood'])} | "
      f"{docs_baselines._fmt(row['elbo'])} | {row['posterior_pairs_at_cap']:.0%} "
      f"/ {row['prior_pairs_at_cap']:.1%} | {row['time_s']:.0f} s "
      f"({row['time_s'] / first['time_s']:.1f}×) |"
    )
  return _block(rows)


def ll_iterations_gap(name: str) -> str:
  """docs/experiments-nat-mnist-likelihood.md: how far the run's cap leaves its
  log-likelihood below the longest cap's, in nats and percent."""
  r = _load(f"{name}.json")
  own = next(row for row in r["rows"] if row["cap"] == r["run_cap"])
  longest = max(r["rows"], key=lambda row: row["cap"])
  gap = longest["log_likelihood"] - own["log_likelihood"]
  return f"{gap:.1f} nats ({100 * gap / abs(longest['log_likelihood']):.1f}%)"


def ll_iterations_protocol(name: str, run: str) -> str:
  """docs/experiments-nat-mnist-likelihood.md: a longer cap's log-likelihood over a
  run's whole protocol (``ll_iterations.py``) beside the run's own."""
  r, s = _load(f"{name}.json"), _load(f"{run}.json")["summary"]
  if r["points"] != s["log_likelihood_points"]:
    raise ValueError(f"{name} covers {r['points']} points, {run} its protocol's")
  (row,) = r["rows"]
  gap = row["log_likelihood"] - s["log_likelihood"]
  return (
    f"{docs_baselines._fmt(row['log_likelihood'])} with {row['cap']} "
    f"iterations against the run's {docs_baselines._fmt(s['log_likelihood'])} "
    f"({gap:+.1f} nats, {100 * gap / abs(s['log_likelihood']):+.1f}%; "
    f"{row['time_s'] / 60:.0f} min)"
  )


def run_time(name: str) -> str:
  """README, docs: a finished run's times (``docs/results/<name>.json``)."""
  return _run_time(_load(f"{name}.json")["summary"])


def mnist_cpu(exp: str) -> str:
  """README: the CPU-budget command of ``exp`` (rot / nat), seed 0."""
  name = f"{exp}_mnist_cpu_seed0"
  if exp == "rot":
    return rot_span(name)
  s = _load(f"{name}.json")["summary"]
  return (
    f"MSE {s['mse']:.4f} (1 seed); decoded posterior samples keep their "
    f"class {100 * s['class_consistency']:.0f}% of the time"
  )


def _seed(name: str) -> int:
  """The seed of the run in ``docs/results/<name>.json``: its command's
  ``--config.seed=N``, or the config's default 0."""
  found = re.search(r"--config\.seed=(\d+)", _load(f"{name}.json")["command"])
  return int(found.group(1)) if found else 0


def _seed_runs(prefix: str) -> list[tuple[int, dict]]:
  """``(seed, summary)`` of every ``docs/results/<prefix>_seed*.json``, by seed."""
  names = [p.stem for p in RESULTS.glob(f"{prefix}_seed*.json")]
  return sorted((_seed(n), _load(f"{n}.json")["summary"]) for n in names)


def rot_span(name: str) -> str:
  """README: a finished rot_mnist run's gated span against the goal and the
  reference (``docs/results/<name>.json``)."""
  s = _load(f"{name}.json")["summary"]
  low, high = s["rotation_gated_span_quartiles"]
  span = s["rotation_gated_span_degrees"]
  return (
    f"median {span:g}° (quartiles {low:g}°–{high:g}°, "
    f"{s['rotation_gated_digits']} digits, seed {_seed(name)}); goal "
    f"{'reached' if span >= 180 else 'not reached'} (the operator fitted to "
    f"the encoder's orbits: {s['reference_rotation_gated_span_degrees']:g}°)"
  )


def rot_seeds_span(prefix: str) -> str:
  """README, docs: the gated span of every seed's run of ``prefix``."""
  runs = _seed_runs(prefix)
  spans = [s["rotation_gated_span_degrees"] for _, s in runs]
  refs = [s["reference_rotation_gated_span_degrees"] for _, s in runs]
  reached = sum(span >= 180 for span in spans)
  plural = "s" if len(runs) > 1 else ""
  return (
    f"median{plural} {', '.join(f'{x:g}°' for x in spans)} (seed{plural} "
    f"{', '.join(str(seed) for seed, _ in runs)}; "
    f"{runs[0][1]['rotation_gated_digits']} digits); goal reached in "
    f"{_of(reached, len(runs))} (the operator{plural} fitted to the encoder's orbits: "
    f"{', '.join(f'{x:g}°' for x in refs)})"
  )


def seeds_time(prefix: str) -> str:
  """README: the training and evaluation times of every seed's run of ``prefix``."""
  runs = [s for _, s in _seed_runs(prefix)]
  if any(s["resumed_from_step"] for s in runs):
    raise ValueError(f"{prefix}: a resumed run's times are those of its last part")

  def span(key: str) -> str:
    return docs_inference._span([s[key] for s in runs])

  return (
    f"{span('train_time_s')} s training + {span('eval_time_s')} s evaluation"
    f"{' a seed' if len(runs) > 1 else ''}"
  )


def rot_seeds_table(prefix: str) -> str:
  """docs/experiments-rot-mnist.md: one row per seed's run of ``prefix``."""
  rows = [
    "| seed | gated span, median (quartiles) | correlation gate alone / class "
    "gate alone | reference operator's span | \\|cos\\| with it | gate level | "
    "per class, lowest – highest | MSE | log-likelihood | knn accuracy | "
    "`Psi` steps refused | time |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  for seed, s in _seed_runs(prefix):
    low, high = s["rotation_gated_span_quartiles"]
    per_class = s["rotation_gated_span_per_class"]
    worst, best = per_class.index(min(per_class)), per_class.index(max(per_class))
    rows.append(
      f"| {seed} | **{s['rotation_gated_span_degrees']:g}°** ({low:g}°–{high:g}°) | "
      f"{s['rotation_correlation_gate_only_span_degrees']:g}° / "
      f"{s['rotation_class_gate_only_span_degrees']:g}° | "
      f"{s['reference_rotation_gated_span_degrees']:g}° | "
      f"{s['reference_cosine']:.3f} | {s['rotation_gate_level']:.3f} | "
      f"{per_class[worst]:g}° ({worst}) – {per_class[best]:g}° ({best}) | "
      f"{s['mse']:.4f} | {docs_baselines._fmt(s['log_likelihood'])} "
      f"({s['log_likelihood_points']} × {s['log_likelihood_samples']}) | "
      f"{s['knn_class_accuracy']:.3f} | "
      f"{_of(s['psi_rejected_steps'], s['psi_attempted_steps'])} | {_run_time(s)} |"
    )
  return _block(rows)


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
  """docs/population-swiss-roll.md: members that traverse the roll when only
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
  """docs/population-swiss-roll.md: the whole-member studies (seeds 0-9)."""
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
      f"| {label} ([json](results/{name})) | {learned} of {members} | "
      f"{round(study['oracle_success_rate'] * seeds)} of {seeds} | "
      f"{round(early['population_success_rate'] * seeds)} of {seeds} (AUC "
      f"{early['auc']:.2f}) | {end['picked_success']['3']} / "
      f"{end['picked_success']['20']} of {seeds} (AUC {end['auc']['3']:.2f} / "
      f"{end['auc']['20']:.2f}) |"
    )
  return _block(rows)


def swiss_anchor_table() -> str:
  """docs/experiments-sensitivity.md: members and picks by random anchor count."""
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
  "rot-run": rot_run,
  "rot-seeds-span": rot_seeds_span,
  "rot-seeds-table": rot_seeds_table,
  "seeds-time": seeds_time,
  "run-time": run_time,
  "nat-runs-table": nat_runs_table,
  "release-table": release_table,
  "nat-paper": nat_paper,
  "nat-paper-ll-gap": nat_paper_ll_gap,
  "ll-iterations-table": ll_iterations_table,
  "ll-terms-table": ll_terms_table,
  "ll-terms-share": ll_terms_share,
  "ll-terms-solvers": ll_terms_solvers,
  "ll-terms-solver-gain": ll_terms_solver_gain,
  "ll-iterations-gap": ll_iterations_gap,
  "ll-iterations-protocol": ll_iterations_protocol,
  "nat-seeds-table": nat_seeds_table,
  "nat-seeds-range": nat_seeds_range,
  "nat-seeds-medians": nat_seeds_medians,
  "nat-seeds-gap": nat_seeds_gap,
  "rot-levers-table": rot_levers_table,
  "rot-lever": rot_lever,
  "rot-lever-each": rot_lever_each,
  "rot-lever-vs": rot_lever_vs,
  "rot-regrid-table": rot_regrid_table,
  "rot-parts-table": rot_parts_table,
  "rot-parts-objective": rot_parts_objective,
  "rot-part": rot_part,
  "rot-terms-table": rot_terms_table,
  "rot-reach-table": rot_reach_table,
  "rot-term": rot_term,
  "rot-reach": rot_reach,
  "scheduler-step": scheduler_step,
  "scheduler-ratio": scheduler_ratio,
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
  "fit-battery-table": fit_battery_table,
  "fit-rates": fit_rates,
  "fit-family-rate": fit_family_rate,
  "fit-alternating-retries": fit_alternating_retries,
  "fit-tries": fit_tries,
  "fit-scale-one-rates": fit_scale_one_rates,
  "fit-scale-two-first-tries": fit_scale_two_first_tries,
  "fit-wobbly-tries": fit_wobbly_tries,
  "fit-sample-check": fit_sample_check,
  "fit-false-learned": fit_false_learned,
  "fit-time": fit_time,
  "fit-anchor-table": fit_anchor_table,
  "fit-ellipse-levers": fit_ellipse_levers,
  "fit-ellipse-members": fit_ellipse_members,
  "fit-speed-table": fit_speed_table,
  "fit-speed-fresh": fit_speed_fresh,
  "fit-speed-modes": fit_speed_modes,
  "fit-time-by-tries": fit_time_by_tries,
  "first-command-table": first_command_table,
  "eval-time-table": eval_time_table,
  "fit-wobbly-levers": fit_wobbly_levers,
  "fit-lever-table": fit_lever_table,
  "fit-constant-rate": fit_constant_rate,
  "fit-calibration": fit_calibration,
  "fit-settled": fit_settled,
  "mnist-cpu": mnist_cpu,
  **docs_inference.RENDERERS,
  **docs_original.RENDERERS,
  **docs_synthetic.RENDERERS,
  **docs_training.RENDERERS,
  **docs_baselines.RENDERERS,
  **docs_gpu.RENDERERS,
}


def spans(text: str):
  """``(name, text)`` of every generated span in a page's ``text``."""
  return [(m.group(2), m.group(3)) for m in SPAN.finditer(text)]


def _render(name: str, cache: dict) -> str | None:
  """A span's text: ``RENDERERS[head](*args)`` for ``head:arg:arg``; None
  for a name without a renderer."""
  if name not in cache:
    head, *args = name.split(":")
    cache[name] = RENDERERS[head](*args) if head in RENDERERS else None
  return cache[name]


def render(text: str, cache: dict) -> str:
  """``text`` with every span replaced by its renderer's output."""
  return SPAN.sub(lambda m: m.group(1) + _render(m.group(2), cache) + m.group(4), text)


def stale(pages=PAGES) -> list[str]:
  """``page: name`` of every span that differs from its rendering (or whose
  name has no renderer)."""
  cache, out = {}, []
  for page in pages:
    for name, text in spans(page.read_text()):
      if text != _render(name, cache):
        where = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page.name
        out.append(f"{where}: {name}")
  return out


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--check", action="store_true", help="only list stale spans")
  args = parser.parse_args(argv)
  if args.check:
    out = stale()
    print("\n".join(out) or "every generated span is up to date")
    return 1 if out else 0
  cache = {}
  for page in PAGES:
    text = page.read_text()
    new = render(text, cache)
    if new != text:
      page.write_text(new)
      print(f"rewrote {page.relative_to(ROOT)}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
