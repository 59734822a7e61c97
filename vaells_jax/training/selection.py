"""Choosing a population's member: signals that need no ground truth.

At :func:`selection_step` every member is scored (:func:`selection_signals`)
and :func:`select` keeps the one with the best ``config.select_signal``.
"""

from __future__ import annotations

import jax
import numpy as np

from vaells_jax.config import Config
from vaells_jax.data.dataset import Dataset
from vaells_jax.models.vaells import Model
from vaells_jax.training.coverage import (
  COVERAGE_RADII,
  combined_coverages,
  coverage_points,
  coverage_signals,
  member_data_coverage,
  member_sample_distance,
)
from vaells_jax.training.guards import batch_indices
from vaells_jax.training.population import member

__all__ = [
  "OPERATOR_NORM_LIMIT",
  "SIGN",
  "SIGNAL_BATCHES",
  "TIE_BREAK",
  "data_signals",
  "select",
  "selection_signals",
  "selection_step",
]

SIGNAL_BATCHES = 10  # training batches each member's loss terms are averaged over
# Direction of each selection signal: the member with the smallest
# sign * signal is chosen.
SIGN = {
  "psi_rejected": 1.0,
  "loss": 1.0,
  "log_p": -1.0,
  "latent_coverage": -1.0,
  "latent_coverage_wide": -1.0,
  "latent_coverage_both": -1.0,
  "latent_coverage_ranks": -1.0,
  "data_coverage": -1.0,
  "sample_distance": 1.0,
}
# Ties of a signal are broken by another before the loss: many members carry
# a point along the whole swiss roll (data_coverage 1); of those, the one
# whose prior samples lie nearest the data (docs/studies/population-swiss-roll.md).
TIE_BREAK = {"data_coverage": "sample_distance"}
_TERMS = ("loss", "log_p", "log_q", "recon")
# Operators this large have blown up: the paper's synthetic runs end at norms
# of 0.003-0.1; runs whose reconstructions broke had 1.0-4.5 (docs/fit.md).
OPERATOR_NORM_LIMIT = 1.0


def selection_step(config: Config) -> int:
  """The step at which a population is scored and one member kept."""
  return max(1, round(config.select_at * config.num_steps))


def selection_signals(state, config: Config, data: Dataset, step_fn) -> dict:
  """Each member's signals, none of which needs the true manifold.

  * ``psi_rejected``: rejected ``Psi`` steps so far (the paper's health
    signal);
  * ``loss``, ``log_p``, ``log_q``, ``recon``: the loss and its terms, averaged
    over :data:`SIGNAL_BATCHES` training batches (fixed by the seed), as the
    step computes them (the parameters are not updated);
  * ``latent_coverage``, ``latent_coverage_wide``
    (:func:`~vaells_jax.training.coverage.latent_coverage`) and their two
    combinations (:func:`~vaells_jax.training.coverage.combined_coverages`);
  * ``data_coverage``: how much of its class's training points the decoded
    orbit from an anchor passes on the data
    (:func:`~vaells_jax.training.coverage.data_coverage`), and
    ``sample_distance``: how far decoded prior samples lie from the data
    (:func:`~vaells_jax.training.coverage.member_sample_distance`), only
    where ``config.select_signal`` is ``data_coverage`` (they decode every
    member's orbits and samples: seconds on a CPU);
  * ``operator_norm``: the largest Frobenius norm of the member's operators
    (a member above :data:`OPERATOR_NORM_LIMIT` blew up and is not kept).

  Args:
    state: the population's state, ``[K, ...]`` leaves.
    config: the run's configuration.
    data: the training data.
    step_fn: the population's jitted step
      (:func:`~vaells_jax.training.population.make_population_step`).

  Returns:
    ``{name: [K] list of floats}``.
  """
  x = np.asarray(data.x_train, np.float32)
  labels = np.asarray(data.labels_train, np.int32)
  signals = _loss_signals(state, config, x, labels, step_fn)
  signals["psi_rejected"] = np.asarray(state.psi_rejected).astype(float).tolist()
  members = [member(state, k) for k in range(config.population)]
  signals.update(_latent_signals(members, config, data, x, labels))
  signals.update(combined_coverages(signals))
  if config.select_signal == "data_coverage":  # decodes orbits and samples
    signals.update(data_signals(members, config, data))
  norms = np.linalg.norm(np.asarray(state.params["psi"], np.float64), axis=(-2, -1))
  signals["operator_norm"] = norms.max(axis=-1).tolist()
  return signals


def _loss_signals(state, config: Config, x, labels, step_fn) -> dict:
  """Each member's loss terms (:data:`_TERMS`), averaged over
  :data:`SIGNAL_BATCHES` training batches fixed by the seed."""
  key = jax.random.PRNGKey(config.seed + 3)
  sums = None
  for i in range(SIGNAL_BATCHES):
    idx = batch_indices(config.seed + 3, i, x.shape[0], config.batch_size)
    _, metrics = step_fn(
      state, {"x": x[idx], "label": labels[idx]}, jax.random.fold_in(key, i)
    )
    terms = {k: np.asarray(metrics[k], np.float64) for k in _TERMS}
    sums = terms if sums is None else {k: sums[k] + terms[k] for k in _TERMS}
  return {k: (v / SIGNAL_BATCHES).tolist() for k, v in sums.items()}


def _latent_signals(members, config: Config, data: Dataset, x, labels) -> dict:
  """Each member's latent coverages (:data:`COVERAGE_RADII`) of its encoded
  coverage points."""
  model = Model.create(config, data.data_dim)
  encode = jax.jit(model.encode)
  xs, ys = coverage_points(x, labels, config.seed)
  latents = [np.asarray(encode(m.params, xs)) for m in members]
  scores = [
    coverage_signals(z, ys, np.asarray(m.psi), config.seed)
    for z, m in zip(latents, members, strict=True)
  ]
  return {name: [s[name] for s in scores] for name in COVERAGE_RADII}


def data_signals(members, config: Config, data: Dataset) -> dict:
  """``data_coverage`` and ``sample_distance`` of each of ``members`` (single
  runs' states, :func:`~vaells_jax.training.population.member`), on the
  coverage signals' training points."""
  model = Model.create(config, data.data_dim)
  x, labels = coverage_points(data.x_train, data.labels_train, config.seed)
  key = jax.random.PRNGKey(config.seed + 4)
  return {
    "data_coverage": [
      member_data_coverage(model, m.params, x, labels) for m in members
    ],
    "sample_distance": [
      member_sample_distance(
        model,
        m.params,
        x,
        labels,
        key,
        laplace_scale=1.0 / config.zeta3,
        gamma=config.gamma,
      )
      for m in members
    ],
  }


def select(signals: dict, name: str) -> tuple[int, str]:
  """The member with the best signal ``name`` and a sentence saying why.

  Only members whose signal and loss are finite and whose ``operator_norm``
  (where recorded) is at most :data:`OPERATOR_NORM_LIMIT` are kept; ties go
  to the better :data:`TIE_BREAK` signal (where recorded), then the lower
  loss, then the lower index."""
  value = SIGN[name] * np.asarray(signals[name], np.float64)
  loss = np.asarray(signals["loss"], np.float64)
  ok = np.isfinite(value) & np.isfinite(loss)
  if "operator_norm" in signals:
    ok &= np.asarray(signals["operator_norm"], np.float64) <= OPERATOR_NORM_LIMIT
  if not ok.any():
    return 0, (
      "no member has a finite signal and operators within "
      f"{OPERATOR_NORM_LIMIT}; member 0 (the single run) kept"
    )
  tie = TIE_BREAK.get(name)
  second = (
    SIGN[tie] * np.asarray(signals[tie], np.float64)
    if tie in signals
    else np.zeros_like(value)
  )
  order = np.lexsort(
    (
      np.arange(len(value)),
      np.where(ok, loss, np.inf),
      np.where(ok, second, np.inf),
      np.where(ok, value, np.inf),
    )
  )
  best = int(order[0])
  values = ", ".join(f"{v:.4g}" for v in signals[name])
  better = (
    "fewest" if name == "psi_rejected" else ("highest" if SIGN[name] < 0 else "lowest")
  )
  reason = f"member {best} has the {better} {name} ({values})"
  tied = int(np.sum(ok & (value == value[best])))
  if tie in signals and tied > 1:
    reason += f"; of the {tied} tied, the lowest {tie} ({signals[tie][best]:.4g})"
  return best, reason
