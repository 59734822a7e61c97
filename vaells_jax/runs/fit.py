"""Training VAELLS on a user's own arrays: ``vaells_jax.fit(x, labels, anchors)``."""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import os
import pathlib
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from vaells_jax.config import Config
from vaells_jax.data.anchors import separate_pieces, spread_anchors
from vaells_jax.data.conditioning import InputMap
from vaells_jax.data.dataset import Dataset
from vaells_jax.data.files import atomic_write_text
from vaells_jax.runs.fit_defaults import (
  CURVE_STEPS,
  CURVE_TRIES,
  FIT_CONFIG,
  FIT_POPULATION,
  FIT_RETRY_CHANGES,
  FIT_TRIES,
  IMAGE_CHANNELS,
  IMAGE_LATENT_DIM,
  IMAGE_LR_NET,
  IMAGE_STEPS,
  IMAGE_TRIES,
  MIN_IMAGE_SIDE,
  curve_config,
  defaults,
  hwc,
  image_config,
)

if TYPE_CHECKING:  # the api imports jax, which fit imports when it is called
  from vaells_jax.api import TrainedBaseline, TrainedVAELLS

__all__ = [
  "CURVE_STEPS",
  "CURVE_TRIES",
  "FIT_CONFIG",
  "FIT_POPULATION",
  "FIT_RETRY_CHANGES",
  "FIT_TRIES",
  "IMAGE_CHANNELS",
  "IMAGE_LATENT_DIM",
  "IMAGE_LR_NET",
  "IMAGE_STEPS",
  "IMAGE_TRIES",
  "MIN_IMAGE_SIDE",
  "config_of_try",
  "curve_config",
  "defaults",
  "fit",
  "image_config",
  "user_dataset",
]

ANCHOR_CHOICES = ("spread", "random")


def _check_image_network(config: Config, shape: tuple[int, ...] | None) -> None:
  """A config with ``network="image"`` must be for images of ``shape``."""
  if config.network != "image":
    return
  if config.image_shape != (None if shape is None else hwc(shape)):
    got = "vectors" if shape is None else f"images of shape {shape}"
    raise ValueError(
      f"config.image_shape={config.image_shape} does not match x ({got}); "
      "network='image' trains on images of that (H, W, C)."
    )


_RANK = {"learned": 2, "uncertain": 1, "not learned": 0}


def _found_classes(x: ArrayLike, log: Callable[[str], object]) -> np.ndarray | None:
  """Classes for vectors given without labels: the separate pieces they lie
  on (:func:`separate_pieces`), or None for one piece."""
  x = np.asarray(x, np.float64)
  if x.ndim != 2 or not np.all(np.isfinite(x)):
    return None  # user_dataset says what is wrong
  pieces = separate_pieces(x)
  if pieces.max() == 0:
    return None
  log(f"no labels: the data lie on {pieces.max() + 1} separate pieces, one class each")
  return pieces


def _check_labels(labels: ArrayLike | None, num_points: int) -> np.ndarray:
  if labels is None:
    return np.zeros(num_points, np.int64)
  labels = np.asarray(labels)
  if labels.shape != (num_points,) or not np.issubdtype(labels.dtype, np.integer):
    raise ValueError(
      f"labels must be integers of shape [{num_points}], got "
      f"{labels.dtype} {labels.shape}."
    )
  if num_points == 0:
    return labels.astype(np.int64)
  if labels.min() < 0:
    raise ValueError(f"labels must be >= 0, got {labels.min()}.")
  if labels.max() >= num_points:  # every class needs a point: C <= N
    raise ValueError(
      f"labels must be in 0..C-1 with every class present, so below the "
      f"{num_points} points; got {labels.max()}."
    )
  missing = sorted(set(range(labels.max() + 1)) - set(labels.tolist()))
  if missing:
    raise ValueError(f"labels must cover 0..C-1; classes {missing} have no points.")
  return labels.astype(np.int64)


def _random_anchors(
  x: np.ndarray, labels: np.ndarray, per_class: int, rng: np.random.Generator
) -> np.ndarray:
  """``per_class`` random points of each class, as the paper does: ``[C, A, D]``."""
  chosen = []
  for c in range(labels.max() + 1):
    idx = np.flatnonzero(labels == c)
    if len(idx) < per_class:
      raise ValueError(
        f"class {c} has {len(idx)} training points, fewer than "
        f"anchors_per_class={per_class}."
      )
    chosen.append(x[rng.choice(idx, per_class, replace=False)])
  return np.stack(chosen)


def _check_anchors(
  anchors: ArrayLike, num_classes: int, dim: int, shape: tuple[int, ...] | None = None
) -> np.ndarray:
  anchors = np.asarray(anchors, np.float64)
  sample = (dim,) if shape is None else shape
  if anchors.shape[-len(sample) :] == sample and anchors.ndim - len(sample) in (1, 2):
    anchors = anchors.reshape(anchors.shape[: anchors.ndim - len(sample)] + (dim,))
  if anchors.ndim == 2:
    anchors = anchors[None]
  if anchors.ndim != 3 or anchors.shape[0] != num_classes or anchors.shape[2] != dim:
    each = ", ".join(map(str, sample))
    raise ValueError(
      f"anchors must be [C={num_classes}, A, {each}] (or [A, {each}] "
      f"for one class), got {np.shape(anchors)}."
    )
  if not np.all(np.isfinite(anchors)):
    raise ValueError("anchors contain non-finite values.")
  return anchors


def fit(
  x: ArrayLike,
  labels: ArrayLike | None = None,
  anchors: ArrayLike | None = None,
  *,
  config: Config | None = None,
  anchors_per_class: int = 3,
  anchor_choice: str = "spread",
  test_fraction: float = 0.2,
  workdir: str | os.PathLike[str] | None = None,
  log: Callable[[str], object] = print,
  resume: bool = False,
  overwrite: bool = False,
  tries: int | None = None,
  time_budget_s: float | None = None,
  retry_changes: Mapping[str, Any] | None = None,
  evaluate: bool = True,
  warm_start: bool = True,
) -> TrainedVAELLS | TrainedBaseline:
  """Trains VAELLS on ``x`` and returns the trained model (as ``load`` does).

  A seeded ``test_fraction`` of the points is held out for the metrics. The
  data are centred and scaled by one number (:class:`~vaells_jax.data.
  conditioning.InputMap`) before training, so the outcome does not depend on
  their units; the returned model takes and gives the user's units. The
  workdir gets the same outputs as ``experiments/run.py``; metrics that need
  a known ground-truth manifold are left out. The model's ``verdict`` (also
  printed, and in ``summary.json`` and ``summary.md``) says whether it
  learned a manifold (:mod:`vaells_jax.runs.verdict`). Compiled programs are
  kept on disk (:func:`vaells_jax.runs.cache.compilation_cache`) unless the
  caller configured jax's cache already or ``VAELLS_NO_CACHE=1``; a
  population gets one CPU device per core when jax has not started yet
  (:func:`vaells_jax.training.placement.claim_cores`), else its members
  run in groups from one thread per core
  (:class:`vaells_jax.training.placement.MemberGroups`).

  Args:
    x: data ``[N, D]``, any ``D``, or images ``[N, H, W]`` or
      ``[N, H, W, C]`` (C = 1 or 3, sides >= :data:`MIN_IMAGE_SIDE`),
      which train the image networks of :func:`image_config` (without a
      config) and a model that takes and gives images of that shape
      (docs/images.md).
    labels: integer classes ``[N]`` in ``0..C-1``, or None: one class per
      separate curve the vectors lie on
      (:func:`~vaells_jax.data.anchors.separate_pieces`; one class when
      ``anchors`` are given). Each sample's prior uses only its own class's
      anchors.
    anchors: input-space anchors ``[C, A, D]`` (or ``[A, D]`` for one class;
      images: ``[C, A, H, W(, C)]``),
      in the units of ``x``; None chooses ``anchors_per_class`` training
      points per class (``anchor_choice``).
    config: a :class:`~vaells_jax.config.Config`; ``config.model`` picks
      VAELLS or a baseline. Default (:func:`defaults`): for vectors of
      several classes :data:`FIT_CONFIG`, the paper's concentric settings
      with :data:`FIT_POPULATION` members, ten times the paper's
      ``lr_psi``, ``lr_net_cooldown=0.5`` and ``latent_scale=2``; for one
      class :func:`curve_config`, for images :func:`image_config` (a config
      you build trains ``config.population`` members, default 1).
    anchors_per_class: anchors chosen per class when ``anchors`` is None.
    anchor_choice: ``"spread"``: spread along each class's manifold
      (:func:`vaells_jax.data.anchors.spread_anchors`); ``"random"``: random
      training points, as the paper places them.
    test_fraction: fraction of points held out for evaluation.
    workdir: output folder (default: a new temporary folder).
    log: where progress lines go.
    resume: continue the run in ``workdir`` from its latest checkpoint
      (same data and config).
    overwrite: start over in a ``workdir`` that already holds a run.
    tries: runs trained at most (default: :data:`FIT_TRIES` with
      :data:`FIT_CONFIG`, 1 with a config you give or fit's config for one
      class or for images). While a VAELLS run's verdict is not
      ``learned``, a fresh one (seed ``config.seed + k``, the same data split
      and anchors) trains in ``workdir/try<k>``; the best run by verdict,
      then ``latent_coverage``, is returned (and alone evaluated: metrics,
      figures, ``summary.md``), and ``workdir/tries.json`` names it for
      ``load``. 1: one run, whatever its verdict. The second try changes
      ``retry_changes`` in the config; later tries train the config of
      those two tries whose prior samples lay closer to the data (the
      verdict's ``sample_noise_levels``).
    retry_changes: ``{field: value}`` of the config that the second try
      trains with (default: :data:`FIT_RETRY_CHANGES` with fit's own
      config, none with a config you give).
    time_budget_s: no further try starts once the time spent plus the
      longest try so far would exceed this many seconds (None: no limit).
    evaluate: False: skip the evaluation (metrics, figures, ``summary.md``,
      the test set's log-likelihood). The verdict is computed from training
      signals and is there either way; ``summary.json`` then says
      ``"evaluated": false``, and :func:`vaells_jax.runs.runner.evaluate_run`
      adds the evaluation later.
    warm_start: with image networks (``config.network="image"``) or
      networks that do not train (``config.lr_net=0``, fit's config for one
      class), start from networks fitted to a layout of each class's
      manifold (:mod:`vaells_jax.training.warm_start`); False: from random
      networks.

  Returns:
    The :class:`~vaells_jax.api.TrainedVAELLS` (a
    :class:`~vaells_jax.api.TrainedBaseline` for a baseline ``config.model``).

  Raises:
    ValueError: for non-finite or misshapen data, labels or anchors, too few
      points for the batch size or the split, or a ``workdir`` that already
      holds a run (without ``resume`` or ``overwrite``).
    vaells_jax.training.checkpoint.CheckpointError: when resuming from a corrupt
      checkpoint or one of another configuration.
    vaells_jax.runs.runner.TrainingDiverged: when the loss stays non-finite.
  """
  from vaells_jax.runs import runner  # imports jax
  from vaells_jax.runs.cache import compilation_cache

  compilation_cache()
  shape = _sample_shape(x)
  if labels is None and anchors is None and shape is None:
    labels = _found_classes(x, log)
  plan = _plan_tries(
    config, tries, retry_changes, workdir, resume, overwrite, shape, labels
  )
  data = user_dataset(
    x,
    labels,
    anchors,
    seed=plan.config.seed,
    anchors_per_class=anchors_per_class,
    anchor_choice=anchor_choice,
    test_fraction=test_fraction,
    batch_size=plan.config.batch_size,
  )
  _check_tries(plan.tries, time_budget_s)
  input_map = InputMap.of(data.x_train, shape)
  folder = pathlib.Path(workdir or tempfile.mkdtemp(prefix="vaells_"))
  if warm_start:
    plan = _warm_start(plan, data, input_map, folder, log)
  record, kept, trained = _train_tries(
    plan, data, input_map, folder, log, time_budget_s
  )
  if evaluate:
    runner.evaluate_run(trained, folder / f"try{kept}" if kept else folder, log)
  if len(record) > 1:
    _write_tries(folder, record, kept, log)
  return trained


class _Tries(NamedTuple):
  """What :func:`fit`'s tries train: the configs, how many, and how."""

  config: Config
  retry_config: Config
  retry_changes: Mapping[str, Any]
  tries: int
  resume: bool
  overwrite: bool


def _plan_tries(
  config, tries, retry_changes, workdir, resume, overwrite, shape=None, labels=None
) -> _Tries:
  """:func:`fit`'s defaults filled in (for images of ``shape``, if given,
  and ``labels``: :func:`~vaells_jax.runs.fit_defaults.defaults`) and its
  settings checked."""
  own = defaults(shape, labels)
  if tries is None:
    tries = own.tries if config is None else 1
  if retry_changes is None:
    retry_changes = own.retry_changes if config is None else {}
  if config is None:
    config = own.config
  if not isinstance(config, Config):
    raise ValueError(f"config must be a Config, got {type(config).__name__}.")
  _check_image_network(config, shape)
  unknown = set(retry_changes) - {f.name for f in dataclasses.fields(Config)}
  if unknown:
    raise ValueError(f"retry_changes names no Config field: {sorted(unknown)}.")
  retry_config = dataclasses.replace(config, **retry_changes)
  if workdir is not None and not str(workdir).strip():
    raise ValueError("workdir is an empty string; give a folder, or None.")
  return _Tries(config, retry_config, retry_changes, tries, resume, overwrite)


WARM_START_NAME = "start_networks.msgpack"
# The turn an open curve's layout spans, by network (0: a segment):
# docs/studies/fit-open-curves.md.
WARM_START_OPEN_ARC = {"image": 0.0, "mlp": 0.75}


def _warm_start(plan: _Tries, data, input_map, folder, log) -> _Tries:
  """``plan`` with its configs starting from networks fitted to a layout
  of the data (:mod:`vaells_jax.training.warm_start`), written to
  ``folder`` (kept there for a resumed run), for image networks or
  networks that do not train (``lr_net=0``) without ``start_networks``;
  else ``plan`` as it is."""
  config = plan.config
  held = config.network == "image" or config.lr_net == 0  # networks not trained
  wanted = held and config.latent_dim >= 2
  if not wanted or config.start_networks:
    return plan
  from vaells_jax.training import placement, warm_start

  placement.claim_cores(plan.config.population)  # before jax's first computation
  path = (folder / WARM_START_NAME).resolve()
  if not (plan.resume and path.exists()):
    began = time.perf_counter()
    x = input_map.model_data(data).x_train
    open_arc = WARM_START_OPEN_ARC.get(config.network, 0.0)
    folder.mkdir(parents=True, exist_ok=True)
    info = warm_start.write_start(config, x, data.labels_train, path, open_arc)
    log(
      f"warm start: {info['circles']} of {info['classes']} classes laid out on "
      f"circles; layout error {info['layout_error']:.3g}, reconstruction "
      f"{info['recon']:.3g} ({time.perf_counter() - began:.0f} s)"
    )
  return plan._replace(
    config=dataclasses.replace(plan.config, start_networks=str(path)),
    retry_config=dataclasses.replace(plan.retry_config, start_networks=str(path)),
  )


def _check_tries(tries, time_budget_s) -> None:
  if not isinstance(tries, numbers.Integral) or isinstance(tries, bool) or tries < 1:
    raise ValueError(f"tries must be an integer >= 1, got {tries!r}.")
  if time_budget_s is not None and not (
    isinstance(time_budget_s, numbers.Real) and float(time_budget_s) > 0
  ):
    raise ValueError(f"time_budget_s must be > 0 or None, got {time_budget_s!r}.")


def _train_tries(plan: _Tries, data, input_map, workdir, log, time_budget_s):
  """Trains tries until one is ``learned``, ``plan.tries`` are done or the
  time budget would run out: ``(record, kept, trained)``, a row per try,
  the index of the best (by verdict, then ``latent_coverage``) and its model."""
  start, longest = time.perf_counter(), 0.0
  record: list[dict[str, Any]] = []
  best: tuple[tuple[int, float], int, Any] | None = None
  for k in range(plan.tries):
    began = time.perf_counter()
    trained = _train_try(k, plan, record, data, input_map, workdir, log)
    rank, row = _rank_try(trained, f"try{k}" if k else ".")
    record.append(row)
    if best is None or rank > best[0]:
      best = (rank, k, trained)
    longest = max(longest, time.perf_counter() - began)
    spent = time.perf_counter() - start
    if not _another_try(k, plan, record, spent + longest, time_budget_s, log):
      break
  assert best is not None  # plan.tries >= 1
  _, kept, trained = best
  return record, kept, trained


def _train_try(k, plan: _Tries, record, data, input_map, workdir, log):
  """Trains try ``k`` (in ``workdir``, later ones in ``workdir/try<k>``),
  unevaluated; the first try of a fresh run removes the old run's tries."""
  from vaells_jax.api import TRIES_NAME
  from vaells_jax.runs import runner

  config = config_of_try(k, record, plan.config, plan.retry_config)
  trained, _ = runner.train_and_evaluate(
    dataclasses.replace(config, seed=plan.config.seed + k),
    input_map.model_data(data),
    workdir / f"try{k}" if k else workdir,
    log,
    resume=plan.resume,
    overwrite=plan.overwrite,
    input_map=input_map,
    evaluate=False,
  )
  if k == 0 and not plan.resume:  # tries of a run this one replaced
    (workdir / TRIES_NAME).unlink(missing_ok=True)
    for old in workdir.glob("try[0-9]*"):
      shutil.rmtree(old, ignore_errors=True)
  return trained


def _rank_try(trained, folder: str) -> tuple[tuple[int, float], dict]:
  """A try's rank (verdict, then coverage: latent, or images') and its row."""
  said = trained.verdict["verdict"] if trained.verdict else None
  signals = trained.verdict["signals"] if said else {}
  name = "image_coverage" if "image_coverage" in signals else "latent_coverage"
  coverage = signals.get(name, 0.0)
  row = {
    "folder": folder,
    "verdict": said,
    name: coverage,
    "sample_noise_levels": signals.get("sample_noise_levels"),
  }
  return (_RANK.get(said or "", 0), coverage), row


def _another_try(k, plan: _Tries, record, expected_s, time_budget_s, log) -> bool:
  """Whether try ``k + 1`` trains (said in ``log``): not after a ``learned``
  verdict (or none), the last try, or where the time spent plus the longest
  try so far (``expected_s``) would exceed ``time_budget_s``."""
  said = record[-1]["verdict"]
  if said in (None, "learned") or k + 1 == plan.tries:
    return False
  if time_budget_s is not None and expected_s > time_budget_s:
    log(f"verdict {said}; no further try within time_budget_s={time_budget_s}")
    return False
  changes = ", ".join(f"{f}={v}" for f, v in plan.retry_changes.items())
  config = config_of_try(k + 1, record, plan.config, plan.retry_config)
  retrying = config is plan.retry_config
  log(
    f"verdict {said}: try {k + 2} of {plan.tries}, a fresh population in "
    f"try{k + 1}/" + (f" ({changes})" if changes and retrying else "")
  )
  return True


def _write_tries(workdir, record, kept, log) -> None:
  """``tries.json`` naming the kept try for ``load``, and the tries atop
  ``summary.md``."""
  from vaells_jax.api import TRIES_NAME

  atomic_write_text(
    workdir / TRIES_NAME,
    json.dumps({"kept": record[kept]["folder"], "tries": record}, indent=2),
  )
  log(f"kept try {kept + 1} of {len(record)} ({record[kept]['verdict']})")
  _note_tries(workdir, record, kept)


def config_of_try(k, record, config, retry_config):
  """Try ``k``'s config: ``config`` first, ``retry_config`` second, then
  the one of those two whose try's prior samples lay closer to the data
  (``sample_noise_levels`` in ``record``; a tie or a missing signal:
  ``config``)."""
  if k < 2:
    return (config, retry_config)[k]

  def far(row):
    value = row["sample_noise_levels"]
    return value if value is not None and math.isfinite(value) else math.inf

  return retry_config if far(record[1]) < far(record[0]) else config


def _note_tries(workdir, record, kept) -> None:
  """Puts the tries, and which one ``load`` returns, atop ``summary.md``."""
  lines = ["# fit: tries", "", "| try | folder | verdict | kept |", "|---|---|---|---|"]
  for k, row in enumerate(record):
    mark = "**yes** (`load` returns it)" if k == kept else ""
    lines.append(f"| {k + 1} | `{row['folder']}` | {row['verdict']} | {mark} |")
  path = workdir / "summary.md"
  text = path.read_text() if path.exists() else ""
  atomic_write_text(path, "\n".join(lines) + "\n\n" + text)


def user_dataset(
  x: ArrayLike,
  labels: ArrayLike | None = None,
  anchors: ArrayLike | None = None,
  *,
  seed: int = 0,
  anchors_per_class: int = 3,
  anchor_choice: str = "spread",
  test_fraction: float = 0.2,
  batch_size: int = 1,
) -> Dataset:
  """A user's arrays as the data set :func:`fit` trains on (split by ``seed``).

  Also what :func:`vaells_jax.runs.compare.run_comparison` needs to compare the
  models on your data: ``make_data=lambda c: user_dataset(x, labels,
  seed=c.seed, batch_size=c.batch_size)``. Arguments as :func:`fit`'s;
  ``batch_size`` is the least number of training points.

  Raises:
    ValueError: as :func:`fit`.
  """
  points, shape = _check_x(x)
  classes = _check_labels(labels, points.shape[0])
  _check_choices(test_fraction, anchors_per_class, anchor_choice, seed)
  rng = np.random.default_rng(seed)
  order = rng.permutation(points.shape[0])
  num_test = max(2, math.ceil(test_fraction * points.shape[0]))
  test, train = order[:num_test], order[num_test:]
  if len(train) < batch_size:
    raise ValueError(
      f"{len(train)} training points (after holding out "
      f"{num_test}) are fewer than config.batch_size="
      f"{batch_size}."
    )
  num_classes = int(classes.max()) + 1
  if anchors is None and anchor_choice == "spread":
    anchors = spread_anchors(points[train], classes[train], anchors_per_class)
  elif anchors is None:
    anchors = _random_anchors(points[train], classes[train], anchors_per_class, rng)
  return Dataset(
    x_train=points[train],
    labels_train=classes[train],
    pos_train=None,
    t_train=None,
    x_test=points[test],
    labels_test=classes[test],
    pos_test=None,
    t_test=None,
    anchors=_check_anchors(anchors, num_classes, points.shape[1], shape),
    anchor_pos=None,
    mapping=None,
    noise_std=float("nan"),
    manifold=None,
    manifold_labels=None,
    name="user",
  )


def _check_x(x: ArrayLike) -> tuple[np.ndarray, tuple[int, ...] | None]:
  """``x`` as float64 ``[N, D]`` and the shape of one image (None for
  vectors), else a ValueError naming what is wrong."""
  shape = _sample_shape(x)
  array = np.asarray(x)
  points = array.reshape(array.shape[0], -1).astype(np.float64)
  if not np.all(np.isfinite(points)):
    bad = int(np.argwhere(~np.isfinite(points))[0, 0])
    raise ValueError(f"x contains non-finite values (first in sample {bad}).")
  return points, shape


def _sample_shape(x: ArrayLike) -> tuple[int, ...] | None:
  """The shape of one image of ``x`` (None for vectors ``[N, D]``), else a
  ValueError naming what is wrong with ``x``'s type or shape."""
  x = np.asarray(x)
  if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)):
    raise ValueError(
      f"x must hold real numbers, got dtype {x.dtype} (complex data would "
      "lose its imaginary part)."
    )
  if x.ndim not in (2, 3, 4) or 0 in x.shape:
    empty = "x is empty: " if x.size == 0 else ""
    raise ValueError(
      f"{empty}x must be vectors [N, D] or images [N, H, W] or [N, H, W, C] "
      f"with every size >= 1, got shape {x.shape}."
    )
  shape = None if x.ndim == 2 else tuple(int(n) for n in x.shape[1:])
  if shape is not None:
    _check_image_shape(shape)
  return shape


def _check_image_shape(shape: tuple[int, ...]) -> None:
  """Images of ``shape`` ``(H, W)`` or ``(H, W, C)``: sides of at least
  :data:`MIN_IMAGE_SIDE`, 1 or 3 channels; else a ValueError."""
  height, width = shape[:2]
  if min(height, width) < MIN_IMAGE_SIDE:
    raise ValueError(
      f"x holds images of {height} x {width}; fit needs at least "
      f"{MIN_IMAGE_SIDE} x {MIN_IMAGE_SIDE} (pass smaller data as vectors [N, D])."
    )
  if len(shape) == 3 and shape[2] not in (1, 3):
    raise ValueError(
      f"x holds images [N, H, W, C] with C={shape[2]} channels; fit takes C = 1 "
      "or 3 (pass other data as vectors [N, D])."
    )


def _check_choices(
  test_fraction: float, anchors_per_class: int, anchor_choice: str, seed: int
) -> None:
  if not (isinstance(test_fraction, numbers.Real) and 0 < float(test_fraction) < 1):
    raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}.")
  if (
    not isinstance(anchors_per_class, numbers.Integral)
    or isinstance(anchors_per_class, bool)
    or anchors_per_class < 1
  ):
    raise ValueError(
      f"anchors_per_class must be an integer >= 1, got {anchors_per_class!r}."
    )
  if anchor_choice not in ANCHOR_CHOICES:
    raise ValueError(
      f"anchor_choice must be one of {ANCHOR_CHOICES}, got {anchor_choice!r}."
    )
  if not isinstance(seed, numbers.Integral) or not 0 <= int(seed) < 2**63:
    raise ValueError(f"seed must be an integer >= 0, got {seed!r}.")
