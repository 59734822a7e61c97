"""Training VAELLS on a user's own arrays: ``vaells_jax.fit(x, labels, anchors)``."""

from __future__ import annotations

import math
import numbers
import tempfile

import numpy as np

from vaells_jax.config import Config
from vaells_jax.data.synthetic import SyntheticData

__all__ = ["FIT_POPULATION", "fit", "user_dataset"]

# Members fit() trains when it is given no config: dictionary draws of the same
# networks and anchors, the best kept at a quarter of the steps by
# ``latent_coverage``. On two circles given as arrays
# it learned them on 4 of 10 seeds, one run on none
# (benchmarks/fit_population.py; docs/experiments.md, "Population training").
FIT_POPULATION = 8


def _check_labels(labels, num_points):
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


def _choose_anchors(x, labels, per_class, rng):
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


def _check_anchors(anchors, num_classes, dim):
  anchors = np.asarray(anchors, np.float64)
  if anchors.ndim == 2:
    anchors = anchors[None]
  if anchors.ndim != 3 or anchors.shape[0] != num_classes or anchors.shape[2] != dim:
    raise ValueError(
      f"anchors must be [C={num_classes}, A, D={dim}] (or [A, D] "
      f"for one class), got {anchors.shape}."
    )
  if not np.all(np.isfinite(anchors)):
    raise ValueError("anchors contain non-finite values.")
  return anchors


def fit(
  x,
  labels=None,
  anchors=None,
  *,
  config: Config | None = None,
  anchors_per_class=3,
  test_fraction=0.2,
  workdir=None,
  log=print,
  resume=False,
  overwrite=False,
):
  """Trains VAELLS on ``x`` and returns the trained model (as ``load`` does).

  A seeded ``test_fraction`` of the points is held out for the metrics. The
  workdir gets the same outputs as ``experiments/run.py``; metrics that need
  a known ground-truth manifold are left out.

  Args:
    x: data ``[N, D]``, any ``D``.
    labels: integer classes ``[N]`` in ``0..C-1``, or None for one class.
      Each sample's prior uses only its own class's anchors.
    anchors: input-space anchors ``[C, A, D]`` (or ``[A, D]`` for one class);
      None picks ``anchors_per_class`` random training points per class.
    config: a :class:`~vaells_jax.config.Config`; ``config.model`` picks
      VAELLS or a baseline. Default: ``Config(population=FIT_POPULATION)``,
      the paper's concentric settings with :data:`FIT_POPULATION` members
      (a config you build trains ``config.population`` members, default 1).
    anchors_per_class: anchors chosen per class when ``anchors`` is None.
    test_fraction: fraction of points held out for evaluation.
    workdir: output folder (default: a new temporary folder).
    log: where progress lines go.
    resume: continue the run in ``workdir`` from its latest checkpoint
      (same data and config).
    overwrite: start over in a ``workdir`` that already holds a run.

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
  from vaells_jax.runs.runner import train_and_evaluate  # imports jax, optax

  config = Config(population=FIT_POPULATION) if config is None else config
  if not isinstance(config, Config):
    raise ValueError(f"config must be a Config, got {type(config).__name__}.")
  if workdir is not None and not str(workdir).strip():
    raise ValueError("workdir is an empty string; give a folder, or None.")
  data = user_dataset(
    x,
    labels,
    anchors,
    seed=config.seed,
    anchors_per_class=anchors_per_class,
    test_fraction=test_fraction,
    batch_size=config.batch_size,
  )
  workdir = workdir or tempfile.mkdtemp(prefix="vaells_")
  trained, _ = train_and_evaluate(
    config, data, workdir, log, resume=resume, overwrite=overwrite
  )
  return trained


def user_dataset(
  x,
  labels=None,
  anchors=None,
  *,
  seed=0,
  anchors_per_class=3,
  test_fraction=0.2,
  batch_size=1,
) -> SyntheticData:
  """A user's arrays as the data set :func:`fit` trains on (split by ``seed``).

  Also what :func:`vaells_jax.runs.compare.run_comparison` needs to compare the
  models on your data: ``make_data=lambda c: user_dataset(x, labels,
  seed=c.seed, batch_size=c.batch_size)``. Arguments as :func:`fit`'s;
  ``batch_size`` is the least number of training points.

  Raises:
    ValueError: as :func:`fit`.
  """
  x = np.asarray(x)
  if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)):
    raise ValueError(
      f"x must hold real numbers, got dtype {x.dtype} (complex data would "
      "lose its imaginary part)."
    )
  x = x.astype(np.float64)
  if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
    raise ValueError(f"x must be [N, D] with N, D >= 1, got shape {x.shape}.")
  if not np.all(np.isfinite(x)):
    raise ValueError("x contains non-finite values.")
  labels = _check_labels(labels, x.shape[0])
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
  if not isinstance(seed, numbers.Integral) or not 0 <= seed < 2**63:
    raise ValueError(f"seed must be an integer >= 0, got {seed!r}.")
  rng = np.random.default_rng(seed)
  order = rng.permutation(x.shape[0])
  num_test = max(2, math.ceil(test_fraction * x.shape[0]))
  test, train = order[:num_test], order[num_test:]
  if len(train) < batch_size:
    raise ValueError(
      f"{len(train)} training points (after holding out "
      f"{num_test}) are fewer than config.batch_size="
      f"{batch_size}."
    )
  num_classes = int(labels.max()) + 1
  if anchors is None:
    anchors = _choose_anchors(x[train], labels[train], anchors_per_class, rng)
  anchors = _check_anchors(anchors, num_classes, x.shape[1])
  return SyntheticData(
    x_train=x[train],
    labels_train=labels[train],
    pos_train=None,
    t_train=None,
    x_test=x[test],
    labels_test=labels[test],
    pos_test=None,
    t_test=None,
    anchors=anchors,
    anchor_pos=None,
    mapping=None,
    noise_std=float("nan"),
    manifold=None,
    manifold_labels=None,
    name="user",
  )
