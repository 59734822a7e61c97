"""Tables of the rotated-MNIST studies (``studies/mnist/rot_*.py``), from
the results each study writes into docs/results/."""

from __future__ import annotations

import pathlib
import statistics

import numpy as np

# rot_prior_terms.py: the degrees an anchor is reached over, the terms, distances
ANGLES = (2, 5, 10, 18, 36, 72, 180)
TERMS = ("q_fit", "q_l1", "p_fit", "p_l1")
DISTANCES = ("travel", "to_anchor", "c_p")


def levers_table(levers: dict) -> str:
  """Markdown: per lever each seed's gated span and the median over seeds."""
  rows = [
    "| lever | config | gated span per seed (median, quartiles) | median over seeds "
    "| reference operator's span | \\|cos\\| with it | MSE | `Psi` steps rejected |",
    "|---|---|---|---|---|---|---|---|",
  ]
  for lever, entry in levers.items():
    seeds = entry["seeds"].values()

    def med(key, seeds=seeds):
      return statistics.median(s[key] for s in seeds)

    spans = "; ".join(
      f"{s['rotation_gated_span_degrees']:g}° "
      f"({s['rotation_gated_span_quartiles'][0]:g}°–"
      f"{s['rotation_gated_span_quartiles'][1]:g}°)"
      for s in seeds
    )
    flags = " ".join(f"`{f.removeprefix('--config.')}`" for f in entry["flags"])
    flags = flags or "the experiment's"
    rows.append(
      f"| {lever} | {flags} | {spans} | **{med('rotation_gated_span_degrees'):g}°** "
      f"| {med('reference_rotation_gated_span_degrees'):g}° "
      f"| {med('reference_cosine'):.3f} | {med('mse'):.4f} "
      f"| {med('psi_rejected_steps'):g} of {med('psi_attempted_steps'):g} |"
    )
  return "\n".join(rows)


def regrid_span(row: dict, prefix: str = "rotation_") -> str:
  low, high = row[f"{prefix}gated_span_quartiles"]
  return f"{row[f'{prefix}gated_span_degrees']:g}° ({low:g}°–{high:g}°)"


def regrid_table(runs: dict) -> str:
  """Markdown: the runs whose numbers changed, old and new, then the others."""
  ref = "reference_rotation_gated_span_degrees"
  rows = [
    "| run | gated span, median (quartiles): share rule → speed rule "
    "| reference operator's span |",
    "|---|---|---|",
  ]
  same = [pathlib.Path(f).name for f, row in runs.items() if row["old"] == row["new"]]
  for folder, row in runs.items():
    old, new = row["old"], row["new"]
    if old != new:
      rows.append(
        f"| {pathlib.Path(folder).name} | {regrid_span(old)} → **{regrid_span(new)}** "
        f"| {old[ref]:g}° → {new[ref]:g}° |"
      )
  if same:
    rows.append(f"| the other {len(same)}: {', '.join(same)} | unchanged | unchanged |")
  return "\n".join(rows)


def parts_table(runs: dict) -> str:
  """Markdown: per operator, the gated span and ``|cos|`` of each run."""
  names = list(next(iter(runs.values()))["spans"])
  rows = [
    "| operator | gated span per run (median, quartiles) | \\|cos\\| with `R` |",
    "|---|---|---|",
  ]
  for name in names:
    cells = [runs[f]["spans"][name] for f in runs]
    spans = "; ".join(
      f"{c['gated']:g}° ({c['quartiles'][0]:g}°–{c['quartiles'][1]:g}°)" for c in cells
    )
    cos = ", ".join(f"{c['cos']:.3f}" for c in cells)
    rows.append(f"| {name} | {spans} | {cos} |")
  return "\n".join(rows)


def parts_objective_table(runs: dict) -> str:
  """Markdown: per ``psi``, the objective's difference from ``L`` per run."""
  names = list(next(iter(runs.values()))["objective"])
  rows = [
    "| `psi` | objective − at `L`, per run (± standard error) |",
    "|---|---|",
  ]
  for name in names[1:]:
    cells = [runs[f]["objective"][name] for f in runs]
    rows.append(
      f"| {name} | "
      + "; ".join(f"{c['diff']:+.3f} ± {c['diff_se']:.3f}" for c in cells)
      + " |"
    )
  return "\n".join(rows)


def terms_table(runs: dict) -> str:
  """Markdown: per cell, the objective's difference from (``L``, ``L``) and
  each term's, averaged over the runs, with the runs' range of the total."""
  names = list(next(iter(runs.values()))["grid"])
  cells = [(s, n) for s in names for n in names]
  rows = [
    "| samples along | `psi` | objective − at (`L`, `L`), per run | "
    + " | ".join(f"{k} −" for k in TERMS)
    + " | travel | to_anchor | c_p |",
    "|---|---|---|" + "---|" * (len(TERMS) + len(DISTANCES)),
  ]
  for s, n in cells:
    got = [r["grid"][s][n] for r in runs.values()]
    ref = [r["grid"]["learned"]["learned"] for r in runs.values()]
    diffs = "; ".join(f"{g['diff']:+.3f} ± {g['diff_se']:.3f}" for g in got)
    terms = " | ".join(
      f"{np.mean([g[k] - b[k] for g, b in zip(got, ref, strict=True)]):+.3f}"
      for k in TERMS
    )
    dists = " | ".join(f"{np.mean([g[k] for g in got]):.3f}" for k in DISTANCES)
    rows.append(f"| {s} | {n} | {diffs} | {terms} | {dists} |")
  return "\n".join(rows)


def terms_reach_table(runs: dict) -> str:
  """Markdown: per operator and angle, the median ``|c|``, the share taken
  the long way round and the offset left, each run's."""
  names = list(next(iter(runs.values()))["reach"])
  rows = [
    "| `psi` | " + " | ".join(f"{a}°" for a in ANGLES) + " |",
    "|---|" + "---|" * len(ANGLES),
  ]
  for n in names:
    cells = []
    for a in ANGLES:
      got = [r["reach"][n][str(a)] for r in runs.values()]
      cells.append(
        "; ".join(
          f"{g['c']:.1f}, {100 * g['long_way']:.0f}%, {g['residual']:.2f}" for g in got
        )
      )
    rows.append(f"| {n} | " + " | ".join(cells) + " |")
  return "\n".join(rows)
