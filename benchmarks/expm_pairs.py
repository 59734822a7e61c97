"""The transport data term at d > 2: the generic solvers' ``expm_small``
against the per-pair-step solver's ``expm_pairs_shift`` and ``expm_pairs``
(:mod:`vaells_jax.core.expm`, :mod:`vaells_jax.core.solvers.pgd`), in one run.

For ``P`` pairs with ``M`` operators (``||psi_m||_F`` about 0.25, Gaussian
coefficients times ``--scale``), times

* ``value+grad``: ``f(c) = 1/2 ||z1 - expm(sum_m c_m psi_m) z0||^2`` per pair
  and its gradient (what a solver iteration needs once; the difference column
  compares gradients): reverse mode through
  ``expm_small`` (pairs on the leading axis), and pgd's evaluation (pairs on
  the minor axis, the gradient one JVP of ``expm_pairs``);
* ``4 values``: ``f`` at four trial points per pair (pgd's trial steps), the
  same two ways;
* ``4 values, product by ...``: pgd's evaluation with the matrix products
  written as a sum over a product axis, or as a batched ``dot`` (``einsum``),
  instead of ``d`` broadcast multiply-adds.

Minimum of ``--repeats`` jitted calls, alternating; the largest relative
difference of each value from ``expm_small``'s.

Usage::

    python benchmarks/expm_pairs.py                   # d = 6, M = 4, 288 pairs
    python benchmarks/expm_pairs.py --scale=10        # a trained state's norms
    python benchmarks/expm_pairs.py --out=FILE.json   # also write the rows
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np

from vaells_jax.core import expm as expm_module
from vaells_jax.core.expm import expm_small
from vaells_jax.core.solvers import pairs

PRODUCTS = {
  "sum over a product axis": lambda a, b: jnp.sum(a[:, :, None] * b[None], axis=1),
  "einsum": lambda a, b: jnp.einsum("ikp,kjp->ijp", a, b),
}


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--dim", type=int, default=6)
  parser.add_argument("--ops", type=int, default=4)
  parser.add_argument("--pairs", type=int, default=288)
  parser.add_argument("--scale", type=float, default=1.0)
  parser.add_argument("--repeats", type=int, default=30)
  parser.add_argument("--out", default=None, help="also write the rows here")
  args = parser.parse_args(argv)
  d, m, p = args.dim, args.ops, args.pairs
  rng = np.random.default_rng(0)
  psi = jnp.asarray(rng.normal(size=(m, d, d)) * 0.25 / d**0.5, jnp.float32)
  c = jnp.asarray(args.scale * rng.normal(size=(4, p, m)), jnp.float32)
  z0, z1 = (jnp.asarray(rng.normal(size=(p, d)), jnp.float32) for _ in range(2))
  norms = np.abs(np.einsum("kpm,mij->kpij", c, psi)).sum(-2).max(-1)

  def small(c):  # [..., P, M] -> f [..., P]
    moved = jnp.einsum(
      "...ij,...j->...i", expm_small(jnp.einsum("...m,mij->...ij", c, psi)), z0
    )
    return 0.5 * jnp.sum((z1 - moved) ** 2, axis=-1)

  def rows(c):  # [..., P, M] -> pgd's M rows [..., P]
    return tuple(jnp.moveaxis(c, -1, 0))

  cases = {
    "value+grad, expm_small": (jax.grad(lambda c: small(c).sum()), c[0]),
    "value+grad, pgd": (
      lambda c: jnp.stack(
        pairs.value_and_grad_general(rows(c), psi, z0.T, z1.T)[1], -1
      ),
      c[0],
    ),
    "4 values, expm_small": (small, c),
    "4 values, pgd": (lambda c: pairs.data_general(rows(c), psi, z0.T, z1.T), c),
  }
  fns = {name: jax.jit(fn) for name, (fn, _) in cases.items()}
  ours = expm_module._pairs_product
  for name, product in PRODUCTS.items():  # traced now, with the product swapped
    expm_module._pairs_product = product
    case = f"4 values, product by {name}"
    cases[case] = cases["4 values, pgd"]
    fns[case] = (
      jax.jit(lambda c: pairs.data_general(rows(c), psi, z0.T, z1.T)).lower(c).compile()
    )
  expm_module._pairs_product = ours
  results = {
    name: jax.block_until_ready(fns[name](x)) for name, (_, x) in cases.items()
  }
  times = {name: [] for name in cases}
  for _ in range(args.repeats):
    for name, (_, x) in cases.items():
      start = time.perf_counter()
      jax.block_until_ready(fns[name](x))
      times[name].append(time.perf_counter() - start)
  print(
    f"device={jax.devices()[0]} jax={jax.__version__} d={d} M={m} pairs={p} "
    f"||A||_1 median {np.median(norms):.2g}, max {norms.max():.2g}"
  )
  print("| case | ms (min) | vs expm_small | max relative difference |")
  print("|---|---|---|---|")
  table = {}
  for name in cases:
    base = name.split(",")[0] + ", expm_small"
    value, reference = (np.asarray(results[k]) for k in (name, base))
    difference = np.abs(value - reference).max() / np.abs(reference).max()
    table[name] = {"ms": 1e3 * min(times[name]), "difference": float(difference)}
    table[name]["speedup"] = min(times[base]) / min(times[name])
    print(
      f"| {name} | {table[name]['ms']:.2f} "
      f"| {table[name]['speedup']:.1f}x | {difference:.1e} |"
    )
  out = {
    "settings": {"d": d, "M": m, "pairs": p, "scale": args.scale},
    "norm_median": float(np.median(norms)),
    "norm_max": float(norms.max()),
    "cases": table,
  }
  if args.out:
    with open(args.out, "w") as f:
      json.dump(out, f, indent=2)
  return out


if __name__ == "__main__":
  main()
