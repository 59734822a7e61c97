"""How coefficient inference scales: pairs, latent dimension, dictionary size.

Times one jitted ``infer_coefficients`` call (a fixed number of iterations,
``tol`` tiny, so every point of a sweep does the same work per pair) while one
of three sizes grows and the others stay fixed:

* pairs ``N``: 10 -> 100 000 (``d=2``, ``M=4``);
* latent dimension ``d``: 2 -> 64 (``N=256``, ``M=4``);
* dictionary size ``M``: 1 -> 16 (``N=1000``, ``d=2``).

For each point it prints the compile time, the min and median time of
repeated calls, the time per pair, and the memory XLA plans for the program
(arguments + outputs + temporaries, from ``compiled.memory_analysis()``: the
peak the program can need, not a sampled RSS).

Usage::

    python benchmarks/inference_scaling.py            # full sweeps
    python benchmarks/inference_scaling.py --quick    # CI smoke mode
    python benchmarks/inference_scaling.py --method=pgd --sweeps=pairs
    python benchmarks/inference_scaling.py --sweeps=pairs --values=1000,1024
    python benchmarks/inference_scaling.py --out=docs/results/inference_scaling.json
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np

import vaells_jax
from vaells_jax import infer_coefficients, transport

SWEEPS = {
  "pairs": ("N", [10, 100, 1000, 10_000, 100_000], dict(d=2, m=4)),
  "dim": ("d", [2, 4, 8, 16, 32, 64], dict(n=256, m=4)),
  "ops": ("M", [1, 2, 4, 8, 16], dict(n=1000, d=2)),
}
QUICK = {"pairs": [10, 1000], "dim": [2, 4], "ops": [1, 2]}


def make_problem(n: int, d: int, m: int, seed: int = 0):
  """``N`` pairs ``z1 = T_psi(c) z0`` (plus noise) for a random dictionary."""
  rng = np.random.default_rng(seed)
  skew = rng.normal(size=(m, d, d))
  psi = 0.5 * (skew - skew.transpose(0, 2, 1)) + 0.05 * rng.normal(size=(m, d, d))
  psi /= np.sqrt(d)
  z0 = rng.normal(size=(n, d))
  z0 /= np.linalg.norm(z0, axis=-1, keepdims=True)
  coeffs = rng.laplace(scale=0.5, size=(n, m))
  z1 = np.asarray(transport(psi, coeffs, z0)) + 1e-3 * rng.normal(size=(n, d))
  f32 = lambda a: jnp.asarray(a, jnp.float32)  # noqa: E731
  return f32(psi), f32(z0), f32(z1)


def measure(
  n: int, d: int, m: int, iterations: int, repeats: int, method: str = "fista"
) -> dict:
  psi, z0, z1 = make_problem(n, d, m)
  solve = jax.jit(
    lambda psi, z0, z1, key: infer_coefficients(
      psi,
      z0,
      z1,
      l1_weight=1e-6,
      key=key,
      init_range=(-2.5, 2.5),
      max_iter=iterations,
      tol=1e-12,
      method=method,
    )
  )
  key = jax.random.PRNGKey(0)
  start = time.perf_counter()
  compiled = solve.lower(psi, z0, z1, key).compile()
  compile_s = time.perf_counter() - start
  stats = compiled.memory_analysis()
  memory = (
    (
      stats.argument_size_in_bytes
      + stats.output_size_in_bytes
      + stats.temp_size_in_bytes
    )
    if stats is not None
    else float("nan")
  )
  jax.block_until_ready(compiled(psi, z0, z1, key))
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(compiled(psi, z0, z1, key))
    times.append(time.perf_counter() - start)
  best = min(times)
  return {
    "N": n,
    "d": d,
    "M": m,
    "compile_s": compile_s,
    "min_s": best,
    "median_s": float(np.median(times)),
    "us_per_pair": 1e6 * best / n,
    "memory_mb": memory / 2**20,
  }


def main(argv=None) -> dict[str, list[dict]]:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="small sweeps (CI)")
  parser.add_argument(
    "--iterations",
    type=int,
    default=None,
    help="solver iterations per start (default 50; 5 quick)",
  )
  parser.add_argument("--repeats", type=int, default=None)
  parser.add_argument("--method", default="fista", help="infer_coefficients method")
  parser.add_argument(
    "--sweeps", default=",".join(SWEEPS), help="comma-separated sweeps to run"
  )
  parser.add_argument(
    "--values", default=None, help="the sizes of a single sweep, e.g. 1000,1024"
  )
  parser.add_argument("--out", default=None, help="also write the results here")
  args = parser.parse_args(argv)
  iterations = args.iterations or (5 if args.quick else 50)
  repeats = args.repeats or (1 if args.quick else 3)
  print(
    f"device={jax.devices()[0]} jax={jax.__version__} "
    f"vaells_jax={vaells_jax.__version__} iterations={iterations} "
    f"repeats={repeats} method={args.method}"
  )
  results = {}
  for sweep in args.sweeps.split(","):
    name, values, fixed = SWEEPS[sweep]
    values = QUICK[sweep] if args.quick else values
    if args.values:
      values = [int(v) for v in args.values.split(",")]
    sizes = [
      {
        "n": fixed.get("n"),
        "d": fixed.get("d"),
        "m": fixed.get("m"),
        {"N": "n", "d": "d", "M": "m"}[name]: v,
      }
      for v in values
    ]
    rows = [
      measure(s["n"], s["d"], s["m"], iterations, repeats, args.method) for s in sizes
    ]
    results[sweep] = rows
    print(
      f"\n{sweep}: {name} grows, " + ", ".join(f"{k}={v}" for k, v in fixed.items())
    )
    print(
      f"| {name} | time ms (min / median) | µs per pair | compile s "
      "| planned memory MB |"
    )
    print("|---|---|---|---|---|")
    for r in rows:
      print(
        f"| {r[name]} | {1e3 * r['min_s']:.2f} / {1e3 * r['median_s']:.2f} "
        f"| {r['us_per_pair']:.2f} | {r['compile_s']:.1f} "
        f"| {r['memory_mb']:.2f} |"
      )
  if args.out:
    env = {"device": str(jax.devices()[0]), "jax": jax.__version__}
    settings = {"iterations": iterations, "repeats": repeats, "method": args.method}
    with open(args.out, "w") as f:
      json.dump({"environment": env, **settings, "sweeps": results}, f, indent=2)
  return results


if __name__ == "__main__":
  main()
