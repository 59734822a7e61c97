"""How long the README's test commands take on this machine.

``python benchmarks/test_times.py --out=docs/results/test_times.json``

Runs ``python -m pytest -q`` three times, one after another: the default
tests with an empty compilation cache (as on a fresh machine), the default
tests again with the programs that run cached, then ``-m whole_run`` (also
cached from its own first programs onward); records each wall time and
pytest's closing line. ``--warm``: the two cached runs only, with the
tests' own compilation cache (filled by an earlier run). Run it alone on
the machine: the tests use every core.
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

RUNS = {
  "default_cold": [],
  "default": [],
  "whole_run": ["-m", "whole_run"],
}


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--out", required=True, type=pathlib.Path)
  parser.add_argument("--warm", action="store_true", help="cached runs only")
  parser.add_argument("--quick", action="store_true", help="one small file (CI)")
  args = parser.parse_args(argv)
  result = {
    "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores",
    "mnist": os.environ.get("VAELLS_MNIST_DIR", "tests/data/mnist (1 000 digits)"),
    "runs": {},
  }
  with tempfile.TemporaryDirectory() as cache:
    env = dict(os.environ)
    if not args.warm:
      env["JAX_COMPILATION_CACHE_DIR"] = cache
    result["cache"] = "the tests' own, filled" if args.warm else "empty at the start"
    runs = {"quick": ["tests/test_laplace.py"]} if args.quick else RUNS
    for name, extra in runs.items():
      if args.warm and name == "default_cold":
        continue
      command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra]
      start = time.perf_counter()
      done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
      seconds = time.perf_counter() - start
      last = done.stdout.strip().splitlines()[-1]
      if done.returncode:
        raise SystemExit(f"{name}: pytest failed:\n{done.stdout[-3000:]}")
      result["runs"][name] = {"command": " ".join(["python -m pytest -q", *extra])}
      result["runs"][name].update(wall_time_s=round(seconds, 1), pytest=last)
      print(f"{name}: {seconds:.0f} s  {last}", flush=True)
      args.out.write_text(json.dumps(result, indent=1) + "\n")
  return result


if __name__ == "__main__":
  main()
