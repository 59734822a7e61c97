"""The numbers of docs/studies/benchmarks-inference.md and -solvers.md, rendered.

The renderers of :mod:`docs.gen` for the inference benchmarks, from the
JSON their scripts write into docs/results/ (each page names the command
of each file): ``inference_speed*.json``, ``exact_inference.json``,
``inference_scaling*.json``, ``pgd_quality.json``, ``expm_pairs*.json``,
``loop_iterations.json`` and ``loop_ops_pgd.json``. Names taking arguments
are written ``gen:NAME:ARG:ARG`` in a page.
"""

from __future__ import annotations

from .common import _block, _load, _n

SPEED = "inference_speed"  # inference_speed.py's default run; or its training
# solvers' run, "inference_speed_training"


def _speed_rows(name: str = SPEED) -> list[dict]:
  return _load(f"{name}.json")["results"]


def _speed_row(case: str, solver: str, name: str = SPEED) -> dict:
  rows = _speed_rows(name)
  (row,) = [r for r in rows if (r["case"], r["solver"]) == (case, solver)]
  return row


def _label(row: dict) -> str:
  solver = row["solver"]
  return f"`auto` ({row['method']})" if solver == "auto" else f"`{solver}`"


def _times(x: float) -> str:
  """A ratio: 1956×, 3.1×, 0.42×."""
  return f"{x:.0f}×" if x >= 10 else f"{x:.2g}×"


def speed_env() -> str:
  env = _load("inference_speed.json")["environment"]
  return f"device={env['device']} jax={env['jax']} numpy={env['numpy']}"


def speed_table(name: str = SPEED) -> str:
  rows = [
    "| case | solver | pair-solves a step | batched pairs/s | jit loop pairs/s "
    "| CG default tol pairs/s | vs CG | vs jit loop | step ms (min) | compile s "
    "| median objective: batched / jit loop / CG |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  for r in _speed_rows(name):
    rate, obj = r["pairs_per_s"], r["median_objective"]
    rows.append(
      f"| {r['case']} | {_label(r)} | {r['pair_solves_per_step']} "
      f"| {rate['batched']:.0f} | {rate['jit_loop']:.0f} "
      f"| {rate['cg_default_tol']:.0f} | {_times(r['speedup_vs_cg_default_tol'])} "
      f"| {_times(r['speedup_vs_jit_loop'])} | {r['batched_step_ms_min']:.1f} "
      f"| {r['batched_compile_s']:.1f} | {obj['batched']:.3g} / "
      f"{obj['jit_loop']:.3g} / {obj['cg_default_tol']:.3g} |"
    )
  return _block(rows)


def objective_table(name: str = SPEED) -> str:
  checks = _load(f"{name}.json")["objective_check"]
  rows = [
    "| case | solver | median objective / CG's, per seed | worst "
    "| fraction as low as CG, per seed | lowest |",
    "|---|---|---|---|---|---|",
  ]
  for case, check in checks.items():
    for solver, c in check.items():
      ratio, good = c["median_ratio"], c["as_good_fraction"]
      rows.append(
        f"| {case} | {_label(_speed_row(case, solver, name))} "
        f"| {' '.join(f'{x:.2f}' for x in ratio)} | {max(ratio):.2f} "
        f"| {' '.join(f'{x:.2f}' for x in good)} | {min(good):.2f} |"
      )
  return _block(rows)


def speedup(case: str, solver: str, against: str, name: str = SPEED) -> str:
  """``case``'s batched ``solver`` over scipy CG (``cg``), its jit loop
  (``loop``) or the batched solver ``against`` of the same run."""
  row = _speed_row(case, solver, name)
  if against in ("cg", "loop"):
    key = {"cg": "speedup_vs_cg_default_tol", "loop": "speedup_vs_jit_loop"}
    return _times(row[key[against]])
  other = _speed_row(case, against, name)
  return _times(other["batched_step_ms_min"] / row["batched_step_ms_min"])


def median_objective(case: str, solver: str, which: str, name: str = SPEED) -> str:
  """The median objective of ``case``'s pairs under ``solver``'s batched
  solve (``batched``) or scipy CG's (``cg_default_tol``), problem seed 0."""
  return f"{_speed_row(case, solver, name)['median_objective'][which]:.2g}"


def step_ms(case: str, solver: str, name: str = SPEED) -> str:
  return f"{_speed_row(case, solver, name)['batched_step_ms_min']:.1f} ms"


def objective_range(case: str, solver: str, field: str, name: str = SPEED) -> str:
  """The range over seeds of ``case``'s ``solver``'s median objective over
  CG's (``ratio``) or of its fraction of pairs as low as CG (``good``, %)."""
  check = _load(f"{name}.json")["objective_check"][case][solver]
  if field == "ratio":
    low, high = (f"{v:.2f}" for v in _bounds(check["median_ratio"]))
    return low if low == high else f"{low}–{high}"
  low, high = (f"{100 * v:.0f}" for v in _bounds(check["as_good_fraction"]))
  return f"{low}%" if low == high else f"{low}–{high}%"


def _bounds(values):
  return min(values), max(values)


def exact_table() -> str:
  cases = _load("exact_inference.json")["cases"]
  rows = [
    "| case | solver | step ms | compile s | pairs | `exact` as low (1e-6 rel.) "
    "| max(`exact` − solver) | float32 rounding | median objective: solver / "
    "`exact` |",
    "|---|---|---|---|---|---|---|---|---|",
  ]
  for i, (case, solvers) in enumerate(cases.items()):
    for solver, r in solvers.items():
      compile_s = f"{r['compile_s']:.1f}" if i == 0 and "compile_s" in r else "—"
      rounding = f"{r['float32_rounding']:.2g}" if "float32_rounding" in r else "—"
      rows.append(
        f"| {case} | {solver} | {r['step_ms']:.1f} | {compile_s} | {r['pairs']} "
        f"| {r['exact_as_low']:.3f} | {r['max_excess']:.2g} | {rounding} "
        f"| {r['median_objective']:.4g} / {r['exact_median_objective']:.4g} |"
      )
  return _block(rows)


def exact_speedup(case: str, solver: str) -> str:
  """How many times faster ``exact`` is than ``solver`` on ``case``."""
  rows = _load("exact_inference.json")["cases"][case]
  return _times(rows[solver]["step_ms"] / rows["exact"]["step_ms"])


def exact_excess() -> str:
  """The largest excess of ``exact``'s objective over any solver's."""
  cases = _load("exact_inference.json")["cases"].values()
  return f"{max(r['max_excess'] for rows in cases for r in rows.values()):.1g}"


def exact_rounding() -> str:
  """The largest float32 rounding of a solver's own objective."""
  cases = _load("exact_inference.json")["cases"].values()
  values = [
    r["float32_rounding"]
    for rows in cases
    for r in rows.values()
    if "float32_rounding" in r
  ]
  return f"{max(values):.0e}"


_SWEEP = {"pairs": "N", "dim": "d", "ops": "M"}
_FIXED = {
  "pairs": "pairs N (d = 2, M = 4)",
  "dim": "latent dim d (N = 256, M = 4)",
  "ops": "dictionary size M (N = 1 000, d = 2)",
}


def _time(seconds: float) -> str:
  return f"{seconds:.2f} s" if seconds >= 1 else f"{1e3 * seconds:.3g} ms"


def _us(us: float) -> str:
  return f"{us:.0f}" if us >= 100 else f"{us:.2g}"


def _mb(mb: float) -> str:
  return f"{mb:.0f} MB" if mb >= 100 else f"{mb:.2g} MB"


def scaling_table(sweep: str) -> str:
  """Time (and for the pairs µs per pair) and memory as ``sweep`` grows."""
  rows = _load("inference_scaling.json")["sweeps"][sweep]
  name = _SWEEP[sweep]
  lines = [
    f"| {_FIXED[sweep]} | " + " | ".join(_n(r[name]) for r in rows) + " |",
    "|---|" + "---|" * len(rows),
    "| time | " + " | ".join(_time(r["min_s"]) for r in rows) + " |",
  ]
  if sweep == "pairs":
    per_pair = " | ".join(_us(r["us_per_pair"]) for r in rows)
    lines.append(f"| µs per pair | {per_pair} |")
  lines.append("| memory | " + " | ".join(_mb(r["memory_mb"]) for r in rows) + " |")
  return _block(lines)


def scaling_ratio(sweep: str, a: str, b: str) -> str:
  """Time at size ``b`` over time at size ``a`` in ``sweep``."""
  rows = {r[_SWEEP[sweep]]: r for r in _load("inference_scaling.json")["sweeps"][sweep]}
  return f"{rows[int(b)]['min_s'] / rows[int(a)]['min_s']:.1f}×"


def scaling_us(sweep: str, size: str) -> str:
  """µs per pair at ``size`` of ``sweep``."""
  rows = {r[_SWEEP[sweep]]: r for r in _load("inference_scaling.json")["sweeps"][sweep]}
  return f"{rows[int(size)]['us_per_pair']:.0f} µs"


def scaling_hard_pair() -> str:
  """The hard-pair check's times: the first 1 000 pairs, the first 1 024."""
  rows = _load("inference_scaling_hard_pair.json")["sweeps"]["pairs"]
  times = {}
  for r in rows:
    times.setdefault(r["N"], []).append(1e3 * r["min_s"])
  return "; ".join(
    f"{_n(n)} pairs " + " and ".join(f"{t:.1f}" for t in ts) + " ms"
    for n, ts in times.items()
  )


def scaling_solvers() -> str:
  """µs per pair as the pairs grow, for ``fista``, ``pgd`` and
  ``gauss_newton`` (the three pairs sweeps)."""
  files = {
    "fista": "inference_scaling.json",
    "pgd": "inference_scaling_pgd.json",
    "gauss_newton": "inference_scaling_gauss_newton.json",
  }
  sweeps = {k: _load(f)["sweeps"]["pairs"] for k, f in files.items()}
  sizes = [r["N"] for r in sweeps["fista"]]
  rows = [
    "| pairs N | " + " | ".join(_n(n) for n in sizes) + " |",
    "|---|" + "---|" * len(sizes),
  ]
  for solver, sweep in sweeps.items():
    assert [r["N"] for r in sweep] == sizes, solver
    cells = " | ".join(_us(r["us_per_pair"]) for r in sweep)
    rows.append(f"| `{solver}`, µs per pair | {cells} |")
  return _block(rows)


def pgd_quality_table() -> str:
  result = _load("pgd_quality.json")
  rows = [
    "| d | M | `pgd` / `fista` objective (5% / 50% / 95%) | `pgd` ≤ `fista` "
    "(within 0.1%) | within 2% | within 2% of the brute force: `pgd` / `fista` |",
    "|---|---|---|---|---|---|",
  ]
  for r in result["rows"]:
    q = " / ".join(f"{v:.3f}" for v in r["ratio_q"])
    rows.append(
      f"| {r['d']} | {r['M']} | {q} | {r['as_good']:.2f} | {r['within_2pc']:.2f} "
      f"| {r['pgd_near_best']:.2f} / {r['fista_near_best']:.2f} |"
    )
  return _block(rows)


def pgd_quality_settings() -> str:
  r = _load("pgd_quality.json")
  return (
    f"{r['pairs']} pairs a row, {r['max_iter']} iterations, l1 weight "
    f"{r['l1']:g}, the brute force on the first {r['brute']}"
  )


def pgd_as_good() -> str:
  """docs/library.md: the range over ``d`` and ``M`` of the pairs where
  ``pgd`` ends as low as ``fista`` (within 0.1%)."""
  shares = [100 * r["as_good"] for r in _load("pgd_quality.json")["rows"]]
  return f"{min(shares):g}–{max(shares):g}%"


def expm_table() -> str:
  rows = [
    "| `‖A‖₁` median / max | value + gradient: `expm_small` / `pgd` "
    "| four trial values: `expm_small` / `pgd` / products as a sum over an "
    "axis / as `einsum` |",
    "|---|---|---|",
  ]
  for name in ("expm_pairs", "expm_pairs_scale10"):
    r = _load(f"{name}.json")
    c = {k: v["ms"] for k, v in r["cases"].items()}
    scale = r["settings"]["scale"]
    label = f"{r['norm_median']:.2g} / {r['norm_max']:.2g}" + (
      f" (`--scale={scale:g}`)" if scale != 1 else ""
    )
    grad = c["value+grad, expm_small"] / c["value+grad, pgd"]
    four = c["4 values, expm_small"] / c["4 values, pgd"]
    rows.append(
      f"| {label} | {c['value+grad, expm_small']:.2f} / "
      f"**{c['value+grad, pgd']:.2f} ms** ({grad:.1f}×) "
      f"| {c['4 values, expm_small']:.2f} / **{c['4 values, pgd']:.2f}** / "
      f"{c['4 values, product by sum over a product axis']:.2f} / "
      f"{c['4 values, product by einsum']:.2f} ms ({four:.0f}×) |"
    )
  return _block(rows)


def loop_iterations_table() -> str:
  rows = [
    "| experiment | step | pairs | iterations: median / 90% | at `max_iter` "
    "| `‖q‖ ≤ tol` |",
    "|---|---|---|---|---|---|",
  ]
  for r in _load("loop_iterations.json")["iterations"]:
    rows.append(
      f"| {r['experiment']} | {r['at_step']} | {r['pairs']} | {r['median']:.0f} / "
      f"{r['p90']:.0f} | {r['at_max']:.0%} of {r['max_iter']} "
      f"| {r['converged']:.0%} |"
    )
  return _block(rows)


def loop_ops(experiment: str, name: str = "loop_iterations") -> str:
  """Operations an iteration of ``experiment``'s inference loop runs."""
  (row,) = [r for r in _load(f"{name}.json")["ops"] if r["experiment"] == experiment]
  return str(row["total"])


RENDERERS = {
  "inference-env": speed_env,
  "inference-speed-table": speed_table,
  "inference-objective-table": objective_table,
  "inference-speedup": speedup,
  "inference-objective": objective_range,
  "inference-step-ms": step_ms,
  "inference-median": median_objective,
  "exact-table": exact_table,
  "exact-speedup": exact_speedup,
  "exact-excess": exact_excess,
  "exact-rounding": exact_rounding,
  "scaling-table": scaling_table,
  "scaling-ratio": scaling_ratio,
  "scaling-us": scaling_us,
  "scaling-hard-pair": scaling_hard_pair,
  "scaling-solvers": scaling_solvers,
  "pgd-quality-table": pgd_quality_table,
  "pgd-quality-settings": pgd_quality_settings,
  "pgd-as-good": pgd_as_good,
  "expm-table": expm_table,
  "loop-iterations-table": loop_iterations_table,
  "loop-ops": loop_ops,
}
