"""The authors' released training states beside ours: operators, Psi steps, ||c||.

The authors' repository (``siplab-gt/VAELLS``) ships, per experiment, the
``spreadInferenceTest.mat`` its ``VAELLS.py`` saves during training:
the final operators (``Psi_new``, ``[d*d, M]``, each column an operator in
column-major order), the ``Psi`` rate at every step (``lr_save``), and one
batch's inferred coefficients (``c_est_mu``: posterior, ``c_est_batch``:
anchors) and scaled codes (``z_scale_np``). From them, per experiment:

* each operator's Frobenius norm beside the norm of the original's initial
  draw (``0.01 randn``: about ``0.01 d``) and its symmetric share
  ``||(Psi + Psi^T) / 2|| / ||Psi||`` (0: a rotation, 1: a scaling);
* the ``Psi`` steps accepted and rejected, read off the rate: an accepted
  step divides it by 0.99 (by 0.9992 alone once the late decay has
  started), a rejected one multiplies it by 0.99 (times 0.9992 once the
  decay has started); a step accepted at the rate's cap leaves it unchanged
  and is not counted. The rate's start, end and maximum;
* ``||c||_1`` of the posterior and anchor coefficients (median, 95th
  percentile, maximum) and the median ``||z||``.

With ``--run NAME=WORKDIR`` the same for a run of ours (its latest
checkpoint, a population's kept member; the initial norm the median of its
own draw's, unknown for a population; the coefficients
those of the next training step's own inference; ``z`` on the latent
scale, where coefficients are inferred; for a single run also each
operator's cosine with its initial draw and its relative change, as
``operator_drift.py``). Nothing of the authors' repository is copied here:
pass a checkout or snapshot of it.

Usage::

    python benchmarks/original_release.py AUTHORS_REPO [--experiments=natMNIST]
        [--run natMNIST=RUN ...] [--out=FILE]

``--out`` writes the rows as JSON (``docs/results/original_release.json``
renders docs/population.md's comparison, ``original_release_nat.json``
docs/studies/experiments-nat-mnist.md's).
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import argparse
import json

import original_method as om  # first: pins BLAS threads before NumPy loads

# isort: split

import numpy as np  # noqa: E402
import operator_drift  # noqa: E402
from scipy.io import loadmat  # noqa: E402

from vaells_jax.models.vaells import Model  # noqa: E402

RELEASED = {  # the release's folder: latent dimension
  "natMNIST": 6,
  "rotMNIST": 10,
  "concen_circle": 2,
  "swiss_roll": 2,
}
FILE = "spreadInferenceTest.mat"
DECAY = 0.99  # VAELLS.py: decay
TITRATE = 0.9992  # VAELLS.py: titrate_decay


def operator_stats(psi: np.ndarray) -> dict:
  """Norms and symmetric shares of operators ``[M, d, d]``."""
  norms = np.linalg.norm(psi, axis=(1, 2))
  sym = np.linalg.norm(psi + np.swapaxes(psi, 1, 2), axis=(1, 2)) / 2
  return {"norms": norms, "symmetric_share": sym / norms}


def psi_steps(rates: np.ndarray) -> dict:
  """Accepted and rejected ``Psi`` steps read off the rate at every step."""
  rates = np.asarray(rates, np.float64).ravel()
  rates = rates[: np.flatnonzero(rates).max() + 1]  # saved before the last step
  ratio = rates[1:] / rates[:-1]

  def near(*factors):
    return np.isclose(ratio, np.prod(factors), rtol=1e-6, atol=0)

  accepted = near(1 / DECAY) | near(TITRATE)
  rejected = near(DECAY) | near(DECAY, TITRATE)
  return {
    "accepted": int(accepted.sum()),
    "rejected": int(rejected.sum()),
    "rate_start": float(rates[0]),
    "rate_end": float(rates[-1]),
    "rate_max": float(rates.max()),
  }


def coefficient_stats(coeffs: np.ndarray, num_ops: int) -> np.ndarray:
  """Median, 95th percentile and maximum of ``||c||_1`` over pairs."""
  l1 = np.abs(np.asarray(coeffs, np.float64).reshape(-1, num_ops)).sum(axis=1)
  return np.quantile(l1, [0.5, 0.95, 1.0])


def released(repo, name: str) -> dict:
  """The statistics of one experiment of the authors' release."""
  mat = loadmat(str(pathlib.Path(repo) / "pretrained_models" / name / FILE))
  d = RELEASED[name]
  columns = mat["Psi_new"]
  psi = np.stack(
    [columns[:, m].reshape(d, d, order="F") for m in range(columns.shape[1])]
  )
  return {
    "source": f"authors' release: {name}",
    "steps": int(np.flatnonzero(mat["lr_save"]).max() + 1),
    **operator_stats(psi),
    "initial_norm": 0.01 * d,
    **psi_steps(mat["lr_save"]),
    "posterior_l1": coefficient_stats(mat["c_est_mu"], len(psi)),
    "prior_l1": coefficient_stats(mat["c_est_batch"], len(psi)),
    "z_norm": float(np.median(np.linalg.norm(mat["z_scale_np"], axis=1))),
  }


def ours(run_dir) -> dict:
  """The same statistics for a run of ours (a population run: its kept member)."""
  config, data, start, state = om.restore_run(run_dir)
  model = Model.create(config, data.data_dim)
  pairs = om.capture_step_pairs(
    model, state, *om.step_batch(config, data, int(state.step))
  )
  psi = np.asarray(state.psi, np.float64)
  attempted, rejected = int(state.psi_attempted), int(state.psi_rejected)
  moved = {}
  if config.population == 1:  # a population's kept member drew its own
    change = operator_drift.drift(start.psi, psi)
    moved = {
      "start_cosine": change["cosine"],
      "relative_change": change["relative_change"],
    }
  return {
    "source": f"ours: {run_dir}",
    "seed": config.seed,
    "steps": int(state.step),
    **operator_stats(psi),
    # A population's kept member drew its own operators, not the seed's.
    "initial_norm": float(np.median(np.linalg.norm(start.psi, axis=(1, 2))))
    if config.population == 1
    else float("nan"),
    "accepted": attempted - rejected,
    "rejected": rejected,
    "rate_start": config.lr_psi,
    "rate_end": float(state.lr_psi),
    "rate_max": float("nan"),  # not kept by a run
    "posterior_l1": coefficient_stats(pairs["ours"].posterior.coeffs, len(psi)),
    "prior_l1": coefficient_stats(pairs["ours"].prior.coeffs, len(psi)),
    "z_norm": float(
      np.median(np.linalg.norm(pairs["z"].reshape(-1, psi.shape[-1]), axis=1))
    ),
    **moved,
  }


def _row(r: dict) -> str:
  fmt = lambda a, p=3: " ".join(f"{x:.{p}g}" for x in a)  # noqa: E731
  return (
    f"| {r['source']} | {r['steps']} | {fmt(r['norms'])} ({r['initial_norm']:.3g}) "
    f"| {fmt(r['symmetric_share'], 2)} | {r['accepted']} / {r['rejected']} "
    f"| {r['rate_start']:.3g} → {r['rate_end']:.3g} (max {r['rate_max']:.3g}) "
    f"| {fmt(r['posterior_l1'])} | {fmt(r['prior_l1'])} | {r['z_norm']:.3g} |"
  )


def main(argv=None) -> list[dict]:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("repo", help="a checkout or snapshot of siplab-gt/VAELLS")
  parser.add_argument(
    "--run",
    action="append",
    default=[],
    metavar="NAME=WORKDIR",
    help=f"a run of ours shown under a released experiment ({', '.join(RELEASED)})",
  )
  parser.add_argument(
    "--experiments",
    default=",".join(RELEASED),
    help="the released experiments to read (comma-separated)",
  )
  parser.add_argument("--out", default=None, help="the rows as JSON")
  args = parser.parse_args(argv)
  names = args.experiments.split(",")
  if set(names) - set(RELEASED):
    parser.error(f"--experiments: choose from {list(RELEASED)}; got {names}")
  runs = {}
  for item in args.run:
    name, _, workdir = item.partition("=")
    if name not in names or not workdir:
      raise SystemExit(f"--run wants NAME=WORKDIR with NAME in {names}; got {item!r}")
    runs.setdefault(name, []).append(workdir)
  rows = []
  print(
    "| source | steps | `‖Psi_m‖_F` (initial draw) | symmetric share "
    "| `Psi` steps accepted / rejected | `Psi` rate start → end | "
    "`‖c‖_1` posterior: median, 95%, max | anchors | median `‖z‖` |"
  )
  print("|---|---|---|---|---|---|---|---|---|")
  for name in names:
    for row in [released(args.repo, name)] + [ours(w) for w in runs.get(name, [])]:
      rows.append({"experiment": name, **row})
      print(_row(row))
  if args.out:
    listed = [
      {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in r.items()}
      for r in rows
    ]
    pathlib.Path(args.out).write_text(json.dumps(listed, indent=1))
  return rows


if __name__ == "__main__":
  main()
