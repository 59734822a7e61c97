"""Natural MNIST over seeds: how far its numbers move from seed to seed.

``python benchmarks/nat_seeds.py --seeds=0-9 --jobs=2
--out=docs/results/nat_mnist_seeds.json``

Each run is the README's natural-MNIST command at the CPU budget on the
paper's split of ``--data-dir`` (default ``../shared/data/mnist-full``: 50 000
training digits, the 10 000 test digits for MSE and log-likelihood) with
``--config.seed=S``; further arguments (e.g. ``--config.num_ops=8``) go to
every run and are recorded. A run lives in ``ROOT/nat_sS``: a finished one
(its ``summary.json``) is read as it is and an interrupted one resumes, so a
rerun continues where it stopped; ``--collect-only`` reads the finished
runs without starting any. ``--jobs=2`` runs two at a time, each on one
core with one XLA thread, as ``rot_levers.py`` does.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from rot_levers import cpu_budget_command, run_all, run_arguments  # noqa: E402

# summary.json numbers kept per seed
KEYS = (
  "mse",
  "log_likelihood",
  "elbo",
  "log_likelihood_points",
  "log_likelihood_samples",
  "knn_class_accuracy",
  "class_consistency",
  "classifier_test_accuracy",
  "operator_reach_rms",
  "operator_reach_at_end",
  "operator_reach_start_class_kept",
  "psi_rejected_steps",
  "psi_attempted_steps",
  "train_time_s",
  "eval_time_s",
)


def command(extra: list):
  """``run_all``'s command line of one seed, with ``extra`` arguments."""

  def of(lever: str, seed: int, workdir: pathlib.Path, data_dir: str) -> list:
    return cpu_budget_command("nat_mnist", seed, workdir, data_dir, extra)

  return of


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  run_arguments(parser, "0-9", "runs/nat_seeds")
  args, extra = parser.parse_known_args(argv)
  unknown = [a for a in extra if not a.startswith("--config.")]
  if unknown:
    parser.error(f"only --config.FIELD=VALUE arguments go to the runs, not {unknown}")
  runs = [("nat", seed) for seed in args.seeds]
  args.root.mkdir(parents=True, exist_ok=True)
  if not args.collect_only:
    run_all(runs, args.root, args.data_dir, args.jobs, command(extra))
  seeds = {}
  for seed in args.seeds:
    path = args.root / f"nat_s{seed}" / "summary.json"
    if path.exists():
      summary = json.loads(path.read_text())
      seeds[str(seed)] = {k: summary.get(k) for k in KEYS}
  given = sys.argv[1:] if argv is None else argv
  flags = [a for a in given if a != "--collect-only"]
  result = {
    "command": " ".join(["python benchmarks/nat_seeds.py", *flags]),
    "run": " ".join(
      [
        "python experiments/run.py --exp=nat_mnist --budget=cpu",
        f"--data-dir={os.path.relpath(args.data_dir, ROOT)}",
        "--config.seed=S",
      ]
      + extra
    ),
    "machine": f"{os.cpu_count()}-core CPU, {platform.machine()}",
    "jobs": args.jobs,
    "seeds": seeds,
  }
  for seed, row in seeds.items():
    print(
      f"seed {seed}: MSE {row['mse']:.4f}  LL {row['log_likelihood']:.1f}  "
      f"class consistency {row['class_consistency']:.3f}  "
      f"{row['train_time_s']:.0f} s training",
      flush=True,
    )
  if args.out:
    from vaells_jax.data.files import atomic_write_text

    atomic_write_text(args.out, json.dumps(result, indent=1) + "\n")
  return result


if __name__ == "__main__":
  main()
