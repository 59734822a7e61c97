"""Objective quality of the ``"pgd"`` solver against ``"fista"`` and brute force.

On realistic pairs (operators of norm ``||psi_m||_F`` in 0.03-0.5, points of
norm 0.3-3, true coefficients ``~ Laplace(1)``, a small noise, sparsity weight
1e-5), for each latent dimension ``d`` in {2, 6, 10} and dictionary size
``M`` in {1, 2, 4}: both solvers run from the same starts
(``solver_starts``: ``U[-2.5, 2.5]``), ``max_iter`` iterations, ``tol`` tiny,
so both run every iteration. Per setting it prints the quantiles of the
ratio pgd / fista of the final objectives, the fraction of pairs where pgd
ends no higher (within 0.1% and within 2%), and, on a subset, the fraction
where pgd is within 2% of the best of 20 scipy L-BFGS-B runs (on the split
``c = c+ - c-`` smooth form of the l1 problem, from pgd's start and 19 more
uniform starts; float64).

Usage::

    python benchmarks/pgd_quality.py            # all settings
    python benchmarks/pgd_quality.py --quick    # d = 2 only, fewer pairs
    python benchmarks/pgd_quality.py --out=docs/results/pgd_quality.json
"""

from __future__ import annotations

import argparse
import json

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg
import scipy.optimize

from vaells_jax import infer_coefficients
from vaells_jax.core.inference import solver_starts

L1 = 1e-5
INIT_RANGE = (-2.5, 2.5)


def make_pairs(d: int, m: int, n: int, seed: int):
  """``n`` pairs ``z1 = expm(sum_m c_m psi_m) z0 + noise`` with realistic norms."""
  rng = np.random.default_rng(seed)
  psi = rng.normal(size=(m, d, d))
  psi /= np.linalg.norm(psi, axis=(1, 2), keepdims=True)
  psi *= rng.uniform(0.03, 0.5, size=(m, 1, 1))
  z0 = rng.normal(size=(n, d))
  z0 *= rng.uniform(0.3, 3.0, size=(n, 1)) / np.linalg.norm(z0, axis=-1, keepdims=True)
  coeffs = rng.laplace(scale=1.0, size=(n, m))
  z1 = np.stack(
    [
      scipy.linalg.expm(np.einsum("m,mij->ij", c, psi)) @ z
      for c, z in zip(coeffs, z0, strict=True)
    ]
  )
  z1 += 1e-3 * rng.normal(size=z1.shape)
  return psi, z0, z1


def solve(method, psi, z0, z1, key, max_iter, dtype):
  psi, z0, z1 = (jnp.asarray(a, dtype) for a in (psi, z0, z1))
  result = infer_coefficients(
    psi,
    z0,
    z1,
    l1_weight=L1,
    key=key,
    init_range=INIT_RANGE,
    max_iter=max_iter,
    tol=1e-12,
    method=method,
  )
  return np.asarray(result.objective, np.float64), np.asarray(result.coeffs)


def brute_force(psi, z0, z1, start, rng, runs=20):
  """Best of ``runs`` L-BFGS-B solves of the split (smooth) l1 problem."""
  m = psi.shape[0]

  def fun(u):
    c = u[:m] - u[m:]
    a = np.einsum("m,mij->ij", c, psi)
    r = z1 - scipy.linalg.expm(a) @ z0
    grad_a = scipy.linalg.expm_frechet(a.T, -np.outer(r, z0), compute_expm=False)
    g = np.einsum("mij,ij->m", psi, grad_a)
    return 0.5 * r @ r + L1 * u.sum(), np.concatenate([g, -g]) + L1

  best = np.inf
  starts = [start] + [rng.uniform(*INIT_RANGE, m) for _ in range(runs - 1)]
  for c0 in starts:
    u0 = np.concatenate([np.maximum(c0, 0), np.maximum(-c0, 0)])
    res = scipy.optimize.minimize(
      fun, u0, jac=True, method="L-BFGS-B", bounds=[(0, None)] * (2 * m)
    )
    best = min(best, float(res.fun))
  return best


def run(d, m, n, max_iter, brute, dtype, seed=0):
  psi, z0, z1 = make_pairs(d, m, n, seed)
  key = jax.random.PRNGKey(seed)
  fista, _ = solve("fista", psi, z0, z1, key, max_iter, dtype)
  pgd, _ = solve("pgd", psi, z0, z1, key, max_iter, dtype)
  ratio = pgd / fista
  row = {
    "d": d,
    "M": m,
    "ratio_q": [float(q) for q in np.quantile(ratio, [0.05, 0.5, 0.95])],
    "as_good": float(np.mean(pgd <= fista * (1 + 1e-3) + 1e-9)),
    "within_2pc": float(np.mean(pgd <= fista * 1.02 + 1e-9)),
  }
  if brute:
    lo, hi = (jnp.full(n, v, dtype) for v in INIT_RANGE)
    starts = np.asarray(solver_starts(key, 1, m, lo, hi), np.float64)[0]
    rng = np.random.default_rng(seed + 1)
    best = np.array(
      [brute_force(psi, z0[i], z1[i], starts[i], rng) for i in range(brute)]
    )
    row["pgd_near_best"] = float(np.mean(pgd[:brute] <= best * 1.02 + 1e-9))
    row["fista_near_best"] = float(np.mean(fista[:brute] <= best * 1.02 + 1e-9))
  return row


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true")
  parser.add_argument("--pairs", type=int, default=None)
  parser.add_argument("--max-iter", type=int, default=100)
  parser.add_argument("--brute", type=int, default=None, help="pairs brute-forced")
  parser.add_argument("--float64", action="store_true")
  parser.add_argument("--out", default=None, help="also write the rows here")
  args = parser.parse_args(argv)
  n = args.pairs or (100 if args.quick else 400)
  brute = args.brute if args.brute is not None else (0 if args.quick else 30)
  dims = (2,) if args.quick else (2, 6, 10)
  print(
    f"pairs={n} max_iter={args.max_iter} l1={L1} "
    f"dtype={'float64' if args.float64 else 'float32'} brute-force pairs={brute}"
  )
  print(
    "| d | M | pgd / fista objective (5% / 50% / 95%) | pgd <= fista (0.1%) "
    "| pgd <= fista (2%) | pgd / fista within 2% of brute force |"
  )
  print("|---|---|---|---|---|---|")
  rows = []
  with jax.enable_x64(args.float64):
    dtype = jnp.float64 if args.float64 else jnp.float32
    for d in dims:
      for m in (1, 2, 4):
        r = run(d, m, n, args.max_iter, brute, dtype)
        rows.append(r)
        near = (
          f"{r['pgd_near_best']:.2f} / {r['fista_near_best']:.2f}" if brute else "-"
        )
        q = " / ".join(f"{v:.3f}" for v in r["ratio_q"])
        print(
          f"| {d} | {m} | {q} | {r['as_good']:.2f} | {r['within_2pc']:.2f} | {near} |"
        )
  if args.out:
    settings = {"pairs": n, "max_iter": args.max_iter, "brute": brute, "l1": L1}
    with open(args.out, "w") as f:
      json.dump({**settings, "rows": rows}, f, indent=2)
  return rows


if __name__ == "__main__":
  main()
