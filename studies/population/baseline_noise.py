"""The baselines' observation noise: a VAE on the concentric circles at
several ``baseline_zeta1`` (the weight of its reconstruction, ``1 / sigma^2``).

Runs ``python experiments/run.py --exp=concentric --model=vae
--config.baseline_zeta1=Z`` (the paper's budget) in a fresh process per
value and seed, and records each run's knn accuracy, reconstruction MSE and
sample-to-manifold distance (docs/studies/baselines.md, "Observation noise").

Usage::

    python benchmarks/baseline_noise.py --out=docs/results/baseline_noise.json
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
from whole_run import run_one  # noqa: E402


def main(argv=None) -> list[dict]:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--zeta1", default="0.01,1,100")
  parser.add_argument("--seeds", default="0,1,2")
  parser.add_argument("--out", help="also write the results to this JSON file")
  args = parser.parse_args(argv)
  rows = []
  with tempfile.TemporaryDirectory() as tmp:
    for zeta1 in (float(z) for z in args.zeta1.split(",")):
      for seed in (int(s) for s in args.seeds.split(",")):
        extra = ["--model=vae", f"--config.baseline_zeta1={zeta1}"]
        run = run_one("concentric", seed, pathlib.Path(tmp) / "run", extra)
        rows.append({"baseline_zeta1": zeta1, **run})
        print(
          f"zeta1={zeta1:g} seed={seed} knn={run['knn_class_accuracy']:.2f} "
          f"mse={run['mse']:.4f} sample_dist={run['sample_manifold_distance']:.1f}",
          flush=True,
        )
  if args.out:
    pathlib.Path(args.out).write_text(json.dumps(rows, indent=2) + "\n")
  return rows


if __name__ == "__main__":
  main()
