"""``fit()`` on a user's arrays against the concentric command, side by side.

``python benchmarks/fit_speed.py --repeats=2``

Alternates two fresh processes: ``python experiments/run.py --exp=concentric``
and a script that calls ``vaells_jax.fit(x, labels)`` with its defaults on
the README's two circles (radii 1 and 2, 100 points each, 10-D): the same
configuration and number of steps (4000; fit's default is the concentric
experiment's), the compilation cache as each leaves it (a first round fills
it; ``--skip-first`` drops that round from the ratio). Prints each
process's wall time, fit's tries and verdict, and the ratio of fit's time
per try to the command's (a try trains the command's steps).

``--started`` adds two fit processes a round that run a jax computation
before calling ``fit`` (a library caller's case: the backend has started
with one CPU device): the population's members in groups from one thread
per core (the default there), and all in one thread (``member_groups``
patched to 1). ``--out=FILE`` writes the rounds as JSON (docs/fit.md's
table: ``docs/results/fit_speed.json``, rendered by docs_numbers.py).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]

FIT_SCRIPT = """
import pathlib
import sys
import numpy as np
import vaells_jax
if sys.argv[2] != "fresh":
  import jax
  jax.numpy.zeros(1).block_until_ready()  # the backend starts: one CPU device
if sys.argv[2] == "one_thread":
  from vaells_jax.training import placement
  placement.member_groups = lambda members: 1
rng = np.random.default_rng(0)
theta = rng.uniform(0, 2 * np.pi, 200)
labels = np.repeat([0, 1], 100)
radius = np.where(labels == 0, 1.0, 2.0)
circles = np.stack([radius * np.cos(theta), radius * np.sin(theta)], axis=1)
x = circles @ rng.normal(size=(2, 10)) + 0.01 * rng.normal(size=(200, 10))
workdir = pathlib.Path(sys.argv[1])
config = None
if sys.argv[3] == "quick":
  from vaells_jax.config import Config

  config = Config(num_steps=6, hidden=(32,), eval_ll_points=4, log_every=3)
model = vaells_jax.fit(
  x, labels, config=config, workdir=workdir, overwrite=True, log=print
)
tries = len(list(workdir.glob("try[0-9]*"))) + 1
print("TRIES", tries, model.verdict["verdict"])
"""

QUICK = ("--config.num_steps=6", "--config.log_every=3", "--config.hidden=(32,)")


def _timed(command) -> tuple[float, str]:
  start = time.perf_counter()
  result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
  if result.returncode:
    raise SystemExit(f"{command[:3]} failed:\n{result.stderr[-2000:]}")
  return time.perf_counter() - start, result.stdout


def main(argv=None) -> list[dict]:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--repeats", type=int, default=2)
  parser.add_argument("--skip-first", action="store_true", help="a warm-up round")
  parser.add_argument("--started", action="store_true", help="jax started before fit")
  parser.add_argument("--quick", action="store_true", help="6 steps (CI)")
  parser.add_argument(
    "--out", default=None, help="write the rounds as JSON (docs/results/fit_speed.json)"
  )
  args = parser.parse_args(argv)
  modes = ("fresh", "started", "one_thread") if args.started else ("fresh",)
  quick = "quick" if args.quick else "full"
  rounds = []
  with tempfile.TemporaryDirectory() as tmp:
    for i in range(args.repeats + args.skip_first):
      command, _ = _timed(
        [
          sys.executable,
          "experiments/run.py",
          "--exp=concentric",
          f"--workdir={tmp}/concentric",
          "--overwrite",
          *QUICK * args.quick,
        ]
      )
      warm_up = " (warm-up)" if args.skip_first and i == 0 else ""
      print(f"round {i}: concentric command {command:.1f} s{warm_up}", flush=True)
      for mode in modes:
        fit, said = _timed(
          [sys.executable, "-c", FIT_SCRIPT, f"{tmp}/fit", mode, quick]
        )
        tries, verdict = said.split("TRIES ")[-1].split(maxsplit=1)
        row = {
          "mode": mode,
          "concentric_s": command,
          "fit_s": fit,
          "tries": int(tries),
          "verdict": verdict.strip(),
          "ratio": fit / command,
          "ratio_per_try": fit / int(tries) / command,
        }
        print(
          f"  fit ({mode}) {fit:.1f} s in {tries} tries ({row['verdict']}), "
          f"ratio {row['ratio']:.2f}, a try {row['ratio_per_try']:.2f}",
          flush=True,
        )
        if not (args.skip_first and i == 0):
          rounds.append({"round": i, **row})
  if args.out:
    pathlib.Path(args.out).write_text(
      json.dumps({"machine": platform.node(), "rounds": rounds}, indent=1) + "\n"
    )
  return rounds


if __name__ == "__main__":
  main()
