"""Operations per iteration of a training step's inference loop.

Compiles an experiment's training step (the state at step 0, past warm-up for
the MNIST ones) and counts, in the optimised HLO, the operations XLA:CPU runs
one by one in the body of the innermost ``while`` loop of the inference
solve (``_infer_flat``): fusions, copies of loop-carried buffers and
conditionals, with the operations inside each conditional's branch. At a
training step's few hundred pairs each of them costs about the same fixed
overhead, so their number, not the arithmetic, sets the loop's time
(docs/studies/benchmarks-solvers.md, "The per-pair-step solver"). With
``--iterations-at`` it also reports how many iterations the step's pairs run (the loop
runs as long as its slowest pair), on the state trained to each of those steps.

Usage::

    python benchmarks/loop_ops.py --experiments=concentric,swiss_roll
    python benchmarks/loop_ops.py --experiments=concentric --iterations-at=1000,3000
    python benchmarks/loop_ops.py --inference-method=pgd --max-iter=300
    python benchmarks/loop_ops.py --iterations-at=1000,3000 --out=FILE.json
"""

from __future__ import annotations

import argparse
import collections
import json
import pathlib
import re
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
import original_method as om  # noqa: E402

# isort: split

from vaells_jax.training import step as train  # noqa: E402

_FREE = {"parameter", "get-tuple-element", "tuple", "constant", "bitcast"}
_INSTRUCTION = re.compile(r"\s+(?:ROOT )?%[\w.\-]+ = (?:\([^=]*\)|\S+) ([\w\-]+)\(")


def hlo_computations(hlo: str) -> dict:
  """``{name: [instruction lines]}`` of an HLO module's text."""
  computations, current = {}, None
  for line in hlo.splitlines():
    header = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{$", line)
    if header:
      current = computations.setdefault(header.group(1), [])
    elif current is not None and line.startswith("  "):
      current.append(line)
  return computations


def count_ops(computations: dict, name: str, counts: collections.Counter) -> None:
  """Adds the operations of computation ``name`` (and of its conditionals'
  largest branch) to ``counts``."""
  for line in computations[name]:
    match = _INSTRUCTION.match(line)
    if not match or match.group(1) in _FREE:
      continue
    counts[match.group(1)] += 1
    branches = re.search(r"branch_computations=\{([^}]*)\}", line)
    if branches:
      sizes = []
      for branch in branches.group(1).split(","):
        inner = collections.Counter()
        count_ops(computations, branch.strip().lstrip("%"), inner)
        sizes.append(inner)
      counts.update(max(sizes, key=lambda c: sum(c.values())))


def loop_ops(name: str, mnist_dir=om.DEFAULT_MNIST, **overrides) -> dict:
  config, data, model = om.experiment(name, "paper", mnist_dir, **overrides)
  state = om.seed_state(config, data, config.warmup_steps)
  batch, key = om.step_batch(config, data, config.warmup_steps)
  program = train.make_train_step(model).programs[-1]
  hlo = program.lower(state, batch, key).compile().as_text()
  loops = [
    line
    for line in hlo.splitlines()
    # (a solver's device choice, lax.platform_dependent, adds a branch name)
    if " while(" in line
    and re.search(r"_infer_flat\)/(?:cond/branch_\d+_fun/)?while/body/while", line)
  ]
  if not loops:
    raise ValueError(f"{name}: no inference loop in the compiled step")
  body = re.search(r"body=%?([\w.\-]+)", loops[0]).group(1)
  counts = collections.Counter()
  count_ops(hlo_computations(hlo), body, counts)
  return {"experiment": name, "total": sum(counts.values()), **counts}


def loop_iterations(
  name: str, at_step: int, mnist_dir=om.DEFAULT_MNIST, **overrides
) -> list[dict]:
  """Iterations the inference of the step at ``at_step`` runs, per pair:
  one row for the posterior and one for the prior pairs."""
  config, data, model = om.experiment(name, "paper", mnist_dir, **overrides)
  state = om.trained_state(config, data, model, at_step)
  result = om.capture_step_pairs(model, state, *om.step_batch(config, data, at_step))
  rows = []
  for part in ("posterior", "prior"):
    solved = getattr(result["ours"], part)
    iters = np.asarray(solved.num_iter).ravel()
    median, p90 = np.percentile(iters, [50, 90])
    rows.append(
      {
        "experiment": name,
        "at_step": at_step,
        "pairs": f"{part} ({iters.size})",
        "median": float(median),
        "p90": float(p90),
        "at_max": float(np.mean(iters >= config.inference_max_iter)),
        "max_iter": config.inference_max_iter,
        "converged": float(np.mean(solved.converged)),
      }
    )
  return rows


def main(argv=None) -> list[dict]:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--experiments", default="concentric,swiss_roll")
  parser.add_argument("--mnist-dir", default=str(om.DEFAULT_MNIST))
  parser.add_argument(
    "--iterations-at",
    default="",
    help="comma-separated training steps: also report the iterations per pair there",
  )
  om.add_solver_flags(parser)
  parser.add_argument("--out", default=None, help="also write the rows here")
  args = parser.parse_args(argv)
  overrides = om.solver_overrides(args)
  rows = [loop_ops(n, args.mnist_dir, **overrides) for n in args.experiments.split(",")]
  print("| experiment | operations per iteration | fusions | copies | conditionals |")
  print("|---|---|---|---|---|")
  for r in rows:
    print(
      f"| {r['experiment']} | {r['total']} | {r.get('fusion', 0)} "
      f"| {r.get('copy', 0)} | {r.get('conditional', 0)} |"
    )
  table = []
  if args.iterations_at:
    table = iterations_table(args, overrides)
  if args.out:
    with open(args.out, "w") as f:
      json.dump({"overrides": overrides, "ops": rows, "iterations": table}, f, indent=2)
  return rows + table


def iterations_table(args, overrides) -> list[dict]:
  steps = [int(s) for s in args.iterations_at.split(",")]
  table = [
    row
    for name in args.experiments.split(",")
    for at in steps
    for row in loop_iterations(name, at, args.mnist_dir, **overrides)
  ]
  print()
  print(
    "| experiment | step | pairs | iterations: median / 90% | at max_iter | converged |"
  )
  print("|---|---|---|---|---|---|")
  for r in table:
    print(
      f"| {r['experiment']} | {r['at_step']} | {r['pairs']} | {r['median']:.0f} / "
      f"{r['p90']:.0f} | {r['at_max']:.0%} of {r['max_iter']} | {r['converged']:.0%} |"
    )
  return table


if __name__ == "__main__":
  main()
