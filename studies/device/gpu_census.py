"""Loops, conditionals and Triton kernels in each experiment's training step
as lowered for a GPU, counted on any machine (no GPU needed).

On a GPU every iteration of a ``while`` loop whose condition reads data,
and every conditional on data, reads its predicate on the host
(docs/studies/benchmarks-gpu.md, "Loops the host waits on"); this counts loops and
conditionals in each default step's StableHLO for CUDA (jax's
cross-platform lowering, before XLA's optimisations), with each solver
given in ``--methods`` for the synthetic experiments. ``--iterations``
also runs each default step once on this CPU (from the trained state of
``--states`` where there is one) and records how many iterations each of
its blocked solves (and ``exact``'s refinement) ran: where its pairs run
to ``max_iter`` anyway, a loop of known trip count costs a GPU no extra
iteration.

Usage::

    python benchmarks/gpu_census.py --mnist-dir=../shared/data/mnist \\
      --iterations --states=.device/states --json=docs/results/gpu_census.json
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
import device_steps  # noqa: E402  (first: pins BLAS threads)

# isort: split

from unittest import mock  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

from vaells_jax.core.solvers import columns, exact, gauss_newton, pgd  # noqa: E402
from vaells_jax.training import step as train  # noqa: E402

_CASE = re.compile(r"^\s*(%[\w]+)(?::\d+)? = \"stablehlo\.case\"\((%[\w]+)\)")
_CONSTANT = re.compile(r"^\s*(%[\w]+) = stablehlo\.constant ")


def count(text: str) -> dict:
  """``while`` loops (all, and those whose condition reads data: see
  :func:`_loops`), conditionals whose branch index is data (not those
  ``lax.platform_dependent`` leaves on a constant index, which XLA folds)
  and Triton kernels in a StableHLO module's text."""
  static, conditionals = set(), 0
  for line in text.splitlines():
    if constant := _CONSTANT.match(line):
      static.add(constant.group(1))
    elif case := _CASE.match(line):
      if case.group(2) in static:
        static.add(case.group(1))
      else:
        conditionals += 1
  loops = _loops(text)
  return {
    "while": len(loops),
    "while_on_data": loops.count(False),
    "conditional": conditionals,
    "triton": len(re.findall(r"xla\.gpu\.triton", text)),
  }


def _loops(text: str) -> list:
  """Per ``while`` loop: whether it is counted (its condition compares the
  counter with a constant: XLA knows its trip count, and a GPU runs it
  without reading the condition on the host)."""
  loops, cond = [], None
  for line in text.splitlines():
    if "stablehlo.while(" in line:
      cond = []
    elif cond is not None and line.strip() == "cond {":
      continue
    elif cond is not None and line.strip().startswith("} do {"):
      constants = [c for c in cond if "stablehlo.constant" in c]
      compares = [c for c in cond if "stablehlo.compare" in c]
      counted = (
        len(cond) == 3
        and len(constants) == 1
        and len(compares) == 1
        and re.search(r"compare\s+LT, %iterArg\w*, %c", compares[0]) is not None
      )
      loops.append(counted)
      cond = None
    elif cond is not None:
      cond.append(line)
  return loops


def lowered_census(name, mnist_dir, method=None, overrides=None) -> dict:
  """:func:`count` of ``name``'s default step lowered for CUDA."""
  overrides = dict(overrides or {}) | ({"inference_method": method} if method else {})
  config, _, model, state, _, batch, key = device_steps.experiment_states(
    name, mnist_dir, None, overrides
  )
  step = train.make_train_step(model).programs[-1]
  text = step.trace(state, batch, key).lower(lowering_platforms=("cuda",)).as_text()
  return {"experiment": name, "inference_method": config.inference_method} | count(text)


def solve_iterations(name, mnist_dir, states, overrides=None) -> dict:
  """Iterations of each blocked solve (``run_blocks``; ``exact``'s
  refinement loop) in one default step of ``name`` on this CPU, from the
  trained state where ``states`` has one: per solve its pairs and their
  largest and median ``num_iter``."""
  solves = []

  def record(num_iter):
    solves.append(
      {
        "pairs": int(num_iter.size),
        "max": int(num_iter.max()),
        "median": float(np.median(num_iter)),
      }
    )

  def run_blocks(*args, **kwargs):
    state = blocked(*args, **kwargs)
    jax.debug.callback(record, state.num_iter)
    return state

  def refine(*args, **kwargs):  # exact's loop: a pair's most over its candidates
    u, phi, conv, iters = refined(*args, **kwargs)
    jax.debug.callback(record, iters.reshape(iters.shape[0], -1).max(1))
    return u, phi, conv, iters

  blocked, refined = columns.run_blocks, exact.refine
  config, _, model, initial, trained, batch, key = device_steps.experiment_states(
    name, mnist_dir, states, overrides
  )
  step = train.make_train_step(model).programs[-1]
  with (
    mock.patch.object(gauss_newton, "run_blocks", run_blocks),
    mock.patch.object(pgd, "run_blocks", run_blocks),
    mock.patch.object(exact, "refine", refine),
  ):
    jax.clear_caches()  # trace the solvers again, with the recording loop
    jax.block_until_ready(step(initial if trained is None else trained, batch, key))
  return {
    "experiment": name,
    "inference_method": config.inference_method,
    "max_iter": config.inference_max_iter,
    "state": "initial" if trained is None else "trained",
    "solves": solves,
  }


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--experiments", default=",".join(device_steps.EXPERIMENTS))
  parser.add_argument("--methods", default="gauss_newton_fused", help="synthetic")
  parser.add_argument("--mnist-dir", default="../shared/data/mnist")
  parser.add_argument("--tiny", action="store_true", help="batch of 4")
  parser.add_argument("--json", default=None)
  parser.add_argument(
    "--iterations", action="store_true", help="also run each step, count iterations"
  )
  parser.add_argument("--states", default=None, help="folder of trained states")
  args = parser.parse_args(argv)
  overrides = {"batch_size": 4} if args.tiny else {}
  rows = []
  for name in filter(None, args.experiments.split(",")):
    methods = [None]
    if name in device_steps.SYNTHETIC:
      methods += list(filter(None, args.methods.split(",")))
    for method in methods:
      rows.append(lowered_census(name, args.mnist_dir, method, overrides))
      print(json.dumps(rows[-1]), flush=True)
  result = {"jax": jax.__version__, "platform": "cuda", "steps": rows}
  if args.iterations:
    result["iterations"] = []
    for name in filter(None, args.experiments.split(",")):
      row = solve_iterations(name, args.mnist_dir, args.states, overrides)
      result["iterations"].append(row)
      print(json.dumps(row), flush=True)
  if args.json:
    pathlib.Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
  return result


if __name__ == "__main__":
  main()
