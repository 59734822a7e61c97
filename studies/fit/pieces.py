"""Whether ``separate_pieces`` finds each battery family's curves.

``python studies/fit/pieces.py --seeds=100-109 --out=docs/results/fit_pieces.json``

For each family of ``benchmarks/fit_battery.py`` and seed, all of the
family's points are split by :func:`vaells_jax.data.anchors.separate_pieces`
(as ``fit(x)`` splits data given without labels) and compared with the true
curves: ``found`` when there are as many pieces as curves and each piece
holds one curve's points only.
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

from vaells_jax.data.anchors import separate_pieces  # noqa: E402


def pieces_found(x, labels) -> dict:
  """The pieces of ``x`` against the true ``labels``."""
  pieces = separate_pieces(x)
  pure = all(np.unique(labels[pieces == p]).size == 1 for p in np.unique(pieces))
  count = int(pieces.max() + 1)
  return {
    "pieces": count,
    "curves": int(np.unique(labels).size),
    "found": bool(pure and count == np.unique(labels).size),
  }


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--seeds", default="100-109", type=seed_range)
  parser.add_argument("--families", default=",".join(fit_battery.FAMILIES))
  parser.add_argument("--out", required=True, type=pathlib.Path)
  args = parser.parse_args(argv)
  results = {}
  for family in args.families.split(","):
    results[family] = []
    for seed in args.seeds:
      x, labels, _, _ = fit_battery.family_data(family, seed)
      results[family].append({"seed": seed, **pieces_found(x, labels)})
    found = sum(r["found"] for r in results[family])
    print(f"{family}: curves found on {found} of {len(args.seeds)} seeds", flush=True)
  args.out.write_text(json.dumps(results, indent=2))
  return results


if __name__ == "__main__":
  main()
