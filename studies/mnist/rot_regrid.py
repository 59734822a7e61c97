"""Finished rotated-MNIST runs evaluated again by today's rotation metrics.

``python benchmarks/rot_regrid.py
runs/rot_levers/{base,base_long,channels96,latent20,latent20_long}_s?
--one-thread --out=docs/results/rot_mnist_regrid.json``

For each run folder (a finished ``experiments/run.py --exp=rot_mnist`` run)
the trained model is loaded and ``image_report.rotation_report`` computes
the rotation metrics again (deterministic in the run's seed); the
numbers its ``summary.json`` held before (``old``) and the new ones
(``new``) are written to ``--out``, then the new ones replace the old in
``summary.json`` and ``summary.md``. A run already in ``--out`` is not
evaluated again (its recorded new numbers are merged into its summary), so
a rerun continues where it stopped. ``--one-thread`` evaluates on one core
with one XLA thread, as ``rot_levers.py --jobs=2`` trains and evaluates
its runs: only the same thread settings reproduce a run's summary exactly
(on two threads the digit classifier trains to a slightly different
accuracy, which moves spans by a few degrees). Written for the frame grid's rule
(:func:`~vaells_jax.evaluation.rotation.gated_path_grid`: the fastest
rotation by its speed, not its share); it applies to any later change of
the rotation metrics.
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import argparse
import json
import os

import rot_levers

SHOWN = (  # the numbers tabulated old and new
  "rotation_gated_span_degrees",
  "rotation_gated_span_quartiles",
  "reference_rotation_gated_span_degrees",
)


def _merge(folder: pathlib.Path, new: dict) -> None:
  from vaells_jax.config import CONFIG_NAME, config_from_json
  from vaells_jax.data.files import atomic_write_text
  from vaells_jax.evaluation.image_report import FIGURES
  from vaells_jax.evaluation.summary_md import write_markdown

  summary = json.loads((folder / "summary.json").read_text())
  summary.update(new)
  atomic_write_text(folder / "summary.json", json.dumps(summary, indent=2))
  write_markdown(folder, summary, config_from_json(folder / CONFIG_NAME), FIGURES)


def regrid(folders, out: pathlib.Path | None) -> dict:
  """``{folder: {"old", "new"}}`` (the :data:`SHOWN` numbers) of each run."""
  import vaells_jax
  from vaells_jax.data.files import atomic_write_text
  from vaells_jax.evaluation.image_report import rotation_report

  done = json.loads(out.read_text())["runs"] if out and out.exists() else {}
  for folder in map(pathlib.Path, folders):
    if str(folder) not in done:
      old = json.loads((folder / "summary.json").read_text())
      if "rotation_gated_span_degrees" not in old:
        raise SystemExit(f"{folder}: not a finished rotated-MNIST run")
      new = rotation_report(vaells_jax.load(folder), folder)
      done[str(folder)] = {
        "old": {k: old[k] for k in SHOWN},
        "new": {k: new[k] for k in SHOWN},
        "metrics": new,
      }
      if out:  # recorded before the summary changes: a rerun skips it
        atomic_write_text(out, json.dumps({"runs": done}, indent=1) + "\n")
    _merge(folder, done[str(folder)]["metrics"])
    row = done[str(folder)]
    print(
      f"{folder}: gated span {row['old'][SHOWN[0]]:g} -> {row['new'][SHOWN[0]]:g}, "
      f"reference {row['old'][SHOWN[2]]:g} -> {row['new'][SHOWN[2]]:g}",
      flush=True,
    )
  return done


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("folders", nargs="+")
  parser.add_argument("--out", type=pathlib.Path)
  parser.add_argument("--one-thread", action="store_true")
  args = parser.parse_args(argv)
  if args.one_thread:  # before jax starts
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    os.environ["XLA_FLAGS"] = rot_levers.one_thread_flags(os.environ)
  return regrid(args.folders, args.out)


if __name__ == "__main__":
  main()
