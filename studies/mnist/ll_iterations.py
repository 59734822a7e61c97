"""How the log-likelihood estimate depends on the coefficient solver's cap.

``python benchmarks/ll_iterations.py runs/nat_paper_m4_full_seed0
--points=50 --caps=100,300,1000 --out=docs/results/ll_iterations_nat_m4.json``

The log-likelihood (``vaells_jax/evaluation/likelihood.py``) weighs each
posterior sample by the densities of the coefficients inferred between it
and its anchors, solved with the run's ``inference_max_iter`` (the training
steps' cap; the reference code's evaluation runs its 50 CG iterations).
An anchor's solve stopped early by the cap lowers ``log p(w)`` and so the
estimate; a posterior one lowers ``log q(w | x)`` and so raises it. For a
finished run this script recomputes the first ``--points`` test points of
the run's own evaluation (same presented inputs, same keys, same chunks of
25 points) with each cap in ``--caps`` and reports, per cap: the mean
log-likelihood and ELBO of those points, the share of posterior and prior
pairs the cap stopped (``num_iter == cap``), and the time. At the run's
own cap the numbers are the run's (``tests/test_digits.py`` checks this
against ``summary.json``).
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import argparse
import dataclasses
import json
import time

import jax
import numpy as np

CHUNK = 25  # importance_log_likelihood's default chunk_size


def evaluation_batch(workdir, points: int | None = None):
  """``(trained, batch, key)``: a finished digits run, its first ``points``
  test points (default: as many as its evaluation) as its log-likelihood
  evaluation presents them, and that evaluation's key."""
  from vaells_jax import api

  trained = api.load(workdir)
  if not isinstance(trained, api.TrainedVAELLS) or trained.config.network != "conv":
    raise ValueError(f"{workdir} is not a VAELLS run on digits (rot/nat_mnist).")
  data, cfg = trained.data, trained.config
  if points is None:
    points = min(cfg.eval_ll_points, len(data.x_test))
  if not 0 < points <= len(data.x_test):
    raise ValueError(f"--points must lie in 1..{len(data.x_test)}, got {points}.")
  # As image_report.evaluate_and_report draws them.
  k_present, k_ll, _, _ = jax.random.split(jax.random.PRNGKey(cfg.seed + 2), 4)
  x_orig = np.asarray(data.x_test, np.float32)
  x_in = np.asarray(jax.jit(trained._model.present)(x_orig, k_present))
  batch = {
    "x": x_in[:points],
    "source": {"x": x_orig[:points], "label": np.asarray(data.labels_test)[:points]},
  }
  return trained, batch, k_ll


def measure(workdir, points: int, caps) -> dict:
  """``{"points", "samples", "run_cap", "rows": [per cap]}`` (module docstring)."""
  from vaells_jax.evaluation import likelihood
  from vaells_jax.models.vaells import Model

  trained, batch, k_ll = evaluation_batch(workdir, points)
  data, cfg, params = trained.data, trained.config, trained.params
  rows = []
  for cap in caps:
    model = Model.create(
      dataclasses.replace(cfg, inference_max_iter=cap), data.data_dim
    )
    start = time.perf_counter()
    log_w, stopped = [], {"posterior": [], "prior": []}
    for i, chunk in likelihood.padded_chunks(batch, CHUNK):
      total, inferred = likelihood.chunk_log_weights(
        model, params, chunk, jax.random.fold_in(k_ll, i), cfg.eval_ll_samples
      )
      log_w.append(np.asarray(total, np.float64))
      keep = min(CHUNK, points - i * CHUNK)  # not the padding
      for part in stopped:
        num_iter = np.asarray(getattr(inferred, part).num_iter)[:keep]
        stopped[part].append(num_iter >= cap)
    log_w = np.concatenate(log_w)[:points]
    rows.append(
      {
        "cap": cap,
        "log_likelihood": float(np.mean(likelihood.iwae_bound(log_w))),
        "elbo": float(log_w.mean()),
        **{
          f"{part}_pairs_at_cap": float(np.concatenate(flags).mean())
          for part, flags in stopped.items()
        },
        "time_s": time.perf_counter() - start,
      }
    )
    print(json.dumps(rows[-1]), flush=True)
  return {
    "run": str(workdir),
    "points": points,
    "samples": cfg.eval_ll_samples,
    "run_cap": cfg.inference_max_iter,
    "method": cfg.inference_method,
    "rows": rows,
  }


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("workdir", type=pathlib.Path, help="a finished run")
  parser.add_argument("--points", type=int, default=50)
  parser.add_argument("--caps", default="100,300,1000")
  parser.add_argument("--out", type=pathlib.Path)
  args = parser.parse_args(argv)
  caps = [int(c) for c in args.caps.split(",")]
  if any(c < 1 for c in caps):
    parser.error(f"--caps must be positive integers, got {args.caps}")
  result = measure(args.workdir, args.points, caps)
  if args.out:
    from vaells_jax.data.files import atomic_write_text

    atomic_write_text(args.out, json.dumps(result, indent=1) + "\n")
  return result


if __name__ == "__main__":
  main()
