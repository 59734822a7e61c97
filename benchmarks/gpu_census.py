"""Loops, conditionals and Triton kernels in each experiment's training step
as lowered for a GPU, counted on any machine (no GPU needed).

On a GPU every iteration of a ``while`` loop and every conditional reads
its predicate on the host (docs/benchmarks-gpu.md, "Where the time goes");
this counts them in each default step's StableHLO for CUDA (jax's
cross-platform lowering, before XLA's optimisations), with each solver
given in ``--methods`` for the synthetic experiments.

Usage::

    python benchmarks/gpu_census.py --mnist-dir=../shared/data/mnist \\
      --json=docs/results/gpu_census.json
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
import device_steps  # noqa: E402  (first: pins BLAS threads)

# isort: split

import jax  # noqa: E402

from vaells_jax.training import step as train  # noqa: E402

_CASE = re.compile(r"^\s*(%[\w]+)(?::\d+)? = \"stablehlo\.case\"\((%[\w]+)\)")
_CONSTANT = re.compile(r"^\s*(%[\w]+) = stablehlo\.constant ")


def count(text: str) -> dict:
  """``while`` loops, conditionals whose branch index is data (not those
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
  return {
    "while": len(re.findall(r"stablehlo\.while", text)),
    "conditional": conditionals,
    "triton": len(re.findall(r"xla\.gpu\.triton", text)),
  }


def lowered_census(name, mnist_dir, method=None, overrides=None) -> dict:
  """:func:`count` of ``name``'s default step lowered for CUDA."""
  overrides = dict(overrides or {}) | ({"inference_method": method} if method else {})
  config, _, model, state, _, batch, key = device_steps.experiment_states(
    name, mnist_dir, None, overrides
  )
  step = train.make_train_step(model).programs[-1]
  text = step.trace(state, batch, key).lower(lowering_platforms=("cuda",)).as_text()
  return {"experiment": name, "inference_method": config.inference_method} | count(text)


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--experiments", default=",".join(device_steps.EXPERIMENTS))
  parser.add_argument("--methods", default="gauss_newton_fused", help="synthetic")
  parser.add_argument("--mnist-dir", default="../shared/data/mnist")
  parser.add_argument("--tiny", action="store_true", help="batch of 4")
  parser.add_argument("--json", default=None)
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
  if args.json:
    pathlib.Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
  return result


if __name__ == "__main__":
  main()
