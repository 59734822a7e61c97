"""How often ``fit(x, labels)`` learns a user's manifold, and whether it says so.

``python benchmarks/fit_battery.py --seeds=100-109 --out=fit_battery.json``

Each family (:class:`Family`) makes user-shaped data from a seed: noisy
curves in 2-D mapped linearly (``U[-1, 1]^{D x 2}``) to ``D`` dimensions,
noise 0.01 per coordinate unless the family says otherwise, one class per
curve. ``knots_3d`` and ``torus`` (beyond the battery, not in the default
``--families``) map a trefoil knot and a circle whose height swings in
3-D, and the flat torus in 4-D. :func:`vaells_jax.fit` gets the points and
labels only (``unlabelled``: the points alone), with its defaults for such
data (:func:`vaells_jax.runs.fit_defaults.defaults`; ``--set`` changes
them); the true curves, which fit never sees, then score the returned
model as the experiments are scored
(:func:`vaells_jax.evaluation.synthetic_report.learned_structure`: orbit
coverage >= 0.9 and decoded prior samples within 15 noise levels, a noise
level being 0.01 on every family; a surface by :func:`surface_coverage`),
and the model's own verdict is read against that. Results go to ``--out``
after every fit (a rerun continues where it stopped).

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
from collections.abc import Callable
from typing import NamedTuple

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


def _wave(t):
  """An open curve whose curvature changes sign twice: a sine wave of one
  and a half periods, 4 long and 1.4 high."""
  return np.stack([4 * (t - 0.5), 0.7 * np.sin(3 * np.pi * t)], -1)


def _spiral(t):
  """An open curve: a spiral of 1.75 turns, r 0.3 -> 2 (the swiss roll's
  kind)."""
  angle = 3.5 * np.pi * t
  r = 0.3 + 1.7 * t
  return np.stack([r * np.cos(angle), r * np.sin(angle)], -1)


def _torus(t):
  """A two-dimensional manifold: the flat torus in 4-D, two circles of
  radius 1 and 1.5 turned by the two parameters ``t [.., 2]``."""
  a, b = 2 * np.pi * t[..., 0], 2 * np.pi * t[..., 1]
  return np.stack([np.cos(a), np.sin(a), 1.5 * np.cos(b), 1.5 * np.sin(b)], -1)


def _uneven(n, rng):
  """Curve parameters dense on a fifth of the curve (half the points) and
  sparse on the rest: 4 times the spacing."""
  dense = rng.uniform(0, 0.2, n // 2)
  return np.concatenate([dense, rng.uniform(0.2, 1, n - n // 2)])


class Family(NamedTuple):
  """A battery family: ``curves`` ``(t -> [.., d], closed)``, one class
  each, with ``counts`` points, mapped to ``dim`` dimensions, times
  ``scale`` plus ``shift``; ``noise`` per coordinate, curve parameters
  drawn by ``sampling(n, rng)`` (uniform by default), ``labelled``: fit is
  given the labels; ``params``: the manifold's dimension (2: a surface,
  ``t [.., 2]``)."""

  curves: list
  counts: tuple
  dim: int
  scale: float = 1.0
  shift: float = 0.0
  noise: float = NOISE
  sampling: Callable | None = None
  labelled: bool = True
  params: int = 1


TWO_RINGS = [_ring(1.0), _ring(2.0)]
FAMILIES = {
  "circles": Family(TWO_RINGS, (100, 100), 10),
  "circles_scaled": Family(TWO_RINGS, (100, 100), 10, 100.0, 1000.0),
  "ellipses": Family(
    [_ring(0.6, ratio=0.6), _ring(1.2, ratio=0.7, turn=0.5), _ring(2.0, ratio=0.8)],
    (60, 120, 180),
    10,
  ),
  "unequal": Family([_ring(0.7), _ring(1.5)], (40, 200), 10),
  "circles_100d": Family(TWO_RINGS, (100, 100), 100),
  "wobbly_100d": Family([_ring(1.0, 0.25), _ring(2.0, 0.25)], (120, 120), 100),
  "arc": Family([(_spiral_arc, False)], (200,), 10),
  "s_curve": Family([(_s_curve, False)], (200,), 20),
  "wave": Family([(_wave, False)], (200,), 20),
  "spiral": Family([(_spiral, False)], (300,), 20),
  "uneven": Family(TWO_RINGS, (150, 150), 10, sampling=_uneven),
  "noise_0.03": Family(TWO_RINGS, (100, 100), 10, noise=0.03),
  "noise_0.1": Family(TWO_RINGS, (100, 100), 10, noise=0.1),
  "few_points": Family(TWO_RINGS, (50, 50), 10),
  "ten_classes": Family([_ring(0.5 + 0.25 * k) for k in range(10)], (60,) * 10, 10),
  "unlabelled": Family(
    [_ring(0.7), _ring(1.5), _ring(2.3)], (100, 100, 100), 10, labelled=False
  ),
  "knots_3d": Family([(_trefoil, True), (_seam, True)], (150, 100), 10),
  "torus": Family([(_torus, True)], (400,), 20, params=2),
}
BEYOND = ("knots_3d", "torus")  # not in the default --families
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


SURFACE_GRID = 40  # a surface's true points: a 40 x 40 grid of its parameters


def family_data(name: str, seed: int):
  """``(x [N, D], labels [N], manifold [C G, D], manifold_labels [C G])``
  of family ``name``, in the user's units (``labels`` the true classes,
  given to fit only for a ``labelled`` family)."""
  family = FAMILIES[name]
  rng = np.random.default_rng(seed)
  shape = (family.params,) if family.params > 1 else ()
  mapping = rng.uniform(-1, 1, (family.dim, family.curves[0][0](np.zeros(shape)).size))
  xs, labels, grid, grid_labels = [], [], [], []
  for c, ((curve, closed), n) in enumerate(
    zip(family.curves, family.counts, strict=True)
  ):
    if family.sampling is not None:
      t = family.sampling(n, rng)
    else:
      t = rng.uniform(0, 1, (n, *shape))
    xs.append(
      curve(t) @ mapping.T + family.noise * rng.standard_normal((n, family.dim))
    )
    labels.append(np.full(n, c))
    if family.params > 1:
      side = np.arange(SURFACE_GRID) / SURFACE_GRID
      cells = np.stack(np.meshgrid(side, side, indexing="ij"), -1).reshape(-1, 2)
      grid.append(curve(cells) @ mapping.T)
    else:
      dense = curve(np.linspace(0, 1, 20 * GRID, endpoint=not closed)) @ mapping.T
      grid.append(_equal_arc(dense, closed))
    grid_labels.append(np.full(len(grid[-1]), c))
  x, labels = np.concatenate(xs), np.concatenate(labels)
  order = rng.permutation(len(x))
  manifold = np.concatenate(grid)
  return (
    x[order] * family.scale + family.shift,
    labels[order],
    manifold * family.scale + family.shift,
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
  if anchor_choice == "even" and FAMILIES[family].labelled:
    anchors = even_anchors(manifold, manifold_labels, anchors_per_class)
  start = time.perf_counter()
  with tempfile.TemporaryDirectory() as workdir:
    model = fit(
      x,
      labels if FAMILIES[family].labelled else None,
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
  from vaells_jax.data.anchors import separate_pieces
  from vaells_jax.runs.fit_defaults import defaults

  x, labels, _, _ = family_data(family, seed)
  own = defaults(None, labels if FAMILIES[family].labelled else separate_pieces(x))
  config = (adjust or (lambda c: c))(own.config)
  return own._replace(config=dataclasses.replace(config, seed=seed))


def _scored(model, family, seed) -> dict:
  """``model`` (in the user's units) scored on ``family``'s true curves as
  the experiments are scored, in units of the battery's :data:`NOISE` (the
  same absolute distances at every noise level); a surface by
  :func:`surface_coverage`; without labels, each class fit found is scored
  on the true curve its anchors lie on (and fails unless the classes are
  the true curves, one each)."""
  from vaells_jax.evaluation.synthetic_report import (
    eval_keys,
    learned_structure,
    success,
  )

  _, _, manifold, manifold_labels = family_data(family, seed)
  order = list(np.unique(manifold_labels))
  found = (
    order
    if FAMILIES[family].labelled
    else _found_curves(model, manifold, manifold_labels)
  )
  order = found or order
  manifold = np.concatenate([manifold[manifold_labels == c] for c in order])
  manifold_labels = np.repeat(np.arange(len(order)), GRID_OF[FAMILIES[family].params])
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
    noise_std=NOISE * FAMILIES[family].scale,
    **shapes,
  )
  truth = dataclasses.replace(model, data=truth)
  scores = learned_structure(truth, eval_keys(seed)[0])
  if FAMILIES[family].params > 1:
    scores["curve_coverage"] = scores["orbit_coverage"]
    scores["orbit_coverage"] = surface_coverage(truth)
    scores["success"] = success(
      scores["orbit_coverage"], scores["sample_manifold_distance"]
    )
  scores["success"] = bool(scores["success"] and found is not None)
  return {k: v if isinstance(v, bool) else float(v) for k, v in scores.items()}


GRID_OF = {1: GRID, 2: SURFACE_GRID**2}  # true points of a curve, of a surface


def _found_curves(model, manifold, manifold_labels):
  """The true curve of each class of ``model`` (by its anchors' nearest
  true points), or None unless they are the true curves, one each."""
  anchors = np.asarray(model.anchors, np.float64)
  owners = []
  for per_class in anchors:
    near = np.linalg.norm(per_class[:, None] - manifold[None], axis=-1).argmin(1)
    owners.append(int(np.bincount(manifold_labels[near]).argmax()))
  curves = np.unique(manifold_labels)
  return owners if sorted(owners) == list(curves) else None


SURFACE_CELLS = 10  # a surface's parameter square in 10 x 10 cells
SURFACE_STEPS = 61  # coefficients of each of the two operators


def surface_coverage(trained, threshold: float = 40.0) -> float:
  """How much of a true surface the two strongest operators' combined flows
  cover: the fraction of its parameter square's 10 x 10 cells that the
  points ``expm(a Psi_1 + b Psi_2) z`` reach, over a grid of ``(a, b)``
  spanning a turn of each operator each way from an anchor ``z``, counting
  the grid's points that stay within ``threshold`` noise levels of the
  surface and connect to the anchor (as :func:`orbit_coverage` follows a
  curve's orbit while it stays on the curve); the best anchor's. A flow
  along one direction of a torus reaches one row of cells (0.1), both
  directions reach all of them (1)."""
  from scipy import ndimage

  from vaells_jax.evaluation.fixed_shapes import RowPrograms
  from vaells_jax.evaluation.metrics import nearest_neighbours
  from vaells_jax.training.coverage import surface_coefficients

  data, rows = trained.data, RowPrograms(trained)
  coeffs = surface_coefficients(trained.psi, SURFACE_STEPS)
  anchors = rows.encode(trained.anchors).reshape(-1, trained.psi.shape[-1])
  params = np.stack(
    np.meshgrid(
      *[np.arange(SURFACE_GRID) // (SURFACE_GRID // SURFACE_CELLS)] * 2, indexing="ij"
    ),
    -1,
  ).reshape(-1, 2)
  best = 0.0
  for z in anchors:
    decoded = rows.decode(rows.transport(coeffs, z))
    near, gap = nearest_neighbours(
      decoded.reshape(-1, decoded.shape[-1]), data.manifold
    )
    near = near.reshape(decoded.shape[:2])
    close = gap.reshape(decoded.shape[:2]) <= threshold * data.noise_std
    parts, _ = ndimage.label(close)
    centre = parts[SURFACE_STEPS // 2, SURFACE_STEPS // 2]
    if centre == 0:
      continue
    cells = {tuple(c) for c in params[near[parts == centre]]}
    best = max(best, len(cells) / SURFACE_CELLS**2)
  return best


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
