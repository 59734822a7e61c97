"""A real training step's pairs: the original method against the library's solver.

Trains an experiment with the library's own step to ``--at-step`` (batches and
keys as the training loop draws them; a population config trains one member),
then takes the exact pairs the next step solves (``Psi``, ``mu``, the encoded
anchors and ``z``: :func:`original_method.capture_step_pairs`) and solves them

* ``vaells_jax``: :func:`vaells_jax.models.vaells.infer_step_coefficients`,
  jitted, as the step calls it (its config's solver, starts and restarts);
* ``original``: the original method (:func:`scipy_reference.
  original_step_inference`): per pair, anchor and restart, scipy CG with
  ``tol=10^-7`` (= -13, never met), 50 iterations, its eigendecomposition
  gradient, posterior starts U[0, 1] (one), prior restart ``r`` from
  U[-2.5 + 2.5 r, 2.5 r]; float64; BLAS pinned to one thread.

The MNIST experiments' state is the initial one with its step set past
warm-up (their warm-up is 30 000 steps), as in ``train_step.py``; or, with
``--state=WORKDIR``, the latest checkpoint of a run of that experiment (its
trained networks, anchors and ``Psi``; the experiment's ``--budget`` config
otherwise, e.g. the paper's 100 inference iterations).

Timing: the two alternate, ``--repeats`` times each (min and median); compile
time apart. Quality: every pair's objective recomputed in float64
(:func:`scipy_reference.transport_objective`) at each method's
coefficients (prior pairs: the best restart); the fraction of pairs where
ours <= original's (1 + 1e-6) + 1e-12, and the median of ours / original's.
The same fraction for the original method run once more with other starts
shows how far its result depends on its starts.

Usage::

    python benchmarks/original_pairs.py                 # concentric, swiss_roll
    python benchmarks/original_pairs.py --quick         # CI smoke mode
    python benchmarks/original_pairs.py --experiments=nat_mnist \
      --inference-method=pgd --state=runs/nat_mnist --repeats=1
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

import original_method as om  # first: pins BLAS threads before NumPy loads

# isort: split

import jax  # noqa: E402
import numpy as np  # noqa: E402
from scipy_reference import (  # noqa: E402
  original_step_inference,
  transport_objective,
)

from vaells_jax.api import DATA_NAME  # noqa: E402
from vaells_jax.config import CONFIG_NAME, config_from_json  # noqa: E402
from vaells_jax.data.dataset import load_dataset  # noqa: E402
from vaells_jax.models import vaells as model_lib  # noqa: E402
from vaells_jax.training.checkpoint import restore_checkpoint  # noqa: E402
from vaells_jax.training.guards import run_identity  # noqa: E402

EXPERIMENTS = ("concentric", "swiss_roll")  # the default; MNIST ones on request
QUICK_BATCH = 4


def float64_objectives(pairs, coeffs_post, coeffs_prior, zeta_q, zeta_p):
  """Objectives ``[B, S]`` and ``[B, S, A]`` of given coefficients, in float64."""
  psi, mu, anchors, z = (np.asarray(pairs[k], np.float64) for k in om.PAIR_KEYS)
  batch, samples, _ = z.shape
  post = np.array(
    [
      [
        transport_objective(coeffs_post[b, s], psi, mu[b], z[b, s], zeta_q)
        for s in range(samples)
      ]
      for b in range(batch)
    ]
  )
  prior = np.array(
    [
      [
        [
          transport_objective(c, psi, a, z[b, s], zeta_p)
          for a, c in zip(anchors[b], coeffs_prior[b, s], strict=True)
        ]
        for s in range(samples)
      ]
      for b in range(batch)
    ]
  )
  return post, prior


def compare(ours, original) -> dict:
  """Fraction of pairs where ours is as low as the original's, median ratio."""
  ours, original = np.ravel(ours), np.ravel(original)
  return {
    "pairs": int(ours.size),
    "as_good_fraction": float(np.mean(ours <= original * (1 + 1e-6) + 1e-12)),
    "median_ratio": float(np.median(ours / original)),
    "median_ours": float(np.median(ours)),
    "median_original": float(np.median(original)),
  }


def _state(config, data, model, at_step: int, run_dir=None):
  """``(state, step)``: trained to ``at_step`` (synthetic); past warm-up from
  the initial state, or a run's latest checkpoint (MNIST)."""
  if not config.warmup_steps:
    return om.trained_state(config, data, model, at_step), at_step
  state = om.seed_state(config, data)
  if run_dir is None:
    return state, config.warmup_steps
  saved = config_from_json(pathlib.Path(run_dir) / CONFIG_NAME)
  saved_data = load_dataset(pathlib.Path(run_dir) / DATA_NAME)
  state = restore_checkpoint(run_dir, state, identity=run_identity(saved, saved_data))
  return state, max(int(state.step), config.warmup_steps)


def run_experiment(
  name: str,
  at_step: int,
  repeats: int,
  budget: str = "paper",
  mnist_dir=om.DEFAULT_MNIST,
  run_dir=None,
  **overrides,
) -> dict:
  config, data, model = om.experiment(name, budget, mnist_dir, **overrides)
  if run_dir is not None:  # the run's own data: its anchors are in the state
    data = load_dataset(pathlib.Path(run_dir) / DATA_NAME)
  state, at_step = _state(config, data, model, at_step, run_dir)
  state = state.replace(step=jax.numpy.asarray(at_step, state.step.dtype))
  pairs = om.capture_step_pairs(model, state, *om.step_batch(config, data, at_step))
  args = [jax.numpy.asarray(pairs[k]) for k in (*om.PAIR_KEYS, "key")]
  ours_fn = jax.jit(lambda *a: model_lib.infer_step_coefficients(model, *a))
  start = time.perf_counter()
  ours = jax.block_until_ready(ours_fn(*args))
  compile_s = time.perf_counter() - start
  rng = np.random.default_rng(at_step)
  times = {"vaells_jax": [], "original": []}
  for _ in range(repeats):  # interleaved
    start = time.perf_counter()
    ours = jax.block_until_ready(ours_fn(*args))
    times["vaells_jax"].append(time.perf_counter() - start)
    start = time.perf_counter()
    original = original_step_inference(
      *(pairs[k] for k in om.PAIR_KEYS),
      config.zeta_q,
      config.zeta_p,
      config.num_restarts,
      rng,
    )
    times["original"].append(time.perf_counter() - start)
  # The jitted solve on the captured arguments is the step's own solve.
  np.testing.assert_allclose(ours.prior.objective, pairs["ours"].prior.objective)
  ours_post, ours_prior = float64_objectives(
    pairs,
    np.asarray(ours.posterior.coeffs),
    np.asarray(ours.prior.coeffs),
    config.zeta_q,
    config.zeta_p,
  )
  orig_post, orig_prior = float64_objectives(
    pairs,
    original.posterior_coeffs,
    original.prior_coeffs,
    config.zeta_q,
    config.zeta_p,
  )
  # The bar "as good as the original": the original against itself with
  # other starts (the same rng, drawn on).
  again = original_step_inference(
    *(pairs[k] for k in om.PAIR_KEYS),
    config.zeta_q,
    config.zeta_p,
    config.num_restarts,
    rng,
  )
  again_post, again_prior = float64_objectives(
    pairs, again.posterior_coeffs, again.prior_coeffs, config.zeta_q, config.zeta_p
  )
  num_anchors = pairs["anchors"].shape[1]
  stats = {k: (float(np.min(v)), float(np.median(v))) for k, v in times.items()}
  return {
    "experiment": name,
    "at_step": at_step,
    "inference_method": config.inference_method,
    "our_pair_solves": om.our_pair_solves(config, num_anchors),
    "original_pair_solves": om.original_pair_solves(config, num_anchors),
    "compile_s": compile_s,
    "step_s": stats,
    "speedup": stats["original"][0] / stats["vaells_jax"][0],
    "original_iterations_median": float(np.median(original.iterations)),
    "original_iterations_at_50": float(np.mean(original.iterations == 50)),
    "posterior": compare(ours_post, orig_post),
    "prior": compare(ours_prior, orig_prior),
    "original_again": {
      "posterior": compare(again_post, orig_post),
      "prior": compare(again_prior, orig_prior),
    },
  }


def main(argv=None) -> list[dict]:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument(
    "--quick", action="store_true", help=f"CI smoke mode (batch of {QUICK_BATCH})"
  )
  parser.add_argument("--experiments", default=",".join(EXPERIMENTS))
  parser.add_argument("--at-step", type=int, default=None, help="default 1000")
  parser.add_argument("--json", default=None, help="also write the rows here")
  parser.add_argument("--repeats", type=int, default=None)
  parser.add_argument(
    "--budget", default="paper", choices=("paper", "cpu"), help="MNIST configs"
  )
  parser.add_argument("--mnist-dir", default=str(om.DEFAULT_MNIST))
  om.add_solver_flags(parser)
  parser.add_argument(
    "--state", default=None, metavar="WORKDIR", help="MNIST: a run's checkpoint"
  )
  args = parser.parse_args(argv)
  at_step = args.at_step if args.at_step is not None else 5 if args.quick else 1000
  repeats = args.repeats or (1 if args.quick else 5)
  print(
    f"device={jax.devices()[0]} jax={jax.__version__} blas_pinned={om.BLAS_PINNED} "
    f"at_step={at_step} repeats={repeats}"
  )
  overrides = {"batch_size": QUICK_BATCH} if args.quick else {}
  overrides.update(om.solver_overrides(args))
  names = args.experiments.split(",")
  rows = [
    run_experiment(
      n, at_step, repeats, args.budget, args.mnist_dir, args.state, **overrides
    )
    for n in names
  ]
  print(
    "| experiment | pair-solves ours / original | vaells_jax ms (min / median) "
    "| original ms (min / median) | speedup | original CG iterations (median, "
    "share at 50) | posterior: as good, median ratio | prior: as good, median ratio "
    "| the original with other starts: as good, posterior / prior |"
  )
  print("|---|---|---|---|---|---|---|---|---|")
  for r in rows:
    (o_min, o_med), (c_min, c_med) = r["step_s"]["vaells_jax"], r["step_s"]["original"]
    post, prior = r["posterior"], r["prior"]
    print(
      f"| {r['experiment']} (step {r['at_step']}) | {r['our_pair_solves']} / "
      f"{r['original_pair_solves']} | {1e3 * o_min:.1f} / {1e3 * o_med:.1f} "
      f"| {1e3 * c_min:.0f} / {1e3 * c_med:.0f} | {r['speedup']:.0f}x "
      f"| {r['original_iterations_median']:.0f}, "
      f"{r['original_iterations_at_50']:.2f} "
      f"| {post['as_good_fraction']:.2f} of {post['pairs']}, "
      f"{post['median_ratio']:.3g} "
      f"| {prior['as_good_fraction']:.2f} of {prior['pairs']}, "
      f"{prior['median_ratio']:.3g} "
      f"| {r['original_again']['posterior']['as_good_fraction']:.2f} / "
      f"{r['original_again']['prior']['as_good_fraction']:.2f} |"
    )
  if args.json:
    with open(args.json, "w") as f:
      json.dump(rows, f, indent=2, default=float)
  return rows


if __name__ == "__main__":
  main()
