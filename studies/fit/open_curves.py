"""Why ``fit`` fails on open curves that bend both ways: one try of a
recipe per seed, its latent codes and orbits drawn.

``python studies/fit/open_curves.py --family=s_curve --seeds=100-102
--keep=runs/open_curves --out=docs/results/fit_open_curves.json``

For each seed, ``fit(x, labels, config=...)`` (one try) on the battery
family's data (``benchmarks/fit_battery.py``), kept in
``KEEP/<family>_s<seed>`` (a kept fit is read, not trained again; one that
stopped goes on). The config is ``FIT_CONFIG`` changed by ``--set
KEY=VALUE`` (``--set lr_net=0`` holds the networks, which then start from
the warm start's layout; ``--warm-start=ARC`` lays an open curve on ARC of
a turn, 0 a segment). Each fit is scored on the true curve as the battery
scores it, its verdict computed again, and its ``figure.png`` draws the
latent codes coloured by their place along the true curve with the
strongest operator's orbits from the encoded anchors, and, in the true
curve's own coordinates, the data, the decoded orbits and decoded prior
samples. The json also holds how far the anchors lie off the curves' span
and each operator's eigenvalues (the kind of flow: rotation, spiral,
shear, saddle).
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

import fit_battery  # noqa: E402
from seed_rates import seed_range  # noqa: E402

from vaells_jax.training.coverage import pairwise_distances  # noqa: E402

ORBIT_POINTS = 801


def _along(points, manifold):
  """Each point's place along the true curve, 0..1 (its nearest grid point)."""
  return pairwise_distances(points, manifold).argmin(axis=1) / (len(manifold) - 1)


def _orbits(model):
  """The strongest operator's orbits from each encoded anchor, a turn (or,
  for a flow without rotation, a unit of its largest eigenvalue) each way:
  ``[C, A, T, d]``."""
  import jax

  psi = np.asarray(model.psi, np.float64)
  op = psi[int(np.argmax(np.linalg.norm(psi, axis=(1, 2))))]
  rate = max(float(np.abs(np.linalg.eigvals(op)).max()), 1e-6)
  ts = np.linspace(-2 * np.pi / rate, 2 * np.pi / rate, ORBIT_POINTS)
  flows = np.asarray(jax.vmap(jax.scipy.linalg.expm)(ts[:, None, None] * op))
  return np.einsum("tij,caj->cati", flows, np.asarray(model.anchors_latent))


def analyse(model, family: str, seed: int, figure: pathlib.Path) -> dict:
  """``model``'s flows, scores and figure."""
  import jax
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  x, labels, manifold, manifold_labels = fit_battery.family_data(family, seed)
  family_ = fit_battery.FAMILIES[family]
  curves, dim, scale, shift = family_.curves, family_.dim, family_.scale, family_.shift
  inner = curves[0][0](np.zeros(1)).shape[-1]  # the curves' own dimension
  mapping = np.random.default_rng(seed).uniform(-1, 1, (dim, inner))
  unmap = np.linalg.pinv(mapping).T
  to_plane = lambda v: ((np.asarray(v, np.float64) - shift) / scale @ unmap)[:, :2]  # noqa: E731
  data = model.data
  codes = np.asarray(model.encode(data.x_train), np.float64)
  along = np.zeros(len(codes))
  for c in range(int(labels.max()) + 1):
    own = data.labels_train == c
    along[own] = _along(np.asarray(data.x_train)[own], manifold[manifold_labels == c])
  orbits = _orbits(model)
  lim = 1.5 * np.abs(codes).max()
  fig, axes = plt.subplots(1, 2, figsize=(10, 4.6))
  axes[0].scatter(codes[:, 0], codes[:, 1], c=along, cmap="viridis", s=8)
  for anchor_orbits in orbits:
    for orbit in anchor_orbits:
      keep = np.all(np.abs(orbit[:, :2]) < lim, axis=1)
      axes[0].plot(orbit[keep, 0], orbit[keep, 1], "r-", lw=0.8)
  anchors = np.asarray(model.anchors_latent).reshape(-1, codes.shape[1])
  axes[0].plot(anchors[:, 0], anchors[:, 1], "k*", ms=10)
  axes[0].set_title("codes (colour: place along the curve), orbits", fontsize=10)
  axes[0].set_aspect("equal")
  plane = to_plane(manifold)
  axes[1].plot(plane[:, 0], plane[:, 1], ".", color="0.7", ms=1)
  points = to_plane(data.x_train)
  axes[1].scatter(points[:, 0], points[:, 1], c=along, cmap="viridis", s=6)
  for c in range(orbits.shape[0]):
    samples = model.decode(model.sample_prior(jax.random.PRNGKey(seed), 300, c))
    samples = to_plane(samples)
    axes[1].plot(samples[:, 0], samples[:, 1], "b.", ms=2, alpha=0.5)
    for orbit in orbits[c]:
      keep = np.linalg.norm(orbit, axis=-1) < lim
      decoded = to_plane(model.decode(orbit[keep]))
      axes[1].plot(decoded[:, 0], decoded[:, 1], "r-", lw=0.8)
  box = np.abs(plane).max() * 1.4
  axes[1].set_xlim(-box, box)
  axes[1].set_ylim(-box, box)
  axes[1].set_aspect("equal")
  axes[1].set_title("data, decoded orbits (red), prior samples (blue)", fontsize=10)
  fig.suptitle(f"{family}, seed {seed}")
  fig.tight_layout()
  fig.savefig(figure, dpi=90)
  plt.close(fig)
  psi = np.asarray(model.psi, np.float64)
  anchors_in = np.asarray(model.anchors, np.float64)  # [C, A, D]
  plane_of = np.linalg.pinv(unmap.T) @ unmap.T  # projects onto the curves' span
  centred = (anchors_in - shift) / scale
  return {
    # how far the (trained) anchors lie off the curves' span, over the
    # noise's typical distance off it (a data point: about 1)
    "anchor_off_span": (
      np.linalg.norm(centred - centred @ plane_of.T, axis=-1)
      / (fit_battery.NOISE * np.sqrt(dim - inner))
    )
    .round(2)
    .tolist(),
    "eigenvalues": [  # [re, im] of each operator's
      np.stack([e.real, e.imag], -1).round(4).tolist() for e in np.linalg.eigvals(psi)
    ],
    "operator_norms": np.linalg.norm(psi, axis=(1, 2)).round(4).tolist(),
  }


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--family", default="s_curve")
  parser.add_argument("--seeds", default="100-102", type=seed_range)
  parser.add_argument("--keep", required=True, type=pathlib.Path)
  parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
  parser.add_argument("--out", required=True, type=pathlib.Path)
  parser.add_argument(
    "--warm-start",
    type=float,
    default=None,
    metavar="ARC",
    help="open curves' layout on ARC of a turn (0: a segment); the warm "
    "start itself comes with --set lr_net=0",
  )
  args = parser.parse_args(argv)
  from vaells_jax.runs import fit as fit_module

  if args.warm_start is not None:
    fit_module.WARM_START_OPEN_ARC["mlp"] = args.warm_start
  from vaells_jax.api import load
  from vaells_jax.config import override
  from vaells_jax.runs.fit import FIT_CONFIG, fit
  from vaells_jax.runs.verdict import verdict

  out = json.loads(args.out.read_text()) if args.out.exists() else {}
  for seed in args.seeds:
    config = override(FIT_CONFIG, dict(s.split("=", 1) for s in args.set))
    config = dataclasses.replace(config, seed=seed)
    folder = args.keep / f"{args.family}_s{seed}"
    x, labels, _, _ = fit_battery.family_data(args.family, seed)
    if (folder / "summary.json").exists():
      model = load(folder)
    else:
      resume = (folder / "config.json").exists()  # a fit that stopped: go on
      model = fit(
        x, labels, config=config, workdir=folder, resume=resume, log=lambda line: None
      )
    said = verdict(model, seed)  # the library's verdict, computed again
    row = {
      **fit_battery._scored(model, args.family, seed),
      "verdict": said["verdict"],
      "signals": said["signals"],
      **analyse(model, args.family, seed, folder / "figure.png"),
    }
    variant = "".join("_" + s for s in args.set)
    variant += "" if args.warm_start is None else f"_warm{args.warm_start:g}"
    out[f"{args.family}{variant}_s{seed}"] = row
    args.out.write_text(json.dumps(out, indent=1, default=float) + "\n")
    print(
      f"{args.family} seed {seed}: success {row['success']} coverage "
      f"{row['orbit_coverage']:.2f} samples {row['sample_manifold_distance']:.1f} "
      f"verdict {row['verdict']} anchors off {row['anchor_off_span']}",
      flush=True,
    )
  return out


if __name__ == "__main__":
  main()
