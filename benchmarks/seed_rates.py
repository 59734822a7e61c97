"""How often an experiment's command learns its manifold, over seeds.

``python benchmarks/seed_rates.py --exp=concentric --seeds=100-139
--workdir=runs/seeds --out=docs/results/seeds_concentric.json``

Runs ``experiments/run.py --exp=EXP --config.seed=S --workdir=WORKDIR/sS``
for each seed (``--field=psi_seed``: ``--config.psi_seed=S`` instead, the
dictionary draw alone), one process at a time (a seed whose ``summary.json`` exists is
read, not rerun), and records each run's outcome as the experiments score it:
success when the strongest operator's orbit coverage is at least 0.9 and
decoded prior samples lie within 15 noise levels (SPEC section 6), with the
run's wall time and the report's other numbers, and the run's own verdict
(``summary.json``; with ``--reverdict``, the library's verdict computed again
on the saved run, for runs written before it changed) beside the outcome.
Extra arguments go to every run (e.g. ``--config.population=1``) and are
recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vaells_jax.evaluation.synthetic_report import success  # noqa: E402

# summary.json numbers recorded beside the outcome
REPORTED = (
  "knn_class_accuracy",
  "orbit_manifold_distance",
  "path_manifold_distance",
  "path_endpoint_error",
  "linear_path_manifold_distance",
  "psi_rejected_steps",
  "psi_attempted_steps",
  "operator_magnitudes",
)


def outcome(summary: dict, verdict: dict | None = None) -> dict:
  """A run's success and the numbers behind it, from its ``summary.json``,
  and its verdict (``verdict``, else the summary's)."""
  coverage = summary["orbit_coverage"]
  samples = summary["sample_manifold_distance"]
  verdict = verdict or summary.get("verdict") or {}
  return {
    "success": success(coverage, samples),
    "orbit_coverage": coverage,
    "sample_manifold_distance": samples,
    "wall_time_s": summary["wall_time_s"],
    **{k: summary[k] for k in REPORTED if k in summary},
    "verdict": verdict.get("verdict"),
    "verdict_signals": verdict.get("signals"),
  }


def reverdict(workdir: pathlib.Path) -> dict:
  """The library's verdict on the run saved in ``workdir``, computed again."""
  from vaells_jax.api import load
  from vaells_jax.runs.verdict import verdict

  trained = load(workdir)
  return verdict(trained, trained.config.seed)


def seed_range(text: str) -> list[int]:
  """``"100-139"`` or ``"0,3,5"`` as seeds."""
  if "-" in text:
    first, last = (int(v) for v in text.split("-"))
    return list(range(first, last + 1))
  return [int(v) for v in text.split(",")]


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--exp", required=True)
  parser.add_argument("--seeds", required=True, type=seed_range)
  parser.add_argument("--workdir", required=True, type=pathlib.Path)
  parser.add_argument("--out", required=True, type=pathlib.Path)
  parser.add_argument("--field", default="seed", help="the Config field S sets")
  parser.add_argument(
    "--reverdict", action="store_true", help="compute each run's verdict again"
  )
  args, extra = parser.parse_known_args(argv)
  command = f"python experiments/run.py --exp={args.exp} --config.{args.field}=S"
  result = {
    "command": " ".join([command, *extra]),
    "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores",
    "seeds": {},
  }
  for seed in args.seeds:
    workdir = args.workdir / f"s{seed}"
    summary = workdir / "summary.json"
    if not summary.exists():
      run = [sys.executable, str(ROOT / "experiments" / "run.py"), f"--exp={args.exp}"]
      run += [f"--config.{args.field}={seed}", f"--workdir={workdir}", *extra]
      if (workdir / "config.json").exists():  # a run that stopped: go on
        run.append("--resume")
      args.workdir.mkdir(parents=True, exist_ok=True)
      with open(args.workdir / f"s{seed}.log", "w") as log:
        subprocess.run(run, stdout=log, stderr=subprocess.STDOUT, check=True)
    said = reverdict(workdir) if args.reverdict else None
    row = result["seeds"][str(seed)] = outcome(json.loads(summary.read_text()), said)
    print(
      f"seed {seed}: {'learned' if row['success'] else 'FAILED'}  orbit coverage "
      f"{row['orbit_coverage']:.2f}  samples {row['sample_manifold_distance']:.1f}"
      f"  {row['wall_time_s']:.0f} s  verdict {row['verdict']}",
      flush=True,
    )
    args.out.write_text(json.dumps(result, indent=1) + "\n")
  rows = result["seeds"].values()
  wins = sum(r["success"] for r in rows)
  agree = sum(r["success"] == (r["verdict"] == "learned") for r in rows)
  print(
    f"{args.exp}: learned on {wins} of {len(rows)} seeds; verdict agrees on {agree}"
  )
  return result


if __name__ == "__main__":
  main()
