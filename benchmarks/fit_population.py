"""How often ``fit()`` learns a user's manifold, single run against population.

``python benchmarks/fit_population.py --seeds=100-109 --out=fit_population.json``

The data are a user's arrays, not an experiment's: two noisy concentric
circles (radii 1 and 2, 100 training and 100 test points each) mapped
linearly to 10 dimensions, handed to :func:`vaells_jax.fit` as ``x`` and
``labels`` (fit holds out its own split and picks 3 random training points
per class as anchors). Each seed trains ``fit`` twice with the library's
default configuration (the paper's concentric settings, 4000 steps): once as
one run (``population=1``) and once with the population ``fit`` uses when
no config is given (:data:`vaells_jax.runs.fit.FIT_POPULATION`). The
ground truth, which ``fit`` never sees, then scores the returned model as
the sensitivity studies do
(:func:`vaells_jax.evaluation.synthetic_report.learned_structure`: orbit
coverage >= 0.9 of the true circles and decoded prior samples within 15 noise
levels). Results go to ``--out`` after every run (a rerun continues).

``--study=DIR`` instead runs the population study of
:func:`vaells_jax.runs.sensitivity.population_study` on the same circles
(every member trained to the end, its ground truth and selection signals at
10-100% of the steps; anchors at random places on the circles, as fit's are
random points): which members learn, and which signal would have picked them.
``--radii``, ``--points`` and ``--dim`` change the circles (e.g. the
concentric experiment's ``--radii=0.5,1 --points=200 --dim=20``).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import jax  # noqa: E402

from vaells_jax.api import TrainedVAELLS  # noqa: E402
from vaells_jax.config import Config  # noqa: E402
from vaells_jax.data.synthetic import make_concentric  # noqa: E402
from vaells_jax.evaluation.synthetic_report import (  # noqa: E402
  eval_keys,
  learned_structure,
)
from vaells_jax.runs.fit import FIT_POPULATION, fit  # noqa: E402
from vaells_jax.runs.sensitivity import population_study  # noqa: E402


def user_data(seed: int, radii=(1.0, 2.0), points=100, dim=10, placement="even"):
  """The user's circles, with the ground truth kept for scoring."""
  return make_concentric(
    seed=seed,
    num_per_circle=points,
    num_test_per_circle=100,
    radii=radii,
    data_dim=dim,
    noise_std=0.01,
    anchor_placement=placement,
  )


def one_fit(seed, population, num_steps, anchors_per_class, **shape) -> dict:
  data = user_data(seed, **shape)
  config = Config(seed=seed, population=population, num_steps=num_steps)
  start = time.perf_counter()
  with tempfile.TemporaryDirectory() as workdir:
    model = fit(
      data.x_train,
      data.labels_train,
      config=config,
      anchors_per_class=anchors_per_class,
      workdir=workdir,
      log=lambda line: None,
    )
  wall = time.perf_counter() - start
  trained = TrainedVAELLS(model.config, model.params, data)
  key = eval_keys(seed)[0]  # the run report's prior-sample key
  return {**learned_structure(trained, key), "wall_time_s": wall}


def _seeds(text: str) -> list[int]:
  if "-" in text:
    lo, hi = text.split("-")
    return list(range(int(lo), int(hi) + 1))
  return [int(s) for s in text.split(",")]


def main(argv=None) -> dict | None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--seeds", default="100-109", help="e.g. 100-109 or 1,2,3")
  parser.add_argument(
    "--populations",
    default=f"1,{FIT_POPULATION}",
    help="members of each fit (--study: the last)",
  )
  parser.add_argument(
    "--anchors-per-class", type=int, default=3, help="fit's anchors_per_class"
  )
  parser.add_argument("--num-steps", type=int, default=Config().num_steps)
  parser.add_argument("--out", default="fit_population.json")
  parser.add_argument("--study", default=None, metavar="DIR")
  parser.add_argument("--radii", default="1,2", help="the two circles' radii")
  parser.add_argument("--points", type=int, default=100, help="per circle")
  parser.add_argument("--dim", type=int, default=10, help="input dimension")
  args = parser.parse_args(argv)
  populations = [int(k) for k in args.populations.split(",")]
  shape = dict(
    radii=tuple(float(r) for r in args.radii.split(",")),
    points=args.points,
    dim=args.dim,
  )
  print(f"jax {jax.__version__}, {jax.devices()[0].device_kind}, {platform.node()}")
  if args.study:
    summary = population_study(
      Config(population=populations[-1], num_steps=args.num_steps),
      lambda c: user_data(c.seed, **shape, placement="random"),
      _seeds(args.seeds),
      args.study,
    )
    print(pathlib.Path(args.study, "sensitivity.md").read_text())
    return summary
  out = pathlib.Path(args.out)
  results = json.loads(out.read_text()) if out.exists() else {}
  for seed in _seeds(args.seeds):
    for k in populations:
      name = f"seed{seed}_k{k}_a{args.anchors_per_class}"
      if name not in results:
        results[name] = {
          "seed": seed,
          "population": k,
          "anchors_per_class": args.anchors_per_class,
          **one_fit(seed, k, args.num_steps, args.anchors_per_class, **shape),
        }
        out.write_text(json.dumps(results, indent=2))
      r = results[name]
      print(
        f"seed {seed} population {k}: success {r['success']} (coverage "
        f"{r['orbit_coverage']:.2f}, samples {r['sample_manifold_distance']:.1f}), "
        f"{r['wall_time_s']:.0f} s",
        flush=True,
      )
  for k in populations:
    rows = [
      r
      for r in results.values()
      if r["population"] == k and r["anchors_per_class"] == args.anchors_per_class
    ]
    wins = sum(r["success"] for r in rows)
    times = [r["wall_time_s"] for r in rows]
    print(
      f"population {k}: {wins} of {len(rows)} seeds learned the circles; "
      f"fit() {min(times):.0f}-{max(times):.0f} s"
    )


if __name__ == "__main__":
  main()
