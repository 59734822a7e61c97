"""Operations per iteration of a training step's inference loop.

Compiles an experiment's training step (the state at step 0, past warm-up for
the MNIST ones) and counts, in the optimised HLO, the operations XLA:CPU runs
one by one in the body of the innermost ``while`` loop of the inference
solve (``_infer_flat``): fusions, copies of loop-carried buffers and
conditionals, with the operations inside each conditional's branch. At a
training step's few hundred pairs each of them costs about the same fixed
overhead, so their number, not the arithmetic, sets the loop's time
(docs/benchmarks.md, "The per-pair-step solver").

Usage::

    python benchmarks/loop_ops.py --experiments=concentric,swiss_roll
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import original_method as om  # noqa: E402

# isort: split

from vaells_jax.training import step as train  # noqa: E402

_FREE = {"parameter", "get-tuple-element", "tuple", "constant", "bitcast"}
_INSTRUCTION = re.compile(r"\s+(?:ROOT )?%[\w.\-]+ = (?:\([^=]*\)|\S+) ([\w\-]+)\(")


def _computations(hlo: str) -> dict:
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


def loop_ops(name: str, mnist_dir=om.DEFAULT_MNIST) -> dict:
  config, data, model = om.experiment(name, "paper", mnist_dir)
  state = om.seed_state(config, data, config.warmup_steps)
  batch, key = om.step_batch(config, data, config.warmup_steps)
  program = train.make_train_step(model).programs[-1]
  hlo = program.lower(state, batch, key).compile().as_text()
  loops = [
    line
    for line in hlo.splitlines()
    if " while(" in line and "_infer_flat)/while/body/while" in line
  ]
  if not loops:
    raise ValueError(f"{name}: no inference loop in the compiled step")
  body = re.search(r"body=%?([\w.\-]+)", loops[0]).group(1)
  counts = collections.Counter()
  count_ops(_computations(hlo), body, counts)
  return {"experiment": name, "total": sum(counts.values()), **counts}


def main(argv=None) -> list[dict]:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--experiments", default="concentric,swiss_roll")
  parser.add_argument("--mnist-dir", default=str(om.DEFAULT_MNIST))
  args = parser.parse_args(argv)
  rows = [loop_ops(n, args.mnist_dir) for n in args.experiments.split(",")]
  print("| experiment | operations per iteration | fusions | copies | conditionals |")
  print("|---|---|---|---|---|")
  for r in rows:
    print(
      f"| {r['experiment']} | {r['total']} | {r.get('fusion', 0)} "
      f"| {r.get('copy', 0)} | {r.get('conditional', 0)} |"
    )
  return rows


if __name__ == "__main__":
  main()
