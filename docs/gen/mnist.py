"""The numbers of the MNIST pages: rotated and natural MNIST runs and studies."""

from __future__ import annotations

import re
import statistics

import numpy as np

from . import rot_studies
from .common import RESULTS, _block, _fmt, _load, _n, _of, _span


def rot_levers_table(name: str = "rot_mnist_levers") -> str:
  """docs/studies/experiments-rot-mnist-levers.md: a lever study on the paper's split
  (``rot_levers.py --out=docs/results/NAME.json``)."""
  return _block(rot_studies.levers_table(_load(f"{name}.json")["levers"]).split("\n"))


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
  """docs/studies/experiments-rot-mnist-levers.md: a lever's lowest–highest ``key``
  over its seeds (:data:`ROT_LEVER_KEYS`)."""
  values, fmt = _lever_values(lever, key, name), ROT_LEVER_KEYS[key][1]
  low, high = fmt.format(min(values)), fmt.format(max(values))
  return low if low == high else f"{low}–{high}"


def rot_lever_each(lever: str, key: str, name: str = "rot_mnist_levers") -> str:
  """docs/studies/experiments-rot-mnist-levers.md: a lever's ``key`` per seed, in seed
  order."""
  fmt = ROT_LEVER_KEYS[key][1]
  return ", ".join(fmt.format(v) for v in _lever_values(lever, key, name))


def rot_lever_vs(lever: str, base: str = "base", name: str = "rot_mnist_levers") -> str:
  """docs/studies/experiments-rot-mnist-levers.md: each seed's gated span without and
  with the lever ("56.5° → 64°, ...")."""
  spans = [_lever_values(x, "span", name) for x in (base, lever)]
  pairs = zip(*spans, strict=True)
  return ", ".join(f"{a:g}° → {b:g}°" for a, b in pairs)


def rot_regrid_table() -> str:
  """docs/experiments-rot-mnist.md: finished runs by the frame grid's share
  rule and its speed rule (``rot_regrid.py``)."""
  return _block(
    rot_studies.regrid_table(_load("rot_mnist_regrid.json")["runs"]).split("\n")
  )


def _operator_parts(name: str) -> dict:
  return _load(f"{name}.json")["runs"]


def rot_parts_table(name: str = "rot_operator_parts") -> str:
  """docs/studies/experiments-rot-mnist-operator.md: spans of operators between the
  learned and the reference one (``rot_operator_parts.py --out=NAME``)."""
  return _block(rot_studies.parts_table(_operator_parts(name)).split("\n"))


def rot_parts_objective(name: str = "rot_operator_parts") -> str:
  """docs/studies/experiments-rot-mnist-operator.md: the ``Psi`` objective at those
  operators, from the learned one's (``rot_operator_parts.py``)."""
  table = rot_studies.parts_objective_table(_operator_parts(name))
  return _block(table.split("\n"))


def rot_part(operator: str, key: str, name: str = "rot_operator_parts") -> str:
  """docs/studies/experiments-rot-mnist-operator.md: an operator's lowest–highest
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
  """docs/studies/experiments-rot-mnist-operator.md: the ``Psi`` objective's terms
  per operator and samples (``rot_prior_terms.py``)."""
  return _block(
    rot_studies.terms_table(_load("rot_prior_terms.json")["runs"]).split("\n")
  )


def rot_reach_table() -> str:
  """docs/studies/experiments-rot-mnist-operator.md: the prior's coefficients from a
  digit's code to its turned codes (``rot_prior_terms.py``)."""
  runs = _load("rot_prior_terms.json")["runs"]
  return _block(rot_studies.terms_reach_table(runs).split("\n"))


def rot_term(samples: str, psi: str, key: str, name: str = "rot_prior_terms") -> str:
  """docs/studies/experiments-rot-mnist-operator.md: lowest–highest over the runs of
  a cell's ``key`` (``diff``: from (``L``, ``L``); a term or distance)."""
  runs = _load(f"{name}.json")["runs"].values()
  values = [r["grid"][samples][psi][key] for r in runs]
  fmt = "{:.1f}" if key == "c_p" else "{:.3f}"
  low, high = fmt.format(min(values)), fmt.format(max(values))
  return low if low == high else f"{low}–{high}"


def rot_reach(psi: str, angle: str, key: str, name: str = "rot_prior_terms") -> str:
  """docs/studies/experiments-rot-mnist-operator.md: lowest–highest over the runs of
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


def rot_run(name: str) -> str:
  """docs/experiments-rot-mnist.md: one finished rot_mnist run's summary
  (``docs/results/<name>.json``)."""
  s = _load(f"{name}.json")["summary"]
  low, high = s["rotation_gated_span_quartiles"]
  per_class = s["rotation_gated_span_per_class"]
  worst, best = per_class.index(min(per_class)), per_class.index(max(per_class))
  ll = _fmt(s["log_likelihood"])
  refused = _of(s["psi_rejected_steps"], s["psi_attempted_steps"])
  return (
    f"class kept (the paper's criterion) "
    f"{s['rotation_class_gate_only_span_degrees']:g}°; both gates "
    f"{s['rotation_gated_span_degrees']:g}° (quartiles {low:g}°–{high:g}°, "
    f"{s['rotation_gated_digits']} digits; correlation gate alone "
    f"{s['rotation_correlation_gate_only_span_degrees']:g}°; gate level "
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
  """docs/studies/experiments-nat-mnist.md: one row per finished nat_mnist run."""
  span = _span
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
      f"| {_nat_label(name)} ([json](../results/{name}.json)) | **{s['mse']:.4f}** | "
      f"{_fmt(s['log_likelihood'])} ({s['log_likelihood_points']} "
      f"× {s['log_likelihood_samples']}) | {_fmt(s['elbo'])} | "
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
  fmt = _fmt

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
  """docs/studies/experiments-nat-mnist.md: nat_mnist's numbers seed by seed
  (``benchmarks/nat_seeds.py``), then their median and range."""
  span, fmt = _span, _fmt
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
  """docs/studies/experiments-nat-mnist.md: how far each seed's ELBO lies below its
  log-likelihood (``nat_seeds.py``), lowest to highest, in nats."""
  gaps = [
    s["log_likelihood"] - s["elbo"] for s in _load(f"{name}.json")["seeds"].values()
  ]
  low, high = (f"{round(g):,}".replace(",", " ") for g in (min(gaps), max(gaps)))
  return f"{low}–{high} nats"


def nat_seeds_medians(*names: str) -> str:
  """docs/studies/experiments-nat-mnist.md: one row per ``nat_seeds.py`` results
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
  """docs/studies/experiments-nat-mnist.md: the lowest and highest of a number of
  ``nat_seeds.py``'s runs (``digits`` decimals, or the docs' own format)."""
  values = [s[key] for s in _load(f"{name}.json")["seeds"].values()]
  show = _fmt if digits == "" else (lambda v: f"{v:.{digits}f}")
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
  """docs/studies/experiments-nat-mnist-likelihood.md: the importance weights' parts
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
        _fmt(v) for v in (statistics.median(values), min(values), max(values))
      )
      cells.append(mid if low == high else f"{mid} ({low} – {high})")
    rows.append(f"| {words} | " + " | ".join(cells) + " |")
  return _block(rows)


def ll_terms_solvers(*names: str) -> str:
  """docs/studies/experiments-nat-mnist-likelihood.md: runs' log-likelihoods with
  several solver settings (``ll_terms.py --solvers``), a row per setting, a column
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
      f"{_fmt(r['log_likelihood'])} ({r['median_distance_gamma']['prior']:.1f})"
      if (r := cells.get((key, column)))
      else "—"
      for column in columns
    ]
    rows.append(f"| {restarts} ({span}), {cap} | " + " | ".join(row) + " |")
  return _block(rows)


def ll_terms_solver_gain(num_ops: str, *names: str) -> str:
  """docs/studies/experiments-nat-mnist-likelihood.md: how much the last solver setting
  of each ``M = num_ops`` run in ``names`` (``ll_terms.py --solvers``) raises its
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
  """docs/studies/experiments-nat-mnist-likelihood.md: ``part``'s share of the
  difference between the fewest and the most operators' median ELBO
  (``ll_terms.py``)."""
  groups = list(_ll_terms(name).values())
  few, most = groups[0], groups[-1]
  med = lambda runs, path: statistics.median(_ll_term(runs, path))  # noqa: E731
  gap = med(most, ("elbo",)) - med(few, ("elbo",))
  share = (med(most, ("parts", part)) - med(few, ("parts", part))) / gap
  return f"{share:.0%}"


def release_table(*names: str) -> str:
  """docs/studies/experiments-nat-mnist.md: the authors' released model beside ours
  (``docs/results/<name>.json`` of ``original_release.py``; the release's
  row once)."""
  span = _span
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
    source = f"{who}, `M = {len(r['norms'])}`, {_n(r['steps'])} steps"
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
  steps = f" (steps {_n(first + 1)}–{_n(s['steps'])})"
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
  ll = _fmt(s["log_likelihood"])
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
  """docs/studies/experiments-nat-mnist.md: how far nat_mnist ``M = m``'s paper-budget
  log-likelihood lies from paper table 1's, in percent."""
  s, paper = _nat_paper(m)
  gap = (
    100 * (s["log_likelihood"] - paper["log_likelihood"]) / abs(paper["log_likelihood"])
  )
  return f"{abs(gap):.1f}% {'above' if gap > 0 else 'below'}"


def ll_iterations_table(name: str) -> str:
  """docs/studies/experiments-nat-mnist-likelihood.md: a run's log-likelihood
  recomputed with several solver caps (``benchmarks/ll_iterations.py``)."""
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
      f"| {row['cap']}{own} | {_fmt(row['log_likelihood'])} | "
      f"{_fmt(row['elbo'])} | {row['posterior_pairs_at_cap']:.0%} "
      f"/ {row['prior_pairs_at_cap']:.1%} | {row['time_s']:.0f} s "
      f"({row['time_s'] / first['time_s']:.1f}×) |"
    )
  return _block(rows)


def ll_iterations_gap(name: str) -> str:
  """docs/studies/experiments-nat-mnist-likelihood.md: how far the run's cap leaves its
  log-likelihood below the longest cap's, in nats and percent."""
  r = _load(f"{name}.json")
  own = next(row for row in r["rows"] if row["cap"] == r["run_cap"])
  longest = max(r["rows"], key=lambda row: row["cap"])
  gap = longest["log_likelihood"] - own["log_likelihood"]
  return f"{gap:.1f} nats ({100 * gap / abs(longest['log_likelihood']):.1f}%)"


def ll_iterations_protocol(name: str, run: str) -> str:
  """docs/studies/experiments-nat-mnist-likelihood.md: a longer cap's log-likelihood
  over a run's whole protocol (``ll_iterations.py``) beside the run's own."""
  r, s = _load(f"{name}.json"), _load(f"{run}.json")["summary"]
  if r["points"] != s["log_likelihood_points"]:
    raise ValueError(f"{name} covers {r['points']} points, {run} its protocol's")
  (row,) = r["rows"]
  gap = row["log_likelihood"] - s["log_likelihood"]
  return (
    f"{_fmt(row['log_likelihood'])} with {row['cap']} "
    f"iterations against the run's {_fmt(s['log_likelihood'])} "
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


def _reached(spans: list[float]) -> str:
  return _of(sum(x >= 180 for x in spans), len(spans))


def rot_span(name: str) -> str:
  """README: a finished rot_mnist run's spans, the paper's criterion (the
  class kept) first, then both gates, against 180° and the reference."""
  s = _load(f"{name}.json")["summary"]
  low, high = s["rotation_gated_span_quartiles"]
  kept, both = (
    s["rotation_class_gate_only_span_degrees"],
    s["rotation_gated_span_degrees"],
  )
  return (
    f"class kept (the paper's criterion): median {kept:g}°; both gates: median "
    f"{both:g}° (quartiles {low:g}°–{high:g}°, {s['rotation_gated_digits']} "
    f"digits, seed {_seed(name)}); ≥ 180° in {_reached([kept])} and "
    f"{_reached([both])} (the operator fitted to the encoder's orbits, both "
    f"gates: {s['reference_rotation_gated_span_degrees']:g}°)"
  )


def rot_seeds_span(prefix: str) -> str:
  """README, docs: every seed's run of ``prefix``, the paper's criterion
  (the class kept) first, then both gates."""
  runs = _seed_runs(prefix)
  kept = [s["rotation_class_gate_only_span_degrees"] for _, s in runs]
  both = [s["rotation_gated_span_degrees"] for _, s in runs]
  refs = [s["reference_rotation_gated_span_degrees"] for _, s in runs]
  plural = "s" if len(runs) > 1 else ""

  def listed(values):
    return ", ".join(f"{x:g}°" for x in values)

  return (
    f"class kept (the paper's criterion): median{plural} {listed(kept)}; both "
    f"gates: median{plural} {listed(both)} (seed{plural} "
    f"{', '.join(str(seed) for seed, _ in runs)}; "
    f"{runs[0][1]['rotation_gated_digits']} digits); ≥ 180° in {_reached(kept)} "
    f"and {_reached(both)} (the operator{plural} fitted to the encoder's orbits, "
    f"both gates: {listed(refs)})"
  )


def seeds_time(prefix: str) -> str:
  """README: the training and evaluation times of every seed's run of ``prefix``."""
  runs = [s for _, s in _seed_runs(prefix)]
  if any(s["resumed_from_step"] for s in runs):
    raise ValueError(f"{prefix}: a resumed run's times are those of its last part")

  def span(key: str) -> str:
    return _span([s[key] for s in runs])

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
      f"{s['mse']:.4f} | {_fmt(s['log_likelihood'])} "
      f"({s['log_likelihood_points']} × {s['log_likelihood_samples']}) | "
      f"{s['knn_class_accuracy']:.3f} | "
      f"{_of(s['psi_rejected_steps'], s['psi_attempted_steps'])} | {_run_time(s)} |"
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
  "mnist-cpu": mnist_cpu,
}
