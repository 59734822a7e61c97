"""The exact one-operator solver against jaxopt and scipy CG at rotated-MNIST sizes.

One training step's inference of ``rot_mnist`` (latent ``d = 10``, ``M = 1``,
32 samples, each with its posterior pair and 10 anchor pairs: 352 pairs, l1
weight ``1e-6``, jaxopt starts from ``U[0, 1]`` and ``U[-2.5, 2.5]``, the
config's ``inference_tol = 1e-9``), solved by:

* ``exact``: ``method="exact"`` (:mod:`vaells_jax.core.solvers.exact`), 20 refinement
  steps;
* ``fista`` and ``lm``: the jaxopt solvers with 100 iterations, one start;
* ``scipy_cg``: the original code's CG (:mod:`scipy_reference`) from
  the jaxopt solvers' starts, on a subset of the pairs, its time scaled to 352.

Two operators: ``rotation`` (a rotation-like skew ``psi``, ``||psi||_F = 0.5``,
codes of norm 3) and ``small`` (``||psi||_F = 0.03``, codes of norm 0.3, as at
the start of training). Reports the step time (min over repeats, float32, this
CPU) and, per other solver, from one common float64 evaluation of every
solver's final coefficients (``scipy.linalg.expm``): the fraction of pairs
where ``exact`` ends at least as low (within ``1e-6`` relative), the largest
excess of ``exact``'s objective over the solver's and the median objectives;
and how far the solver's own float32 objective is from that evaluation (the
most over its pairs: ``float32 rounding``, larger than the differences
between the solvers' minima, so comparing float32 objectives measures
rounding, not optimality).

Usage::

    python benchmarks/exact_inference.py            # full
    python benchmarks/exact_inference.py --quick    # CI smoke mode
    python benchmarks/exact_inference.py --cases=small --repeats=2
    python benchmarks/exact_inference.py --out=docs/results/exact_inference.json
"""

from __future__ import annotations

# BLAS and OpenMP on one thread before numpy loads, as the original ran its
# scipy loops (original_method.py; a 2 x 2 scipy expm takes 50 us pinned
# and up to 100x that with OpenBLAS's threads on a busy 2-core CPU).
import original_method  # noqa: F401

# isort: split

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg
from scipy_reference import original_cg_pairs

from vaells_jax import infer_coefficients
from vaells_jax.core.inference import solver_starts

BATCH, ANCHORS, DIM, L1 = 32, 10, 10, 1e-6
ITERATIONS, TOL = 100, 1e-9
CASES = {"rotation": (0.5, 3.0), "small": (0.03, 0.3)}  # ||psi||_F, ||z||
SOLVERS = {
  "exact": {"method": "exact", "max_iter": 20},
  "fista": {"method": "fista", "max_iter": ITERATIONS},
  "lm": {"method": "lm", "max_iter": ITERATIONS},
}


def make_problem(psi_norm, code_norm, seed=0, batch=BATCH):
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
  enc = rng.standard_normal((batch, DIM))
  enc *= code_norm / np.linalg.norm(enc, axis=-1, keepdims=True)
  c = rng.laplace(scale=1.0, size=batch)
  z = np.stack([expm(t, e) for t, e in zip(c, enc, strict=True)])
  z += 1e-3 * code_norm * rng.standard_normal(z.shape)
  turns = rng.uniform(-np.pi / omega, np.pi / omega, (batch, ANCHORS))
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


def objective64(psi, coeffs, z0, z1):
  """Every solver's objective, evaluated the same way: float64, scipy ``expm``.

  Args:
    psi: ``[1, d, d]``; coeffs: ``[P]``; z0, z1: ``[P, d]`` (the first ``P``
      pairs).

  Returns:
    ``1/2 ||z1 - expm(c psi) z0||^2 + L1 |c|`` per pair, ``[P]``.
  """
  psi = np.asarray(psi, np.float64)[0]
  out = []
  for c, a, b in zip(np.asarray(coeffs, np.float64), z0, z1, strict=True):
    r = b - scipy.linalg.expm(c * psi) @ a
    out.append(0.5 * r @ r + L1 * abs(c))
  return np.asarray(out)


def run_case(name, steps, repeats, cg_pairs, batch=BATCH):
  """One case's rows; ``steps``: the jitted step of each solver (shared)."""
  psi, z0, z1 = make_problem(*CASES[name], batch=batch)
  key = jax.random.PRNGKey(0)
  z0_pairs = np.asarray(z0, np.float64).reshape(-1, DIM)
  z1_pairs = np.broadcast_to(np.asarray(z1, np.float64), z0.shape).reshape(-1, DIM)
  rows, coeffs, rounding = {}, {}, {}
  for solver, step in steps.items():
    first, best, result = timed(lambda step=step: step(psi, z0, z1, key), repeats)
    rows[solver] = {"step_ms": 1e3 * best, "compile_s": first - best}
    coeffs[solver] = np.asarray(result.coeffs).reshape(-1)
    rounding[solver] = np.asarray(result.objective).reshape(-1)  # float32
  # The original method's CG on the first pairs, from the jaxopt solvers' starts.
  pairs = cg_pairs
  lo, hi = (jnp.asarray(np.tile(a, batch)) for a in (LOW, HIGH))
  starts = np.asarray(solver_starts(key, 1, 1, lo, hi))[:, :pairs]
  start = time.perf_counter()
  cg, _ = original_cg_pairs(
    np.asarray(psi, np.float64), z0_pairs[:pairs], z1_pairs[:pairs], L1, starts
  )
  cg_s = time.perf_counter() - start
  rows["scipy_cg"] = {"step_ms": 1e3 * cg_s * batch * (1 + ANCHORS) / pairs}
  coeffs["scipy_cg"] = cg.reshape(-1)
  objectives = {
    solver: objective64(psi, c, z0_pairs[: len(c)], z1_pairs[: len(c)])
    for solver, c in coeffs.items()
  }
  exact = objectives["exact"]
  for solver, obj in objectives.items():
    ours = exact[: len(obj)]
    row = rows[solver]
    row["exact_as_low"] = float(np.mean(ours <= obj * (1 + 1e-6) + 1e-12))
    row["max_excess"] = float(np.max(ours - obj))
    row["median_objective"] = float(np.median(obj))
    row["exact_median_objective"] = float(np.median(ours))
    row["pairs"] = len(obj)
    if solver in rounding:  # the solver's own float32 objective, off by
      row["float32_rounding"] = float(np.max(np.abs(rounding[solver] - obj)))
  return rows


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="CI smoke mode")
  parser.add_argument(
    "--cases", default=",".join(CASES), help="comma-separated subset of CASES"
  )
  parser.add_argument("--repeats", type=int, default=None, help="timed repeats")
  parser.add_argument("--out", default=None, help="also write the results here")
  args = parser.parse_args(argv)
  names = args.cases.split(",")
  if not set(names) <= set(CASES):
    raise ValueError(f"--cases must name cases of {tuple(CASES)}, got {names}.")
  # Quick: 4 samples (44 pairs), 2 of them for scipy CG. Full: 32 samples,
  # scipy CG on the first 8 samples' pairs.
  if args.quick:
    repeats, cg_pairs, batch = 1, 2, 4
  else:
    repeats, cg_pairs, batch = 5, 8 * (1 + ANCHORS), BATCH
  repeats = args.repeats or repeats
  print(f"device={jax.devices()[0]} jax={jax.__version__}")
  print(
    "| case | solver | step ms | compile s | pairs compared | exact as low | "
    "max(exact - solver) | float32 rounding | median objective: solver / exact |"
  )
  print("|---|---|---|---|---|---|---|---|---|")
  results = {}
  steps = {solver: make_step(settings) for solver, settings in SOLVERS.items()}
  for name in names:
    results[name] = rows = run_case(name, steps, repeats, cg_pairs, batch)
    for solver, r in rows.items():
      print(
        f"| {name} | {solver} | {r['step_ms']:.1f} | "
        f"{r.get('compile_s', float('nan')):.1f} | {r['pairs']} | "
        f"{r['exact_as_low']:.3f} | {r['max_excess']:.2g} | "
        f"{r.get('float32_rounding', float('nan')):.2g} | "
        f"{r['median_objective']:.4g} / "
        f"{r['exact_median_objective']:.4g} |"
      )
  if args.out:
    env = {"device": str(jax.devices()[0]), "jax": jax.__version__}
    with open(args.out, "w") as f:
      json.dump({"environment": env, "repeats": repeats, "cases": results}, f, indent=2)
  return results


if __name__ == "__main__":
  main()
