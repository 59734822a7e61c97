"""How well the warm start's networks reconstruct held-out images when the
classes lie on nested circles in a 2-D latent space, against unit circles at
their own heights on a third axis (``vaells_jax.training.warm_start``):
the layout and the pretraining alone, on fit's training split, ``1 - R^2``
on its held-out split.

``python studies/images/latent_layout.py --seeds=100-101
--out=docs/results/image_latent_layout.json``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from image_battery import FAMILIES, family_data  # noqa: E402
from seed_rates import seed_range  # noqa: E402

from vaells_jax.data.conditioning import InputMap  # noqa: E402
from vaells_jax.models.vaells import Model  # noqa: E402
from vaells_jax.runs.fit import image_config, user_dataset  # noqa: E402
from vaells_jax.training import warm_start  # noqa: E402


def held_out_error(name: str, seed: int, latent_dim: int) -> float:
  """``1 - R^2`` of the warm start's networks on the held-out images."""
  x, labels, _, _ = family_data(name, seed)
  config = dataclasses.replace(image_config(x.shape[1:]), latent_dim=latent_dim)
  data = user_dataset(x, labels, seed=0)  # fit's split at config.seed 0
  data = InputMap.of(data.x_train, x.shape[1:]).model_data(data)
  index, codes, _ = warm_start.layout(data.x_train, data.labels_train, 0, latent_dim)
  networks, _ = warm_start.pretrain(config, data.x_train[index], codes, 0)
  test = np.asarray(data.x_test, np.float32)
  model = Model.create(config, test.shape[1])
  decoded = np.asarray(model.decode(networks, model.encode(networks, test)))
  spread = np.sum((test - test.mean(axis=0)) ** 2)
  return float(np.sum((decoded - test) ** 2) / spread)


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--seeds", default="100-101")
  parser.add_argument("--families", default="rotated_digits")
  parser.add_argument("--out", default="image_latent_layout.json")
  args = parser.parse_args(argv)
  out = pathlib.Path(args.out)
  rows = json.loads(out.read_text()) if out.exists() else {}
  for name in args.families.split(","):
    assert name in FAMILIES, name
    for seed in seed_range(args.seeds):
      for dim in (2, 3):
        key = f"{name}_seed{seed}_latent{dim}"
        if key not in rows:
          rows[key] = {"family": name, "seed": seed, "latent_dim": dim}
          rows[key]["held_out_error"] = held_out_error(name, seed, dim)
          out.write_text(json.dumps(rows, indent=2))
        print(key, f"held-out 1 - R^2 {rows[key]['held_out_error']:.3f}", flush=True)
  return rows


if __name__ == "__main__":
  main()
