"""Every member of finished population runs, scored on the ground truth.

``python benchmarks/population_members.py WORKDIR [WORKDIR ...] --out=FILE``

For each workdir of a synthetic experiment's run with ``config.population >
1`` (e.g. ``python experiments/run.py --exp=swiss_roll --config.seed=131
--workdir=WORKDIR``), restores the population at its selection step and
scores each member as the run's own evaluation scores the kept one
(``learned_structure``: orbit coverage of the strongest operator, decoded
prior samples' distance in noise levels, success), beside the selection
signals the run chose by. Tells a failed run whose population held members
that learned (the signal chose wrong) from one whose members all failed.
Signals the run did not record (``data_coverage`` and ``sample_distance``
in runs made before they existed) are computed from the members'
checkpoints as the selection computes them (``selection.data_signals``).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import jax  # noqa: E402

from vaells_jax.api import DATA_NAME, TrainedVAELLS  # noqa: E402
from vaells_jax.config import CONFIG_NAME, config_from_json  # noqa: E402
from vaells_jax.data.dataset import load_dataset  # noqa: E402
from vaells_jax.evaluation.synthetic_report import (  # noqa: E402
  eval_keys,
  learned_structure,
)
from vaells_jax.training import population, population_run, selection  # noqa: E402
from vaells_jax.training.checkpoint import restore_checkpoint  # noqa: E402


def restored_members(workdir: pathlib.Path):
  """``(config, data, members)`` of a finished population run (an
  experiment's or ``fit``'s): the data it saved and trained on, and each
  member's state at the selection step."""
  config = config_from_json(workdir / CONFIG_NAME)
  data = load_dataset(workdir / DATA_NAME)
  start = population.init_population(jax.random.PRNGKey(config.seed), config, data)
  state = restore_checkpoint(
    workdir / population_run.POPULATION_DIR,
    start,
    step=selection.selection_step(config),
  )
  return config, data, [population.member(state, k) for k in range(config.population)]


def score_members(workdir: pathlib.Path) -> dict:
  """The selection and every member's ground-truth scores of one run."""
  config, data, states = restored_members(workdir)
  pop_dir = workdir / population_run.POPULATION_DIR
  kept = json.loads((pop_dir / population_run.SELECTION_NAME).read_text())
  recorded = kept["signals"]
  if "data_coverage" not in recorded:  # a run made before these signals
    recorded = {**recorded, **selection.data_signals(states, config, data)}
  members = []
  for k, state in enumerate(states):
    trained = TrainedVAELLS(config, state.params, data)
    scores = learned_structure(trained, eval_keys(config.seed)[0])
    signals = {name: values[k] for name, values in recorded.items()}
    members.append({**scores, "signals": signals})
  return {
    "seed": config.seed,
    "signal": kept["signal"],
    "selected_member": kept["selected_member"],
    "members": members,
  }


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("workdirs", nargs="+", type=pathlib.Path)
  parser.add_argument("--out", type=pathlib.Path, help="write the results here")
  args = parser.parse_args(argv)
  runs = {}
  for workdir in args.workdirs:
    run = runs[workdir.name] = score_members(workdir)
    signal = run["signal"]
    learned = [k for k, m in enumerate(run["members"]) if m["success"]]
    print(
      f"{workdir.name} (seed {run['seed']}): kept member {run['selected_member']}; "
      f"members that learned: {learned or 'none'}"
    )
    ranked = sorted(enumerate(run["members"]), key=lambda km: -km[1]["signals"][signal])
    for k, m in ranked:
      print(
        f"  member {k:2d}  {signal} {m['signals'][signal]:.3f}  orbit coverage "
        f"{m['orbit_coverage']:.2f}  samples {m['sample_manifold_distance']:5.1f}"
        f"  {'learned' if m['success'] else ''}"
      )
  if args.out:
    args.out.write_text(json.dumps(runs, indent=1))
  return runs


if __name__ == "__main__":
  main()
