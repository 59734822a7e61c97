"""Wall time of whole experiment runs, as a user starts them.

Runs ``python experiments/run.py --exp=NAME`` in a fresh process for each
experiment (the paper's budget unless overridden) and reports the wall time of
the whole command (interpreter start, JAX import, data, compilation, training,
evaluation and figures) next to the parts ``summary.json`` records:
compilation, training and evaluation. The original code's time for the same
run is estimated as ``steps x`` its measured step time (``train_step.py``
times both steps in one run; pass those step times with ``--cg-step-ms``).

``--against=REV`` also runs git revision ``REV`` (extracted with ``git
archive``), alternating the two trees run by run, so that a shared machine's
load falls on both alike.

Usage::

    python benchmarks/whole_run.py                       # concentric, swiss_roll
    python benchmarks/whole_run.py --quick               # 50 steps each (CI)
    python benchmarks/whole_run.py --experiments=concentric --seeds=0,1,2
    python benchmarks/whole_run.py --against=9a736b4 --repeats=3
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from eval_time import archive_revision  # noqa: E402


def run_one(
  exp: str, seed: int, workdir: pathlib.Path, extra: list[str], root=ROOT
) -> dict:
  """Runs one experiment with the code of the tree ``root``; returns its
  timings and headline metrics."""
  command = [
    sys.executable,
    str(root / "experiments" / "run.py"),
    f"--exp={exp}",
    f"--workdir={workdir}",
    f"--config.seed={seed}",
    "--overwrite",
    *extra,
  ]
  start = time.perf_counter()
  done = subprocess.run(command, capture_output=True, text=True, check=False)
  wall = time.perf_counter() - start
  if done.returncode != 0:
    raise RuntimeError(
      f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}"
    )
  summary = json.loads((workdir / "summary.json").read_text())
  train = summary["train_time_s"]
  compile_s = summary["compile_time_s"]
  return {
    "experiment": exp,
    "seed": seed,
    "steps": summary["steps"],
    "command_wall_s": wall,
    "compile_s": compile_s,
    "training_s": train,  # train_time_s excludes the compile
    "evaluation_s": summary["eval_time_s"],
    "knn_class_accuracy": summary.get("knn_class_accuracy"),
    "mse": summary.get("mse"),
    "sample_manifold_distance": summary.get("sample_manifold_distance"),
    "path_manifold_distance": summary.get("path_manifold_distance"),
    "linear_path_manifold_distance": summary.get("linear_path_manifold_distance"),
  }


def main(argv=None) -> list[dict]:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--experiments", default="concentric,swiss_roll")
  parser.add_argument("--seeds", default="0")
  parser.add_argument(
    "--quick", action="store_true", help="50 steps per run (CI smoke mode)"
  )
  parser.add_argument(
    "--cg-step-ms",
    default=None,
    help="EXP=MS,... step times of the original method from "
    "train_step.py, for the estimated original run time",
  )
  parser.add_argument("--json", default=None, help="also write results here")
  parser.add_argument("--against", help="git revision to alternate with")
  parser.add_argument("--repeats", type=int, default=1, help="runs of each seed")
  args = parser.parse_args(argv)
  extra = ["--config.num_steps=50", "--config.warmup_steps=10"] if args.quick else []
  cg_ms = (
    dict(item.split("=") for item in args.cg_step_ms.split(","))
    if (args.cg_step_ms)
    else {}
  )
  rows = []
  with tempfile.TemporaryDirectory() as tmp:
    trees = {"current": ROOT}
    if args.against:
      folder = pathlib.Path(tmp) / "against"
      folder.mkdir()
      trees = {args.against: archive_revision(args.against, folder), **trees}
    for exp in args.experiments.split(","):
      for seed in (int(s) for s in args.seeds.split(",")):
        for _ in range(args.repeats):
          for name, tree in trees.items():
            workdir = pathlib.Path(tmp) / f"{exp}_{seed}"
            rows.append({"tree": name, **run_one(exp, seed, workdir, extra, tree)})
            print(json.dumps(rows[-1]), flush=True)
  print()
  print(
    "| tree | experiment | seed | steps | command wall s | compile s | training s "
    "| evaluation s | knn acc. | original code, estimated |"
  )
  print("|---|---|---|---|---|---|---|---|---|---|")
  for r in rows:
    estimate = (
      f"{r['steps'] * float(cg_ms[r['experiment']]) / 3.6e6:.1f} h"
      if r["experiment"] in cg_ms
      else "–"
    )
    print(
      f"| {r['tree']} | {r['experiment']} | {r['seed']} | {r['steps']} | "
      f"{r['command_wall_s']:.0f} | {r['compile_s']:.0f} | "
      f"{r['training_s']:.0f} | {r['evaluation_s']:.0f} | "
      f"{r['knn_class_accuracy']:.2f} | {estimate} |"
    )
  if args.json:
    pathlib.Path(args.json).write_text(json.dumps(rows, indent=2))
  return rows


if __name__ == "__main__":
  main()
