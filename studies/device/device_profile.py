"""Where a device's training step spends its time, and what the solvers'
device paths change, in one process.

* ``--ab``: each experiment's step on its trained state with the solvers'
  device paths and with the CPU's paths (``backend.per_platform`` forced to
  its CPU branch), both compiled first and then timed alternately, and the
  likelihood protocol's points per second with each;
* ``--trace``: each step under jax's profiler: kernels and host-device copies
  per step, the time the device spent in kernels against the step's wall
  time, and the kernels that took the most.

Usage (the states as for ``device_steps.py``)::

    python benchmarks/device_profile.py --states=DIR --mnist-dir=DIR --ab --trace
"""

from __future__ import annotations

import argparse
import collections
import json
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
import original_method as om  # noqa: E402  (first: pins BLAS threads)

# isort: split

import device_steps  # noqa: E402
import jax  # noqa: E402
from train_step import _interleaved  # noqa: E402

from vaells_jax.core import backend  # noqa: E402
from vaells_jax.evaluation.likelihood import importance_log_likelihood  # noqa: E402
from vaells_jax.training import step as train  # noqa: E402

DEVICE_PATHS = backend.per_platform


def _paths(device: bool) -> None:
  if device:
    backend.per_platform = DEVICE_PATHS
  else:
    device_steps.cpu_paths()
  jax.clear_caches()


def _setup(name, mnist_dir, states):
  config, data, model, initial, trained, batch, key = device_steps.experiment_states(
    name, mnist_dir, states
  )
  return config, data, model, initial if trained is None else trained, batch, key


def ab_steps(name, mnist_dir, states, repeats) -> dict:
  _, _, model, state, batch, key = _setup(name, mnist_dir, states)
  programs = {}
  for device in (True, False):
    _paths(device)
    step = train.make_train_step(model).programs[-1]
    programs["device" if device else "cpu"] = step.lower(state, batch, key).compile()
  _paths(True)
  times = _interleaved(
    {label: lambda p=p: p(state, batch, key) for label, p in programs.items()},
    repeats,
  )
  return {
    "experiment": name,
    **{label: 1e3 * t["median_s"] for label, t in times.items()},
    **{f"{label}_min": 1e3 * t["min_s"] for label, t in times.items()},
  }


def ab_likelihood(mnist_dir, states, points, samples, chunk) -> dict:
  _, data, model, state, _, _ = _setup("nat_mnist", mnist_dir, states)
  batch = device_steps.likelihood_batch(data, points)
  row = {"points": points, "samples": samples, "chunk": chunk}
  for device in (False, True):
    _paths(device)
    first = jax.tree_util.tree_map(lambda a: a[:chunk], batch)
    importance_log_likelihood(
      model, state.params, first, jax.random.PRNGKey(1), samples, chunk
    )
    start = time.perf_counter()
    ll, _ = importance_log_likelihood(
      model, state.params, batch, jax.random.PRNGKey(0), samples, chunk
    )
    row["device" if device else "cpu"] = {
      "points_per_s": points / (time.perf_counter() - start),
      "log_likelihood": float(ll.mean()),
    }
  _paths(True)
  return row


def trace(name, mnist_dir, states, steps=5) -> dict:
  """Kernels, copies and device time per step from a profiler trace."""
  from jax.profiler import ProfileData

  _, _, model, state, batch, key = _setup(name, mnist_dir, states)
  step = train.make_train_step(model).programs[-1]
  jax.block_until_ready(step(state, batch, key))
  folder = tempfile.mkdtemp()
  with jax.profiler.trace(folder):
    start = time.perf_counter()
    for _ in range(steps):
      jax.block_until_ready(step(state, batch, key))
    wall = (time.perf_counter() - start) / steps
  (path,) = pathlib.Path(folder).rglob("*.xplane.pb")
  kernels, launches, copies, busy = collections.Counter(), 0, 0, 0.0
  lines = {}
  for plane in ProfileData.from_file(str(path)).planes:
    if not plane.name.startswith("/device:GPU"):
      continue
    for line in plane.lines:
      events = list(line.events)
      lines[line.name] = len(events)
      if not line.name.startswith("Stream"):
        continue
      for event in events:
        if "memcpy" in event.name.lower():
          copies += 1
        else:
          launches += 1
          kernels[event.name] += event.duration_ns / 1e6
          busy += event.duration_ns / 1e6
  return {
    "experiment": name,
    "wall_ms": 1e3 * wall,
    "device_busy_ms": busy / steps,
    "kernels_per_step": launches / steps,
    "kernel_names": len(kernels),
    "copies_per_step": copies / steps,
    "lines": lines,
    "top_ms_per_step": {k: v / steps for k, v in kernels.most_common(12)},
  }


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--experiments", default=",".join(device_steps.EXPERIMENTS))
  parser.add_argument("--states", required=True)
  parser.add_argument("--mnist-dir", default=str(om.DEFAULT_MNIST))
  parser.add_argument("--ab", action="store_true")
  parser.add_argument("--trace", action="store_true")
  parser.add_argument("--repeats", type=int, default=20)
  parser.add_argument("--ll-points", type=int, default=200)
  parser.add_argument("--json", default=None)
  args = parser.parse_args(argv)
  names = args.experiments.split(",")
  result = {
    "environment": device_steps.environment(),
    "ab": [],
    "trace": [],
    "likelihood": [],
  }

  def save(key, row):
    result[key].append(row)
    print(json.dumps(row), flush=True)
    if args.json:
      pathlib.Path(args.json).write_text(json.dumps(result, indent=2))

  if args.trace:
    for name in names:
      save("trace", trace(name, args.mnist_dir, args.states))
  if args.ab:
    for name in names:
      save("ab", ab_steps(name, args.mnist_dir, args.states, args.repeats))
    if args.ll_points:
      save(
        "likelihood",
        ab_likelihood(args.mnist_dir, args.states, args.ll_points, 100, 25),
      )
  for row in result["ab"]:
    print(
      f"{row['experiment']}: device paths {row['device']:.2f} ms, "
      f"cpu paths {row['cpu']:.2f} ms (medians, alternating)"
    )
  for row in result["trace"]:
    print(
      f"{row['experiment']}: wall {row['wall_ms']:.2f} ms/step, kernels busy "
      f"{row['device_busy_ms']:.2f} ms, {row['kernels_per_step']:.0f} kernels and "
      f"{row['copies_per_step']:.0f} copies a step; lines {row['lines']}"
    )
  return result


if __name__ == "__main__":
  main()
