"""Coefficient-inference throughput on synthetic pairs of the paper's sizes.

The pairs and operators are synthetic (random ``Psi``; pairs drawn around
encodings like a training step's). ``original_pairs.py`` compares with the
original method on a real training step's pairs. Compares, on the same pairs
and in one run:

* ``batched``: :func:`vaells_jax.infer_coefficients` as a training step calls it:
  one jitted solve over every sample's posterior pair and anchor pairs (each
  with its own sparsity weight and start range), vmapped over pairs and
  restarts;
* ``jit_loop``: a Python loop over a jitted single-pair solve (same solver
  and settings);
* ``cg_default_tol``: scipy CG at its default tolerance, NOT the original's
  setting: a per-pair, per-restart loop of ``scipy.optimize.minimize(
  method="CG", options={"maxiter": 50})`` with ``gtol=1e-5``
  (:func:`scipy_reference.default_tol_cg_pairs`), from the starts the
  batched solver drew (:func:`vaells_jax.core.inference.solver_starts`). It
  stops after a few iterations where the original's ``tol=10^-7`` (= -13)
  runs to 50 or a failed line search, so it is cheaper than the original and
  ends higher.

The batched solve runs each setting of ``SETTINGS`` (the library's default
``auto``, proximal gradient at two budgets, Levenberg-Marquardt). A second
check solves one step's pairs for several problem seeds and compares each
setting's objectives with CG's, pair by pair.

Pairs are drawn like a training step draws them: samples ``z = T(c) f(x) + gamma
eps`` around encodings, anchors elsewhere on the latent manifold. Throughput is
pair-solves per second (a pair with ``R`` restarts counts ``R`` times); compile
time is reported apart. The loops are timed on a subset of the pairs (all of
them without ``--quick``) and their median objective is compared with the
batched solver's on that same subset.

Usage::

    python benchmarks/inference_speed.py            # full
    python benchmarks/inference_speed.py --quick    # CI smoke mode
    python benchmarks/inference_speed.py --cases=concentric,swiss_roll \
      --settings=fista_train,pgd_train,gauss_newton_train  # the training solves
"""

from __future__ import annotations

# BLAS and OpenMP on one thread before numpy loads, as the original ran its
# scipy loops (original_method.py; a 2 x 2 scipy expm takes 50 us pinned
# and up to 100x that with OpenBLAS's threads on a busy 2-core CPU).
import original_method  # noqa: F401

# isort: split

import argparse
import json
import platform
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy_reference import default_tol_cg_pairs

import vaells_jax
from vaells_jax import infer_coefficients, transport
from vaells_jax.core.inference import solver_starts
from vaells_jax.core.solvers import resolve


class Case(NamedTuple):
  name: str
  batch: int
  anchors: int
  restarts: int
  dim: int
  num_ops: int
  zeta_q: float
  zeta_p: float


CASES = (
  Case("concentric", 30, 3, 1, 2, 4, 1e-6, 5e-6),
  Case("swiss_roll", 30, 4, 2, 2, 1, 1e-6, 5e-5),
  Case("rot_mnist", 32, 10, 1, 10, 1, 1e-6, 1e-6),
)


def make_problem(case: Case, seed: int = 0):
  """Pairs like a training step's: posterior ``f(x) -> z`` and prior ``a_i -> z``."""
  rng = np.random.default_rng(seed)
  d, m = case.dim, case.num_ops
  skew = rng.normal(size=(m, d, d))
  psi = 0.5 * (skew - skew.transpose(0, 2, 1)) + 0.05 * rng.normal(size=(m, d, d))
  enc = rng.normal(size=(case.batch, d))
  enc /= np.linalg.norm(enc, axis=-1, keepdims=True)
  c_post = rng.laplace(scale=0.1, size=(case.batch, m))
  z = np.asarray(transport(psi, c_post, enc)) + 1e-3 * rng.normal(size=enc.shape)
  c_anchor = rng.laplace(scale=1.0, size=(case.batch, case.anchors, m))
  anchors = np.asarray(transport(psi, c_anchor, z[:, None, :]))
  f32 = lambda a: jnp.asarray(a, jnp.float32)  # noqa: E731
  return f32(psi), f32(enc), f32(z), f32(anchors)


def loop_pairs(case: Case, enc, z, anchors, n):
  """The first ``n`` samples' pairs, one row each: ``z0, z1, l1, lo, hi``."""
  z0 = np.concatenate([enc[:n, None], anchors[:n]], axis=1).reshape(-1, case.dim)
  z1 = np.repeat(z[:n], 1 + case.anchors, axis=0)
  return (z0, z1) + tuple(np.tile(a, n) for a in pair_settings(case))


def batched_starts(case: Case, key):
  """The starts ``[R, B (1 + A), M]`` the batched step draws from ``key``."""
  _, lo, hi = (np.tile(a, case.batch).astype(np.float32) for a in pair_settings(case))
  return np.asarray(
    solver_starts(key, case.restarts, case.num_ops, jnp.asarray(lo), jnp.asarray(hi))
  )


def scipy_objectives(case: Case, psi, pairs, key):
  """scipy CG, default tolerance, on ``pairs`` from the batched solver's starts.

  ``pairs`` are the first pairs of the batched step solved with ``key``, in
  its order. Same starts make the comparison pair by pair: with other draws
  the two solvers' medians also differ by start luck (a pair's objective is
  often bimodal: the start led to the right minimum or not).
  """
  z0, z1, l1, _, _ = pairs
  starts = batched_starts(case, key)[:, : len(z0)]
  return default_tol_cg_pairs(psi, z0, z1, l1, starts)[1]


# Solver settings compared: the library's default (``auto``: the solver
# measured fastest for the problem's shape, at its default tolerance), jaxopt's
# proximal gradient at its default iterations and tolerance, proximal gradient
# run longer, and Levenberg-Marquardt on the smoothed objective. The last two
# use tol 1e-6: at the default 1e-4 a solver stops once the data term fits,
# before the l1 term (weights 1e-6 to 5e-5) has any say.
SETTINGS = {
  "auto": {},
  "fista": {"method": "fista"},
  "fista_tight": {"method": "fista", "max_iter": 300, "tol": 1e-6},
  "lm": {"method": "lm", "tol": 1e-6},
  # At the synthetic experiments' training tolerance (config.inference_tol =
  # 1e-9: fista and pgd run all 100 iterations), jaxopt fista against the
  # per-pair-step pgd and gauss_newton (the experiments' solver).
  "fista_train": {"method": "fista", "tol": 1e-9},
  "pgd_train": {"method": "pgd", "tol": 1e-9},
  "gauss_newton_train": {"method": "gauss_newton", "tol": 1e-9},
}


# Start ranges: posterior pairs U[0, 1] (the original's), anchors U[-2.5, 2.5]
# (the original's two restart ranges in one; with one restart it draws U[-2.5, 0]).
POSTERIOR_RANGE, PRIOR_RANGE = (0.0, 1.0), (-2.5, 2.5)


def pair_settings(case: Case):
  """Per-pair sparsity weights and start ranges over ``[1 + A]`` (posterior first)."""
  rest = case.anchors
  return (
    np.r_[case.zeta_q, [case.zeta_p] * rest],
    np.r_[POSTERIOR_RANGE[0], [PRIOR_RANGE[0]] * rest],
    np.r_[POSTERIOR_RANGE[1], [PRIOR_RANGE[1]] * rest],
  )


def make_batched(case: Case, settings: dict):
  """One training step's inference, as ``train.py`` runs it: a single solve."""
  l1, lo, hi = (jnp.asarray(a, jnp.float32) for a in pair_settings(case))

  @jax.jit
  def step(psi, enc, z, anchors, key):
    z0 = jnp.concatenate([enc[:, None, :], anchors], axis=1)  # [B, 1 + A, d]
    return infer_coefficients(
      psi,
      z0,
      z[:, None, :],
      l1_weight=l1,
      key=key,
      num_restarts=case.restarts,
      init_range=(lo, hi),
      **settings,
    )

  return step


def make_single(restarts: int, settings: dict):
  """One pair's solve, jitted: the loop's step."""
  return jax.jit(
    lambda psi, a, b, lam, lo, hi, k: infer_coefficients(
      psi,
      a,
      b,
      l1_weight=lam,
      key=k,
      num_restarts=restarts,
      init_range=(lo, hi),
      **settings,
    )
  )


def jit_loop(single, psi, pairs):
  """Each pair solved alone by the jitted ``single``: objectives."""
  z0, z1, l1, lo, hi = pairs
  keys = jax.random.split(jax.random.PRNGKey(1), len(z0))
  return np.asarray(
    [
      float(single(psi, z0[i], z1[i], l1[i], lo[i], hi[i], keys[i]).objective)
      for i in range(len(z0))
    ]
  )


def timed(fn, repeats):
  """Returns (first-call seconds, min, median of ``repeats`` later calls, output)."""
  start = time.perf_counter()
  out = jax.block_until_ready(fn())
  first = time.perf_counter() - start
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    out = jax.block_until_ready(fn())
    times.append(time.perf_counter() - start)
  return first, min(times), float(np.median(times)), out


def run_case(case: Case, subset: int, repeats: int, settings_names) -> list[dict]:
  """One row per solver setting; the scipy loop is timed once for all."""
  psi, enc, z, anchors = make_problem(case)
  key = jax.random.PRNGKey(0)
  restarts = case.restarts
  solves = case.batch * (1 + case.anchors) * restarts

  # The same pairs, one at a time: per sample the posterior pair (enc -> z)
  # and the anchor pairs (a_i -> z), each with its weight and start range.
  n = min(subset, case.batch)
  pairs = loop_pairs(case, enc, z, anchors, n)
  loop_solves = len(pairs[0]) * restarts

  # The faster of two runs: one run of the loop varied 2x on this shared CPU.
  cg_runs = [
    _time_once(lambda: scipy_objectives(case, psi, pairs, key))
    for _ in range(1 if repeats < 3 else 2)
  ]
  cg_time, cg_obj = min(cg_runs, key=lambda run: run[0])
  rows = []
  for name in settings_names:
    settings = SETTINGS[name]
    step = make_batched(case, settings)
    first, best, median, result = timed(
      lambda step=step: step(psi, enc, z, anchors, key), repeats
    )
    single = make_single(restarts, settings)
    jit_first, jit_best, _, jit_obj = timed(
      lambda single=single: jit_loop(single, psi, pairs), 1
    )
    batched_obj = np.asarray(result.objective[:n]).ravel()
    rates = {
      "batched": solves / best,
      "jit_loop": loop_solves / jit_best,
      "cg_default_tol": loop_solves / cg_time,
    }
    rows.append(
      {
        "case": case.name,
        "solver": name,
        "settings": settings,
        "method": resolve(settings.get("method", "auto"), case.num_ops, case.dim),
        "pair_solves_per_step": solves,
        "batched_compile_s": first - median,
        "batched_step_ms_min": 1e3 * best,
        "batched_step_ms_median": 1e3 * median,
        "jit_loop_compile_s": jit_first - jit_best,
        "loop_subset_pair_solves": loop_solves,
        "pairs_per_s": rates,
        "speedup_vs_cg_default_tol": rates["batched"] / rates["cg_default_tol"],
        "speedup_vs_jit_loop": rates["batched"] / rates["jit_loop"],
        "median_objective": {
          "batched": float(np.median(batched_obj)),
          "jit_loop": float(np.median(jit_obj)),
          "cg_default_tol": float(np.median(cg_obj)),
        },
        "batched_converged_fraction": float(np.mean(result.converged)),
      }
    )
  return rows


def objective_check(case: Case, settings_names, seeds) -> dict:
  """Each setting against scipy CG at its default tolerance from the same
  starts, per problem seed.

  One problem (``seed = 0``) decides nothing: its draws of operators and
  pairs can favour either solver. All pairs of each seed's step. Returns, per
  setting, the per-seed ratios of median objectives and fractions of pairs
  that end at least as low as CG's (within 0.1%).
  """
  check = {
    name: {"median_ratio": [], "as_good_fraction": []} for name in settings_names
  }
  for seed in seeds:
    psi, enc, z, anchors = make_problem(case, seed)
    key = jax.random.PRNGKey(seed)
    cg = scipy_objectives(case, psi, loop_pairs(case, enc, z, anchors, case.batch), key)
    for name in settings_names:
      ours = np.asarray(
        make_batched(case, SETTINGS[name])(psi, enc, z, anchors, key).objective
      ).ravel()
      check[name]["median_ratio"].append(float(np.median(ours) / np.median(cg)))
      check[name]["as_good_fraction"].append(
        float(np.mean(ours <= cg * (1 + 1e-3) + 1e-9))
      )
  return check


def _time_once(fn):
  start = time.perf_counter()
  out = fn()
  return time.perf_counter() - start, out


def environment() -> dict:
  return {
    "device": str(jax.devices()[0]),
    "platform": platform.platform(),
    "processor": platform.processor() or platform.machine(),
    "jax": jax.__version__,
    "jaxlib": jax.lib.__version__ if hasattr(jax.lib, "__version__") else "",
    "vaells_jax": vaells_jax.__version__,
    "numpy": np.__version__,
  }


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument(
    "--quick",
    action="store_true",
    help="small subsets, few repeats, default solver settings only (CI smoke mode)",
  )
  parser.add_argument("--repeats", type=int, default=None)
  parser.add_argument(
    "--subset",
    type=int,
    default=None,
    help="samples per case timed in the per-pair loops",
  )
  parser.add_argument(
    "--seeds",
    type=int,
    default=None,
    help="problem seeds of the objective check (5; --quick 0)",
  )
  parser.add_argument(
    "--settings",
    default=None,
    help="comma-separated names of SETTINGS (default: auto, fista, fista_tight, "
    "lm; --quick: auto)",
  )
  parser.add_argument(
    "--cases", default=None, help="comma-separated case names (default: all)"
  )
  parser.add_argument("--out", default=None, help="also write the results here")
  args = parser.parse_args(argv)
  repeats = args.repeats or (3 if args.quick else 20)
  subset = args.subset or (2 if args.quick else 30)
  seeds = range(args.seeds if args.seeds is not None else 0 if args.quick else 5)
  env = environment()
  print(" ".join(f"{k}={v}" for k, v in env.items()))
  names = ["auto"] if args.quick else ["auto", "fista", "fista_tight", "lm"]
  if args.settings:
    names = args.settings.split(",")
  cases = [c for c in CASES if not args.cases or c.name in args.cases.split(",")]
  results = [row for case in cases for row in run_case(case, subset, repeats, names)]
  print()
  print(
    "Settings: "
    + "; ".join(f"{name}: {SETTINGS[name] or 'defaults'}" for name in names)
    + "."
  )
  header = (
    "case",
    "solver",
    "pair-solves/step",
    "batched pairs/s",
    "jit loop pairs/s",
    "CG default tol pairs/s",
    "vs CG default tol",
    "vs jit loop",
    "step ms (min)",
    "compile s",
    "median obj batched / jit loop / CG default tol",
  )
  print("| " + " | ".join(header) + " |")
  print("|" + "---|" * len(header))
  for r in results:
    rate, obj = r["pairs_per_s"], r["median_objective"]
    cells = (
      r["case"],
      r["solver"],
      r["pair_solves_per_step"],
      f"{rate['batched']:.0f}",
      f"{rate['jit_loop']:.0f}",
      f"{rate['cg_default_tol']:.1f}",
      f"{r['speedup_vs_cg_default_tol']:.0f}x",
      f"{r['speedup_vs_jit_loop']:.0f}x",
      f"{r['batched_step_ms_min']:.1f}",
      f"{r['batched_compile_s']:.1f}",
      f"{obj['batched']:.3g} / {obj['jit_loop']:.3g} / {obj['cg_default_tol']:.3g}",
    )
    print("| " + " | ".join(str(c) for c in cells) + " |")
  checks = {case.name: objective_check(case, names, seeds) for case in cases}
  if seeds:
    _print_check(checks, seeds)
  if args.out:
    with open(args.out, "w") as f:
      json.dump(
        {"environment": env, "results": results, "objective_check": checks}, f, indent=2
      )
  return results


def _print_check(checks, seeds):
  print()
  print(
    f"Against scipy CG at its default tolerance (not the original's "
    f"setting) from the same starts, all pairs of one step, "
    f"problem seeds {list(seeds)}: median objective / CG's (below 1: "
    f"better), and the fraction of pairs ending at least as low as CG:"
  )
  print(
    "| case | solver | median ratio per seed | worst | fraction as good per "
    "seed | lowest |"
  )
  print("|---|---|---|---|---|---|")
  for case, check in checks.items():
    for name, c in check.items():
      ratio, good = c["median_ratio"], c["as_good_fraction"]
      print(
        f"| {case} | {name} | {' '.join(f'{x:.2f}' for x in ratio)} | "
        f"{max(ratio):.2f} | {' '.join(f'{x:.2f}' for x in good)} | "
        f"{min(good):.2f} |"
      )


if __name__ == "__main__":
  main()
