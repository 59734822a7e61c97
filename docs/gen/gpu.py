"""The GPU's numbers, rendered (docs/studies/benchmarks-gpu.md, README, benchmarks.md).

The renderers of :mod:`docs.gen` for ``device_h200.json``: the output of
``benchmarks/device_steps.sh`` on the device machine (keys ``device``,
``device_graphs``, ``device_cpu_paths``, ``host_cpu``), of
``device_profile.py --ab --trace`` there (``profile``) and of
``device_steps.py`` on this 2-core CPU (``this_cpu``); and of
``gpu_census.py`` (``gpu_census.json``). Names taking
arguments are written ``gen:NAME:ARG:ARG`` in a page.
"""

from __future__ import annotations

import importlib

from .common import _block, _load, _n

# The step-time goals of a GPU against this 2-core CPU (issue 41).
GPU_GOALS = {"concentric": 3, "swiss_roll": 3, "rot_mnist": 20, "nat_mnist": 20}
STATES = {"initial": "initial", "trained": "trained", "warmup_step": "warm-up"}


def _by_experiment(rows) -> dict:
  return {row["experiment"]: row for row in rows}


def gpu_step_table() -> str:
  """docs/studies/benchmarks-gpu.md: each default step on the GPU (device_steps.sh)
  and on this 2-core CPU (device_steps.py), from the same state files."""
  runs = _load("device_h200.json")
  cpu = _by_experiment(runs["this_cpu"]["steps"])
  rows = [
    "| experiment (solver) | state | GPU ms | 2-core CPU ms | CPU / GPU | goal |",
    "|---|---|---|---|---|---|",
  ]
  for name, gpu in _by_experiment(runs["device"]["steps"]).items():
    for label, words in STATES.items():
      if label in gpu:
        ms = 1e3 * gpu[label]["min_s"]
        cpu_ms = 1e3 * cpu[name][label]["min_s"]
        rows.append(
          f"| {name} (`{gpu['inference_method']}`) | {words} | {ms:.2f} | "
          f"{cpu_ms:.1f} | {cpu_ms / ms:.1f}× | "
          f"{'' if label == 'warmup_step' else f'≥ {GPU_GOALS[name]}×'} |"
        )
  return _block(rows)


def gpu_variant_table() -> str:
  """docs/studies/benchmarks-gpu.md: the trained states' steps in each variant of
  device_steps.sh, the alternating comparison and the profiler's census
  (device_profile.py)."""
  runs = _load("device_h200.json")
  ab = _by_experiment(runs["profile"]["ab"])
  traced = _by_experiment(runs["profile"]["trace"])
  variants = [
    _by_experiment(runs[key]["steps"])
    for key in ("device", "device_graphs", "device_cpu_paths")
  ]
  rows = [
    "| experiment | device paths | + command buffers | CPU paths "
    "| alternating: device / CPU paths | profiled: wall, kernels busy "
    "| kernels, host copies a step |",
    "|---|---|---|---|---|---|---|",
  ]
  for name, row in ab.items():
    steps = " | ".join(f"{1e3 * v[name]['trained']['min_s']:.2f}" for v in variants)
    t = traced[name]
    rows.append(
      f"| {name} | {steps} | {row['device']:.2f} / {row['cpu']:.2f} "
      f"| {t['wall_ms']:.2f}, {t['device_busy_ms']:.2f} "
      f"| {t['kernels_per_step']:.0f}, {t['copies_per_step']:.0f} |"
    )
  return _block(rows)


def gpu_population() -> str:
  """docs/studies/benchmarks-gpu.md: a default population's step against one
  member's."""
  parts = []
  for row in _load("device_h200.json")["device"]["population"]:
    many, one = row["population"]["min_s"], row["single"]["min_s"]
    parts.append(
      f"{row['experiment']} {row['members']} members {1e3 * many:.2f} ms, one "
      f"{1e3 * one:.2f} ms ({many / one:.2f}×)"
    )
  return "; ".join(parts)


def gpu_likelihood() -> str:
  """docs/studies/benchmarks-gpu.md, README: the likelihood protocol on the GPU."""
  runs = _load("device_h200.json")
  ll = runs["device"]["likelihood"]
  ab = runs["profile"]["likelihood"][0]
  return (
    f"{ll['points']} points × {ll['samples']} samples in {ll['seconds']:.0f} s "
    f"({ll['first_chunk_s']:.0f} s of it the first chunk's compile); "
    f"{ab['device']['points_per_s']:.0f} points/s against "
    f"{ab['cpu']['points_per_s']:.1f} with the CPU's chunked solves"
  )


def _ratios(names, labels) -> str:
  """The range of this CPU's step time over the GPU's, over ``names`` and
  ``labels`` (states)."""
  runs = _load("device_h200.json")
  gpu, cpu = (_by_experiment(runs[k]["steps"]) for k in ("device", "this_cpu"))
  ratios = [
    cpu[n][label]["min_s"] / gpu[n][label]["min_s"]
    for n in names
    for label in labels
    if label in gpu[n]
  ]
  low, high = (
    f"{x:.0f}" if x >= 10 else f"{x:.1f}" for x in (min(ratios), max(ratios))
  )
  return f"{low}×" if low == high else f"{low}–{high}×"


def gpu_summary() -> str:
  """README, docs/benchmarks.md: the GPU's steps against this CPU in a line."""
  steps = ("initial", "trained")
  ll = _load("device_h200.json")["device"]["likelihood"]
  return (
    f"rotated MNIST {_ratios(['rot_mnist'], steps)}, natural MNIST "
    f"{_ratios(['nat_mnist'], steps)}, warm-up "
    f"{_ratios(['rot_mnist', 'nat_mnist'], ['warmup_step'])}, synthetic "
    f"{_ratios(['concentric', 'swiss_roll'], steps)} (launch-bound); "
    f"likelihood {ll['points']} × {ll['samples']} in {ll['seconds']:.0f} s"
  )


def gpu_trained_ms() -> str:
  """README: the trained states' GPU step times."""
  gpu = _by_experiment(_load("device_h200.json")["device"]["steps"])
  return " / ".join(
    f"{1e3 * gpu[n]['trained']['min_s']:.{1 if n.endswith('mnist') else 2}f}"
    for n in ("concentric", "swiss_roll", "rot_mnist", "nat_mnist")
  )


def _pct(x: float) -> str:
  return f"{100 * x:.0f}%"


def gpu_warmup_ratio() -> str:
  """The warm-up steps' CPU / GPU ratio (their range)."""
  return _ratios(["rot_mnist", "nat_mnist"], ["warmup_step"])


def gpu_paper_minutes(name: str) -> str:
  """A paper-budget run's steps on the GPU: its warm-up steps at the
  warm-up step's time + the rest at the trained state's."""
  gpu = _by_experiment(_load("device_h200.json")["device"]["steps"])[name]
  config = importlib.import_module(f"vaells_jax.experiments.{name}").get_config()
  first = config.warmup_steps * gpu["warmup_step"]["min_s"] / 60
  rest = (config.num_steps - config.warmup_steps) * gpu["trained"]["min_s"] / 60
  return f"about {first:.0f} + {rest:.0f} minutes"


def gpu_step_ms(name: str, state: str) -> str:
  """One default step's time on the GPU (minimum), in ms."""
  gpu = _by_experiment(_load("device_h200.json")["device"]["steps"])[name]
  return f"{1e3 * gpu[state]['min_s']:.0f} ms"


def _trace(name: str) -> dict:
  """device_profile.py's trace census of ``name``'s step."""
  return _by_experiment(_load("device_h200.json")["profile"]["trace"])[name]


def gpu_trace(name: str) -> str:
  """The profiler's census of one step: busy kernels against the wall."""
  t = _trace(name)
  return (
    f"busy {t['device_busy_ms']:.2f} ms of its {t['wall_ms']:.2f} ms, over "
    f"{_n(t['kernels_per_step'])} kernels and {_n(t['copies_per_step'])} "
    "copies to the host a step"
  )


def gpu_busy(name: str) -> str:
  t = _trace(name)
  return f"{t['device_busy_ms']:.0f} ms of the step's {t['wall_ms']:.0f} ms"


def gpu_copies(name: str) -> str:
  t = _trace(name)
  return _n(t["copies_per_step"])


def gpu_svd() -> str:
  """rot_mnist: the time of cuSOLVER's batched Jacobi SVD kernels among the
  step's busiest kernels, against all kernels' busy time."""
  t = _trace("rot_mnist")
  svd = sum(
    ms
    for kernel, ms in t["top_ms_per_step"].items()
    if any(word in kernel for word in ("gesvd", "svd_", "syevj"))
  )
  return f"{svd:.1f} ms of the {t['device_busy_ms']:.1f} ms"


def gpu_cpu_likelihood() -> str:
  """The likelihood protocol on this 2-core CPU (device_steps.py)."""
  ll = _load("device_h200.json")["this_cpu"]["likelihood"]
  return f"{ll['points']} points took {ll['seconds']:.0f} s"


def gpu_paths_effect() -> str:
  """The device paths against the CPU paths on the GPU: the likelihood's
  throughput and the alternating steps' medians."""
  profile = _load("device_h200.json")["profile"]
  ll = profile["likelihood"][0]
  ab = _by_experiment(profile["ab"])
  faster = ll["device"]["points_per_s"] / ll["cpu"]["points_per_s"]
  nat = 1 - ab["nat_mnist"]["device"] / ab["nat_mnist"]["cpu"]
  slower = [ab[n]["device"] / ab[n]["cpu"] - 1 for n in ("concentric", "swiss_roll")]
  return (
    f"the likelihood protocol {faster:.0f}× faster, the nat_mnist step "
    f"{_pct(nat)} faster, the synthetic steps {100 * min(slower):.0f}–"
    f"{_pct(max(slower))} slower"
  )


def gpu_process_spread() -> str:
  """The synthetic trained steps' largest spread over the three GPU
  processes (device, command buffers, CPU paths)."""
  runs = _load("device_h200.json")
  spreads = []
  for name in ("concentric", "swiss_roll"):
    times = [
      _by_experiment(runs[k]["steps"])[name]["trained"]["min_s"]
      for k in ("device", "device_graphs", "device_cpu_paths")
    ]
    spreads.append(max(times) / min(times) - 1)
  return _pct(max(spreads))


def gpu_census_table() -> str:
  """docs/studies/benchmarks-gpu.md: loops and conditionals of each step lowered
  for CUDA (gpu_census.py; counted on a CPU)."""
  rows = [
    "| experiment | solver | `while` loops | of them on data | conditionals on data "
    "| Triton kernels |",
    "|---|---|---|---|---|---|",
  ]
  for r in _load("gpu_census.json")["steps"]:
    rows.append(
      f"| {r['experiment']} | `{r['inference_method']}` | {r['while']} | "
      f"{r['while_on_data']} | {r['conditional']} | {r['triton']} |"
    )
  return _block(rows)


def gpu_solve_iterations() -> str:
  """docs/studies/benchmarks-gpu.md: the iterations of each step's blocked solves on
  this CPU (gpu_census.py --iterations)."""
  rows = [
    "| experiment | solver | state | pairs | iterations: largest / median "
    "| of `max_iter` |",
    "|---|---|---|---|---|---|",
  ]
  for r in _load("gpu_census.json")["iterations"]:
    for solve in r["solves"]:
      rows.append(
        f"| {r['experiment']} | `{r['inference_method']}` | {r['state']} | "
        f"{solve['pairs']} | {solve['max']} / {solve['median']:g} | "
        f"{r['max_iter']} |"
      )
  return _block(rows)


RENDERERS = {
  "gpu-census-table": gpu_census_table,
  "gpu-solve-iterations": gpu_solve_iterations,
  "gpu-step-table": gpu_step_table,
  "gpu-variant-table": gpu_variant_table,
  "gpu-population": gpu_population,
  "gpu-likelihood": gpu_likelihood,
  "gpu-summary": gpu_summary,
  "gpu-trained-ms": gpu_trained_ms,
  "gpu-warmup-ratio": gpu_warmup_ratio,
  "gpu-paper-minutes": gpu_paper_minutes,
  "gpu-step-ms": gpu_step_ms,
  "gpu-trace": gpu_trace,
  "gpu-busy": gpu_busy,
  "gpu-copies": gpu_copies,
  "gpu-svd": gpu_svd,
  "gpu-cpu-likelihood": gpu_cpu_likelihood,
  "gpu-paths-effect": gpu_paths_effect,
  "gpu-process-spread": gpu_process_spread,
}
