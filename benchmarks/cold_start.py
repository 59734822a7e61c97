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

Usage::

    python benchmarks/cold_start.py
    python benchmarks/cold_start.py --experiments= --chains=1,10,100,300,1000
    python benchmarks/cold_start.py --quick    # CI smoke mode
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import original_method as om  # noqa: E402  (first: pins BLAS threads)

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
  config, data, model = om.experiment(
    name, **({"inference_max_iter": max_iter} if max_iter else {})
  )
  state = om.trained_state(config, data, model, 1000)
  batch, key = om.step_batch(config, data, 1000)
  step = train.make_train_step(model)
  return lambda: step(state, batch, key)


def main(argv=None) -> list[dict]:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--chains", default="1,10,100,300")
  parser.add_argument("--experiments", default="concentric")
  parser.add_argument("--repeats", type=int, default=20)
  parser.add_argument("--pause", type=float, default=0.2)
  parser.add_argument(
    "--quick", action="store_true", help="chains of 1 and 10 links, no step (CI)"
  )
  args = parser.parse_args(argv)
  if args.quick:
    args.chains, args.experiments, args.repeats, args.pause = "1,10", "", 3, 0.02
  print(
    f"device={jax.devices()[0]} jax={jax.__version__} pause={args.pause} s "
    f"repeats={args.repeats} (medians)"
  )
  rows = []
  for n in [int(c) for c in args.chains.split(",") if c]:
    fn, x = chain(n)
    times = warm_and_paused(lambda fn=fn, x=x: fn(x), args.repeats, args.pause)
    rows.append((f"chain of {n} links ({2 * n} kernels)", *times))
  for name in [e for e in args.experiments.split(",") if e]:
    for max_iter in (None, 1):
      label = f"{name} step (step 1000{', --max-iter=1' if max_iter else ''})"
      fn = step_program(name, max_iter)
      rows.append((label, *warm_and_paused(fn, args.repeats, args.pause)))
  print("| program | warm ms | after pause ms | ratio |")
  print("|---|---|---|---|")
  for label, warm, paused in rows:
    print(f"| {label} | {1e3 * warm:.3f} | {1e3 * paused:.3f} | {paused / warm:.1f}x |")
  return [{"program": r[0], "warm_s": r[1], "after_pause_s": r[2]} for r in rows]


if __name__ == "__main__":
  main()
