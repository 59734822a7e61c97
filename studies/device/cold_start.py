"""What a jitted program costs on XLA:CPU when it runs after other work.

``train_step.py`` alternates the library's step with the original method's
(seconds of scipy in a callback), so each of our steps starts after a pause.
This script times programs two ways, in one run: back to back (``warm``) and
each after ``--pause`` seconds of a Python busy loop (``after pause``):
each of ``--repeats`` rounds pauses, then calls the program 5 times; the
first call is the paused one, the fifth the warm one (medians over rounds):

* chains of ``n`` links, each an 8 x 8 ``dot`` and a ``tanh`` (2 kernels
  as XLA compiles them): what the kernels of a program cost;
* the library's training step of ``--experiments`` at step 1000 (the state
  ``train_step.py`` times), with its inference at the config's iteration limit
  and at ``--max-iter=1``: the step without most of its solver.

It also counts the kernels (XLA:CPU thunks: fusions, copies, ``dot``,
conditionals, loops) each program runs per call, from a ``jax.profiler``
trace, and for the steps splits them into the inference loop, the rest of
the inference (starts, anchors, choice of the best start) and the rest of the
step. A straight line through the chains' times after the pause (a fixed
cost plus a cost per kernel) prices each program as if every kernel it runs
ran cold; a step's loop reruns the same kernels, which then cost about what
they cost warm (docs/studies/benchmarks-training.md, "What bounds the
interleaved step").

Usage::

    python benchmarks/cold_start.py --out=docs/results/cold_start.json
    python benchmarks/cold_start.py --experiments= --chains=1,10,100,300,1000
    python benchmarks/cold_start.py --quick    # CI smoke mode
    python benchmarks/cold_start.py --chains=10,300 --unrolled-threefry

``--unrolled-threefry`` lowers ``jax.random``'s hash on the CPU as jax does
on GPUs (one fused kernel instead of a loop of five rounds; the same bits):
fewer kernels, larger ones.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import pathlib
import re
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
import original_method as om  # noqa: E402  (first: pins BLAS threads)
from loop_ops import hlo_computations  # noqa: E402

# isort: split

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from vaells_jax.training import step as train  # noqa: E402


def _busy(seconds: float) -> None:
  end = time.perf_counter() + seconds
  while time.perf_counter() < end:
    pass


def warm_and_paused(fn, repeats: int, pause: float, run: int = 5) -> tuple:
  """Median seconds of ``fn()`` right after ``pause`` s busy, and of the
  last of ``run`` calls back to back after it."""
  for _ in range(3):
    jax.block_until_ready(fn())
  paused, warm = [], []
  for _ in range(repeats):
    _busy(pause)
    times = []
    for _ in range(run):
      start = time.perf_counter()
      jax.block_until_ready(fn())
      times.append(time.perf_counter() - start)
    paused.append(times[0])
    warm.append(times[-1])
  return float(np.median(warm)), float(np.median(paused))


_PARTS = ("inference loop", "inference, outside its loop", "rest")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = ")
_CALLS = re.compile(r"(?:body|condition|to_apply|calls)=%([\w.\-]+)")
_OP_NAME = re.compile(r'op_name="([^"]*)"')


def _op_name(line: str) -> str:
  match = _OP_NAME.search(line)
  return match.group(1) if match else ""


def _part_of(hlo: str) -> dict:
  """``{instruction name: part}`` for an optimised HLO module's text: the
  ``"inference loop"`` (inside a ``while`` of ``_infer_flat``), the
  ``"inference, outside its loop"`` (its own or a calling instruction's
  ``op_name`` names ``_infer_flat`` or ``solver_starts``), else ``"rest"``."""
  where, caller = {}, {}  # instruction -> (computation, line); callee -> line
  for computation, body in hlo_computations(hlo).items():
    for line in body:
      match = _INSTRUCTION.match(line)
      if not match:
        continue
      where[match.group(1)] = (computation, line)
      called = _CALLS.findall(line)
      branches = re.search(r"branch_computations=\{([^}]*)\}", line)
      if branches:
        called += [b.strip().lstrip("%") for b in branches.group(1).split(",")]
      for name in called:
        caller[name] = line

  def part(computation: str, line: str) -> str:
    context = [line]
    while computation in caller:
      line = caller[computation]
      context.append(line)
      computation = where[_INSTRUCTION.match(line).group(1)][0]
    if any(" while(" in c and "_infer_flat" in _op_name(c) for c in context[1:]):
      return "inference loop"
    names = [_op_name(c) for c in context]
    if any("_infer_flat" in n or "solver_starts" in n for n in names):
      return "inference, outside its loop"
    return "rest"

  return {name: part(*place) for name, place in where.items()}


def executed_kernels(program, args, calls: int = 3) -> collections.Counter:
  """Kernels (thunks) XLA:CPU runs per call of the jitted ``program(*args)``,
  by part (:func:`_part_of`), from a ``jax.profiler`` trace of ``calls``
  calls of its compiled executable (whose HLO names the trace's events)."""
  compiled = program.lower(*args).compile()
  parts = _part_of(compiled.as_text())
  jax.block_until_ready(compiled(*args))
  counts = collections.Counter()
  with tempfile.TemporaryDirectory() as folder:
    with jax.profiler.trace(folder):
      for _ in range(calls):
        jax.block_until_ready(compiled(*args))
    (trace,) = pathlib.Path(folder).glob("plugins/profile/*/*.trace.json.gz")
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
  for event in events:
    if event.get("ph") == "X" and event["name"] in parts:
      counts[parts[event["name"]]] += 1
  return collections.Counter({k: v / calls for k, v in counts.items()})


def chain(n: int):
  """A jitted chain of ``n`` dot-and-tanh links (``2 n`` kernels), and its
  argument."""
  w = 0.5 * jnp.eye(8)

  def f(x):
    for _ in range(n):
      x = jnp.tanh(x @ w)
    return x

  return jax.jit(f), jnp.ones((8, 8))


def step_program(name: str, max_iter: int | None):
  """The jitted training step (its post-warm-up program) and its arguments
  at step 1000."""
  config, data, model = om.experiment(
    name, **({"inference_max_iter": max_iter} if max_iter else {})
  )
  state = om.trained_state(config, data, model, 1000)
  batch, key = om.step_batch(config, data, 1000)
  return train.make_train_step(model).programs[-1], (state, batch, key)


def main(argv=None) -> list[dict]:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--chains", default="1,10,100,300")
  parser.add_argument("--experiments", default="concentric")
  parser.add_argument("--repeats", type=int, default=20)
  parser.add_argument("--pause", type=float, default=0.2)
  parser.add_argument(
    "--quick", action="store_true", help="chains of 1 and 10 links, no step (CI)"
  )
  parser.add_argument("--unrolled-threefry", action="store_true")
  parser.add_argument("--out", help="also write the results to this JSON file")
  args = parser.parse_args(argv)
  if args.unrolled_threefry:  # jax's own rule for other platforms (private API)
    from jax._src.interpreters import mlir
    from jax._src.random import threefry2x32 as threefry

    mlir.register_lowering(
      threefry.threefry2x32_p, threefry._threefry2x32_lowering_rule, platform="cpu"
    )
  if args.quick:
    args.chains, args.experiments, args.repeats, args.pause = "1,10", "", 3, 0.02
  print(
    f"device={jax.devices()[0]} jax={jax.__version__} pause={args.pause} s "
    f"repeats={args.repeats} (medians) unrolled_threefry={args.unrolled_threefry}"
  )
  rows = []
  for n in [int(c) for c in args.chains.split(",") if c]:
    fn, x = chain(n)
    times = warm_and_paused(lambda fn=fn, x=x: fn(x), args.repeats, args.pause)
    rows.append((f"chain of {n} links", executed_kernels(fn, (x,)), *times))
  for name in [e for e in args.experiments.split(",") if e]:
    for max_iter in (None, 1):
      label = f"{name} step (step 1000{', --max-iter=1' if max_iter else ''})"
      fn, step_args = step_program(name, max_iter)
      times = warm_and_paused(
        lambda fn=fn, a=step_args: fn(*a), args.repeats, args.pause
      )
      rows.append((label, executed_kernels(fn, step_args), *times))
  # After a pause: a fixed cost and a cost per kernel, fitted to the chains.
  chains = [
    (sum(k.values()), paused) for label, k, _, paused in rows if "chain" in label
  ]
  per_kernel, fixed = (np.nan, np.nan)
  if len(chains) > 1:
    per_kernel, fixed = np.polyfit(*np.transpose(chains), 1)
  print(f"after a pause: {1e3 * fixed:.3f} ms + {1e6 * per_kernel:.2f} us per kernel")
  print(
    "| program | kernels: inference loop / rest of inference / rest of step "
    "/ total | warm ms | after pause ms | predicted after pause ms |"
  )
  print("|---|---|---|---|---|")
  results = []
  for label, kernels, warm, paused in rows:
    total = sum(kernels.values())
    split = " / ".join(f"{kernels[p]:.0f}" for p in _PARTS)
    print(
      f"| {label} | {split} / {total:.0f} | {1e3 * warm:.3f} | {1e3 * paused:.3f} "
      f"| {1e3 * (fixed + per_kernel * total):.3f} |"
    )
    results.append(
      {
        "program": label,
        "kernels": dict(kernels),
        "warm_s": warm,
        "after_pause_s": paused,
      }
    )
  if args.out:
    record = {
      "device": str(jax.devices()[0]),
      "jax": jax.__version__,
      "pause_s": args.pause,
      "repeats": args.repeats,
      "unrolled_threefry": args.unrolled_threefry,
      "after_pause_fixed_s": fixed,
      "after_pause_per_kernel_s": per_kernel,
      "programs": results,
    }
    pathlib.Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
  return results


if __name__ == "__main__":
  main()
