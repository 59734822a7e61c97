"""Time one population training step: members vmapped, mapped, or one alone.

``python benchmarks/population_step.py --base=swiss_roll --population=8
--out=docs/results/population_step_swiss_roll.json``

Compares, on the experiment's data and config (dictionary draw from the
seed), the jitted step of ``--population`` members on one device with
``jax.vmap`` over the member axis and with ``jax.lax.map`` (the CPU default of
``vaells_jax.training.population``), the ``lax.map`` step with the members
split over one CPU device per core (as ``experiments/run.py`` runs it; the
device count set as run.py sets it), and the single-run step. Compile time is
left out: each step is run ``--warmup`` times first, then timed over
``--steps`` steps after ``block_until_ready``; the minimum of ``--repeats``
timings is reported, in ms per step.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import pathlib
import platform
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vaells_jax.experiments import make_data  # noqa: E402
from vaells_jax.training.placement import claim_cores  # noqa: E402


def _time(step, state, data, config, warmup, steps, repeats) -> float:
  import jax
  import numpy as np

  from vaells_jax.training.guards import batch_indices

  x = np.asarray(data.x_train, np.float32)
  labels = np.asarray(data.labels_train, np.int32)
  batches = [
    {"x": x[i], "label": labels[i]}
    for i in (
      batch_indices(config.seed, s, len(x), config.batch_size)
      for s in range(warmup + steps)
    )
  ]
  key = jax.random.PRNGKey(0)
  for s in range(warmup):
    state, _ = step(state, batches[s], jax.random.fold_in(key, s))
  jax.block_until_ready(state)
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    run = state
    for s in range(warmup, warmup + steps):
      run, _ = step(run, batches[s], jax.random.fold_in(key, s))
    jax.block_until_ready(run)
    best = min(best, (time.perf_counter() - start) / steps)
  return 1000 * best


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument(
    "--base", default="concentric", choices=("concentric", "swiss_roll")
  )
  parser.add_argument("--population", type=int, default=4)
  parser.add_argument("--warmup", type=int, default=30)
  parser.add_argument("--steps", type=int, default=50)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--out", help="also write the results to this JSON file")
  args = parser.parse_args(argv)
  claim_cores(args.population)  # before jax starts its backends
  import jax

  from vaells_jax import api
  from vaells_jax.training import placement, population

  base = importlib.import_module(f"vaells_jax.experiments.{args.base}").get_config()
  config = dataclasses.replace(base, population=args.population, psi_seed=-1)
  data = make_data(args.base, config, None)
  key = jax.random.PRNGKey(config.seed)
  members = population.init_population(key, config, data)
  single = api.MODELS["vaells"].init(key, config, data)
  timed = lambda step, state: _time(  # noqa: E731
    step, state, data, config, args.warmup, args.steps, args.repeats
  )
  step = lambda vectorize, devices: population.make_population_step(  # noqa: E731
    config, data.data_dim, vectorize=vectorize, devices=devices, groups=1
  )
  one = jax.devices()[:1]
  split = placement.member_devices(args.population)
  rows = {
    "vmap": timed(step(True, one), members),
    "lax.map": timed(step(False, one), members),
    f"lax.map, split over {len(split)} devices": timed(step(False, split), members),
    f"lax.map, {len(split)} groups from threads, one device": timed(
      population.make_population_step(
        config, data.data_dim, vectorize=False, devices=one, groups=len(split)
      ),
      members,
    ),
    "single": timed(
      api.MODELS["vaells"].make_step(config, data.data_dim, None), single
    ),
  }
  print(
    f"{args.base}, {args.population} members, {jax.devices()[0].platform} "
    f"({platform.processor() or platform.machine()}), jax {jax.__version__}"
  )
  for name, ms in rows.items():
    print(f"  {name:32s} {ms:8.1f} ms/step")
  if args.out:
    record = {
      "base": args.base,
      "population": args.population,
      "devices_split": len(split),
      "device": str(jax.devices()[0]),
      "jax": jax.__version__,
      "steps": args.steps,
      "repeats": args.repeats,
      "ms_per_step": rows,
    }
    pathlib.Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
  return rows


if __name__ == "__main__":
  main()
