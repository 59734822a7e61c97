"""Whether the warm start's layout finds each battery family's curves.

``python studies/fit/layouts.py --seeds=100-109 --out=docs/results/fit_layouts.json``

For each family of ``benchmarks/fit_battery.py`` and seed, each class's
training points (the first 80%, as many as ``fit`` trains on) are laid out
by :func:`vaells_jax.training.warm_start.class_layout`, as ``fit`` lays
them out, and compared with their place along the true curve: ``agreement``
is the layout angle's circular correlation with the true one on a closed
curve (``|mean exp(i (angle - s 2 pi t))|``, the better sign ``s``), the
absolute correlation of the layout's position with ``t`` on an open one,
and 0 where the layout took a loop for an open curve or the reverse.
``short_circuits`` counts the neighbour graph's edges that join points
more than a tenth of the curve apart along it.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import fit_battery  # noqa: E402
from seed_rates import seed_range  # noqa: E402

from vaells_jax.data.anchors import NEIGHBOURS  # noqa: E402
from vaells_jax.training import warm_start  # noqa: E402
from vaells_jax.training.coverage import pairwise_distances  # noqa: E402


def class_scores(points, curve, closed: bool) -> dict:
  """``agreement`` and ``short_circuits`` (module docstring) of one class."""
  t = pairwise_distances(points, curve).argmin(axis=1) / len(curve)
  code, loop = warm_start.class_layout(points)
  if loop != closed:
    agreement = 0.0
  elif closed:
    angle = np.arctan2(code[:, 1], code[:, 0])
    agreement = max(
      abs(np.mean(np.exp(1j * (angle - s * 2 * np.pi * t)))) for s in (1, -1)
    )
  else:
    agreement = abs(np.corrcoef(code[:, 0], t)[0, 1])
  gaps = pairwise_distances(points, points)
  np.fill_diagonal(gaps, np.inf)
  near = np.argsort(gaps, axis=1)[:, :NEIGHBOURS]
  along = np.abs(t[:, None] - t[near])
  along = np.minimum(along, 1 - along) if closed else along
  return {"agreement": float(agreement), "short_circuits": int((along > 0.1).sum())}


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--seeds", default="100-109", type=seed_range)
  parser.add_argument("--families", default=",".join(fit_battery.FAMILIES))
  parser.add_argument("--out", required=True, type=pathlib.Path)
  args = parser.parse_args(argv)
  result = {}
  for family in args.families.split(","):
    curves = fit_battery.FAMILIES[family][0]
    rows = []
    for seed in args.seeds:
      x, labels, manifold, manifold_labels = fit_battery.family_data(family, seed)
      for c, (_, closed) in enumerate(curves):
        own = x[labels == c]
        points = own[: int(0.8 * len(own))]
        scores = class_scores(points, manifold[manifold_labels == c], closed)
        rows.append({"seed": seed, "class": c, **scores})
    result[family] = rows
    worst = min(r["agreement"] for r in rows)
    wrong = sum(r["agreement"] < 0.95 for r in rows)
    print(f"{family}: {wrong} of {len(rows)} classes below 0.95 (worst {worst:.2f})")
  args.out.write_text(json.dumps(result, indent=1) + "\n")
  return result


if __name__ == "__main__":
  main()
