"""How far a run's transport operators moved from their initial draw.

For each operator ``Psi_m`` of a run's latest checkpoint, against the same
operator in the run's initial state (rebuilt from its ``config.json``: the
same seed draws the same ``Psi``): the Frobenius norms at the start and end,
the cosine between the two, and ``||Psi_end - Psi_start|| / ||Psi_start||``.
A cosine near 1 with a small relative change means training left the
operator near its random draw, whatever its measured reach. Single runs
only (a population's members draw their own operators).

Usage::

    python benchmarks/operator_drift.py RUN [RUN ...]
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import argparse

import original_method as om  # first: pins BLAS threads before NumPy loads

# isort: split

import numpy as np  # noqa: E402


def operator_drift(run_dir) -> dict:
  """Per operator: start and end norms, cosine, relative change."""
  config, _, start, end = om.restore_run(run_dir)
  if config.population > 1:
    raise ValueError(
      f"{run_dir}: a population run; its members draw their own operators, "
      "so the seed's initial state is not theirs (single runs only)"
    )
  return {"step": int(end.step), **drift(start.params["psi"], end.params["psi"])}


def drift(start_psi, end_psi) -> dict:
  """Operators ``[M, d, d]`` at the start and end: per operator the norms,
  the cosine between the two and the relative change."""
  a = np.asarray(start_psi, np.float64).reshape(len(start_psi), -1)
  b = np.asarray(end_psi, np.float64).reshape(len(end_psi), -1)
  norm_a, norm_b = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
  return {
    "norm_start": norm_a,
    "norm_end": norm_b,
    "cosine": (a * b).sum(axis=1) / (norm_a * norm_b),
    "relative_change": np.linalg.norm(b - a, axis=1) / norm_a,
  }


def main(argv=None) -> list[dict]:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("runs", nargs="+", help="workdirs of runs with a checkpoint")
  args = parser.parse_args(argv)
  rows = []
  print("| run | step | operator | norm start / end | cosine | relative change |")
  print("|---|---|---|---|---|---|")
  for run in args.runs:
    row = operator_drift(run)
    rows.append(row)
    for m in range(len(row["cosine"])):
      print(
        f"| {run} | {row['step']} | {m} | {row['norm_start'][m]:.4f} / "
        f"{row['norm_end'][m]:.4f} | {row['cosine'][m]:.4f} "
        f"| {row['relative_change'][m]:.3f} |"
      )
  return rows


if __name__ == "__main__":
  main()
