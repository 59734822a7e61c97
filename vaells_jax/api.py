"""A trained model as other JAX code uses it: encode, decode, sample, paths.

:class:`TrainedVAELLS` for VAELLS and :class:`TrainedBaseline` for the
baselines share these methods; :func:`load` returns whichever a workdir, or
a folder that ``model.save`` wrote (:mod:`vaells_jax.data.saved_model`), holds.
:data:`MODELS` is the table of trainable models: for each ``config.model``
its initial state, its jitted step and its trained-model class, looked up by
the runner and by :func:`load`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from vaells_jax.config import CONFIG_NAME, Config, config_from_json
from vaells_jax.core.laplace import sample_laplace
from vaells_jax.core.transport import transport, transport_path
from vaells_jax.data.conditioning import INPUT_MAP_NAME, InputMap
from vaells_jax.data.dataset import Dataset, load_dataset
from vaells_jax.data.saved_model import (
  PARAMS_NAME,
  NoTrainingData,
  SavedModel,
  is_saved_model,
  read_saved_model,
  write_saved_model,
)
from vaells_jax.evaluation.likelihood import importance_log_likelihood, iwae_bound
from vaells_jax.models.baselines import Baseline
from vaells_jax.models.vaells import Model, StepSolvers
from vaells_jax.training.baseline_step import (
  create_baseline,
  describe_baseline,
  init_baseline_state,
  make_baseline_step,
)
from vaells_jax.training.checkpoint import restore_checkpoint
from vaells_jax.training.guards import likely_cause, run_identity
from vaells_jax.training.step import (
  describe_vaells,
  diagnose_vaells,
  init_state,
  make_vaells_step,
)

__all__ = [
  "MODELS",
  "ModelEntry",
  "TrainedBaseline",
  "TrainedVAELLS",
  "load",
]

DATA_NAME = "dataset.npz"
# Written by ``fit`` when it trained several tries: which subfolder ``load`` returns.
TRIES_NAME = "tries.json"
Params = dict[str, Any]  # nested dicts of arrays
PathLike = str | os.PathLike[str]


def _width(a: ArrayLike, width: int, what: str) -> jax.Array:
  """``a`` as an array whose last axis is ``width``, else a ValueError."""
  a = jnp.asarray(a)
  if a.ndim == 0 or a.shape[-1] != width:
    raise ValueError(
      f"{what} must be [..., {width}] (the model's width), got shape {a.shape}."
    )
  return a


@dataclasses.dataclass
class TrainedVAELLS:
  """A trained model.

  Latent points are the model's codes ``z = f(x) / latent_scale``, the
  coordinates in which the operators act (:mod:`vaells_jax.models.vaells`);
  with ``latent_scale = 1`` (the synthetic experiments) that is ``f(x)``.

  Attributes:
    config: the training configuration.
    params: ``{"encoder", "decoder", "anchors", "psi"}``, in the units the
      networks trained in.
    data: the data set it was trained on, in the user's units
      (:class:`NoTrainingData` for a model loaded from ``save``'s folder).
    input_map: for a model that trained on conditioned data (``fit``), the
      map from the user's units to the networks' (``encode``, ``decode``,
      ``anchors``, ``sample_posterior`` and ``log_likelihood`` take and give
      the user's units); None: the same units.
    verdict: whether the run learned a manifold (:mod:`vaells_jax.runs.verdict`),
      when the run computed one.
  """

  config: Config
  params: Params
  data: Dataset | NoTrainingData
  input_map: InputMap | None = None
  verdict: dict[str, Any] | None = None

  @property
  def psi(self) -> jax.Array:
    """The learned operators, ``[M, d, d]``."""
    return self.params["psi"]

  def flat(self) -> TrainedVAELLS:
    """This model on flattened samples: images in and out as row-major
    vectors ``[..., D]`` (what the metrics and the verdict compute on)."""
    return _flat(self)

  @property
  def _model(self) -> Model:
    return Model.create(self.config, self.data.data_dim)

  @property
  def solvers(self) -> StepSolvers:
    """The coefficient solvers (``.posterior``, ``.prior``) built from the config."""
    return self._model.solvers

  def encode(self, x: ArrayLike) -> jax.Array:
    """``f(x) / latent_scale``: ``[..., D] -> [..., d]``."""
    x = _inputs(self.input_map, x, self.data.data_dim, "encode's input")
    return self._model.encode(self.params, x)

  def decode(self, z: ArrayLike) -> jax.Array:
    """``g(latent_scale * z)``: ``[..., d] -> [..., D]``."""
    z = _width(z, self.config.latent_dim, "decode's input")
    return _to_user(self.input_map, self._model.decode(self.params, z))

  @property
  def anchors(self) -> jax.Array:
    """The (learned) anchors in input space, ``[C, A, D]``."""
    return _to_user(self.input_map, self.params["anchors"])

  @property
  def anchors_latent(self) -> jax.Array:
    """Encoded anchors, ``[C, A, d]``."""
    return self._model.encode(self.params, self.params["anchors"])

  def save(self, path: PathLike, *, overwrite: bool = False) -> pathlib.Path:
    """Writes the model, without its training data, to the folder ``path``.

    The folder (:mod:`vaells_jax.data.saved_model`) holds the config, the
    parameters (network, anchors, ``psi``), the input map and the verdict:
    no training data and no optimiser state. It is written into a
    temporary folder and renamed into place, so no half-written model is
    left. ``vaells_jax.load(path)`` reads it back, with the same ``encode``
    and ``decode`` to the bit; its ``data`` is a
    :class:`~vaells_jax.data.saved_model.NoTrainingData`, which raises a
    ``ValueError`` for what needs the training data.

    Args:
      path: a folder that does not exist or is empty (or, with
        ``overwrite``, holds a saved model, which is replaced).
      overwrite: replace a saved model already in ``path``.

    Returns:
      ``path``, a ``pathlib.Path``.

    Raises:
      ValueError: ``path`` is a file, a link, a folder of other files, or a
        saved model without ``overwrite``.
    """
    return _save(self, path, overwrite)

  def _sample_around(
    self,
    key: jax.Array,
    starts: jax.Array,
    n: int,
    laplace_scale: float | None = None,
    gamma: float | None = None,
  ) -> jax.Array:
    """``n`` samples ``T(c) s + gamma eps`` around each start ``[..., d]``."""
    cfg = self.config
    b = 1.0 / cfg.zeta3 if laplace_scale is None else laplace_scale
    gamma = cfg.gamma if gamma is None else gamma
    k_c, k_e = jax.random.split(key)
    shape = starts.shape[:-1] + (n,)
    coeffs = sample_laplace(k_c, shape + (cfg.num_ops,), b)
    eps = jax.random.normal(k_e, shape + (cfg.latent_dim,))
    return transport(self.psi, coeffs, starts[..., None, :]) + gamma * eps

  def sample_prior(
    self,
    key: jax.Array,
    n: int,
    label: int | None = None,
    laplace_scale: float | None = None,
    gamma: float | None = None,
  ) -> jax.Array:
    """``n`` latent samples from the prior (of class ``label``, or all classes).

    Each sample picks an anchor uniformly and moves it along the operators
    with Laplace coefficients (scale ``1 / zeta3`` unless ``laplace_scale``)
    plus Gaussian noise (``gamma`` unless given). Returns ``[n, d]``.
    """
    anchors = self.anchors_latent
    if label is not None:
      if not 0 <= label < anchors.shape[0]:
        raise ValueError(f"label must be in [0, {anchors.shape[0]}), got {label}.")
      anchors = anchors[label]
    anchors = anchors.reshape(-1, anchors.shape[-1])
    k_pick, k_move = jax.random.split(key)
    picked = anchors[jax.random.randint(k_pick, (n,), 0, anchors.shape[0])]
    return self._sample_around(k_move, picked, 1, laplace_scale, gamma)[:, 0]

  def sample_posterior(
    self,
    key: jax.Array,
    x: ArrayLike,
    n: int,
    laplace_scale: float | None = None,
    gamma: float | None = None,
  ) -> jax.Array:
    """``n`` samples of ``q(z | x)`` for each input: ``[B, D] -> [B, n, d]``."""
    return self._sample_around(key, self.encode(x), n, laplace_scale, gamma)

  def infer_path(
    self,
    z0: ArrayLike,
    z1: ArrayLike,
    ts: ArrayLike,
    key: jax.Array | None = None,
    num_restarts: int | None = None,
    init_range: tuple[float, float] | None = None,
  ) -> jax.Array:
    """The transport path from ``z0`` to ``z1`` (``[..., d]`` each) at times ``ts``.

    Coefficients are inferred with the prior's sparsity weight and, unless
    given here, the config's restarts and start range (see
    :func:`~vaells_jax.core.inference.infer_coefficients`). Points far apart on
    an operator's orbit need starts near their coefficient: a spiral's next
    turn is a local minimum away, so spread the restarts over the turns the
    path may take. ``t in [0, 1]`` interpolates, other ``t`` extrapolate.
    Returns ``[T, ..., d]``.

    The solver is compiled for each new shape of ``z0`` (and restarts):
    about 5-20 s on a CPU the first time, milliseconds after. To avoid a
    compile per batch size, call it with one fixed batch size (pad the
    pairs, slice the result); the random restart starts are drawn for the
    whole batch, so padded pairs' paths may differ from unpadded ones within
    the solver's tolerance. ``encode``/``decode`` likewise compile per shape
    (fast: a second or less).
    """
    key = jax.random.PRNGKey(0) if key is None else key
    z0, z1 = jnp.asarray(z0), jnp.asarray(z1)
    solver = self.solvers.prior.replace(
      num_restarts=num_restarts, init_range=init_range
    )
    result = solver(self.psi, z0, z1, l1_weight=self.config.zeta_p, key=key)
    return transport_path(self.psi, result.coeffs, z0, ts)

  def log_likelihood(
    self,
    key: jax.Array,
    x: ArrayLike,
    labels: ArrayLike | None = None,
    num_samples: int = 100,
    chunk_size: int = 25,
  ) -> tuple[np.ndarray, np.ndarray]:
    """Importance-sampled ``log p(x)`` and ELBO (paper appendix D).

    Args:
      key: ``jax.random`` key.
      x: inputs ``[P, D]`` as the model sees them.
      labels: ``[P]`` classes (which anchors); default class 0.
      num_samples: samples per point.
      chunk_size: points per jitted call.

    Returns:
      ``(log_likelihood [P], elbo [P])`` float64 NumPy arrays (nats).
    """
    x = np.asarray(_inputs(self.input_map, np.asarray(x, np.float32), None, "x"))
    labels = (
      np.zeros(len(x), np.int32) if labels is None else np.asarray(labels, np.int32)
    )
    log_p, elbo = importance_log_likelihood(
      self._model,
      self.params,
      {"x": x, "source": {"x": x, "label": labels}},
      key,
      num_samples,
      chunk_size,
    )
    jacobian = _log_jacobian(self.input_map, x.shape[-1])
    return log_p + jacobian, elbo + jacobian


@dataclasses.dataclass
class TrainedBaseline:
  """A trained baseline (``config.model`` in ``vae``, ``vampprior``, ``svae``).

  Latent points are posterior means (unit mean directions for ``svae``).

  Attributes:
    config: the training configuration.
    params: the baseline's parameters (:mod:`vaells_jax.models.baselines`).
    data: as :class:`TrainedVAELLS`'s.
    input_map: as :class:`TrainedVAELLS`'s.
  """

  config: Config
  params: Params
  data: Dataset | NoTrainingData
  input_map: InputMap | None = None
  verdict = None  # computed for VAELLS only
  psi = None  # no transport operators

  @property
  def baseline(self) -> Baseline:
    """The static :class:`vaells_jax.models.baselines.Baseline`."""
    return create_baseline(self.config, self.data.data_dim)

  def save(self, path: PathLike, *, overwrite: bool = False) -> pathlib.Path:
    """Writes the model, without its training data, to the folder ``path``
    (as :meth:`TrainedVAELLS.save`)."""
    return _save(self, path, overwrite)

  def flat(self) -> TrainedBaseline:
    """As :meth:`TrainedVAELLS.flat`."""
    return _flat(self)

  def encode(self, x: ArrayLike) -> jax.Array:
    """The posterior's mean (direction): ``[..., D] -> [..., d]``."""
    x = _inputs(self.input_map, x, self.data.data_dim, "encode's input")
    return self.baseline.encode(self.params, x)[0]

  def decode(self, z: ArrayLike) -> jax.Array:
    """``g(z)``: ``[..., d] -> [..., D]``."""
    z = _width(z, self.config.latent_dim, "decode's input")
    return _to_user(self.input_map, self.baseline.decode(self.params, z))

  def sample_prior(self, key: jax.Array, n: int, label: int | None = None) -> jax.Array:
    """``n`` samples of ``p(z)``, ``[n, d]``; the baselines' prior has no classes."""
    if label is not None:
      raise ValueError(
        f"{self.config.model} has one prior for all classes; "
        "call sample_prior without label."
      )
    return self.baseline.sample_prior(self.params, key, n)

  def sample_posterior(self, key: jax.Array, x: ArrayLike, n: int) -> jax.Array:
    """``n`` samples of ``q(z | x)`` for each input: ``[B, D] -> [B, n, d]``."""
    x = _inputs(self.input_map, jnp.asarray(x), self.data.data_dim, "x")
    return self.baseline.sample_posterior(self.params, key, x, n)

  def infer_path(
    self,
    z0: ArrayLike,
    z1: ArrayLike,
    ts: ArrayLike,
    key: jax.Array | None = None,
    num_restarts: int | None = None,
    init_range: tuple[float, float] | None = None,
  ) -> jax.Array:
    """The model's path from ``z0`` to ``z1`` (``[..., d]`` each) at ``ts``.

    A straight line for ``vae`` and ``vampprior``; for ``svae`` the great
    circle through the two points' directions (``t`` outside ``[0, 1]``
    continues along it). ``key``, ``num_restarts`` and ``init_range`` are
    unused (kept for the common interface). Returns ``[T, ..., d]``.
    """
    del key, num_restarts, init_range
    z0, z1 = jnp.asarray(z0), jnp.asarray(z1)
    ts = jnp.asarray(ts, z0.dtype).reshape((-1,) + (1,) * z0.ndim)
    if self.config.model != "svae":
      return z0 + ts * (z1 - z0)
    return great_circle(z0, z1, ts)

  def log_likelihood(
    self,
    key: jax.Array,
    x: ArrayLike,
    labels: ArrayLike | None = None,
    num_samples: int = 100,
    chunk_size: int = 25,
  ) -> tuple[np.ndarray, np.ndarray]:
    """Importance-sampled ``log p(x)`` and ELBO, as :class:`TrainedVAELLS`'s.

    ``labels`` is unused (kept for the common interface). Returns
    ``(log_likelihood [P], elbo [P])`` float64 NumPy arrays.
    """
    del labels
    x = np.asarray(_inputs(self.input_map, np.asarray(x, np.float32), None, "x"))
    fn = jax.jit(self.baseline.log_weights, static_argnums=3)
    log_w = np.concatenate(
      [
        np.asarray(
          fn(
            self.params, x[i : i + chunk_size], jax.random.fold_in(key, i), num_samples
          ).total,
          np.float64,
        )
        for i in range(0, len(x), chunk_size)
      ]
    )
    jacobian = _log_jacobian(self.input_map, x.shape[-1])
    return np.asarray(iwae_bound(log_w)) + jacobian, log_w.mean(axis=-1) + jacobian


def _inputs(input_map: InputMap | None, x: Any, width: int | None, what: str) -> Any:
  """The user's ``x`` (vectors ``[..., D]``, or images ``[..., *shape]`` of
  an image model) in the model's units, ``[..., D]``, else a ValueError."""
  if input_map is not None and input_map.shape is not None:
    return input_map.to_model(x, what)
  x = x if width is None else _width(x, width, what)
  return x if input_map is None else input_map.to_model(x)


def _flat(model: Any) -> Any:
  if model.input_map is None or model.input_map.shape is None:
    return model
  return dataclasses.replace(model, input_map=model.input_map.flat())


def _to_user(input_map: InputMap | None, y: Any) -> Any:
  return y if input_map is None else input_map.to_user(y)


def _log_jacobian(input_map: InputMap | None, dim: int) -> float:
  """``log |d x' / d x|`` of the map to the model's units: densities of the
  user's ``x`` are the model's times ``scale^-D``."""
  return 0.0 if input_map is None else -dim * float(np.log(input_map.scale))


def great_circle(z0: jax.Array, z1: jax.Array, ts: jax.Array) -> jax.Array:
  """Points ``cos(t w) u0 + sin(t w) v`` on the great circle from ``u0`` to ``u1``.

  ``u0, u1`` are the unit directions of ``z0, z1 [..., d]``, ``w`` the angle
  between them and ``v`` the unit tangent at ``u0`` towards ``u1``; ``t = 0``
  gives ``u0`` and ``t = 1`` gives ``u1``. Where ``u0 = u1`` every ``t``
  gives ``u0``. ``ts`` broadcasts against ``z0``'s leading dimensions.
  """
  u0 = z0 / jnp.linalg.norm(z0, axis=-1, keepdims=True)
  u1 = z1 / jnp.linalg.norm(z1, axis=-1, keepdims=True)
  cos = jnp.clip(jnp.sum(u0 * u1, axis=-1, keepdims=True), -1.0, 1.0)
  tangent = u1 - cos * u0
  norm = jnp.linalg.norm(tangent, axis=-1, keepdims=True)
  v = tangent / jnp.where(norm > 0, norm, 1.0)
  w = jnp.arctan2(norm, cos)
  return jnp.cos(ts * w) * u0 + jnp.sin(ts * w) * v


class ModelEntry(NamedTuple):
  """How the runner trains one kind of model, and how :func:`load` restores it.

  Attributes:
    init: ``(key, config, data) -> state``, the initial training state.
    make_step: ``(config, data_dim, mesh) -> step``, the jitted
      ``step(state, batch, key) -> (state, metrics)``.
    trained: ``(config, state, data) -> trained model``.
    summary: ``state -> dict`` of the model's own training counters.
    describe: ``metrics -> str``, the metrics of a training log line.
    diagnose: ``(state, config) -> str``, the likely cause of a diverged run.
  """

  init: Callable[[Any, Config, Dataset], Any]
  make_step: Callable[[Config, int, Any], Callable]
  trained: Callable[[Config, Any, Dataset], Any]
  summary: Callable[[Any], dict]
  describe: Callable[[dict], str]
  diagnose: Callable[[Any, Config], str]


_VAELLS = ModelEntry(
  init=lambda key, config, data: init_state(key, config, data.anchors, data.data_dim),
  make_step=make_vaells_step,
  trained=lambda config, state, data: TrainedVAELLS(config, state.params, data),
  summary=lambda state: dict(
    psi_rejected_steps=int(state.psi_rejected),
    psi_attempted_steps=int(state.psi_attempted),
    final_lr_psi=float(state.lr_psi),
  ),
  describe=describe_vaells,
  diagnose=diagnose_vaells,
)
_BASELINE = ModelEntry(
  init=lambda key, config, data: init_baseline_state(key, config, data.x_train),
  make_step=make_baseline_step,
  trained=lambda config, state, data: TrainedBaseline(config, state.params, data),
  summary=lambda state: {},
  describe=describe_baseline,
  diagnose=likely_cause,
)
MODELS = {
  "vaells": _VAELLS,
  "vae": _BASELINE,
  "vampprior": _BASELINE,
  "svae": _BASELINE,
}


def load(workdir: PathLike, kept: bool = True) -> TrainedVAELLS | TrainedBaseline:
  """Loads the model trained in ``workdir`` (by ``experiments/run.py`` or
  ``fit``; where ``fit`` trained several tries, the one it kept, or with
  ``kept=False`` the first try, which ``workdir`` itself holds; the others
  are ``load(workdir / "try<k>")``), or saved there by ``model.save``.

  A run's latest checkpoint is verified file by file against its SHA-256 and
  against the run it records: ``config.json`` and ``dataset.npz`` must be
  those it was trained with. A saved model's files are verified against the
  SHA-256 sums in its ``model.json``; its ``data`` is a
  :class:`~vaells_jax.data.saved_model.NoTrainingData`.

  Raises:
    FileNotFoundError: ``config.json`` or ``dataset.npz`` is missing (a
      saved model: one of its files).
    ValueError: either is unreadable or invalid (one line naming it).
    vaells_jax.training.checkpoint.CheckpointError: (a ``ValueError``) no
      checkpoint, a file that fails its checksum, or a checkpoint written by
      another config or data (e.g. ``config.json`` edited after training).
  """
  workdir = pathlib.Path(workdir)
  if is_saved_model(workdir):
    return _load_saved(workdir)
  if kept and (workdir / TRIES_NAME).exists():
    folder = json.loads((workdir / TRIES_NAME).read_text())["kept"]
    if folder != ".":
      return load(workdir / folder)
  for name in (CONFIG_NAME, DATA_NAME):
    if not (workdir / name).exists():
      raise FileNotFoundError(
        f"{workdir / name} is missing: is {workdir} a VAELLS workdir?"
      )
  config = config_from_json(workdir / CONFIG_NAME)
  data = load_dataset(workdir / DATA_NAME)
  entry = MODELS[config.model]
  # the target's shapes only: not the networks a run started from
  blank = dataclasses.replace(config, start_networks="")
  target = entry.init(jax.random.PRNGKey(0), blank, data)
  state = restore_checkpoint(workdir, target, identity=run_identity(config, data))
  trained = entry.trained(config, state, data)
  if (workdir / INPUT_MAP_NAME).exists():
    input_map = InputMap.load(workdir / INPUT_MAP_NAME)
    if input_map.shift.shape != (data.data_dim,):
      raise ValueError(
        f"{workdir / INPUT_MAP_NAME} maps {input_map.shift.shape[0]} features; "
        f"the run's data have {data.data_dim}."
      )
    trained = dataclasses.replace(
      trained, data=input_map.user_data(data), input_map=input_map
    )
  if isinstance(trained, TrainedVAELLS):
    trained = dataclasses.replace(trained, verdict=_saved_verdict(workdir))
  return trained


def _saved_verdict(workdir: pathlib.Path) -> dict[str, Any] | None:
  """The verdict in the run's ``summary.json``, if there is one."""
  try:
    return json.loads((workdir / "summary.json").read_text()).get("verdict")
  except (OSError, ValueError):
    return None


def _save(
  model: TrainedVAELLS | TrainedBaseline, path: PathLike, overwrite: bool
) -> pathlib.Path:
  saved = SavedModel(
    config=model.config,
    params=jax.device_get(model.params),
    data_dim=model.data.data_dim,
    input_map=model.input_map,
    verdict=model.verdict,
  )
  return write_saved_model(path, saved, overwrite=overwrite)


def _load_saved(folder: pathlib.Path) -> TrainedVAELLS | TrainedBaseline:
  """The model in a folder ``model.save`` wrote."""
  saved = read_saved_model(folder)
  params = jax.tree.map(jnp.asarray, saved.params)
  data = NoTrainingData(saved.data_dim, folder)
  if saved.config.model != "vaells":
    return TrainedBaseline(saved.config, params, data, saved.input_map)
  psi, anchors = params.get("psi"), params.get("anchors")
  cfg = saved.config
  if (
    psi is None
    or anchors is None
    or psi.shape != (cfg.num_ops, cfg.latent_dim, cfg.latent_dim)
    or anchors.shape[-1] != saved.data_dim
  ):
    raise ValueError(
      f"{folder / PARAMS_NAME} does not hold this config's psi "
      f"[{cfg.num_ops}, {cfg.latent_dim}, {cfg.latent_dim}] and anchors "
      f"[..., {saved.data_dim}]."
    )
  return TrainedVAELLS(cfg, params, data, saved.input_map, saved.verdict)
