"""Single runs of the synthetic experiments, rendered
(docs/studies/experiments-synthetic.md).

The renderers of :mod:`docs.gen` for the ``seed_rates.py`` files of
single runs (``--config.population=1``): ``single_concentric.json``,
``single_swiss_roll.json`` (seeds 0-9) and ``swiss_roll_draws.json``
(seed 0, ``--field=psi_seed``, draws 0-9); ``figure_runs.json``: the
``summary.json`` of the default commands whose figures the page shows;
``sensitivity_levers.json``: ``seed_rates.py`` files of single runs with
one change each (docs/studies/experiments-sensitivity.md), whose unchanged
concentric row is the single run beside the default's
``seeds_concentric_100_139.json`` on the same fresh seeds
(docs/population.md).
Names taking arguments are written ``gen:NAME:ARG`` in a page.
"""

from __future__ import annotations

from .common import _block, _load, _span

FILES = {
  "concentric": "single_concentric.json",
  "swiss_roll": "single_swiss_roll.json",
  "draws": "swiss_roll_draws.json",
}


def _by_seed(result: dict) -> dict:
  """A ``seed_rates.py`` result's runs by integer seed."""
  return {int(s): r for s, r in result["seeds"].items()}


def _runs(name: str) -> dict:
  return _by_seed(_load(FILES[name]))


def single_command(name: str) -> str:
  """The command of a file, as ``seed_rates.py`` recorded it."""
  return f"`{_load(FILES[name])['command']}`"


def single_table(name: str) -> str:
  """Seed by seed: the outcome and the report's numbers."""
  label = "draw" if name == "draws" else "seed"
  rows = [
    f"| {label} | learned | orbit coverage | sample dist. | orbit dist. | path "
    "dist. (endpoint err.) | line dist. | knn acc. | `Psi` rejected / tried | "
    "‖Psi_m‖_F | wall time |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  for seed, r in sorted(_runs(name).items()):
    norms = ", ".join(f"{m:.3f}" for m in r["operator_magnitudes"])
    rows.append(
      f"| {seed} | {'**yes**' if r['success'] else 'no'} "
      f"| {r['orbit_coverage']:.2f} | {r['sample_manifold_distance']:.1f} "
      f"| {r['orbit_manifold_distance']:.1f} | {r['path_manifold_distance']:.2f} "
      f"({r['path_endpoint_error']:.2f}) | {r['linear_path_manifold_distance']:.2f} "
      f"| {r['knn_class_accuracy']:.2f} "
      f"| {r['psi_rejected_steps']} / {r['psi_attempted_steps']} | {norms} "
      f"| {r['wall_time_s']:.0f} s |"
    )
  return _block(rows)


def single_rate(name: str) -> str:
  """How many of the file's runs learned: "4 of 10"."""
  runs = _runs(name)
  return f"{sum(r['success'] for r in runs.values())} of {len(runs)}"


def single_groups(name: str) -> str:
  """The numbers that tell the runs that learned from the others."""
  runs = _runs(name).values()
  parts = []
  for learned in (True, False):
    group = [r for r in runs if r["success"] == learned]
    if not group:
      continue
    what = "the runs that learned" if learned else "the others"
    samples = [r["sample_manifold_distance"] for r in group]
    paths = [r["path_manifold_distance"] for r in group]
    lines = [r["linear_path_manifold_distance"] for r in group]
    parts.append(
      f"{what}: prior samples {min(samples):.1f}–{max(samples):.1f} noise levels "
      f"off, paths {min(paths):.1f}–{max(paths):.1f} spacings from the data "
      f"(straight lines {min(lines):.1f}–{max(lines):.1f})"
    )
  return "; ".join(parts)


def single_rejections(name: str) -> str:
  """The paper's health signal, the rejected `Psi` steps, by outcome."""
  runs = _runs(name).values()
  tried = {r["psi_attempted_steps"] for r in runs}
  groups = [
    _span([r["psi_rejected_steps"] for r in runs if r["success"] == learned])
    for learned in (True, False)
    if any(r["success"] == learned for r in runs)
  ]
  return f"{' against '.join(groups)} of {'/'.join(map(str, sorted(tried)))}"


def figure_run(name: str) -> str:
  """The outcome of the run a page's figures come from."""
  s = _load("figure_runs.json")[name]
  return (
    f"orbit coverage {s['orbit_coverage']:.2f}, prior samples "
    f"{s['sample_manifold_distance']:.1f} noise levels off"
  )


def sensitivity_table() -> str:
  """One row a lever: the change, its flag, which seeds learned, the ranges,
  and Fisher's exact test against the experiment's unchanged row."""
  from scipy.stats import fisher_exact

  rows = [
    "| experiment | change | flag | learned | p against none | orbit coverage "
    "| prior samples (noise levels) |",
    "|---|---|---|---|---|---|---|",
  ]
  levers = _load("sensitivity_levers.json")["levers"]
  base = {}
  for lever in levers:
    runs = _by_seed(lever)
    wins = [s for s, r in sorted(runs.items()) if r["success"]]
    coverage = [r["orbit_coverage"] for r in runs.values()]
    samples = [r["sample_manifold_distance"] for r in runs.values()]
    counts = (len(wins), len(runs) - len(wins))
    if not lever["flag"]:
      base[lever["experiment"]], p = counts, "—"
    else:
      p = f"{fisher_exact([counts, base[lever['experiment']]])[1]:.2f}"
    flag = f"`{lever['flag']}`" if lever["flag"] else "—"
    learned = f"{len(wins)} of {len(runs)}"
    if wins:
      learned += f" ({', '.join(map(str, wins))})"
    rows.append(
      f"| {lever['experiment']} | {lever['change']} | {flag} | {learned} | {p} "
      f"| {min(coverage):.2f}–{max(coverage):.2f} "
      f"| {min(samples):.1f}–{max(samples):.1f} |"
    )
  return _block(rows)


def _lever(experiment: str, flag: str) -> dict:
  levers = _load("sensitivity_levers.json")["levers"]
  (lever,) = [v for v in levers if (v["experiment"], v["flag"]) == (experiment, flag)]
  return _by_seed(lever)


def _cell(r: dict) -> str:
  mark = "✓" if r["success"] else "✗"
  return f"{r['orbit_coverage']:.2f} / {r['sample_manifold_distance']:.1f} {mark}"


def fresh_seeds_table() -> str:
  """The concentric command on fresh seeds: one member alone, the default."""
  single = _lever("concentric", "")
  default = _by_seed(_load("seeds_concentric_100_139.json"))
  rows = ["| seed | one member alone | the default (8 draws) |", "|---|---|---|"]
  for seed in sorted(single):
    rows.append(f"| {seed} | {_cell(single[seed])} | {_cell(default[seed])} |")
  wins = [sum(r["success"] for r in runs.values()) for runs in (single, default)]
  rows.append(
    f"| learned | {wins[0]} of {len(single)} | {wins[1]} of {len(default)} "
    f"(seeds {min(default)}–{max(default)}) |"
  )
  return _block(rows)


def default_details() -> str:
  """The default's fresh seeds: coverage, sample distances, wall times."""
  runs = _load("seeds_concentric_100_139.json")["seeds"].values()
  coverage = [r["orbit_coverage"] for r in runs]
  samples = [r["sample_manifold_distance"] for r in runs]
  seconds = [r["wall_time_s"] for r in runs]
  low, high = min(coverage), max(coverage)
  cover = f"{low:.2f} on every seed" if low == high else f"{low:.2f}–{high:.2f}"
  return (
    f"orbit coverage {cover}, sample distances "
    f"{min(samples):.1f}–{max(samples):.1f}, {_span(seconds)} s a run"
  )


RENDERERS = {
  "default-details": default_details,
  "fresh-seeds-table": fresh_seeds_table,
  "sensitivity-table": sensitivity_table,
  "figure-run": figure_run,
  "single-command": single_command,
  "single-table": single_table,
  "single-rate": single_rate,
  "single-groups": single_groups,
  "single-rejections": single_rejections,
}
