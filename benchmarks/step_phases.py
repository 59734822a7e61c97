"""Time of one training step in each phase: warm-up, network step, ``Psi`` step.

Builds an experiment's config (MNIST at ``--budget``), its initial state,
and times the library's jitted step (``make_train_step``) with the state's
step counter set to the first step of each phase: 0 (warm-up, when the config
has one), the first network step and the first ``Psi`` step after warm-up.
Prints the first call (compilation included) and the fastest of
``--repeats`` calls.

Usage::

    python benchmarks/step_phases.py --experiments rot_mnist,nat_mnist --budget=cpu
"""

from __future__ import annotations

import argparse
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


def phase_times(name: str, budget: str, mnist_dir, repeats: int) -> dict:
  config, data, model = om.experiment(name, budget, mnist_dir)
  state = om.seed_state(config, data)
  step_fn = train.make_train_step(model)
  starts = {"network": config.warmup_steps, "psi": train.first_psi_step(config)}
  if config.warmup_steps:
    starts = {"warm-up": 0, **starts}
  rows = {}
  for phase, at in starts.items():
    at_state = state.replace(step=jnp.asarray(at, jnp.int32))
    batch, key = om.step_batch(config, data, at)
    start = time.perf_counter()
    jax.block_until_ready(step_fn(at_state, batch, key))
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
      start = time.perf_counter()
      jax.block_until_ready(step_fn(at_state, batch, key))
      times.append(time.perf_counter() - start)
    rows[phase] = (first, min(times))
  return rows


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--experiments", default="rot_mnist,nat_mnist")
  parser.add_argument("--budget", default="cpu", choices=("paper", "cpu"))
  parser.add_argument("--mnist-dir", default=str(om.DEFAULT_MNIST))
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args(argv)
  print(f"device={jax.devices()[0]} jax={jax.__version__} budget={args.budget}")
  print("| experiment | phase | first call s | step ms (min) |")
  print("|---|---|---|---|")
  for name in args.experiments.split(","):
    for phase, (first, best) in phase_times(
      name, args.budget, args.mnist_dir, args.repeats
    ).items():
      print(f"| {name} | {phase} | {first:.1f} | {1e3 * best:.1f} |", flush=True)


if __name__ == "__main__":
  main()
