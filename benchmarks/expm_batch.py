"""The transport data term at d > 2: ``expm_small`` against ``expm_batch`` and
``expm_action`` (:mod:`vaells_jax.core.expm`), in one run.

For ``P`` pairs with ``M`` operators (``||psi_m||_F`` about 0.25, Gaussian
coefficients times ``--scale``), times

* ``value+grad``: ``f(c) = 1/2 sum ||z1 - expm(sum_m c_m psi_m) z0||^2`` and
  its gradient (what a solver iteration needs once), with the matrix from
  ``expm_small`` and from ``expm_batch``;
* ``4 values``: ``f`` at four trial points per pair (the per-pair step
  solver's trials), with ``expm_small``, ``expm_batch`` and ``expm_action``.

Minimum of ``--repeats`` jitted calls, alternating; the largest relative
difference of each value from ``expm_small``'s.

Usage::

    python benchmarks/expm_batch.py                   # d = 6, M = 4, 288 pairs
    python benchmarks/expm_batch.py --dim=10 --ops=1 --scale=5
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from vaells_jax.core.expm import expm_action, expm_batch, expm_small


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--dim", type=int, default=6)
  parser.add_argument("--ops", type=int, default=4)
  parser.add_argument("--pairs", type=int, default=288)
  parser.add_argument("--scale", type=float, default=1.0)
  parser.add_argument("--repeats", type=int, default=30)
  args = parser.parse_args(argv)
  d, m, p = args.dim, args.ops, args.pairs
  rng = np.random.default_rng(0)
  psi = jnp.asarray(rng.normal(size=(m, d, d)) * 0.25 / d**0.5, jnp.float32)
  c = jnp.asarray(args.scale * rng.normal(size=(4, p, m)), jnp.float32)
  z0, z1 = (jnp.asarray(rng.normal(size=(p, d)), jnp.float32) for _ in range(2))
  generators = lambda c: jnp.einsum("...pm,mij->...pij", c, psi)  # noqa: E731
  norms = np.abs(np.asarray(generators(c))).sum(-2).max(-1)

  def data(moved):
    return 0.5 * jnp.sum((z1 - moved) ** 2, axis=-1)

  def by_matrix(expm):
    return lambda c: data(jnp.einsum("...ij,...j->...i", expm(generators(c)), z0))

  def by_action(c):
    a = generators(c).reshape(-1, d, d)
    return data(expm_action(a, jnp.tile(z0, (4, 1))).reshape(4, p, d))

  def batched(expm):  # expm_batch takes one batch axis
    return lambda a: expm(a.reshape(-1, d, d)).reshape(a.shape)

  cases = {
    "value+grad, expm_small": (
      jax.value_and_grad(lambda c: by_matrix(expm_small)(c).sum()),
      c[0],
    ),
    "value+grad, expm_batch": (
      jax.value_and_grad(lambda c: by_matrix(expm_batch)(c).sum()),
      c[0],
    ),
    "4 values, expm_small": (by_matrix(expm_small), c),
    "4 values, expm_batch": (by_matrix(batched(expm_batch)), c),
    "4 values, expm_action": (by_action, c),
  }
  fns = {name: jax.jit(fn) for name, (fn, _) in cases.items()}
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
  for name in cases:
    base = name.split(",")[0] + ", expm_small"
    value, reference = (
      np.asarray(jax.tree_util.tree_leaves(results[k])[0]) for k in (name, base)
    )
    difference = np.abs(value - reference).max() / np.abs(reference).max()
    print(
      f"| {name} | {1e3 * min(times[name]):.2f} "
      f"| {min(times[base]) / min(times[name]):.1f}x | {difference:.1e} |"
    )


if __name__ == "__main__":
  main()
