"""The README's first command, timed: where its time goes and its silences.

``python benchmarks/first_command.py --repeats=2 --out=docs/results/first_command.json``

Runs ``python -u experiments/run.py --exp=concentric`` in fresh processes,
a first time on an empty compilation cache (a new ``JAX_COMPILATION_CACHE_DIR``,
as on a fresh machine) and then ``--repeats`` times with the programs that
run cached on disk. Each run's output lines are time-stamped as they arrive
(:mod:`silences`); reported per run: the whole command's wall time, the
compile, training and evaluation times it writes in ``summary.json``, the
longest silence between two lines, and the run's ``orbit_coverage``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]

QUICK = ("--config.num_steps=6", "--config.log_every=3", "--config.hidden=(32,)")


def timed_run(workdir: pathlib.Path, cache: pathlib.Path, extra=()) -> dict:
  """One command in a fresh process: wall time, summary times, longest silence."""
  env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": str(cache)}
  env.pop("VAELLS_NO_CACHE", None)
  command = [
    sys.executable,
    "-u",
    str(ROOT / "experiments" / "run.py"),
    "--exp=concentric",
    f"--workdir={workdir}",
    "--overwrite",
    *extra,
  ]
  start = last = time.perf_counter()
  longest, silent_before = 0.0, ""
  with subprocess.Popen(
    command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
  ) as process:
    for line in process.stdout:
      now = time.perf_counter()
      if now - last > longest:
        longest, silent_before = now - last, line.strip()[:60]
      last = now
  wall = time.perf_counter() - start
  if process.returncode:
    raise SystemExit(f"{' '.join(command)} exited {process.returncode}")
  summary = json.loads((workdir / "summary.json").read_text())
  return {
    "wall_s": wall,
    "compile_s": summary["compile_time_s"],
    "train_s": summary["train_time_s"],
    "eval_s": summary["eval_time_s"],
    "longest_silence_s": max(longest, time.perf_counter() - last),
    "silent_before": silent_before,
    "orbit_coverage": summary["orbit_coverage"],
  }


def main(argv=None) -> list[dict]:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--repeats", type=int, default=2, help="runs on a filled cache")
  parser.add_argument("--out", default=None, help="write the runs as JSON")
  parser.add_argument("--quick", action="store_true", help="6 steps (CI)")
  args = parser.parse_args(argv)
  runs = []
  with tempfile.TemporaryDirectory() as tmp:
    cache = pathlib.Path(tmp) / "cache"
    for i in range(1 + args.repeats):
      run = {"cache": "empty" if i == 0 else "filled"}
      run.update(timed_run(pathlib.Path(tmp) / "run", cache, QUICK * args.quick))
      runs.append(run)
      print(
        f"{run['cache']} cache: {run['wall_s']:.1f} s (compile "
        f"{run['compile_s']:.1f} s, training {run['train_s']:.1f} s, "
        f"evaluation {run['eval_s']:.1f} s), "
        f"longest silence {run['longest_silence_s']:.1f} s before "
        f"{run['silent_before']!r}; orbit coverage {run['orbit_coverage']:.2f}",
        flush=True,
      )
  if args.out:
    pathlib.Path(args.out).write_text(
      json.dumps({"machine": platform.node(), "runs": runs}, indent=1) + "\n"
    )
  return runs


if __name__ == "__main__":
  main()
