"""The training step's and whole runs' numbers, rendered
(docs/studies/benchmarks-training.md).

The renderers of :mod:`docs.gen` for ``cold_start.json`` (``python
benchmarks/cold_start.py``), ``step_phases.json`` (``step_phases.py``),
``population_step_*.json`` (``population_step.py``), ``whole_run.json``
(``whole_run.py``) and ``test_times.json`` (``test_times.py``, the README's
test commands); the original method's CG iterations and step time come
from ``original_pairs_step1000.json`` and ``train_step_synthetic.json``.
Names taking arguments are written ``gen:NAME:ARG:ARG`` in a page.
"""

from __future__ import annotations

from .common import _block, _load, _n
from .original import _pair_rows, _step_row

_PARTS = ("inference loop", "inference, outside its loop", "rest")  # cold_start.py's


def _program_label(label: str) -> str:
  return (
    label.replace("chain of 1 links", "chain of 1 link")
    .replace("chain of", "a chain of")
    .replace("concentric step (step 1000)", "the concentric step (state at step 1000)")
    .replace(
      "concentric step (step 1000, --max-iter=1)",
      "the same, `--max-iter=1` (its own state at step 1000)",
    )
  )


def cold_start_table() -> str:
  record = _load("cold_start.json")
  fixed, per_kernel = record["after_pause_fixed_s"], record["after_pause_per_kernel_s"]
  rows = [
    "| program | kernels: inference loop / rest of inference / rest of step "
    "/ total | warm ms | after the pause ms | predicted after the pause ms |",
    "|---|---|---|---|---|",
  ]
  for p in record["programs"]:
    kernels = [p["kernels"].get(part, 0) for part in _PARTS]
    total = sum(kernels)
    split = " / ".join(_n(k) for k in kernels)
    rows.append(
      f"| {_program_label(p['program'])} | {split} / {_n(total)} "
      f"| {1e3 * p['warm_s']:.2f} | {1e3 * p['after_pause_s']:.2f} "
      f"| {1e3 * (fixed + per_kernel * total):.2f} |"
    )
  return _block(rows)


def cold_start_line() -> str:
  """The line through the chains: fixed cost and cost per kernel."""
  record = _load("cold_start.json")
  fixed, per_kernel = record["after_pause_fixed_s"], record["after_pause_per_kernel_s"]
  return f"{1e3 * fixed:.2f} ms and {1e6 * per_kernel:.1f} µs more for each kernel"


def cold_start_rest() -> str:
  """Kernels the full step (no ``--max-iter``) runs outside its inference
  loop."""
  (p,) = [
    p
    for p in _load("cold_start.json")["programs"]
    if p["program"].startswith("concentric step") and "max-iter" not in p["program"]
  ]
  return _n(p["kernels"].get(_PARTS[1], 0) + p["kernels"].get(_PARTS[2], 0))


def original_cg_iterations(experiment: str) -> str:
  """The original's CG iterations on a step-1000 step's pairs."""
  (row,) = [
    r for r in _pair_rows() if r["experiment"] == experiment and r["at_step"] == 1000
  ]
  median, limit = row["original_iterations_median"], row["original_iterations_at_50"]
  return f"a median of {median:g} iterations ({100 * limit:.0f}% reach 50)"


def step_phases_table() -> str:
  record = _load("step_phases.json")
  rows = [
    "| experiment | warm-up step, `cond` / phased | network step, `cond` / phased "
    "| `Psi` step, `cond` / phased |",
    "|---|---|---|---|",
  ]
  for name, phases in record["experiments"].items():
    cells = []
    for phase in ("warm-up", "network", "psi"):
      t = phases[phase]
      cond, phased = 1e3 * t["cond"]["step_s"], 1e3 * t["phased"]["step_s"]
      cells.append(f"{_n(cond)} / **{_n(phased)} ms** ({cond / phased:.1f}×)")
    rows.append(f"| {name} | " + " | ".join(cells) + " |")
  return _block(rows)


def step_phase_s(experiment: str, phase: str) -> str:
  """One phase's phased step time (step_phases.json), in s."""
  t = _load("step_phases.json")["experiments"][experiment][phase]["phased"]
  return f"{t['step_s']:.2f} s"


def _population_columns(n: int) -> list[tuple[str, str]]:
  """(population_step.py's row name, the table's column) with the members
  split over ``n`` devices or groups."""
  return [
    ("vmap", "vmap, 1 device"),
    ("lax.map", "lax.map, 1 device"),
    (
      f"lax.map, {n} groups from threads, one device",
      f"lax.map, {n} groups from threads, 1 device",
    ),
    (f"lax.map, split over {n} devices", f"lax.map, split over {n} devices"),
    ("single", "one member alone"),
  ]


def population_step_table() -> str:
  records = [_load(f"population_step_{b}.json") for b in ("concentric", "swiss_roll")]
  columns = _population_columns(records[0]["devices_split"])
  head = " | ".join(title for _, title in columns)
  rows = [
    f"| {records[0]['population']} members | {head} |",
    "|---|" + "---|" * len(columns),
  ]
  for r in records:
    ms = [r["ms_per_step"][key] for key, _ in columns]
    best = min(ms[:-1])  # the one member alone is not a population
    cells = [f"**{t:.1f} ms**" if t == best else f"{t:.1f} ms" for t in ms]
    rows.append(f"| {r['base'].replace('_', ' ')} | " + " | ".join(cells) + " |")
  return _block(rows)


def population_split(base: str) -> str:
  """The population step on one device (lax.map) against split over the
  cores: ``a → b ms``."""
  r = _load(f"population_step_{base}.json")
  split, _ = _population_columns(r["devices_split"])[3]
  return f"{r['ms_per_step']['lax.map']:.1f} → {r['ms_per_step'][split]:.1f} ms"


def whole_run_table() -> str:
  """Every whole command of whole_run.json, in the order run, beside the
  original method's estimated training (steps x its step time at step 1000,
  train_step_synthetic.json)."""
  rows = [
    "| experiment | seed | steps | whole command | compile | training "
    "| evaluation + figures | the rest | original method, estimated |",
    "|---|---|---|---|---|---|---|---|---|",
  ]
  for r in _load("whole_run.json"):
    rest = r["command_wall_s"] - r["compile_s"] - r["training_s"] - r["evaluation_s"]
    original = _step_row("train_step_synthetic", r["experiment"])["original"]
    estimate = r["steps"] * original["min_s"] / 3600
    rows.append(
      f"| {r['experiment'].replace('_', ' ')} | {r['seed']} | {_n(r['steps'])} "
      f"| **{r['command_wall_s']:.1f} s** | {r['compile_s']:.1f} s "
      f"| {r['training_s']:.1f} s | {r['evaluation_s']:.1f} s | {rest:.1f} s "
      f"| {estimate:.1f} h |"
    )
  return _block(rows)


def whole_run_range(experiment: str) -> str:
  """The whole commands' wall times of ``experiment``: ``a–b s on seeds
  S–T``."""
  runs = [r for r in _load("whole_run.json") if r["experiment"] == experiment]
  walls = [r["command_wall_s"] for r in runs]
  seeds = sorted({r["seed"] for r in runs})
  return f"{min(walls):.0f}–{max(walls):.0f} s a command, seeds {seeds[0]}–{seeds[-1]}"


def test_time(name: str) -> str:
  """A test command's wall time: "4.4 minutes"."""
  return f"{_load('test_times.json')['runs'][name]['wall_time_s'] / 60:.1f} minutes"


RENDERERS = {
  "test-time": test_time,
  "cold-start-table": cold_start_table,
  "cold-start-line": cold_start_line,
  "cold-start-rest": cold_start_rest,
  "original-cg-iterations": original_cg_iterations,
  "step-phases-table": step_phases_table,
  "step-phase-s": step_phase_s,
  "population-step-table": population_step_table,
  "population-split": population_split,
  "whole-run-table": whole_run_table,
  "whole-run-range": whole_run_range,
}
