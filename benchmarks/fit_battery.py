"""How often ``fit(x, labels)`` learns a user's manifold, and whether it says so.

``python benchmarks/fit_battery.py --seeds=100-109 --out=fit_battery.json``

Each family makes user-shaped data from a seed: noisy curves in 2-D mapped
linearly (``U[-1, 1]^{D x 2}``) to ``D`` dimensions, noise 0.01 per
coordinate, one class per curve. ``knots_3d`` (beyond the battery, not in
the default ``--families``) maps curves in 3-D: a trefoil knot and a
circle whose height swings, which no plane holds. :func:`vaells_jax.fit`
gets the points and labels only, with its defaults for such data
(:func:`vaells_jax.runs.fit_defaults.defaults`; ``--set`` changes them); the
true curves, which fit never sees,
then score the returned model as the experiments are scored
(:func:`vaells_jax.evaluation.synthetic_report.learned_structure`: orbit
coverage >= 0.9 and decoded prior samples within 15 noise levels), and the
model's own verdict is read against that. Results go to ``--out`` after every
fit (a rerun continues where it stopped).

``--first-tries=FILE`` takes the rows of a ``--tries=1`` run (the same
seeds, families and anchors) whose verdict is ``learned`` as they are: fit
stops after such a first try, and a try is the same computation on the same
machine (the rerun rows print their first try's ``latent_coverage`` beside
the stored one to show it).

``--members`` also scores every member of the kept try's population at its
selection step (with ``--set select_at=1``: every member trained to the
end), to tell a seed whose members all failed from one where the selection
missed a member that learned. ``--anchors-per-class`` changes fit's 3.

``--anchors=spread,random,even`` compares anchor choices on the same seeds:
fit's default (``spread``), random training points (``random``) and points
evenly spaced along the true curves (``even``, the upper bound a user
cannot have). ``--families`` picks families; ``--steps`` shortens the runs
(``--quick``: a tiny run of each family, for the tests).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import platform
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from seed_rates import seed_range  # noqa: E402

NOISE = 0.01
GRID = 1000  # points of each true curve, at equal arc length


def _ring(radius, wobble=0.0, ratio=1.0, turn=0.0):
  """A closed curve ``r(t) = radius (1 + wobble cos 3t)``, squashed by
  ``ratio`` along one axis and turned by ``turn``: ``t -> [.., 2]``."""

  def curve(t):
    angle = 2 * np.pi * t
    r = radius * (1 + wobble * np.cos(3 * angle))
    p = np.stack([r * np.cos(angle), ratio * r * np.sin(angle)], -1)
    c, s = np.cos(turn), np.sin(turn)
    return p @ np.array([[c, s], [-s, c]])

  return curve, True


def _spiral_arc(t):
  """An open curve: a spiral arc of 1.25 turns' worth of angle, r 0.5 -> 2."""
  angle = 1.5 * np.pi * t
  r = 0.5 + 1.5 * t
  return np.stack([r * np.cos(angle), r * np.sin(angle)], -1)


def _s_curve(t):
  """An open curve whose curvature changes sign: an S of two three-quarter
  turns of radius 1, 4 tall."""
  a = 3 * np.pi * (t - 0.5)
  return np.stack([np.sin(a), np.sign(a) * (np.cos(a) - 1)], -1)


def _trefoil(t):
  """A closed curve in 3-D that no plane holds: the trefoil knot, ~1 across."""
  a = 2 * np.pi * t
  p = [np.sin(a) + 2 * np.sin(2 * a), np.cos(a) - 2 * np.cos(2 * a), -np.sin(3 * a)]
  return np.stack(p, -1) / 3


def _seam(t):
  """A closed curve in 3-D: a circle of radius 2 whose height swings twice."""
  a = 2 * np.pi * t
  return np.stack([2 * np.cos(a), 2 * np.sin(a), 0.8 * np.sin(2 * a)], -1)


# family -> (curves, points per class, input dimension, scale, shift)
FAMILIES = {
  "circles": ([_ring(1.0), _ring(2.0)], (100, 100), 10, 1.0, 0.0),
  "circles_scaled": ([_ring(1.0), _ring(2.0)], (100, 100), 10, 100.0, 1000.0),
  "ellipses": (
    [_ring(0.6, ratio=0.6), _ring(1.2, ratio=0.7, turn=0.5), _ring(2.0, ratio=0.8)],
    (60, 120, 180),
    10,
    1.0,
    0.0,
  ),
  "unequal": ([_ring(0.7), _ring(1.5)], (40, 200), 10, 1.0, 0.0),
  "circles_100d": ([_ring(1.0), _ring(2.0)], (100, 100), 100, 1.0, 0.0),
  "wobbly_100d": ([_ring(1.0, 0.25), _ring(2.0, 0.25)], (120, 120), 100, 1.0, 0.0),
  "arc": ([(_spiral_arc, False)], (200,), 10, 1.0, 0.0),
  "s_curve": ([(_s_curve, False)], (200,), 20, 1.0, 0.0),
  "knots_3d": ([(_trefoil, True), (_seam, True)], (150, 100), 10, 1.0, 0.0),
}
BEYOND = ("knots_3d",)  # not in the default --families
CALIBRATION = ("circles", "arc")  # the verdict's thresholds were set on these


def _equal_arc(points, closed):
  """``points [T, D]`` along a curve resampled to :data:`GRID` points at
  equal arc length."""
  if closed:
    points = np.concatenate([points, points[:1]])
  length = np.r_[0, np.cumsum(np.linalg.norm(np.diff(points, axis=0), axis=1))]
  end = length[-1] * (1 - 1 / GRID) if closed else length[-1]
  at = np.linspace(0, end, GRID)
  return np.stack(
    [np.interp(at, length, points[:, k]) for k in range(points.shape[1])], 1
  )


def family_data(name: str, seed: int):
  """``(x [N, D], labels [N], manifold [C G, D], manifold_labels [C G])``
  of family ``name``, in the user's units."""
  curves, counts, dim, scale, shift = FAMILIES[name]
  rng = np.random.default_rng(seed)
  mapping = rng.uniform(-1, 1, (dim, curves[0][0](np.zeros(1)).shape[-1]))
  xs, labels, grid, grid_labels = [], [], [], []
  for c, ((curve, closed), n) in enumerate(zip(curves, counts, strict=True)):
    t = rng.uniform(0, 1, n)
    xs.append(curve(t) @ mapping.T + NOISE * rng.standard_normal((n, dim)))
    labels.append(np.full(n, c))
    dense = curve(np.linspace(0, 1, 20 * GRID, endpoint=not closed)) @ mapping.T
    grid.append(_equal_arc(dense, closed))
    grid_labels.append(np.full(GRID, c))
  x, labels = np.concatenate(xs), np.concatenate(labels)
  order = rng.permutation(len(x))
  manifold = np.concatenate(grid)
  return (
    x[order] * scale + shift,
    labels[order],
    manifold * scale + shift,
    np.concatenate(grid_labels),
  )


def even_anchors(manifold, manifold_labels, per_class):
  """``per_class`` points evenly spaced along each true curve: ``[C, A, D]``."""
  picks = (np.arange(per_class) * GRID) // per_class
  return np.stack(
    [manifold[manifold_labels == c][picks] for c in np.unique(manifold_labels)]
  )


def one_fit(
  family,
  seed,
  anchor_choice,
  own=None,
  anchors_per_class=3,
  tries=None,
  members=False,
) -> dict:
  """One ``fit`` call on ``family``'s data of ``seed`` with ``own``
  (:func:`family_defaults`, fit's own by default; ``tries``: instead of
  its), scored on the true curves; ``members``: also every member of the
  kept try's population at its selection step (all trained to the end with
  ``select_at=1``)."""
  from vaells_jax.runs.fit import fit

  x, labels, manifold, manifold_labels = family_data(family, seed)
  own = own or family_defaults(family, seed)
  anchors = None
  if anchor_choice == "even":
    anchors = even_anchors(manifold, manifold_labels, anchors_per_class)
  start = time.perf_counter()
  with tempfile.TemporaryDirectory() as workdir:
    model = fit(
      x,
      labels,
      anchors,
      config=own.config,
      anchors_per_class=anchors_per_class,
      anchor_choice="random" if anchor_choice == "random" else "spread",
      workdir=workdir,
      log=lambda line: None,
      tries=tries or own.tries,
      retry_changes=own.retry_changes,
    )
    wall = time.perf_counter() - start
    tried = pathlib.Path(workdir, "tries.json")
    kept = (
      json.loads(tried.read_text()) if tried.exists() else {"kept": ".", "tries": []}
    )
    summary = json.loads(
      pathlib.Path(workdir, kept["kept"], "summary.json").read_text()
    )
    population = summary.get("population", {})
    each_try = [  # every try's signals and ground truth (the verdict's calibration)
      _try_scores(pathlib.Path(workdir), t["folder"], family, seed)
      for t in kept["tries"] or [{"folder": "."}]
    ]
    scored_members = (
      [_scored(m, family, seed) for m in _members(pathlib.Path(workdir, kept["kept"]))]
      if members and population
      else None
    )
  return {
    **_scored(model, family, seed),
    "verdict": model.verdict["verdict"],
    "signals": model.verdict["signals"],
    "member_signals": population.get("signals", {}),
    "selected_member": population.get("selected_member"),
    "tries": max(1, len(kept["tries"])),  # one try writes no tries.json
    "kept_try": kept["kept"],
    "try_coverages": [t["latent_coverage"] for t in kept["tries"]],
    "try_scores": each_try,
    "wall_time_s": wall,
    **({"members": scored_members} if scored_members is not None else {}),
  }


def family_defaults(family, seed, adjust=None):
  """fit's defaults for ``family``'s data of ``seed``
  (:func:`vaells_jax.runs.fit_defaults.defaults`), the config changed by
  ``adjust`` and given the seed."""
  from vaells_jax.runs.fit_defaults import defaults

  own = defaults(None, family_data(family, seed)[1])
  config = (adjust or (lambda c: c))(own.config)
  return own._replace(config=dataclasses.replace(config, seed=seed))


def _scored(model, family, seed) -> dict:
  """``model`` (in the user's units) scored on ``family``'s true curves as
  the experiments are scored."""
  from vaells_jax.evaluation.synthetic_report import eval_keys, learned_structure

  _, _, manifold, manifold_labels = family_data(family, seed)
  data = model.data
  shapes = {  # required beside a manifold; the scoring reads none of them
    "pos_train": np.zeros((len(data.x_train), 2)),
    "t_train": np.zeros(len(data.x_train)),
    "pos_test": np.zeros((len(data.x_test), 2)),
    "t_test": np.zeros(len(data.x_test)),
    "anchor_pos": np.zeros(data.anchors.shape[:2] + (2,)),
    "mapping": np.zeros((data.data_dim, 2)),
  }
  truth = dataclasses.replace(
    data,
    manifold=manifold,
    manifold_labels=manifold_labels,
    noise_std=NOISE * FAMILIES[family][3],
    **shapes,
  )
  scores = learned_structure(dataclasses.replace(model, data=truth), eval_keys(seed)[0])
  return {k: v if isinstance(v, bool) else float(v) for k, v in scores.items()}


def _try_scores(workdir: pathlib.Path, name: str, family, seed) -> dict:
  """The verdict signals of one try of a fit in ``workdir`` (folder
  ``name``) and its scores on the true curves."""
  from vaells_jax.api import load

  model = load(workdir / name, kept=False)
  verdict = model.verdict or {}
  return {
    "folder": name,
    "verdict": verdict.get("verdict"),
    "signals": verdict.get("signals"),
    **_scored(model, family, seed),
  }


def _members(workdir: pathlib.Path) -> list:
  """Every member of the population a fit trained in ``workdir``, at its
  selection step, as models in the user's units."""
  from population_members import restored_members  # imports jax: after fit

  from vaells_jax.api import TrainedVAELLS
  from vaells_jax.data.conditioning import INPUT_MAP_NAME, InputMap

  config, data, members = restored_members(workdir)
  input_map = InputMap.load(workdir / INPUT_MAP_NAME)
  return [
    dataclasses.replace(
      TrainedVAELLS(config, m.params, data),
      data=input_map.user_data(data),
      input_map=input_map,
    )
    for m in members
  ]


def table(results: dict) -> str:
  """Per family and anchor choice: success rate, the verdicts against the
  ground truth (precision and recall of ``learned``; the verdict is taken
  again from the stored signals with the library's thresholds) and wall
  times."""
  from vaells_jax.runs.verdict import decide

  results = {
    k: {**r, "verdict": decide(r["signals"])["verdict"]} for k, r in results.items()
  }
  groups = {}
  for r in results.values():
    groups.setdefault((r["family"], r["anchors"]), []).append(r)
  lines = [
    "| family | anchors | learned (ground truth) | verdict learned / uncertain "
    "/ not learned | precision | recall | wall time s |",
    "|---|---|---|---|---|---|---|",
  ]
  for (family, anchors), rows in sorted(groups.items()):
    ok = np.array([r["success"] for r in rows])
    said = np.array([r["verdict"] == "learned" for r in rows])
    counts = [sum(r["verdict"] == v for r in rows) for v in VERDICT_ORDER]
    precision = f"{(ok & said).sum()}/{said.sum()}" if said.any() else "-"
    recall = f"{(ok & said).sum()}/{ok.sum()}" if ok.any() else "-"
    walls = [r["wall_time_s"] for r in rows]
    lines.append(
      f"| {family} | {anchors} | {ok.sum()} of {len(rows)} | "
      f"{' / '.join(map(str, counts))} | {precision} | {recall} | "
      f"{min(walls):.0f}-{max(walls):.0f} |"
    )
  rows = list(results.values())
  ok = np.array([r["success"] for r in rows])
  said = np.array([r["verdict"] == "learned" for r in rows])
  lines.append(
    f"\nAll: verdict `learned` on {said.sum()} fits, {(ok & said).sum()} of them "
    f"learned (precision); {(ok & said).sum()} of the {ok.sum()} fits that "
    "learned were called `learned` (recall)."
  )
  return "\n".join(lines)


VERDICT_ORDER = ("learned", "uncertain", "not learned")


def _learned(row) -> bool:
  from vaells_jax.runs.verdict import decide

  return decide(row["signals"])["verdict"] == "learned"


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--seeds", default="100-109", help="e.g. 100-109 or 1,2,3")
  parser.add_argument(
    "--families", default=",".join(f for f in FAMILIES if f not in BEYOND)
  )
  parser.add_argument("--anchors", default="spread", help="spread,random,even")
  parser.add_argument("--steps", type=int, default=None, help="num_steps of each fit")
  parser.add_argument("--anchors-per-class", type=int, default=3)
  parser.add_argument(
    "--members",
    action="store_true",
    help="score every member of the kept population on the truth (with "
    "--set select_at=1: each trained to the end)",
  )
  parser.add_argument("--quick", action="store_true", help="tiny runs (tests)")
  parser.add_argument(
    "--tries", type=int, default=None, help="fit's tries (default: fit's own)"
  )
  parser.add_argument(
    "--set",
    action="append",
    default=[],
    metavar="KEY=VALUE",
    help="a Config field changed from fit's default (repeatable)",
  )
  parser.add_argument(
    "--warm-start",
    type=float,
    default=None,
    metavar="ARC",
    help="open curves' warm-start layout on ARC of a turn (0: a segment)",
  )
  parser.add_argument("--out", default="fit_battery.json")
  parser.add_argument("--first-tries", default=None, metavar="FILE")
  args = parser.parse_args(argv)
  import jax

  from vaells_jax.config import override
  from vaells_jax.runs import fit as fit_module

  if args.warm_start is not None:
    fit_module.WARM_START_OPEN_ARC["mlp"] = args.warm_start

  def adjust(config):
    """fit's config with the command's changes."""
    if args.quick:
      config = dataclasses.replace(
        config, num_steps=4, batch_size=8, hidden=(16,), population=2, log_every=2
      )
    if args.steps:
      config = dataclasses.replace(config, num_steps=args.steps)
    return override(config, dict(s.split("=", 1) for s in args.set))

  tries = args.tries or (1 if args.quick else None)
  variant = (
    "".join(f"_{s}" for s in args.set)
    + (f"_anchors{args.anchors_per_class}" if args.anchors_per_class != 3 else "")
    + ("_members" if args.members else "")
    + ("" if args.warm_start is None else f"_warm{args.warm_start:g}")
    + (f"_tries{tries}" if tries and tries > 1 else "")
  )
  print(
    f"jax {jax.__version__}, {platform.node()}"
  )  # jax not started: fit takes the cores
  out = pathlib.Path(args.out)
  results = json.loads(out.read_text()) if out.exists() else {}
  first = (
    json.loads(pathlib.Path(args.first_tries).read_text()) if args.first_tries else {}
  )
  first = {(r["family"], r["anchors"], r["seed"]): r for r in first.values()}
  for family in args.families.split(","):
    for anchors in args.anchors.split(","):
      for seed in seed_range(args.seeds):
        own = family_defaults(family, seed, adjust)
        each = f"_tries{own.tries}" if not tries and own.tries > 1 else ""
        steps = own.config.num_steps
        name = f"{family}_{anchors}{variant}{each}_seed{seed}_steps{steps}"
        earlier = first.get((family, anchors, seed))
        if name not in results and earlier and _learned(earlier):
          results[name] = {**earlier, "anchors": anchors + variant + each, "tries": 1}
          out.write_text(json.dumps(results, indent=2))
        if name not in results:
          results[name] = {
            "family": family,
            "anchors": anchors + variant + each,
            "seed": seed,
            "num_steps": steps,
            **one_fit(
              family,
              seed,
              anchors,
              own,
              anchors_per_class=args.anchors_per_class,
              tries=tries,
              members=args.members,
            ),
          }
          out.write_text(json.dumps(results, indent=2))
        r = results[name]
        if earlier and r.get("try_coverages"):
          print(
            f"  first try: latent_coverage {r['try_coverages'][0]:.4f}, "
            f"stored {earlier['signals']['latent_coverage']:.4f}"
          )
        print(
          f"{family} {anchors} seed {seed}: success {r['success']} (coverage "
          f"{r['orbit_coverage']:.2f}, samples {r['sample_manifold_distance']:.1f}), "
          f"verdict {r['verdict']} (latent_coverage "
          f"{r['signals']['latent_coverage']:.2f}), {r['wall_time_s']:.0f} s",
          flush=True,
        )
  print(table(results))
  return results


if __name__ == "__main__":
  main()
