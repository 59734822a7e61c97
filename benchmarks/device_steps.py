"""Every experiment's training step, a population's step and the likelihood
evaluation on the default device, in one process (the device script's unit).

Times, on whatever device jax starts on (a GPU when there is one):

* each experiment's default training step (paper config, one member) on two
  states: ``initial`` (the seed's state; MNIST: its step set past warm-up) and
  ``trained`` (read from ``--states``: files made once on a CPU with
  ``--make-states``, so every device times the same state); MNIST's warm-up
  step (networks only) too; first call (compile) and min / median of
  ``--repeats`` calls, and the compiled step's census (loops, conditionals,
  kernels) from its optimised HLO;
* the synthetic experiments' default population step against its single
  member's (``population.make_population_step`` as the run builds it);
* the paper's likelihood protocol (points x importance samples, nat_mnist's
  trained state) in chunks of ``--ll-chunk`` points, stopped after
  ``--ll-seconds`` with the time the whole would take.

``--method`` replaces each experiment's solver (e.g. ``gauss_newton_fused``
for the synthetic ones). ``--tiny`` is the default suite's CPU check (batch
of 4, one repeat, the synthetic experiments, a few likelihood points).
``device_steps.sh`` runs this on a device machine in its variants.

Usage::

    python benchmarks/device_steps.py --make-states=benchmarks/states \\
      --nat-run=RUN --rot-run=RUN          # once, on a CPU
    python benchmarks/device_steps.py --states=benchmarks/states \\
      --mnist-dir=../shared/data/mnist --json=steps.json
    python benchmarks/device_steps.py --tiny
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import pathlib
import re
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
import original_method as om  # noqa: E402  (first: pins BLAS threads)
from train_step import _interleaved  # noqa: E402

# isort: split

import jax  # noqa: E402
import numpy as np  # noqa: E402

from vaells_jax.core import backend  # noqa: E402
from vaells_jax.evaluation.likelihood import importance_log_likelihood  # noqa: E402
from vaells_jax.training import population  # noqa: E402
from vaells_jax.training import step as train  # noqa: E402

EXPERIMENTS = ("concentric", "swiss_roll", "rot_mnist", "nat_mnist")
SYNTHETIC = EXPERIMENTS[:2]
TRAINED_AT = 1000  # synthetic trained states: the library's state after this many steps
CENSUS = {
  "while": r"\bwhile\(",
  "conditional": r"\bconditional\(",
  "fusion": r"\bfusion\(",
  "custom-call": r"\bcustom-call\(",
}


def save_state(state, path) -> None:
  """``state``'s leaves, in order, as one ``.npz``."""
  leaves = jax.tree_util.tree_leaves(state)
  path.parent.mkdir(parents=True, exist_ok=True)
  np.savez(path, *[np.asarray(leaf) for leaf in leaves])


def load_state(path, like):
  """A state saved by :func:`save_state`, shaped like ``like`` (checked)."""
  leaves, treedef = jax.tree_util.tree_flatten(like)
  with np.load(path) as saved:
    arrays = [saved[f"arr_{i}"] for i in range(len(saved.files))]
  shapes = [(a.shape, a.dtype) for a in arrays]
  if shapes != [(np.shape(x), np.asarray(x).dtype) for x in leaves]:
    raise ValueError(f"{path}: not a state of this configuration")
  return jax.device_put(jax.tree_util.tree_unflatten(treedef, arrays))


def make_states(folder: pathlib.Path, mnist_dir, runs: dict) -> None:
  """The trained states, made on the CPU: the synthetic experiments' after
  :data:`TRAINED_AT` steps, MNIST's from a run's latest checkpoint."""
  for name in SYNTHETIC:
    config, data, model = om.experiment(name)
    save_state(
      om.trained_state(config, data, model, TRAINED_AT), folder / f"{name}.npz"
    )
  for name, run in runs.items():
    if run:
      config, _, _, state = om.restore_run(run)
      save_state(state, folder / f"{name}.npz")
      print(f"{name}: step {int(state.step)} of {run}")


def census(step, *args) -> dict:
  """Loops, conditionals, kernels (fusions) and library calls in the
  optimised program of ``step(*args)``, and the time to compile it."""
  start = time.perf_counter()
  text = step.lower(*args).compile().as_text()
  found = {name: len(re.findall(pattern, text)) for name, pattern in CENSUS.items()}
  return found | {"compile_s": time.perf_counter() - start}


def _times(fn, repeats: int) -> dict:
  """First call and min / median of ``repeats`` calls of ``fn``, in s."""
  return _interleaved({"fn": fn}, repeats)["fn"]


def cpu_paths() -> None:
  """Every per-backend choice takes the CPU's branch, on any device."""
  backend.per_platform = lambda cpu, other, *a: cpu(*a)


def experiment_states(name, mnist_dir, states, overrides=None):
  """``(config, data, model, initial, trained, batch, key)`` of an
  experiment's paper config as one member: ``initial`` the seed's state
  (MNIST's past warm-up), ``trained`` the state file in ``states`` (None
  without one), its step counter past warm-up too, so that the step infers;
  ``batch`` and ``key`` those of the first step past warm-up."""
  config, data, model = om.experiment(name, "paper", mnist_dir, **(overrides or {}))
  initial = om.seed_state(config, data, config.warmup_steps)
  trained = None
  saved = pathlib.Path(states or "") / f"{name}.npz"
  if states and saved.exists():
    trained = load_state(saved, initial)
    trained = trained.replace(step=max(trained.step, initial.step))
  batch, key = om.step_batch(config, data, config.warmup_steps)
  return config, data, model, initial, trained, batch, key


def likelihood_batch(data, points: int) -> dict:
  """The first ``points`` test digits as the likelihood protocol reads them."""
  x = np.asarray(data.x_test[:points], np.float32)
  return {"x": x, "source": {"x": x, "label": np.asarray(data.labels_test[:points])}}


def time_steps(name, repeats, mnist_dir, states, overrides) -> dict:
  """One experiment's step on each state (module docstring)."""
  config, _, model, initial, trained, batch, key = experiment_states(
    name, mnist_dir, states, overrides
  )
  # The jitted programs themselves (the loop's PhasedStep picks one on the
  # host from the step it returned last, without waiting for the device).
  phased = train.make_train_step(model)
  step, warmup = phased.programs[-1], phased.programs[0]
  runs = {"initial": initial} | ({} if trained is None else {"trained": trained})
  row = {
    "experiment": name,
    "inference_method": config.inference_method,
    "inference_max_iter": config.inference_max_iter,
    "batch_size": config.batch_size,
    "census": census(step, initial, batch, key),
  }
  for label, state in runs.items():
    row[label] = _times(lambda state=state: step(state, batch, key), repeats)
    row[f"{label}_at_step"] = int(state.step)
  if config.warmup_steps:
    warm = initial.replace(step=initial.step * 0)
    row["warmup_step"] = _times(lambda: warmup(warm, batch, key), repeats)
  return row


def _chained(step, state, batch, key, steps: int):
  """``steps`` steps, each from the last one's state, as the loop runs them."""

  def run():
    new = state
    for _ in range(steps):
      new, _ = step(new, batch, key)
    return new

  return run


def time_population(name, repeats, overrides) -> dict:
  """The default population's step against its single member's, per step
  over chains of ``repeats`` steps (the step objects the run uses)."""
  config, data, model = om.experiment(name, **overrides)
  default = importlib.import_module(f"vaells_jax.experiments.{name}").get_config()
  members = dataclasses.replace(config, population=default.population)
  key = jax.random.PRNGKey(config.seed)
  batch, step_key = om.step_batch(config, data, 0)
  many = population.init_population(key, members, data)
  one = om.seed_state(config, data)
  steps = {
    "population": (population.make_population_step(members, data.data_dim), many),
    "single": (train.make_train_step(model), one),
  }
  row = {"experiment": name, "members": members.population}
  for label, (step, state) in steps.items():
    chain = _chained(step, state, batch, step_key, repeats)
    row[label] = {k: v / repeats for k, v in _times(chain, 3).items()}
  return row


def time_likelihood(
  mnist_dir, states, points, samples, chunk, seconds, overrides
) -> dict:
  """The likelihood protocol on nat_mnist's trained (else initial) state."""
  _, data, model, initial, trained, _, _ = experiment_states(
    "nat_mnist", mnist_dir, states, overrides
  )
  state = initial if trained is None else trained
  batch = likelihood_batch(data, points)
  key = jax.random.PRNGKey(0)
  done, start, first, values = 0, time.perf_counter(), None, []
  while done < points and time.perf_counter() - start < seconds:
    part = jax.tree_util.tree_map(lambda a, done=done: a[done : done + chunk], batch)
    ll, _ = importance_log_likelihood(
      model, state.params, part, jax.random.fold_in(key, done), samples, chunk
    )
    values.append(ll)
    done += len(ll)
    first = first if first is not None else time.perf_counter() - start
  elapsed = time.perf_counter() - start
  rate = (done - chunk) / (elapsed - first) if done > chunk else chunk / first
  return {
    "points": done,
    "of": points,
    "samples": samples,
    "chunk": chunk,
    "first_chunk_s": first,
    "seconds": elapsed,
    "points_per_s": rate,
    "whole_s": first + (points - chunk) / rate,
    "log_likelihood": float(np.mean(np.concatenate(values))),
  }


def environment() -> dict:
  device = jax.devices()[0]
  info = {
    "platform": device.platform,
    "device": getattr(device, "device_kind", str(device)),
    "jax": jax.__version__,
    "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
    "cpu_paths": os.environ.get("VAELLS_CPU_PATHS", "") == "1",
  }
  print(jax.print_environment_info(return_string=True))
  return info


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--tiny", action="store_true", help="CPU smoke size")
  parser.add_argument("--experiments", default=None, help="default: all four")
  parser.add_argument("--population", default=",".join(SYNTHETIC))
  parser.add_argument("--repeats", type=int, default=10)
  parser.add_argument("--method", default=None, help="the solver, for every step")
  parser.add_argument("--states", default=None, help="folder of trained states")
  parser.add_argument("--make-states", default=None, help="write them here, exit")
  parser.add_argument("--nat-run", default=None, help="a nat_mnist workdir")
  parser.add_argument("--rot-run", default=None, help="a rot_mnist workdir")
  parser.add_argument("--mnist-dir", default=str(om.DEFAULT_MNIST))
  parser.add_argument("--ll-points", type=int, default=500)
  parser.add_argument("--ll-samples", type=int, default=100)
  parser.add_argument("--ll-chunk", type=int, default=25)
  parser.add_argument("--ll-seconds", type=float, default=120.0)
  parser.add_argument("--json", default=None)
  args = parser.parse_args(argv)
  if args.make_states:
    runs = {"nat_mnist": args.nat_run, "rot_mnist": args.rot_run}
    make_states(pathlib.Path(args.make_states), args.mnist_dir, runs)
    return {}
  if os.environ.get("VAELLS_CPU_PATHS") == "1":
    cpu_paths()
  overrides, repeats = {}, args.repeats
  if args.tiny:
    overrides, repeats = {"batch_size": 4}, 1
    args.experiments = args.experiments or ",".join(SYNTHETIC)
    args.ll_points, args.ll_samples, args.ll_chunk = min(args.ll_points, 4), 2, 2
  if args.method:
    overrides["inference_method"] = args.method
  args.experiments = args.experiments or ",".join(EXPERIMENTS)
  result = {"environment": environment(), "steps": [], "population": []}
  for name in filter(None, args.experiments.split(",")):
    result["steps"].append(
      time_steps(name, repeats, args.mnist_dir, args.states, overrides)
    )
    print(json.dumps(result["steps"][-1]), flush=True)
  for name in filter(None, args.population.split(",")):
    result["population"].append(time_population(name, repeats, overrides))
    print(json.dumps(result["population"][-1]), flush=True)
  if args.ll_points:
    result["likelihood"] = time_likelihood(
      args.mnist_dir,
      args.states,
      args.ll_points,
      args.ll_samples,
      args.ll_chunk,
      args.ll_seconds,
      overrides,
    )
    print(json.dumps(result["likelihood"]), flush=True)
  print_tables(result)
  if args.json:
    pathlib.Path(args.json).write_text(json.dumps(result, indent=2))
  return result


def print_tables(result: dict) -> None:
  env = result["environment"]
  print(
    f"\n{env['device']} ({env['platform']}), jax {env['jax']}, "
    f"XLA_FLAGS={env['XLA_FLAGS'] or '-'}, cpu paths={env['cpu_paths']}"
  )
  print(
    "| experiment | solver | state | step ms (min / median) | compile s "
    "| loops / conds / kernels |"
  )
  print("|---|---|---|---|---|---|")
  for r in result["steps"]:
    c = r["census"]
    for label in ("initial", "trained", "warmup_step"):
      if label in r:
        t = r[label]
        print(
          f"| {r['experiment']} | {r['inference_method']} | {label} "
          f"| {1e3 * t['min_s']:.2f} / {1e3 * t['median_s']:.2f} "
          f"| {c['compile_s']:.1f} "
          f"| {c['while']} / {c['conditional']} / {c['fusion']} |"
        )
  for r in result["population"]:
    p, s = r["population"]["min_s"], r["single"]["min_s"]
    print(
      f"population {r['experiment']}: {r['members']} members {1e3 * p:.2f} ms, "
      f"one {1e3 * s:.2f} ms, ratio {p / s:.2f}"
    )
  if "likelihood" in result:
    ll = result["likelihood"]
    print(
      f"likelihood: {ll['points']} of {ll['of']} points x {ll['samples']} samples "
      f"in {ll['seconds']:.1f} s ({ll['points_per_s']:.2f} points/s, "
      f"first chunk {ll['first_chunk_s']:.1f} s); the whole {ll['whole_s']:.0f} s"
    )


if __name__ == "__main__":
  main()
