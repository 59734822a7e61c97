"""``data_coverage`` of every member of finished population runs, reach by reach.

``python benchmarks/data_coverage_reaches.py WORKDIR [WORKDIR ...] --out=FILE``

For each workdir of a synthetic experiment's population run (e.g. the swiss
roll's default), restores the members at the selection step and scores each
with :func:`vaells_jax.training.coverage.member_data_coverage` at each reach
of ``--reaches`` alone (the default signal averages
``coverage.DATA_COVERAGE_REACHES``). With the members' ground-truth scores
(``benchmarks/population_members.py``), ``docs_numbers.py`` renders how often
each reach keeps a member that learned (docs/studies/population-swiss-roll.md).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from population_members import restored_members  # noqa: E402

from vaells_jax.models.vaells import Model  # noqa: E402
from vaells_jax.training import coverage  # noqa: E402


def reach_scores(workdir: pathlib.Path, reaches) -> list[dict]:
  """Each member's ``data_coverage`` at each reach: ``[{reach: score}]``."""
  config, data, members = restored_members(workdir)
  model = Model.create(config, data.data_dim)
  x, labels = coverage.coverage_points(data.x_train, data.labels_train, config.seed)
  return [
    {
      f"{r:g}": coverage.member_data_coverage(
        model, member.params, x, labels, reaches=(r,)
      )
      for r in reaches
    }
    for member in members
  ]


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("workdirs", nargs="+", type=pathlib.Path)
  parser.add_argument("--reaches", default="1.5,2,3,4,6")
  parser.add_argument("--out", type=pathlib.Path, required=True)
  args = parser.parse_args(argv)
  reaches = [float(r) for r in args.reaches.split(",")]
  runs = json.loads(args.out.read_text()) if args.out.exists() else {}
  for workdir in args.workdirs:
    if workdir.name not in runs:  # resumable: a finished run is kept
      runs[workdir.name] = reach_scores(workdir, reaches)
      args.out.write_text(json.dumps(runs, separators=(",", ":")))
      print(workdir.name, flush=True)
  return runs


if __name__ == "__main__":
  main()
