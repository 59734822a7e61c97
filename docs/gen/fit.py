"""The numbers of docs/fit.md, docs/images.md and their studies: fit() measured."""

from __future__ import annotations

import re
import statistics

import numpy as np

from .common import _and, _block, _load, _of, _span

# fit_battery.py's families in the order and words the docs use.
FAMILIES = {
  "circles": "10-D circles",
  "circles_scaled": "scaled circles",
  "unequal": "unequal classes",
  "arc": "an open arc",
  "s_curve": "an open S-curve",
  "wave": "an open wave",
  "spiral": "an open spiral",
  "ellipses": "three ellipses",
  "circles_100d": "100-D circles",
  "wobbly_100d": "100-D wobbly curves",
  "uneven": "unevenly sampled circles",
  "noise_0.03": "circles at noise 0.03",
  "noise_0.1": "circles at noise 0.1",
  "few_points": "50 points a class",
  "ten_classes": "ten classes",
  "unlabelled": "circles without labels",
  "knots_3d": "knotted 3-D curves",
  "torus": "a torus",
}


def _fit_runs(key: str = "fit_defaults") -> dict[str, list[dict]]:
  """fit_battery.json's runs of fit's defaults (or of ``key``), by family."""
  runs: dict[str, list[dict]] = {family: [] for family in FAMILIES}
  for run in _load("fit_battery.json")[key].values():
    runs[run["family"]].append(run)
  return {family: group for family, group in runs.items() if group}


def _all_fit_runs(key: str = "fit_defaults") -> list[dict]:
  """fit_battery.json's runs of fit's defaults (or of ``key``), every family."""
  return [r for group in _fit_runs(key).values() for r in group]


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
  from vaells_jax.runs.fit import config_of_try

  retry, plain = [], []
  for run in _fit_runs()["wobbly_100d"]:
    record = [
      {"sample_noise_levels": t["signals"]["sample_noise_levels"]}
      for t in run["try_scores"]
    ]
    for k, t in enumerate(run["try_scores"]):
      (retry if config_of_try(k, record, False, True) else plain).append(t)

  def learned(group):
    return f"{sum(t['success'] for t in group)} of {len(group)}"

  failed = [t for t in retry if not t["success"]]
  along = [t for t in failed if t["orbit_coverage"] >= 0.9]
  across = [t["orbit_coverage"] for t in failed if t not in along]
  return (
    f"of their tries at the defaults {learned(plain)} learned (orbit coverage "
    f"{_span([t['orbit_coverage'] for t in plain], 2)}), of "
    f"those at `FIT_RETRY_CHANGES` {learned(retry)}; of the {len(failed)} "
    f"retries that failed, {len(across)} have operators that do "
    "not follow the curve (orbit coverage "
    f"{_span(across, 2)})"
    + (
      f" and {len(along)} follow it with samples "
      f"{_span([t['sample_manifold_distance'] for t in along], 1)} "
      "noise levels off"
      if along
      else ""
    )
  )


def fit_sample_check() -> str:
  """docs/fit.md: sample_noise_levels against the ground truth on every
  try of the battery."""
  from vaells_jax.runs.verdict import THRESHOLDS

  every = [t for r in _all_fit_runs() for t in r["try_scores"]]
  tries = [t for t in every if "sample_noise_levels" in t["signals"]]
  near, far = _sample_signals(tries)
  limit = THRESHOLDS["sample_noise_levels_max"]
  which = "all" if len(tries) == len(every) else "the"
  return (
    f"on {which} {len(tries)} tries of the battery that record it, those whose "
    "samples lay within "
    f"15 true noise levels scored {_span(near, 1)} "
    f"({sum(v > limit for v in near)} of {len(near)} above {limit:g}), "
    f"those beyond {_span(far, 1)} "
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


def fit_rates_summary() -> str:
  """README: how many of the battery's families learn on 9 of 10 seeds or
  more, and the verdict's precision and recall."""
  runs = _fit_runs()
  good = [f for f, g in runs.items() if sum(r["success"] for r in g) >= 0.9 * len(g)]
  everything = [r for group in runs.values() for r in group]
  called, right, truly, found = _verdict_counts(everything)
  return (
    f"{len(good)} of {len(runs)} families on 9 of 10 seeds or more "
    f"({sum(r['success'] for r in everything)} of {len(everything)} fits); "
    f"verdict precision {right / called:.2f} ({right} of {called}), "
    f"recall {found / truly:.2f}"
  )


def fit_family_rate(key: str, family: str) -> str:
  """docs/studies/fit-levers.md: the rate on ``family`` in ``key``."""
  group = _fit_runs(key)[family]
  called, right, _, _ = _verdict_counts(group)
  learned = sum(r["success"] for r in group)
  return (
    f"{learned} of {len(group)} (verdict `learned` on {called}, "
    f"{right} of them learned)"
  )


def fit_alternating_retries() -> str:
  """docs/studies/fit-levers.md: the wobbly retries of the battery that alternated
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
      f"15 true noise levels scored {_span(within, 1)}, those beyond "
      f"{_span(beyond, 1)}"
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
  (100-D circles: every kept try; the arc at ``FIT_CONFIG``: the fits that
  learned)."""

  def span(key, family, learned_only):
    values = [
      r["signals"]["latent_coverage"]
      for r in _fit_runs(key)[family]
      if r["success"] or not learned_only
    ]
    return _span(values, 2)

  wide = _fit_runs()["circles_100d"]
  return (
    f"on the 100-D circles the kept try ends at `latent_coverage` "
    f"{span('fit_defaults', 'circles_100d', False)} on all {len(wide)} seeds "
    f"({span('constant_net_rate', 'circles_100d', False)} at constant rates), "
    f"and on the open arc the fits that learned at "
    f"{span('fit_config_one_class', 'arc', True)} "
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
    return _span([r[key] for r in rounds if r["mode"] == mode], 1)

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
  """docs/studies/benchmarks-evaluation.md: the README's first command, run by run."""
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
  """docs/studies/benchmarks-evaluation.md: the evaluation on an empty cache."""
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


IMAGE_FAMILIES = {  # image_battery.py's families in the words the docs use
  "rotated_digits": "rotated digits",
  "turning_shapes": "turning shapes",
  "shifted_digits": "shifted digits (open)",
  "colour_sprites": "colour sprites (C = 3)",
  "wide_sprites": "wide sprites (24 x 40)",
}


def _image_runs(key: str) -> dict[str, list[dict]]:
  """image_battery.json's runs of ``key`` (a variant), by family."""
  runs: dict[str, list[dict]] = {family: [] for family in IMAGE_FAMILIES}
  for run in _load("image_battery.json")[key].values():
    runs[run["family"]].append(run)
  return {family: group for family, group in runs.items() if group}


def image_battery_table(key: str = "defaults") -> str:
  """docs/images.md: the image battery, a row per family (of variant ``key``)."""
  rows = [
    "| family | learned (ground truth) | verdict `learned` / `uncertain` / "
    "`not learned` | orbit coverage | orbit purity | prior samples in class | "
    "samples' distance (spreads) |",
    "|---|---|---|---|---|---|---|",
  ]
  for family, runs in _image_runs(key).items():
    said = [sum(r["verdict"] == v for r in runs) for v in VERDICTS]
    rows.append(
      f"| {IMAGE_FAMILIES[family]} | {sum(r['success'] for r in runs)} of "
      f"{len(runs)} | {' / '.join(map(str, said))} | "
      f"{_span([r['orbit_coverage'] for r in runs], 2)} | "
      f"{_span([r['orbit_purity'] for r in runs], 2)} | "
      f"{_span([r['sample_class'] for r in runs], 2)} | "
      f"{_span([r['sample_distance'] for r in runs], 2)} |"
    )
  return _block(rows)


def _precision_recall(runs) -> str:
  """The verdict's precision and recall against the ground truth of ``runs``."""
  truth = np.array([r["success"] for r in runs])
  said = np.array([r["verdict"] == "learned" for r in runs])
  precision = f"{np.mean(truth[said]):.2f}" if said.any() else "undefined"
  recall = f"{np.mean(said[truth]):.2f}" if truth.any() else "undefined"
  return f"precision {precision} ({said.sum()} said), recall {recall}"


def image_rates(key: str = "defaults") -> str:
  """README: the image battery's rates and the verdict's precision, recall."""
  runs = _image_runs(key)
  every = [r for group in runs.values() for r in group]
  learned = sum(r["success"] for r in every)
  return (
    f"{learned} of {len(every)} image fits ({len(runs)} families, seeds "
    f"{_span([r['seed'] for r in every])}); verdict {_precision_recall(every)}"
  )


def image_anchors() -> str:
  """docs/studies/fit-images.md: the battery with the anchors trained (from
  the same warm starts) against fit's defaults, which hold them."""
  parts = []
  for key, words in (("anchors_trained", "trained"), ("defaults", "held")):
    runs = [r for group in _image_runs(key).values() for r in group]
    failed = [r for r in runs if not r["success"]]
    named = _and(f"{IMAGE_FAMILIES[r['family']]} {r['seed']}" for r in failed)
    parts.append(
      f"anchors {words}, {sum(r['success'] for r in runs)} of {len(runs)} "
      f"learned" + (f" (failed: {named})" if failed else "")
    )
  return "; ".join(parts)


def image_verdict_check() -> str:
  """docs/images.md: the image verdict on the families its thresholds were
  set on and on the others: every scored run of the battery (at fit's
  defaults, with the anchors trained, and the study's)."""
  from vaells_jax.runs.verdict import IMAGE_CALIBRATION

  results = _load("image_battery.json")
  keys = ("defaults", "anchors_trained", "study")
  runs = [r for key in keys for r in results[key].values()]
  runs = [r for r in runs if "image_coverage" in r["signals"]]
  parts = []
  for word, chosen in (("set on", True), ("checked on", False)):
    names = [f for f in IMAGE_FAMILIES if (f in IMAGE_CALIBRATION) == chosen]
    group = [r for r in runs if r["family"] in names]
    families = _and(f.replace("_", " ") for f in names)
    failed = sum(not r["success"] for r in group)
    parts.append(
      f"{word} {families} ({len(group)} runs, {failed} failed): "
      f"{_precision_recall(group)}"
    )
  return "; ".join(parts)


def image_reused() -> str:
  """docs/images.md: how many of the battery's runs reused a kept warm start."""
  runs = _load("image_battery.json")["defaults"].values()
  return f"{sum('warm_start_from' in r for r in runs)} of the table's {len(runs)} runs"


def image_time() -> str:
  """docs/images.md: whole 28 x 28 calls at fit's defaults (their median and
  where it went), and the battery's whole calls with the anchors trained."""
  results = _load("image_battery.json")
  runs = list(results["timing"].values())
  phases = {k: np.median([r["phases_s"][k] for r in runs]) for k in runs[0]["phases_s"]}
  wall = [r["wall_time_s"] for r in runs]
  rest = np.median(wall) - sum(phases.values())
  trained = _image_runs("anchors_trained")
  small = [
    r["wall_time_s"] for f in ("rotated_digits", "shifted_digits") for r in trained[f]
  ]
  larger = [
    f"{IMAGE_FAMILIES[f]} {_span([r['wall_time_s'] for r in trained[f]])} s"
    for f in ("turning_shapes", "colour_sprites", "wide_sprites")
  ]
  return (
    f"28 × 28 at fit's defaults: median {np.median(wall):.0f} s a call over "
    f"{len(runs)} calls ({_span(wall)} s; warm start "
    f"{phases['warm_start_s']:.0f} s, compiling {phases['compile_time_s']:.0f} s, "
    f"training {phases['train_time_s']:.0f} s, the rest, mostly the verdict, "
    f"{rest:.0f} s); the kept runs, two at a time: 28 × 28 median "
    f"{np.median(small):.0f} s over {len(small)} calls, {_and(larger)}"
  )


VERDICTS = ("learned", "uncertain", "not learned")


def fit_mnist() -> str:
  """docs/images.md: fit on the 60 000 MNIST training digits: time, memory."""
  run = _load("fit_mnist.json")
  phases = run["phases_s"]
  return (
    f"{run['images'][0]} digits: {run['wall_time_s'] / 60:.1f} minutes a call "
    f"(warm start {phases['warm_start_s']:.0f} s, "
    f"compiling {phases['compile_time_s']:.0f} s, training "
    f"{phases['train_time_s']:.0f} s, evaluation {phases['eval_time_s']:.0f} s), "
    f"peak memory {run['peak_rss_gb']:.2f} GB, verdict `{run['verdict']}`"
  )


def image_layouts() -> str:
  """docs/images.md: how many classes the warm start lays out as what they are."""
  right = [r for row in _load("image_layouts.json").values() for r in row["right"]]
  return f"{sum(right)} of {len(right)} classes"


def image_study_table() -> str:
  """docs/studies/fit-images.md: single runs of the image battery with
  settings changed (``--set``), a row each."""
  rows = [
    "| family, seed | settings (`--set`) | orbit coverage | purity | samples in "
    "class | samples' distance (spreads) | `reconstruction_error` |",
    "|---|---|---|---|---|---|---|",
  ]
  for key, r in _load("image_battery.json")["study"].items():
    changes = re.findall(r"[a-z][a-z0-9_]*?=[^_]+", key[len(r["family"]) :])
    settings = ", ".join(f"`{c}`" for c in changes)
    rows.append(
      f"| {IMAGE_FAMILIES[r['family']]}, {r['seed']} | {settings or 'defaults'} | "
      f"{r['orbit_coverage']:.2f} | {r['orbit_purity']:.2f} | "
      f"{r['sample_class']:.2f} | {r['sample_distance']:.2f} | "
      f"{r['signals']['reconstruction_error']:.2f} |"
    )
  return _block(rows)


def image_pretrain_loop() -> str:
  """docs/studies/fit-images.md: the pretraining step, looped and scanned."""
  run = _load("image_pretrain_loop.json")
  loop, scan = run["loop_steps_per_s"], run["scan_steps_per_s"]
  return (
    f"{loop:.1f} steps a second from a Python loop, {scan:.1f} in `lax.scan` "
    f"({loop / scan:.1f} times as fast)"
  )


def image_latent_layout() -> str:
  """docs/studies/fit-images.md: the warm start's held-out ``1 - R^2`` with
  2 and 3 latent axes."""
  rows = _load("image_latent_layout.json").values()
  spans = {
    dim: _span([r["held_out_error"] for r in rows if r["latent_dim"] == dim], 2)
    for dim in (2, 3)
  }
  seeds = _and(sorted({r["seed"] for r in rows}))
  families = _and(sorted({r["family"].replace("_", " ") for r in rows}))
  return (
    f"{spans[2]} on nested circles in 2-D, {spans[3]} at heights in 3-D "
    f"({families}, seeds {seeds})"
  )


def image_latent_scale() -> str:
  """docs/studies/fit-images.md: the largest code entries of fit's image
  models (appendix B's rule divides the codes by them)."""
  rows = [r for r in _load("image_latent_scale.json").values() if r["lr_net"] == 0]
  seeds = sorted({r["seed"] for r in rows})
  return (
    f"{_span([r['max_entry'] for r in rows], 2)} (99th percentile "
    f"{_span([r['p99_entry'] for r in rows], 2)}; {len(rows)} fits of "
    f"{len({r['family'] for r in rows})} families, seeds {seeds[0]}–{seeds[-1]})"
  )


SWISS_MEMBERS = [f"swiss_roll_members_{a}_{a + 19}.json" for a in (120, 140, 160, 180)]


def verdict_swiss_members() -> str:
  """docs/fit.md: the swiss roll's members the data_coverage thresholds were
  set on, at the library's thresholds."""
  from vaells_jax.runs.verdict import THRESHOLDS

  members = [
    m for name in SWISS_MEMBERS for run in _load(name).values() for m in run["members"]
  ]
  at = THRESHOLDS["data_coverage_learned"]
  high = [m for m in members if m["signals"]["data_coverage"] >= at]
  learned = [m for m in members if m["success"]]
  latent = [m["signals"]["latent_coverage"] for m in learned]
  data = [m["signals"]["data_coverage"] for m in learned]
  return (
    f"on the {len(members)} members of seeds 120–199, {len(learned)} learned; "
    f"they read `latent_coverage` {_span(latent, 2)} and `data_coverage` "
    f"{_span(data, 2)}; {sum(m['success'] for m in high)} of the {len(high)} "
    f"members at `data_coverage` {at} or more learned"
  )


def verdict_experiments() -> str:
  """docs/fit.md: the verdict on the experiments' own runs, fresh seeds."""
  rows = []
  for exp in ("concentric", "swiss_roll"):
    result = _load(f"seeds_{exp}_500_519.json")
    runs = list(result["seeds"].values())
    seeds = sorted(int(s) for s in result["seeds"])
    learned = [r for r in runs if r["success"]]
    agree = sum(r["success"] == (r["verdict"] == "learned") for r in runs)
    called = sum(r["verdict"] == "learned" for r in learned)
    wrong = sum(r["verdict"] == "learned" for r in runs if not r["success"])
    rows.append(
      f"| {exp.replace('_', ' ')} | {seeds[0]}–{seeds[-1]} | {len(learned)} of "
      f"{len(runs)} | {called} of {len(learned)} | {wrong} | "
      f"**{agree} of {len(runs)}** |"
    )
  return _block(
    [
      "| experiment | seeds | learned (ground truth) | learned and called "
      "`learned` | failed and called `learned` | verdict agrees |",
      "|---|---|---|---|---|---|",
      *rows,
    ]
  )


def fit_open_curves_table() -> str:
  """docs/studies/fit-open-curves.md: one try of each recipe on the open
  S-curve and the knots (studies/fit/open_curves.py), a row per recipe."""
  groups: dict[str, list[dict]] = {}
  for key, row in _load("fit_open_curves.json").items():
    groups.setdefault(key.rsplit("_s", 1)[0], []).append(row)
  rows = [
    "| family, recipe | learned (ground truth) | orbit coverage | prior samples, "
    "noise levels off | anchors off the curves (noise distances) | verdict "
    "`learned` / `uncertain` / `not learned` |",
    "|---|---|---|---|---|---|",
  ]
  for name, runs in groups.items():
    family, _, recipe = name.partition("_learn")
    recipe = recipe and "learn" + recipe
    words = OPEN_CURVE_RECIPES.get(recipe, recipe)
    verdicts = [sum(r["verdict"] == v for r in runs) for v in _VERDICTS]
    rows.append(
      f"| `{family}`, {words} | {sum(r['success'] for r in runs)} of {len(runs)} | "
      f"{_span([r['orbit_coverage'] for r in runs], 2)} | "
      f"{_span([r['sample_manifold_distance'] for r in runs])} | "
      f"{_span([a for r in runs for c in r['anchor_off_span'] for a in c], 1)} | "
      f"{' / '.join(map(str, verdicts))} |"
    )
  return _block(rows)


_VERDICTS = ("learned", "uncertain", "not learned")
_OPERATORS_ALONE = "learn_anchors=False_lr_net=0_population=1_num_steps=1000_warm"
OPEN_CURVE_RECIPES = {
  "": "`FIT_CONFIG`",
  "learn_anchors=False": "`FIT_CONFIG`, anchors held",
  _OPERATORS_ALONE + "0": "layout on a segment, operators alone",
  _OPERATORS_ALONE + "0.75": "layout on ¾ of a circle, operators alone "
  "(`curve_config`)",
}


def fit_layouts() -> str:
  """docs/studies/fit-open-curves.md: the warm start's layouts of the
  battery's classes against the true curves (studies/fit/layouts.py)."""
  result = _load("fit_layouts.json")
  good = [f for f, rows in result.items() if all(r["agreement"] >= 0.95 for r in rows)]
  bad = {f: rows for f, rows in result.items() if f not in good}
  text = (
    f"on {len(good)} families ({', '.join(f'`{f}`' for f in good)}) the layout "
    "places every class's points in their order along the true curve "
    "(agreement 0.95 or more)"
  )
  for family, rows in bad.items():
    wrong = [r for r in rows if r["agreement"] < 0.95]
    right = [r for r in rows if r["agreement"] >= 0.95]
    text += (
      f"; on `{family}` {len(wrong)} of {len(rows)} classes are out of order "
      f"(agreement {_span([r['agreement'] for r in wrong], 2)}), their "
      f"neighbour graphs joining distant stretches "
      f"{_span([r['short_circuits'] for r in wrong])} times, against "
      f"{_span([r['short_circuits'] for r in right])} in the others"
    )
  return text


RENDERERS = {
  "fit-battery-table": fit_battery_table,
  "fit-rates-summary": fit_rates_summary,
  "verdict-swiss-members": verdict_swiss_members,
  "verdict-experiments": verdict_experiments,
  "fit-open-curves-table": fit_open_curves_table,
  "fit-layouts": fit_layouts,
  "image-latent-layout": image_latent_layout,
  "image-latent-scale": image_latent_scale,
  "image-anchors": image_anchors,
  "image-study-table": image_study_table,
  "image-pretrain-loop": image_pretrain_loop,
  "image-battery-table": image_battery_table,
  "image-rates": image_rates,
  "image-verdict-check": image_verdict_check,
  "image-time": image_time,
  "image-reused": image_reused,
  "image-layouts": image_layouts,
  "fit-mnist": fit_mnist,
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
}
