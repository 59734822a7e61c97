"""Time of one training step in each phase: warm-up, network step, ``Psi`` step.

Builds an experiment's config (MNIST at ``--budget``), its initial state,
and times the library's jitted step (``make_train_step``: one program for
warm-up, one for the steps after it, the host choosing) with the state's
step counter set to the first step of each phase: 0 (warm-up, when the config
has one), the first network step and the first ``Psi`` step after warm-up.
Beside it, the same step deciding warm-up inside one program with a
``jax.lax.cond`` (``train_step_fn(model)`` jitted): the form the library
does not use, because XLA:CPU leaves the gradient of a convolution inside a
conditional in a slow form. Prints the first call (compilation included) and
the fastest of ``--repeats`` calls of each.

Usage::

    python benchmarks/step_phases.py --experiments rot_mnist,nat_mnist \\
        --budget=cpu --out=docs/results/step_phases.json
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import original_method as om  # noqa: E402

# isort: split

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from vaells_jax.training import step as train  # noqa: E402


def _timed(step_fn, state, batch, key, repeats: int) -> dict:
  start = time.perf_counter()
  jax.block_until_ready(step_fn(state, batch, key))
  first = time.perf_counter() - start
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(step_fn(state, batch, key))
    times.append(time.perf_counter() - start)
  return {"first_call_s": first, "step_s": min(times)}


def phase_times(name: str, budget: str, mnist_dir, repeats: int) -> dict:
  """``{phase: {"phased": times, "cond": times}}`` (see :func:`_timed`)."""
  config, data, model = om.experiment(name, budget, mnist_dir)
  state = om.seed_state(config, data)
  programs = {
    "phased": train.make_train_step(model),
    "cond": jax.jit(train.train_step_fn(model)),
  }
  starts = {"network": config.warmup_steps, "psi": train.first_psi_step(config)}
  if config.warmup_steps:
    starts = {"warm-up": 0, **starts}
  rows = {}
  for phase, at in starts.items():
    at_state = state.replace(step=jnp.asarray(at, jnp.int32))
    batch, key = om.step_batch(config, data, at)
    rows[phase] = {
      form: _timed(step_fn, at_state, batch, key, repeats)
      for form, step_fn in programs.items()
    }
  return rows


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--experiments", default="rot_mnist,nat_mnist")
  parser.add_argument("--budget", default="cpu", choices=("paper", "cpu"))
  parser.add_argument("--mnist-dir", default=str(om.DEFAULT_MNIST))
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--out", help="also write the results to this JSON file")
  args = parser.parse_args(argv)
  print(f"device={jax.devices()[0]} jax={jax.__version__} budget={args.budget}")
  print("| experiment | phase | form | first call s | step ms (min) |")
  print("|---|---|---|---|---|")
  results = {}
  for name in args.experiments.split(","):
    results[name] = phase_times(name, args.budget, args.mnist_dir, args.repeats)
    for phase, forms in results[name].items():
      for form, t in forms.items():
        print(
          f"| {name} | {phase} | {form} | {t['first_call_s']:.1f} "
          f"| {1e3 * t['step_s']:.1f} |",
          flush=True,
        )
  if args.out:
    record = {
      "device": str(jax.devices()[0]),
      "jax": jax.__version__,
      "budget": args.budget,
      "repeats": args.repeats,
      "experiments": results,
    }
    pathlib.Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
  return results


if __name__ == "__main__":
  main()
