"""Training-step time of each experiment, against the original method of inference.

For every experiment config, times one jitted VAELLS training step that infers
coefficients twice, in one run, alternating, on the same state, batch and key:

* ``vaells_jax``: the library's step, one batched solve of all pairs;
* ``original``: the same jitted step with the original research code's
  inference swapped in (:func:`original_method.original_step_coefficients`,
  through ``jax.pure_callback``): per pair, anchor and restart,
  ``scipy.optimize.minimize(method="CG", options={"maxiter": 50},
  tol=10^-7)`` (``10^-7`` is XOR in Python, -13: never met, so CG stops at 50
  iterations or a failed line search) with its eigendecomposition gradient,
  posterior pairs from one start in U[0, 1], prior restart ``r`` from
  U[-2.5 + 2.5 r, 2.5 r]; float64; BLAS pinned to one thread.

The synthetic experiments' state is the library's own training state after
``--at-step`` steps (default 1000); the MNIST experiments' is the initial
state with its step set past warm-up (their warm-up is 30 000 steps).
Compile time is reported apart from the steady-state time (minimum and median
over repeats, after ``block_until_ready``). For configs with a warm-up (the
MNIST experiments), a warm-up step (reconstruction only, no inference) is
timed too, and the training time of the whole budget is estimated as
``warmup x warm-up step + (steps - warmup) x step`` for both methods
(training only: compilation and evaluation come on top).

Usage::

    python benchmarks/train_step.py --experiments concentric,swiss_roll
    python benchmarks/train_step.py --quick    # CI smoke mode (batch of 4)
    python benchmarks/train_step.py --experiments=concentric \
      --inference-method=pgd                   # the step with the pgd solver
    python benchmarks/train_step.py --budget=cpu   # MNIST steps as configured
                                                   # for the CPU budget
    python benchmarks/train_step.py --original-for=concentric  # the others:
                                                   # the library's step only
    python benchmarks/train_step.py --experiments=concentric \
      --original-for=none --max-iter=1             # one inference iteration
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import original_method as om  # noqa: E402  (first: pins BLAS threads)

# isort: split

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import vaells_jax  # noqa: E402
from vaells_jax.training import step as train  # noqa: E402

EXPERIMENTS = ("concentric", "swiss_roll", "rot_mnist", "nat_mnist")
QUICK_BATCH = 4


def _interleaved(fns: dict, repeats: int) -> dict:
  """First-call and min / median seconds of each of ``fns``, alternating."""
  first, times = {}, {name: [] for name in fns}
  for name, fn in fns.items():
    start = time.perf_counter()
    jax.block_until_ready(fn())
    first[name] = time.perf_counter() - start
  for _ in range(repeats):
    for name, fn in fns.items():
      start = time.perf_counter()
      jax.block_until_ready(fn())
      times[name].append(time.perf_counter() - start)
  return {
    name: {
      "first_s": first[name],
      "min_s": min(times[name]),
      "median_s": float(np.median(times[name])),
    }
    for name in fns
  }


def run_experiment(
  name: str,
  repeats: int,
  budget: str = "paper",
  mnist_dir=om.DEFAULT_MNIST,
  at_step: int = 1000,
  with_original: bool = True,
  **overrides,
) -> dict:
  config, data, model = om.experiment(name, budget, mnist_dir, **overrides)
  if config.warmup_steps:
    at_step = config.warmup_steps  # past warm-up, so that it infers coefficients
    state = om.seed_state(config, data, at_step)
  else:
    state = om.trained_state(config, data, model, at_step)
  batch, key = om.step_batch(config, data, at_step)
  ours, original = train.make_train_step(model), om.original_train_step(model)
  steps = {"vaells_jax": lambda: ours(state, batch, key)}
  if with_original:
    steps["original"] = lambda: original(state, batch, key)
  times = _interleaved(steps, repeats)
  nan = {"first_s": np.nan, "min_s": np.nan, "median_s": np.nan}
  our_time, original_time = times["vaells_jax"], times.get("original", nan)
  warmup_s = 0.0
  if config.warmup_steps:  # The same for both methods: no inference.
    warm = state.replace(step=jnp.asarray(0, jnp.int32))
    warmup_s = _interleaved({"w": lambda: ours(warm, batch, key)}, repeats)["w"]
    warmup_s = warmup_s["min_s"]
  anchors = config.rotation_anchors or data.anchors.shape[1]
  rest = config.num_steps - config.warmup_steps
  return {
    "experiment": name,
    "at_step": at_step,
    "batch_size": config.batch_size,
    "pair_solves_per_step": om.our_pair_solves(config, anchors),
    "original_pair_solves_per_step": om.original_pair_solves(config, anchors),
    "inference_method": config.inference_method,
    "inference_max_iter": config.inference_max_iter,
    "vaells_jax": our_time,
    "original": original_time,
    "speedup": original_time["min_s"] / our_time["min_s"],
    "speedup_median": original_time["median_s"] / our_time["median_s"],
    "warmup_step_s": warmup_s,
    "estimated_training_s": {
      method: config.warmup_steps * warmup_s + rest * t["min_s"]
      for method, t in (("vaells_jax", our_time), ("original", original_time))
    },
  }


def main(argv=None) -> list[dict]:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument(
    "--quick", action="store_true", help=f"1 repeat, batch of {QUICK_BATCH} (CI)"
  )
  parser.add_argument("--repeats", type=int, default=None)
  parser.add_argument("--experiments", default=",".join(EXPERIMENTS))
  parser.add_argument(
    "--at-step", type=int, default=None, help="synthetic state (default 1000)"
  )
  parser.add_argument(
    "--budget",
    default="paper",
    choices=("paper", "cpu"),
    help="config of the MNIST experiments",
  )
  parser.add_argument("--mnist-dir", default=str(om.DEFAULT_MNIST))
  parser.add_argument("--json", default=None, help="also write the rows here")
  parser.add_argument(
    "--original-for",
    default=None,
    help="time the original step only for these experiments (default: all)",
  )
  om.add_solver_flags(parser)
  args = parser.parse_args(argv)
  repeats = args.repeats or (1 if args.quick else 5)
  at_step = args.at_step if args.at_step is not None else 0 if args.quick else 1000
  overrides = {"batch_size": QUICK_BATCH} if args.quick else {}
  overrides.update(om.solver_overrides(args))
  print(
    f"device={jax.devices()[0]} jax={jax.__version__} "
    f"vaells_jax={vaells_jax.__version__} repeats={repeats} "
    f"mnist budget={args.budget} blas_pinned={om.BLAS_PINNED}"
  )
  names = args.experiments.split(",")
  with_original = set(args.original_for.split(",") if args.original_for else names)
  rows = [
    run_experiment(
      name,
      repeats,
      args.budget,
      args.mnist_dir,
      at_step,
      with_original=name in with_original,
      **overrides,
    )
    for name in names
  ]
  print(
    "| experiment | pair-solves/step, ours / original | vaells_jax step ms "
    "(min / median) | compile s | original step ms (min / median) "
    "| speedup (min, median) |"
  )
  print("|---|---|---|---|---|---|")
  for r in rows:
    ours, cg = r["vaells_jax"], r["original"]
    print(
      f"| {r['experiment']} (step {r['at_step']}) | {r['pair_solves_per_step']} / "
      f"{r['original_pair_solves_per_step']} "
      f"| {1e3 * ours['min_s']:.1f} / {1e3 * ours['median_s']:.1f} "
      f"| {ours['first_s'] - ours['median_s']:.1f} "
      f"| {1e3 * cg['min_s']:.0f} / {1e3 * cg['median_s']:.0f} "
      f"| {r['speedup']:.0f}x, {r['speedup_median']:.0f}x |"
    )
  print()
  print(
    "| experiment | warm-up step ms | estimated training, vaells_jax "
    "| estimated training, original |"
  )
  print("|---|---|---|---|")
  for r in rows:
    est = r["estimated_training_s"]
    print(
      f"| {r['experiment']} | {1e3 * r['warmup_step_s']:.1f} "
      f"| {est['vaells_jax'] / 3600:.2f} h | {est['original'] / 3600:.2f} h |"
    )
  if args.json:
    with open(args.json, "w") as f:
      json.dump(rows, f, indent=2)
  return rows


if __name__ == "__main__":
  main()
