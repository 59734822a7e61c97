"""VAELLS against the baselines, rendered (docs/studies/baselines.md).

The renderers of :mod:`docs.gen` for ``compare_*.json`` (the
``comparison.json`` that ``python experiments/run.py --exp=compare_NAME
--seeds=N`` writes, copied) and ``baseline_noise.json`` (``python
benchmarks/baseline_noise.py``). Names taking arguments are written
``gen:NAME:ARG:ARG`` in a page.
"""

from __future__ import annotations

from .common import _block, _fmt, _load

MODELS = {
  "vaells": "VAELLS",
  "vae": "VAE",
  "vampprior": "VampPrior",
  "svae": "hyperspherical VAE",
}
# (key, column, better: +1 higher, -1 lower, 0 neither), in the table's order
COLUMNS = (
  ("sample_manifold_distance", "sample dist. ↓", -1),
  ("path_manifold_distance", "path dist. ↓", -1),
  ("linear_path_manifold_distance", "line dist.", 0),
  ("path_endpoint_error", "path endpoint err.", 0),
  ("knn_class_accuracy", "knn acc. ↑", 1),
  ("class_consistency", "class consistency ↑", 1),
  ("log_likelihood", "log-lik.", 0),
  ("elbo", "ELBO", 0),
  ("mse", "MSE ↓", -1),
  ("wall_time_s", "wall time", 0),
)


def _models(name: str) -> dict:
  return _load(f"compare_{name}.json")["models"]


def compare_table(name: str, observation: str = "own") -> str:
  """Mean ± std over seeds of every metric the models report; the best
  mean of each metric with a direction in bold. ``observation`` = ``"same"``
  where every model has the same observation model (MNIST): the
  log-likelihood and ELBO compare and are bold too; ``"own"`` (synthetic
  sets, VAELLS at σ = 10) leaves the ELBO out."""
  models = _models(name)
  columns = [c for c in COLUMNS if any(c[0] in row for row in models.values())]
  knn = [row.get("knn_class_accuracy", {}).get("mean") for row in models.values()]
  drop = {"knn_class_accuracy"} if all(k == 1 for k in knn) else set()
  drop |= {"elbo"} if observation == "own" else set()
  columns = [c for c in columns if c[0] not in drop]
  rows = [
    "| model | " + " | ".join(title for _, title, _ in columns) + " |",
    "|---|" + "---|" * len(columns),
  ]
  best = {}
  for key, _, better in columns:
    if key in ("log_likelihood", "elbo") and observation == "same":
      better = 1
    means = [row[key]["mean"] for row in models.values() if key in row]
    if better and len(set(means)) > 1:
      best[key] = max(means) if better > 0 else min(means)
  for model, row in models.items():
    cells = []
    for key, _, _ in columns:
      if key not in row:
        cells.append("–")
        continue
      mean, std = row[key]["mean"], row[key]["std"]
      unit = " s" if key == "wall_time_s" else ""
      text = f"{_fmt(mean, key)}{unit}"
      if len(row[key]["values"]) > 1:
        text = f"{_fmt(mean, key)} ± {_fmt(std, key)}{unit}"
      cells.append(f"**{text}**" if best.get(key) == mean else text)
    rows.append(f"| {MODELS[model]} | " + " | ".join(cells) + " |")
  return _block(rows)


def compare_last_seed(name: str) -> str:
  return str(_load(f"compare_{name}.json")["seeds"] - 1)


def compare_mean(name: str, model: str, key: str) -> str:
  return _fmt(_models(name)[model][key]["mean"], key)


def compare_range(name: str, key: str, *models: str) -> str:
  """The range of ``models``' means of ``key``: ``a–b``."""
  means = [_models(name)[m][key]["mean"] for m in models]
  low, high = _fmt(min(means), key), _fmt(max(means), key)
  return low if low == high else f"{low}–{high}"


def compare_wins(name: str, key: str) -> str:
  """On how many seeds VAELLS's ``key`` is lower than every baseline's."""
  models = _models(name)
  ours = models["vaells"][key]["values"]
  others = [models[m][key]["values"] for m in models if m != "vaells"]
  wins = sum(v < min(o[i] for o in others) for i, v in enumerate(ours))
  return f"{wins} of {len(ours)}"


def readme_compare(name: str) -> str:
  """The README's cell: on how many seeds VAELLS's prior samples lie closest,
  its mean ± std and the baselines' range of means."""
  key = "sample_manifold_distance"
  ours = _models(name)["vaells"][key]
  others = compare_range(name, key, *(m for m in _models(name) if m != "vaells"))
  return (
    f"VAELLS closest on {compare_wins(name, key)} seeds: "
    f"{_fmt(ours['mean'], key)} ± {_fmt(ours['std'], key)} against {others}"
  )


def compare_minutes(name: str) -> str:
  """The runs' wall times summed (``summary.json``'s ``wall_time_s``), in
  minutes, and their number."""
  models = _models(name)
  times = [t for row in models.values() for t in row["wall_time_s"]["values"]]
  return f"{sum(times) / 60:.0f} min together, all {len(times)} runs"


def compare_below(name: str, model: str, key: str, other: str) -> str:
  """On how many seeds ``model``'s ``key`` is below its own ``other``."""
  row = _models(name)[model]
  pairs = zip(row[key]["values"], row[other]["values"], strict=True)
  below = sum(a < b for a, b in pairs)
  return f"{below} of {len(row[key]['values'])}"


def compare_ratio(name: str, key: str, model: str, *others: str) -> str:
  """How many times ``model``'s mean of ``key`` is below ``others``' (their
  range)."""
  models = _models(name)
  ours = models[model][key]["mean"]
  ratios = [models[o][key]["mean"] / ours for o in others]
  low, high = f"{min(ratios):.0f}", f"{max(ratios):.0f}"
  return f"{low}×" if low == high else f"{low}–{high}×"


def baseline_noise_table() -> str:
  runs = _load("baseline_noise.json")
  rows = [
    "| `baseline_zeta1` (σ) | knn acc. | MSE | sample dist. |",
    "|---|---|---|---|",
  ]
  for zeta1 in dict.fromkeys(r["baseline_zeta1"] for r in runs):
    group = [r for r in runs if r["baseline_zeta1"] == zeta1]

    def span(key, fmt, group=group):
      values = [r[key] for r in group]
      low, high = fmt.format(min(values)), fmt.format(max(values))
      return low if low == high else f"{low}–{high}"

    rows.append(
      f"| {zeta1:g} ({zeta1**-0.5:g}) | {span('knn_class_accuracy', '{:.2f}')} "
      f"| {span('mse', '{:.3f}')} | {span('sample_manifold_distance', '{:.0f}')} |"
    )
  return _block(rows)


def baseline_noise_seeds() -> str:
  return ", ".join(
    str(s) for s in dict.fromkeys(r["seed"] for r in _load("baseline_noise.json"))
  )


RENDERERS = {
  "compare-table": compare_table,
  "compare-last-seed": compare_last_seed,
  "compare-mean": compare_mean,
  "compare-range": compare_range,
  "compare-wins": compare_wins,
  "compare-below": compare_below,
  "compare-ratio": compare_ratio,
  "readme-compare": readme_compare,
  "compare-minutes": compare_minutes,
  "baseline-noise-table": baseline_noise_table,
  "baseline-noise-seeds": baseline_noise_seeds,
}
