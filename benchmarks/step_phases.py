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

``--scheduler-rounds=N`` instead times the library's step ``N`` times with
XLA's concurrency-optimised CPU scheduler off (the package's setting, see
``vaells_jax/__init__.py``) and ``N`` times with it on, alternated, each in
a fresh process (XLA reads the flag once).

Usage::

    python benchmarks/step_phases.py --experiments rot_mnist,nat_mnist \\
        --budget=cpu --out=docs/results/step_phases.json
    python benchmarks/step_phases.py --experiments concentric,rot_mnist \\
        --forms=phased --repeats=20 --scheduler-rounds=2 \\
        --out=docs/results/xla_scheduler.json
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import original_method as om  # noqa: E402

# isort: split

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from vaells_jax import SCHEDULER_FLAG  # noqa: E402
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


def phase_times(
  name: str, budget: str, mnist_dir, repeats: int, forms=("phased", "cond")
) -> dict:
  """``{phase: {form: times}}`` (see :func:`_timed`); ``forms`` of
  ``phased`` (the library's step) and ``cond``."""
  config, data, model = om.experiment(name, budget, mnist_dir)
  state = om.seed_state(config, data)
  programs = {
    "phased": lambda: train.make_train_step(model),
    "cond": lambda: jax.jit(train.train_step_fn(model)),
  }
  programs = {form: programs[form]() for form in forms}
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
  parser.add_argument("--forms", default="phased,cond")
  parser.add_argument("--scheduler-rounds", type=int, default=0)
  parser.add_argument("--out", help="also write the results to this JSON file")
  args = parser.parse_args(argv)
  if args.scheduler_rounds:
    return scheduler_rounds(args, sys.argv[1:] if argv is None else argv)
  print(f"device={jax.devices()[0]} jax={jax.__version__} budget={args.budget}")
  print("| experiment | phase | form | first call s | step ms (min) |")
  print("|---|---|---|---|---|")
  results = {}
  for name in args.experiments.split(","):
    results[name] = phase_times(
      name, args.budget, args.mnist_dir, args.repeats, args.forms.split(",")
    )
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


def scheduler_rounds(args, argv: list) -> dict:
  """Runs this script ``2 * rounds`` times, the scheduler flag alternating."""
  passed = [a for a in argv if not a.startswith(("--scheduler-rounds", "--out"))]
  rounds = []
  with tempfile.TemporaryDirectory() as tmp:
    for i in range(2 * args.scheduler_rounds):
      setting = ("false", "true")[i % 2]
      out = pathlib.Path(tmp) / f"{i}.json"
      flags = os.environ.get("XLA_FLAGS", "").split()
      flags = [f for f in flags if SCHEDULER_FLAG not in f]
      flags.append(f"--{SCHEDULER_FLAG}={setting}")
      env = dict(os.environ, XLA_FLAGS=" ".join(flags))
      cmd = [sys.executable, __file__, *passed, f"--out={out}"]
      subprocess.run(cmd, env=env, check=True)
      rounds.append({"scheduler": setting, **json.loads(out.read_text())})
  record = {"command": "python benchmarks/step_phases.py " + " ".join(argv)}
  record["rounds"] = rounds
  if args.out:
    pathlib.Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
  return record


if __name__ == "__main__":
  main()
