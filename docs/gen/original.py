"""The numbers against the original method, rendered (docs/benchmarks.md, README).

The renderers of :mod:`docs.gen` for ``original_pairs_step*.json``
(``python benchmarks/original_pairs.py``: a training step's own pairs, the
library's solve against the original method) and ``train_step_*.json``
(``python benchmarks/train_step.py``: whole training steps);
``original_release.json`` (``python benchmarks/original_release.py``: the
authors' released states beside runs of ours). Names taking arguments are
written ``gen:NAME:ARG:ARG`` in a page.
"""

from __future__ import annotations

from .common import _block, _load, _n, _span

STEPS = (1000,)  # original_pairs_step{S}.json


def _pair_rows() -> list[dict]:
  """Every experiment's row at every step, in step order."""
  rows = [r for step in STEPS for r in _load(f"original_pairs_step{step}.json")]
  return sorted(rows, key=lambda r: (r["experiment"], r["at_step"]))


def _as_good(part: dict) -> int:
  return round(part["as_good_fraction"] * part["pairs"])


def original_pairs_table() -> str:
  rows = [
    "| experiment (step) | solver | pair-solves | ours ms (min / median) "
    "| original ms (min / median) | speed-up | original CG iterations, median "
    "(share at 50) | as good as the original: posterior / prior | median "
    "ratio, prior | the original from other starts: as good, prior |",
    "|---|---|---|---|---|---|---|---|---|---|",
  ]
  for r in _pair_rows():
    ours, original = r["step_s"]["vaells_jax"], r["step_s"]["original"]
    post, prior = r["posterior"], r["prior"]
    rows.append(
      f"| {r['experiment']} ({r['at_step']}) | `{r['inference_method']}` "
      f"| {r['our_pair_solves']} | {1e3 * ours[0]:.1f} / {1e3 * ours[1]:.1f} "
      f"| {_n(1e3 * original[0])} / {_n(1e3 * original[1])} "
      f"| {_n(r['speedup'])}× | {r['original_iterations_median']:.0f} "
      f"({r['original_iterations_at_50']:.2f}) "
      f"| {_as_good(post)} of {post['pairs']} / {_as_good(prior)} of "
      f"{prior['pairs']} | {prior['median_ratio']:.3f} "
      f"| {r['original_again']['prior']['as_good_fraction']:.2f} |"
    )
  return _block(rows)


def original_as_good(experiment: str) -> str:
  """How many of a step's pairs end as low as the original's, over the
  measured steps (:data:`STEPS`): ``120 of 120`` or ``146–150 of 150``."""
  rows = [r for r in _pair_rows() if r["experiment"] == experiment]
  counts = [_as_good(r["posterior"]) + _as_good(r["prior"]) for r in rows]
  total = rows[0]["posterior"]["pairs"] + rows[0]["prior"]["pairs"]
  low, high = min(counts), max(counts)
  counted = str(low) if low == high else f"{low}–{high}"
  return f"{counted} of {total}"


def original_pairs_speedups(experiment: str) -> str:
  """The inference's speed-up (its range over the measured steps)."""
  values = [r["speedup"] for r in _pair_rows() if r["experiment"] == experiment]
  low, high = _n(min(values)), _n(max(values))
  return f"{low}×" if low == high else f"{low}–{high}×"


def _step_row(name: str, experiment: str) -> dict:
  (row,) = [r for r in _load(f"{name}.json") if r["experiment"] == experiment]
  return row


def train_step_table(name: str) -> str:
  rows = [
    "| experiment (step) | solver | pair-solves a step, ours / original "
    "| vaells_jax step ms (min / median) | compile s | original step ms "
    "(min / median) | speed-up (min, median) |",
    "|---|---|---|---|---|---|---|",
  ]
  for r in _load(f"{name}.json"):
    ours, cg = r["vaells_jax"], r["original"]
    rows.append(
      f"| {r['experiment']} ({r['at_step']}) | `{r['inference_method']}` "
      f"| {r['pair_solves_per_step']} / {r['original_pair_solves_per_step']} "
      f"| {1e3 * ours['min_s']:.1f} / {1e3 * ours['median_s']:.1f} "
      f"| {ours['first_s'] - ours['median_s']:.1f} "
      f"| {_n(1e3 * cg['min_s'])} / {_n(1e3 * cg['median_s'])} "
      f"| **{_n(r['speedup'])}×**, {_n(r['speedup_median'])}× |"
    )
  return _block(rows)


def train_step_speedup(experiment: str, name: str) -> str:
  return f"{_n(_step_row(name, experiment)['speedup'])}×"


def train_step_hours(experiment: str, name: str) -> str:
  """The whole budget's training estimated from the step times: ours / the
  original's, in hours."""
  est = _step_row(name, experiment)["estimated_training_s"]
  return f"{est['vaells_jax'] / 3600:.1f} h against {est['original'] / 3600:.0f} h"


def readme_original_pairs() -> str:
  """The README's cell: the circles' / the swiss roll's speed-ups and pairs
  as low as the original, over the measured steps."""
  method = _pair_rows()[0]["inference_method"]
  speed = " / ".join(original_pairs_speedups(e) for e in ("concentric", "swiss_roll"))
  good = " / ".join(original_as_good(e) for e in ("concentric", "swiss_roll"))
  return f"`{method}`: {speed} faster; as low as the original on {good} pairs"


def original_pairs_ms() -> str:
  """Our inference's time (min), each experiment and step: ``A / B ms``."""
  values = [1e3 * r["step_s"]["vaells_jax"][0] for r in _pair_rows()]
  return " / ".join(f"{v:.1f}" for v in values) + " ms"


def _thousands(n: int) -> str:
  return f"{n:,}".replace(",", " ")


def release_comparison(experiment: str) -> str:
  """docs/population.md: the authors' released ``experiment`` beside our runs:
  the strongest operator and the rest (norms, symmetric shares), the anchor
  coefficients' median ``||c||_1`` and the ``Psi`` steps refused."""
  rows = [r for r in _load("original_release.json") if r["experiment"] == experiment]
  theirs = next(r for r in rows if r["source"].startswith("authors"))
  ours = [r for r in rows if "seed" in r]

  def gather(runs):
    """The strongest operator's norms and shares, then the others'."""
    top, top_sym, rest, rest_sym = [], [], [], []
    for r in runs:
      order = sorted(range(len(r["norms"])), key=lambda m: -r["norms"][m])
      top.append(r["norms"][order[0]])
      top_sym.append(r["symmetric_share"][order[0]])
      rest += [r["norms"][m] for m in order[1:]]
      rest_sym += [r["symmetric_share"][m] for m in order[1:]]
    return top, top_sym, rest, rest_sym

  def span(values, digits):
    return _span(values, digits).replace("1.00", "1")

  t_top, t_sym, t_rest, t_rest_sym = gather([theirs])
  o_top, o_sym, o_rest, o_rest_sym = gather(ours)
  seeds = sorted(r["seed"] for r in ours)
  refused = [r["rejected"] for r in ours]
  steps = {r["steps"] for r in ours}
  medians = [r["prior_l1"][0] for r in ours]
  return (
    f"Theirs ends with one operator of norm {t_top[0]:.3f} (symmetric share "
    f"{t_sym[0]:.2f}) and {len(t_rest)} of {span(t_rest, 3)} (symmetric share "
    f"{span(t_rest_sym, 2)}); ours on seeds {seeds[0]}–{seeds[-1]} with one of "
    f"{span(o_top, 3)} ({span(o_sym, 2)}) and {len(o_rest) // len(ours)} of "
    f"{span(o_rest, 3)} ({span(o_rest_sym, 2)}). Anchor coefficients "
    f"`‖c‖_1`: median {theirs['prior_l1'][0]:.0f} there, {span(medians, 0)} "
    f"here. Our runs refused {_thousands(min(refused))}–"
    f"{_thousands(max(refused))} of their {_thousands(max(steps))} `Psi` steps"
    f"; theirs refused {theirs['rejected']} of the "
    f"{_thousands(theirs['accepted'] + theirs['rejected'])} its rate records"
  )


RENDERERS = {
  "original-pairs-table": original_pairs_table,
  "original-as-good": original_as_good,
  "train-step-table": train_step_table,
  "train-step-speedup": train_step_speedup,
  "train-step-hours": train_step_hours,
  "readme-original-pairs": readme_original_pairs,
  "original-pairs-ms": original_pairs_ms,
  "release-comparison": release_comparison,
}
