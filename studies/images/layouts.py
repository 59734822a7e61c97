"""Whether the warm start lays each class of the image battery out as what it
is: a closed loop for the periodic families, an open curve for the shifted
digits (``vaells_jax.training.warm_start.layout`` on fit's training split).

``python studies/images/layouts.py --seeds=100-105
--out=docs/results/image_layouts.json``
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from image_battery import FAMILIES, family_data  # noqa: E402
from seed_rates import seed_range  # noqa: E402

from vaells_jax.runs.fit import user_dataset  # noqa: E402
from vaells_jax.training.warm_start import layout  # noqa: E402


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--seeds", default="100-105")
  parser.add_argument("--out", default="image_layouts.json")
  args = parser.parse_args(argv)
  rows = {}
  for name, family in FAMILIES.items():
    for seed in seed_range(args.seeds):
      x, labels, _, _ = family_data(name, seed)
      data = user_dataset(x, labels, seed=0)  # fit's split at config.seed 0
      _, _, closed = layout(data.x_train, data.labels_train, seed=0)
      right = [c == family.periodic for c in closed]
      rows[f"{name}_seed{seed}"] = {"closed": closed, "right": right}
      print(f"{name} seed {seed}: closed {closed}, right {all(right)}", flush=True)
  right = [r for row in rows.values() for r in row["right"]]
  print(f"{sum(right)} of {len(right)} classes laid out as what they are")
  pathlib.Path(args.out).write_text(json.dumps(rows, indent=2))
  return rows


if __name__ == "__main__":
  np.set_printoptions(precision=3)
  main()
