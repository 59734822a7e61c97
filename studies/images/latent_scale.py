"""The latent scale appendix B's rule would pick for fit's image models.

The paper (appendix B) inspects the latent codes after the warm-up steps
and scales them so that their largest entries come to about 1. fit's image
models train with the networks held after the warm start
(``IMAGE_LR_NET = 0``), so a returned model's codes are the warm start's.
For each workdir ``image_battery.py --keep=DIR`` kept, this loads the model,
encodes its family's images and records the largest absolute code entry
and its 99th percentile: the rule would divide the codes by the first,
that is multiply fit's latent scale by it.

``python benchmarks/image_battery.py --seeds=100-109 --keep=DIR`` then
``python studies/images/latent_scale.py --keep=DIR
--out=docs/results/image_latent_scale.json``
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

import vaells_jax  # noqa: E402


def code_entries(workdir: pathlib.Path) -> dict:
  """The largest absolute code entry of a kept fit's family images."""
  family = max((f for f in FAMILIES if workdir.name.startswith(f)), key=len)
  seed = int(workdir.name.rsplit("_seed", 1)[1])
  model = vaells_jax.load(workdir)
  x, _, _, _ = family_data(family, seed)
  entries = np.abs(np.asarray(model.encode(x)))
  return {
    "family": family,
    "seed": seed,
    "latent_scale": model.config.latent_scale,
    "lr_net": model.config.lr_net,
    "max_entry": float(entries.max()),
    "p99_entry": float(np.percentile(entries, 99)),
  }


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--keep", required=True, help="image_battery.py's --keep folder")
  parser.add_argument("--out", default="image_latent_scale.json")
  args = parser.parse_args(argv)
  out = pathlib.Path(args.out)
  rows = json.loads(out.read_text()) if out.exists() else {}
  for workdir in sorted(pathlib.Path(args.keep).iterdir()):
    if workdir.name not in rows and (workdir / "summary.json").exists():
      rows[workdir.name] = code_entries(workdir)
      out.write_text(json.dumps(rows, indent=2))
    if workdir.name in rows:
      r = rows[workdir.name]
      print(f"{workdir.name}: largest entry {r['max_entry']:.3f}", end=", ")
      print(f"99th percentile {r['p99_entry']:.3f}")
  return rows


if __name__ == "__main__":
  main()
