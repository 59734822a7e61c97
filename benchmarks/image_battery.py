"""How often ``fit(x, labels)`` learns the transformation manifold of images.

``python benchmarks/image_battery.py --seeds=100-109 --out=image_battery.json``

Each family makes images from a seed, three classes of 150 images each, with
one transformation parameter per image that ``fit`` never sees:

* ``rotated_digits``: three MNIST test digits (of three classes drawn from
  2, 3, 4, 5, 7, which no half turn maps onto themselves or each other),
  turned to angles drawn over 360 degrees; 28 x 28, floats in [0, 1].
* ``turning_shapes``: three random constellations of Gaussian blobs turning
  about the centre; 32 x 32, ``uint8`` in 0..255.
* ``shifted_digits`` (an open transformation): three digits shifted
  sideways by -5..5 pixels; 28 x 28.
* ``colour_sprites`` (C = 3): three constellations of coloured blobs moving
  round a circle of radius 7 pixels (a translation, periodic); 32 x 32 x 3.
* ``wide_sprites`` (non-square): three constellations moving round an
  ellipse of 12 x 4 pixels in a 24 x 40 frame.

Pixel noise 0.02 (in [0, 1] units). The true images (no noise) on a grid of
the parameter score the returned model (:func:`scores`):

* ``orbit_coverage``: the strongest operator's orbit from each anchor
  (:data:`ORBIT_POINTS` points two turns long for a rotation, as long for
  any flow: steps set by the operator's spectral norm), decoded; each
  decoded image is assigned the (class, parameter) of its nearest true
  image. A class's coverage is the fraction of its
  :data:`BINS` parameter bins its best anchor's orbit reaches with
  images assigned to the class; the mean over classes.
* ``orbit_purity``: the fraction of those orbits' images assigned to the
  anchor's own class (a turn that makes a 3 into a 5 is not a turn).
* ``sample_class``: the fraction of decoded prior samples of each class whose
  nearest true image is of that class.
* ``sample_distance``: the decoded prior samples' median distance to their
  class's nearest true image, in units of the class's spread (the RMS
  distance of its true images from their mean image): the class's mean
  image, a blur of the whole orbit, scores about 1.

``success``: coverage >= 0.9, purity >= 0.9, sample_class >= 0.9 and
sample_distance <= 0.5. The model's verdict is read against it. Results go
to ``--out`` after every fit (a rerun continues), with each call's time
and where it went (``phases_s``); ``--keep DIR`` keeps each fit's workdir
(``vaells_jax.load`` restores it); ``--warm-from DIR`` starts each fit from
the warm start such a kept fit of the same family and seed wrote (a study
of what trains after it; its time is then not a whole call). ``--quick``:
a tiny run of two families (the tests).
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

MNIST_DIR = ROOT.parent / "shared" / "data" / "mnist"
NOISE = 0.02
PER_CLASS = 150
GRID = 360  # true images of each class for the scores
BINS = 36  # parameter bins of orbit_coverage
DIGITS = (2, 3, 4, 5, 7)
ORBIT_POINTS = 400
PRIOR_SAMPLES = 200  # decoded prior samples of each class
SUCCESS = {"coverage": 0.9, "purity": 0.9, "sample_class": 0.9, "distance": 0.5}


@dataclasses.dataclass(frozen=True)
class Family:
  """Images whose class ``c`` at parameter ``p`` (in [0, 1); periodic or
  not) is ``render(c, p)``."""

  shape: tuple[int, ...]
  periodic: bool
  make: object  # (rng, data_dir) -> render(class, params [P]) -> [P, *shape] in [0, 1]
  uint8: bool = False


def _digits(rng, data_dir):
  """Three test digits of three classes of :data:`DIGITS`: ``[3, 28, 28]``."""
  from vaells_jax.data.mnist import load_mnist

  mnist = load_mnist(data_dir, seed=0)
  x = np.concatenate([mnist.x_train, mnist.x_test]).reshape(-1, 28, 28)
  y = np.concatenate([mnist.y_train, mnist.y_test])
  classes = rng.choice(DIGITS, 3, replace=False)
  return np.stack([x[rng.choice(np.flatnonzero(y == c))] for c in classes])


def _rotated_digits(rng, data_dir):
  from scipy.ndimage import rotate

  digits = _digits(rng, data_dir)

  def render(c, params):
    return np.stack(
      [rotate(digits[c], 360 * p, reshape=False, order=1) for p in params]
    )

  return render


def _shifted_digits(rng, data_dir):
  from scipy.ndimage import shift

  digits = _digits(rng, data_dir)

  def render(c, params):
    return np.stack([shift(digits[c], (0, 10 * p - 5), order=1) for p in params])

  return render


def _blobs(rng, colours, reach):
  """Three classes of four blobs at least 3 pixels apart, within ``reach``
  pixels of their centre: offsets ``[3, 4, 2]`` (pixels), widths ``[3, 4]``
  and colours ``[3, 4, colours]``."""
  offsets = []
  while len(offsets) < 3:
    radius = rng.uniform(reach / 3, reach, 4)
    angle = rng.uniform(0, 2 * np.pi, 4)
    o = np.stack([radius * np.cos(angle), radius * np.sin(angle)], -1)
    gaps = np.linalg.norm(o[:, None] - o[None], axis=-1) + 99 * np.eye(4)
    if gaps.min() >= 3:
      offsets.append(o)
  widths = rng.uniform(1.2, 2.0, (3, 4))
  tint = rng.uniform(0.2, 1.0, (3, 4, colours)) if colours > 1 else np.ones((3, 4, 1))
  return np.stack(offsets), widths, tint


def _draw(shape, centres, widths, tint):
  """Blobs at ``centres [P, B, 2]`` (row, column): ``[P, H, W, C]``."""
  rows, cols = np.mgrid[: shape[0], : shape[1]]
  grid = np.stack([rows, cols], -1)[None, None].astype(np.float64)
  gaps = np.sum((grid - centres[:, :, None, None]) ** 2, -1)  # [P, B, H, W]
  weights = np.exp(-gaps / (2 * widths[None, :, None, None] ** 2))
  return np.clip(np.einsum("pbhw,bc->phwc", weights, tint), 0, 1)


def _turning(shape):
  def make(rng, data_dir):
    offsets, widths, tint = _blobs(rng, 1, 9.0)
    middle = (np.array(shape[:2]) - 1) / 2

    def render(c, params):
      a = 2 * np.pi * np.asarray(params)[:, None]
      o = offsets[c]
      turned = np.stack(
        [
          o[:, 0] * np.cos(a) - o[:, 1] * np.sin(a),
          o[:, 0] * np.sin(a) + o[:, 1] * np.cos(a),
        ],
        -1,
      )
      return _draw(shape, middle + turned, widths[c], tint[c])[..., 0]

    return render

  return make


def _moving(shape, semi_axes, colours):
  def make(rng, data_dir):
    offsets, widths, tint = _blobs(rng, colours, 5.0)
    middle = (np.array(shape[:2]) - 1) / 2

    def render(c, params):
      a = 2 * np.pi * np.asarray(params)[:, None]
      path = np.concatenate([semi_axes[0] * np.sin(a), semi_axes[1] * np.cos(a)], -1)
      images = _draw(
        shape, middle + offsets[c][None] + path[:, None], widths[c], tint[c]
      )
      return images if colours > 1 else images[..., 0]

    return render

  return make


FAMILIES = {
  "rotated_digits": Family((28, 28), True, _rotated_digits),
  "turning_shapes": Family((32, 32), True, _turning((32, 32)), uint8=True),
  "shifted_digits": Family((28, 28), False, _shifted_digits),
  "colour_sprites": Family((32, 32, 3), True, _moving((32, 32), (7, 7), 3)),
  "wide_sprites": Family((24, 40), True, _moving((24, 40), (4, 12), 1)),
}


def family_data(name: str, seed: int, per_class: int = PER_CLASS, data_dir=MNIST_DIR):
  """``(x, labels, params, render)`` of ``name`` drawn from ``seed``: the
  images ``fit`` gets (noisy, ``uint8`` for ``uint8`` families), their
  classes and true parameters, and the noise-free renderer."""
  family = FAMILIES[name]
  rng = np.random.default_rng(seed)
  render = family.make(rng, data_dir)
  labels = np.repeat(np.arange(3), per_class)
  params = rng.uniform(0, 1, len(labels))
  x = np.concatenate([render(c, params[labels == c]) for c in range(3)])
  x = x + NOISE * rng.standard_normal(x.shape)
  if family.uint8:
    x = np.round(np.clip(x, 0, 1) * 255).astype(np.uint8)
  return x, labels, params, render


def _truth(name, render):
  """The true images ``[3, GRID, D]`` in the units ``fit`` got, flattened."""
  family = FAMILIES[name]
  grid = np.arange(GRID) / GRID if family.periodic else np.linspace(0, 1, GRID)
  images = np.stack([render(c, grid) for c in range(3)])
  images = images * 255 if family.uint8 else images
  return images.reshape(3, GRID, -1)


def _nearest(images, truth):
  """``(class, grid index, distance)`` of each image's nearest true image."""
  flat = truth.reshape(-1, truth.shape[-1])
  gaps = (
    np.sum(images**2, -1)[:, None] - 2 * images @ flat.T + np.sum(flat**2, -1)[None]
  )
  best = np.argmin(gaps, axis=1)
  distance = np.sqrt(np.maximum(gaps[np.arange(len(images)), best], 0))
  return best // truth.shape[1], best % truth.shape[1], distance


def scores(model, name: str, render, seed: int = 0) -> dict:
  """``model`` (fit's, on ``name``'s images) scored on the true images."""
  import jax
  from scipy.linalg import expm

  flat = model.flat()
  truth = _truth(name, render)
  spread = np.sqrt(np.mean(np.sum((truth - truth.mean(1, keepdims=True)) ** 2, -1), 1))
  psi = np.asarray(model.psi, np.float64)
  m = int(np.argmax(np.linalg.norm(psi, axis=(1, 2))))
  # Steps that move a code by at most 4 pi / ORBIT_POINTS of its norm: two
  # turns of a rotation, or as far along an open flow (a shear's
  # eigenvalues are 0, so a range set by them would step past the codes).
  rate = max(float(np.linalg.norm(psi[m], 2)), 1e-6)
  latents = np.asarray(flat.encode(flat.data.x_test))
  max_norm = 1.5 * np.linalg.norm(latents, axis=-1).max()
  anchors = np.asarray(flat.anchors_latent)  # [C, A, d]
  ts = np.linspace(-2 * np.pi / rate, 2 * np.pi / rate, ORBIT_POINTS)
  flows = np.stack([expm(t * psi[m]) for t in ts])  # [T, d, d]
  coverage, purity = [], []
  for c in range(anchors.shape[0]):
    best = (-1.0, 0.0)
    for a in anchors[c]:
      orbit = flows @ a
      orbit = orbit[np.linalg.norm(orbit, axis=-1) <= max_norm]
      if not len(orbit):
        continue
      images = np.asarray(flat.decode(orbit), np.float64)
      cls, index, _ = _nearest(images, truth)
      bins = np.unique(index[cls == c] * BINS // GRID)
      best = max(best, (len(bins) / BINS, float(np.mean(cls == c))))
    coverage.append(best[0])
    purity.append(best[1])
  keys = jax.random.split(jax.random.PRNGKey(seed), anchors.shape[0])
  in_class, distance = [], []
  for c, key in enumerate(keys):
    decoded = np.asarray(flat.decode(flat.sample_prior(key, PRIOR_SAMPLES, c)))
    cls, _, _ = _nearest(decoded, truth)
    in_class.append(np.mean(cls == c))
    _, _, own = _nearest(decoded, truth[c : c + 1])
    distance.append(np.median(own) / spread[c])
  result = {
    "orbit_coverage": float(np.mean(coverage)),
    "orbit_purity": float(np.mean(purity)),
    "sample_class": float(np.mean(in_class)),
    "sample_distance": float(np.max(distance)),
  }
  result["success"] = bool(
    result["orbit_coverage"] >= SUCCESS["coverage"]
    and result["orbit_purity"] >= SUCCESS["purity"]
    and result["sample_class"] >= SUCCESS["sample_class"]
    and result["sample_distance"] <= SUCCESS["distance"]
  )
  return result


def one_fit(
  name: str,
  seed: int,
  config=None,
  tries=None,
  per_class=PER_CLASS,
  warm_start=True,
  keep=None,
):
  """One ``fit`` call on ``name``'s images of ``seed``, scored on the truth;
  ``keep``: a folder to keep its workdir in (``vaells_jax.load`` reads it)."""
  from fit_mnist import _warm_start_seconds

  from vaells_jax.runs.fit import FIT_RETRY_CHANGES, IMAGE_TRIES, fit, image_config

  x, labels, _, render = family_data(name, seed, per_class)
  config = dataclasses.replace(config or image_config(x.shape[1:]), seed=seed)
  start = time.perf_counter()
  lines: list[str] = []
  with tempfile.TemporaryDirectory() as temporary:
    workdir = keep or temporary
    model = fit(
      x,
      labels,
      config=config,
      workdir=workdir,
      log=lines.append,
      tries=tries or IMAGE_TRIES,
      retry_changes=FIT_RETRY_CHANGES,
      evaluate=False,
      warm_start=warm_start,
    )
    wall = time.perf_counter() - start
    tried = pathlib.Path(workdir, "tries.json")
    record = json.loads(tried.read_text())["tries"] if tried.exists() else []
    summary = pathlib.Path(workdir, "summary.json")
    summary = json.loads(summary.read_text()) if summary.exists() else {}
  phases = {k: summary.get(k) for k in ("compile_time_s", "train_time_s")}
  return {
    **scores(model, name, render, seed),
    "verdict": model.verdict["verdict"],
    "signals": model.verdict["signals"],
    "tries": max(1, len(record)),
    "wall_time_s": wall,
    "phases_s": {"warm_start_s": _warm_start_seconds(lines), **phases},
    "num_steps": config.num_steps,
  }


def table(results: dict) -> str:
  """Per family: success rate, the verdict's precision and recall, time."""
  lines = [
    "| family | learned (truth) | verdict precision | verdict recall | "
    "median s a call | tries |",
    "|---|---|---|---|---|---|",
  ]
  for name in FAMILIES:
    rows = [r for r in results.values() if r["family"] == name]
    if not rows:
      continue
    truth = np.array([r["success"] for r in rows])
    said = np.array([r["verdict"] == "learned" for r in rows])
    precision = f"{np.mean(truth[said]):.2f}" if said.any() else "-"
    recall = f"{np.mean(said[truth]):.2f}" if truth.any() else "-"
    lines.append(
      f"| {name} | {truth.sum()}/{len(rows)} | {precision} | {recall} | "
      f"{np.median([r['wall_time_s'] for r in rows]):.0f} | "
      f"{np.mean([r['tries'] for r in rows]):.1f} |"
    )
  return "\n".join(lines)


def _warm_from(folder, key, config):
  """``config`` starting from the warm start a kept fit ``key`` wrote in
  ``folder`` (``--keep``): the same networks and operators, not recomputed
  (its time is the kept fit's ``warm_start_s``)."""
  if folder is None:
    return config
  path = pathlib.Path(folder, key, "start_networks.msgpack").resolve()
  if not path.exists():
    raise SystemExit(f"--warm-from: {path} is missing")
  return dataclasses.replace(config, start_networks=str(path))


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--seeds", default="100-109", help="e.g. 100-109 or 1,2,3")
  parser.add_argument("--families", default=",".join(FAMILIES))
  parser.add_argument("--tries", type=int, default=None)
  parser.add_argument("--quick", action="store_true", help="tiny runs (tests)")
  parser.add_argument(
    "--no-warm-start", action="store_true", help="fit from random networks"
  )
  parser.add_argument(
    "--set", action="append", default=[], metavar="KEY=VALUE", help="a Config change"
  )
  parser.add_argument("--keep", default=None, help="a folder to keep each workdir in")
  parser.add_argument(
    "--warm-from", default=None, help="a --keep folder whose warm starts to reuse"
  )
  parser.add_argument("--out", default="image_battery.json")
  args = parser.parse_args(argv)
  import jax

  from vaells_jax.config import override
  from vaells_jax.runs.fit import image_config
  from vaells_jax.training import warm_start

  print(f"jax {jax.__version__}, {platform.node()}")
  out = pathlib.Path(args.out)
  results = json.loads(out.read_text()) if out.exists() else {}
  for name in args.families.split(","):
    config = image_config(FAMILIES[name].shape)
    if args.quick:
      config = dataclasses.replace(config, num_steps=4, batch_size=8, population=2)
      warm_start.STEPS = 20
    if args.set:
      config = override(config, dict(s.split("=", 1) for s in args.set))
    variant = "".join(f"_{s}" for s in args.set) + ("_quick" if args.quick else "")
    variant += "_cold" if args.no_warm_start else ""
    for seed in seed_range(args.seeds):
      key = f"{name}{variant}_seed{seed}"
      if key not in results:
        tries = args.tries or (1 if args.quick else None)
        per_class = 20 if args.quick else PER_CLASS
        results[key] = {
          "family": name,
          "seed": seed,
          **one_fit(
            name,
            seed,
            _warm_from(args.warm_from, key, config),
            tries,
            per_class,
            not args.no_warm_start,
            args.keep and str(pathlib.Path(args.keep, key)),
          ),
        }
        out.write_text(json.dumps(results, indent=2))
      r = results[key]
      print(
        f"{name} seed {seed}: success {r['success']} (coverage "
        f"{r['orbit_coverage']:.2f}, purity {r['orbit_purity']:.2f}, samples "
        f"{r['sample_class']:.2f} in class, {r['sample_distance']:.2f} spreads), "
        f"verdict {r['verdict']}, {r['wall_time_s']:.0f} s, {r['tries']} tries",
        flush=True,
      )
  print(table(results))
  return results


if __name__ == "__main__":
  main()
