"""The exact one-operator solver against jaxopt and scipy CG at rotated-MNIST sizes.

One training step's inference of ``rot_mnist`` (latent ``d = 10``, ``M = 1``,
32 samples, each with its posterior pair and 10 anchor pairs: 352 pairs, l1
weight ``1e-6``, start ranges ``U[0, 1]`` and ``U[-2.5, 2.5]``, the config's
``inference_tol = 1e-9``), solved by:

* ``exact``: ``method="exact"`` (:mod:`vaells_jax.core.exact`), 20 refinement
  steps;
* ``fista`` and ``lm``: the jaxopt solvers with 100 iterations, one start;
* ``scipy_cg``: the original code's CG (:mod:`vaells_jax.core.reference`) from
  the jaxopt solvers' starts, on a subset of the pairs, its time scaled to 352.

Two operators: ``rotation`` (a rotation-like skew ``psi``, ``||psi||_F = 0.5``,
codes of norm 3) and ``small`` (``||psi||_F = 0.03``, codes of norm 0.3, as at
the start of training). Reports the step time (min over repeats, float32, this
CPU) and, per other solver, the fraction of pairs where ``exact`` ends at least
as low (within ``1e-6`` relative), the largest excess of ``exact``'s objective
over the solver's (float32 rounding is about ``1e-7`` here) and the median
objectives.

Usage::

    python benchmarks/exact_inference.py            # full
    python benchmarks/exact_inference.py --quick    # CI smoke mode
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg

from vaells_jax import infer_coefficients
from vaells_jax.core.inference import solver_starts
from vaells_jax.core.reference import infer_pairs_cg

BATCH, ANCHORS, DIM, L1 = 32, 10, 10, 1e-6
ITERATIONS, TOL = 100, 1e-9
CASES = {"rotation": (0.5, 3.0), "small": (0.03, 0.3)}  # ||psi||_F, ||z||
SOLVERS = {
  "exact": {"method": "exact", "max_iter": 20},
  "fista": {"method": "fista", "max_iter": ITERATIONS},
  "lm": {"method": "lm", "max_iter": ITERATIONS},
}


def make_problem(psi_norm, code_norm, seed=0):
  """``psi [1, d, d]``, ``z0 [B, 1 + A, d]``, ``z1 [B, 1, d]`` (float32).

  ``psi``: one dominant rotation plane plus a weaker random skew part and a
  little non-skew noise. Posterior pairs: encoding ``-> expm(c psi) enc +
  gamma eps``; anchors: the encoding moved along ``psi`` by up to half a turn
  of its dominant rotation, plus noise.
  """
  rng = np.random.default_rng(seed)
  skew = rng.standard_normal((DIM, DIM))
  psi = 0.3 * (skew - skew.T) + 0.05 * rng.standard_normal((DIM, DIM))
  psi[0, 1] -= 3.0
  psi[1, 0] += 3.0
  psi *= psi_norm / np.linalg.norm(psi)
  omega = np.max(np.abs(np.linalg.eigvals(psi).imag))
  expm = lambda t, z: scipy.linalg.expm(t * psi) @ z  # noqa: E731
  enc = rng.standard_normal((BATCH, DIM))
  enc *= code_norm / np.linalg.norm(enc, axis=-1, keepdims=True)
  c = rng.laplace(scale=1.0, size=BATCH)
  z = np.stack([expm(t, e) for t, e in zip(c, enc, strict=True)])
  z += 1e-3 * code_norm * rng.standard_normal(z.shape)
  turns = rng.uniform(-np.pi / omega, np.pi / omega, (BATCH, ANCHORS))
  anchors = np.stack(
    [[expm(t, e) for t in ts] for ts, e in zip(turns, enc, strict=True)]
  )
  anchors += 0.05 * code_norm * rng.standard_normal(anchors.shape)
  z0 = np.concatenate([enc[:, None], anchors], axis=1)
  f32 = lambda a: jnp.asarray(a, jnp.float32)  # noqa: E731
  return f32(psi[None]), f32(z0), f32(z[:, None])


# Per pair: posterior first, then the anchors.
LOW = np.r_[0.0, [-2.5] * ANCHORS].astype(np.float32)
HIGH = np.r_[1.0, [2.5] * ANCHORS].astype(np.float32)


def make_step(settings):
  @jax.jit
  def step(psi, z0, z1, key):
    return infer_coefficients(
      psi, z0, z1, l1_weight=L1, key=key, init_range=(LOW, HIGH), tol=TOL, **settings
    )

  return step


def timed(fn, repeats):
  """``(first-call seconds, min seconds of repeats, output)``."""
  start = time.perf_counter()
  out = jax.block_until_ready(fn())
  first = time.perf_counter() - start
  best = np.inf
  for _ in range(repeats):
    start = time.perf_counter()
    out = jax.block_until_ready(fn())
    best = min(best, time.perf_counter() - start)
  return first, best, out


def run_case(name, repeats, cg_samples):
  psi, z0, z1 = make_problem(*CASES[name])
  key = jax.random.PRNGKey(0)
  rows, objectives = {}, {}
  for solver, settings in SOLVERS.items():
    step = make_step(settings)
    first, best, result = timed(lambda step=step: step(psi, z0, z1, key), repeats)
    rows[solver] = {"step_ms": 1e3 * best, "compile_s": first - best}
    objectives[solver] = np.asarray(result.objective).reshape(-1)
  # scipy CG on the first samples' pairs, from the jaxopt solvers' starts.
  pairs = cg_samples * (1 + ANCHORS)
  lo, hi = (jnp.asarray(np.tile(a, BATCH)) for a in (LOW, HIGH))
  starts = np.asarray(solver_starts(key, 1, 1, lo, hi))[:, :pairs]
  z1_pairs = np.broadcast_to(np.asarray(z1), z0.shape).reshape(-1, DIM)[:pairs]
  start = time.perf_counter()
  _, cg = infer_pairs_cg(
    np.asarray(psi, np.float64),
    np.asarray(z0).reshape(-1, DIM)[:pairs],
    z1_pairs,
    L1,
    starts,
  )
  cg_s = time.perf_counter() - start
  rows["scipy_cg"] = {"step_ms": 1e3 * cg_s * BATCH * (1 + ANCHORS) / pairs}
  objectives["scipy_cg"] = cg
  exact = objectives["exact"]
  for solver, obj in objectives.items():
    ours = exact[: len(obj)]
    rows[solver]["exact_as_low"] = float(np.mean(ours <= obj * (1 + 1e-6) + 1e-12))
    rows[solver]["max_excess"] = float(np.max(ours - obj))
    rows[solver]["median_objective"] = float(np.median(obj))
    rows[solver]["exact_median_objective"] = float(np.median(ours))
    rows[solver]["pairs"] = len(obj)
  return rows


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="CI smoke mode")
  args = parser.parse_args(argv)
  repeats, cg_samples = (1, 1) if args.quick else (5, 8)
  print(f"device={jax.devices()[0]} jax={jax.__version__}")
  print(
    "| case | solver | step ms | compile s | pairs compared | exact as low | "
    "max(exact - solver) | median objective: solver / exact |"
  )
  print("|---|---|---|---|---|---|---|---|")
  results = {}
  for name in CASES:
    results[name] = rows = run_case(name, repeats, cg_samples)
    for solver, r in rows.items():
      print(
        f"| {name} | {solver} | {r['step_ms']:.1f} | "
        f"{r.get('compile_s', float('nan')):.1f} | {r['pairs']} | "
        f"{r['exact_as_low']:.3f} | {r['max_excess']:.2g} | "
        f"{r['median_objective']:.4g} / "
        f"{r['exact_median_objective']:.4g} |"
      )
  return results


if __name__ == "__main__":
  main()
