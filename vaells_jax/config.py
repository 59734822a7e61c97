"""Training configuration: one frozen dataclass, validated before anything runs.

Its fields are declared in groups by concern (:data:`GROUPS`: run, model,
loss, optimiser, schedule, inference, population, evaluation) and read flat
(``config.lr_net``), as the command line overrides them
(``--config.lr_net=...``) and every run's ``config.json`` and checkpoint
identity record them (docs/library.md, "Configuration").
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import numbers
import pathlib
from typing import Any, cast

import numpy as np

# The solver registry (no JAX): the method list and what each applies to.
from vaells_jax.core.solvers import METHODS as INFERENCE_METHODS
from vaells_jax.core.solvers import unsuitable

__all__ = [
  "ADDED_LATER",
  "CONFIG_NAME",
  "GROUPS",
  "Config",
  "config_from_json",
  "override",
]

CONFIG_NAME = "config.json"  # where a run saves its configuration
NETWORKS = ("mlp", "conv", "image")
MODEL_NAMES = ("vaells", "vae", "vampprior", "svae")  # vaells or a baseline
POPULATION_INITS = ("dictionary", "all")
# Selection signals of population training (vaells_jax.training.selection).
SELECT_SIGNALS = (
  "latent_coverage",
  "latent_coverage_wide",
  "latent_coverage_both",
  "latent_coverage_ranks",
  "data_coverage",
  "psi_rejected",
  "loss",
  "log_p",
)


@dataclasses.dataclass(frozen=True)
class Config:
  """Hyper-parameters of a VAELLS run (names follow paper appendix A/B tables).

  Weights use the ``1/2 ||.||^2`` convention: ``zeta1 * 1/2 ||x - g(z)||^2``
  etc. The Laplace scale of the posterior samples is ``b = 1 / zeta3``.
  """

  # -- run: what trains, for how long, how it logs and stops ------------------
  seed: int = 0
  # "vaells", or a baseline of the paper's comparison (vaells_jax.models.baselines)
  # trained on the same data, networks, batch size, step budget and lr_net.
  model: str = "vaells"
  num_steps: int = 4000
  batch_size: int = 30
  log_every: int = 100
  checkpoint_every: int = 1000
  # Consecutive steps with a non-finite loss before the run stops.
  max_bad_steps: int = 100
  # Split each batch over all devices (jax.devices()); state replicated.
  data_parallel: bool = False

  # -- model: networks, latent space, operators and anchors ------------------
  latent_dim: int = 2
  num_ops: int = 4  # M
  network: str = "mlp"  # "mlp" (table 2), "conv" (table 5, 28x28) or "image"
  image_shape: tuple[int, ...] = ()  # (H, W, C) of network="image"
  start_networks: str = ""  # a file of networks to start from (fit: images)
  hidden: tuple[int, ...] = (512,)  # MLP layer widths
  conv_channels: int = 64  # the conv networks' channels (table 5: 64)
  num_samples: int = 1  # N_s
  latent_scale: float = 1.0
  psi_init_std: float = 0.01
  # Seed of the dictionary's initial draw alone; -1: drawn from ``seed`` with
  # the networks. The paper (appendix "Analysis of sensitivity to anchor
  # points") trains the swiss roll from the same networks and anchors with
  # different dictionary draws; this is that knob.
  psi_seed: int = -1
  learn_anchors: bool = True
  closest_anchor: bool = False
  # Rotated MNIST (paper appendix H): each training input is rotated on the
  # device to a fresh random angle in [0, input_rotation] degrees, and when
  # rotation_anchors > 0 each sample's anchors are its own unrotated input
  # rotated by 360 k / rotation_anchors degrees (not learned; the class
  # anchors are then unused in training).
  input_rotation: float = 0.0
  rotation_anchors: int = 0
  # Baselines only: VampPrior pseudo-inputs (paper: 100 synthetic, 500 MNIST)
  # and the precision of log p(x | z): 1.0, MNIST's zeta1 (with 0.01 a VAE's
  # posterior collapses to the prior: docs/studies/baselines.md).
  num_pseudo: int = 100
  baseline_zeta1: float = 1.0

  # -- loss: the weights of the objective's terms -----------------------------
  zeta1: float = 0.01  # reconstruction
  zeta2: float = 1.0  # posterior data term
  zeta3: float = 1.0  # posterior coefficient term (= 1/b)
  zeta4: float = 1.0  # prior data term
  # prior coefficient term; with closest_anchor a constant of each step (no
  # effect on training), over all anchors a weight in the mixture
  zeta5: float = 0.01
  zeta_q: float = 1e-6  # l1 weight of posterior inference
  zeta_p: float = 5e-6  # l1 weight of prior inference
  eta: float = 0.01  # Frobenius penalty on Psi
  gamma: float = 1e-3  # posterior noise std
  prior_weight_net: float = 1.0  # factor on zeta4, zeta5 in network steps
  recon_weight_psi: float = 1.0  # factor on zeta1 in Psi steps

  # -- optimiser: the parameter groups' rates ----------------------------------
  lr_net: float = 0.005
  lr_anchor: float = 1e-4
  # The last fraction of num_steps over which lr_net and lr_anchor fall to 0
  # along a cosine (vaells_jax.training.optim.cooldown); 0: constant rates,
  # as the paper trains. fit() uses it: the decoder then resolves the data's
  # manifold at its noise (docs/fit.md).
  lr_net_cooldown: float = 0.0
  lr_net_warmup: int = 0  # steps over which lr_net and lr_anchor rise from 0
  lr_psi: float = 4e-4  # starting rate of the accept/reject Psi step
  max_lr_psi: float = 0.1
  psi_lr_decay_start: int = -1  # step after which lr_psi *= 0.9992; -1: never

  # -- schedule: warm-up and the alternating phases -----------------------------
  warmup_steps: int = 0
  alternate: bool = False
  net_steps: int = 20
  psi_steps: int = 20
  # After the last step, this many Adam steps fit the decoder alone to the
  # encoder's codes (vaells_jax.training.polish); 0: none, as the paper
  # trains. Its rate falls from decoder_polish_lr to 0 along a cosine.
  decoder_polish_steps: int = 0
  decoder_polish_lr: float = 3e-4

  # -- inference: the coefficients of the posterior and prior pairs ------------
  # Starts of the coefficient inference, as the original code draws them: an
  # anchor (prior) pair's restart r from U[lo + r w, hi + r w], w = hi - lo, so
  # U[-2.5, 0] then U[0, 2.5] (its --coeffRandStart -2.5 --coeffRandAdd 2.5);
  # a posterior pair once (posterior_restarts) from U[0, 1].
  num_restarts: int = 1
  init_range: tuple[float, float] = (-2.5, 0.0)
  posterior_restarts: int = 1
  posterior_init_range: tuple[float, float] = (0.0, 1.0)
  inference_max_iter: int = 100
  # Effectively "run max_iter iterations", as the reference code's CG did. A
  # real tolerance stops at once on small codes and the operators never learn
  # (concentric: operators 0.001 with tol 1e-4, 0.03 with 1e-9).
  inference_tol: float = 1e-9
  # The coefficient solver (vaells_jax.core.solvers): "auto" picks the fastest
  # measured for the shape: "gauss_newton" (damped Gauss-Newton in orthants)
  # for latent_dim = 2, "exact" (a grid of the one coefficient, then Newton)
  # for num_ops = 1, "pgd" (proximal gradient with a step per pair) otherwise.
  # Also "fista" (jaxopt proximal gradient, the specification's solver) and
  # "lm" (Levenberg-Marquardt on the smoothed objective, then a polish), and
  # "gauss_newton_fused" (gauss_newton as one Pallas kernel, for a GPU).
  inference_method: str = "auto"

  # -- population: members trained side by side, the best kept ----------------
  # Population training (vaells_jax.training.population): ``population``
  # members train side by side in one vmapped step, on the same batches,
  # until ``select_at * num_steps``; they differ in their dictionary draw
  # ("dictionary") or also in networks and anchors ("all"). The member with
  # the best ``select_signal`` then continues alone. 1: a single run.
  population: int = 1
  population_init: str = "dictionary"
  select_at: float = 0.25
  select_signal: str = "latent_coverage"

  # -- evaluation: the report's sample sizes ----------------------------------
  # Importance-sampled log-likelihood (paper appendix D): test points and
  # samples per point. The MNIST configs use the paper's 500 x 100; this
  # default keeps a synthetic run's evaluation short (each VAELLS sample
  # needs an inference per anchor: 100 x 100 took ~40 s on the swiss roll).
  eval_ll_points: int = 100
  eval_ll_samples: int = 20
  # Held-out digits whose operator paths the gated rotation span follows for
  # rotated inputs (vaells_jax.evaluation.rotation.GATED_DIGITS), the operator
  # reach for natural ones (vaells_jax.evaluation.reach). Evaluation only:
  # not part of a checkpoint's identity.
  eval_rotation_digits: int = 200

  def __post_init__(self):
    self._check_types()
    self._check_bounds()
    self._check_signs()
    self._check_run_and_model()
    self._check_image()
    self._check_optimiser()
    self._check_inference()
    self._check_population()

  def _check_signs(self):
    """The fields of :data:`_POSITIVE` > 0 and of :data:`_NON_NEGATIVE` >= 0;
    ``psi_seed`` and ``psi_lr_decay_start`` >= 0 or -1."""
    for name in _POSITIVE:
      if not getattr(self, name) > 0:
        raise ValueError(f"config.{name} must be > 0, got {getattr(self, name)!r}.")
    for name in _NON_NEGATIVE:
      if not getattr(self, name) >= 0:
        raise ValueError(f"config.{name} must be >= 0, got {getattr(self, name)!r}.")
    for name, meaning in _MINUS_ONE.items():
      if getattr(self, name) < -1:
        raise ValueError(
          f"config.{name} must be >= 0, or -1 ({meaning}), got {getattr(self, name)}."
        )

  def _check_run_and_model(self):
    for name, choices in (("model", MODEL_NAMES), ("network", NETWORKS)):
      if getattr(self, name) not in choices:
        raise ValueError(
          f"config.{name} must be one of {choices}, got {getattr(self, name)!r}."
        )
    if self.model == "svae" and self.latent_dim < 2:
      raise ValueError(
        "config.model='svae' needs latent_dim >= 2 (the sphere "
        f"S^(d-1) in R^d), got {self.latent_dim}."
      )
    if self.decoder_polish_steps and self.model != "vaells":
      raise ValueError(
        "config.decoder_polish_steps polishes a VAELLS decoder; "
        f"config.model={self.model!r} trains none (set it to 0)."
      )
    if not self.hidden or any(h < 1 for h in self.hidden):
      raise ValueError(
        "config.hidden must be a non-empty tuple of layer widths "
        f">= 1, got {self.hidden!r}."
      )

  def _check_image(self):
    """``image_shape`` (H, W, C) with network "image" (VAELLS), else ``()``."""
    shape, image = self.image_shape, self.network == "image"
    if image != bool(shape) or image and (len(shape) != 3 or min(shape) < 1):
      raise ValueError(
        "config.image_shape must be (H, W, C) >= 1 with network='image' and () "
        f"otherwise, got {shape!r} with network={self.network!r}."
      )
    if image and self.model != "vaells":
      raise ValueError(f"config.network='image' trains VAELLS, not {self.model!r}.")

  def _check_optimiser(self):
    if not 0 <= self.lr_net_cooldown <= 1:
      raise ValueError(
        f"config.lr_net_cooldown must be in [0, 1], got {self.lr_net_cooldown}."
      )
    if self.lr_net_warmup < 0:
      raise ValueError(f"config.lr_net_warmup must be >= 0, got {self.lr_net_warmup}.")
    if not self.lr_psi <= self.max_lr_psi:
      raise ValueError(
        f"config.lr_psi ({self.lr_psi}) must be <= config.max_lr_psi "
        f"({self.max_lr_psi})."
      )

  def _check_inference(self):
    for name in ("init_range", "posterior_init_range"):
      if len(getattr(self, name)) != 2:
        raise ValueError(
          f"config.{name} must be (lo, hi), two numbers, got {getattr(self, name)}."
        )
      lo, hi = getattr(self, name)
      if not lo <= hi:
        raise ValueError(
          f"config.{name} must be (lo, hi) with lo <= hi, got {getattr(self, name)}."
        )
    if self.inference_method not in INFERENCE_METHODS:
      raise ValueError(
        f"config.inference_method must be one of "
        f"{INFERENCE_METHODS}, got {self.inference_method!r}."
      )
    problem = unsuitable(  # a baseline solves no coefficients of its codes
      self.inference_method,
      self.num_ops,
      self.latent_dim if self.model == "vaells" else None,
      names=("num_ops", "latent_dim"),
    )
    if problem:
      raise ValueError(f"config.inference_method={problem}")

  def _check_population(self):
    if self.population < 1:
      raise ValueError(f"config.population must be >= 1, got {self.population}.")
    for name, choices in (
      ("population_init", POPULATION_INITS),
      ("select_signal", SELECT_SIGNALS),
    ):
      if getattr(self, name) not in choices:
        raise ValueError(
          f"config.{name} must be one of {choices}, got {getattr(self, name)!r}."
        )
    if not 0 < self.select_at <= 1:
      raise ValueError(f"config.select_at must be in (0, 1], got {self.select_at}.")
    if self.population > 1 and self.model != "vaells":
      raise ValueError(
        f"config.population={self.population} trains VAELLS members; "
        f"config.model={self.model!r} has no dictionary to draw."
      )

  def _check_types(self):
    """Each field must hold its annotated type (an int is a valid float).

    NumPy scalars are accepted and stored as the Python type (so the config
    compares, hashes and writes to JSON like one built from Python values).
    """
    for field in dataclasses.fields(self):
      value, kind = getattr(self, field.name), _KINDS[field.name]
      if kind is tuple:
        element = _TUPLE_ELEMENTS[field.name]
        ok = isinstance(value, tuple) and all(_is(v, element) for v in value)
        what = f"a tuple of {element.__name__}"
        normal = tuple(element(v) for v in value) if ok else value
      else:
        ok, what = _is(value, kind), kind.__name__
        normal = kind(value) if ok else value
      if not ok:
        raise ValueError(f"config.{field.name} must be {what}, got {value!r}.")
      object.__setattr__(self, field.name, normal)

  def _check_bounds(self):
    """Floats finite and representable in float32; integers within bounds."""
    for field in dataclasses.fields(self):
      value = getattr(self, field.name)
      kind = _KINDS[field.name]
      if kind is tuple:
        kind = _TUPLE_ELEMENTS[field.name]
        values = value
      else:
        values = (value,)
      for v in values:
        if kind is float and not (v == 0 or _FLOAT32_TINY <= abs(v) <= _FLOAT32_MAX):
          raise ValueError(
            f"config.{field.name} must be finite and 0 or of magnitude in "
            f"[{_FLOAT32_TINY:.3g}, {_FLOAT32_MAX:.3g}] (float32), got {value!r}."
          )
        if kind is int and field.name in _INT_BOUNDS:
          hi = _INT_BOUNDS[field.name]
          if not v <= hi:
            raise ValueError(f"config.{field.name} must be <= {hi}, got {value!r}.")
    for name in ("seed",):
      if not 0 <= getattr(self, name) <= _MAX_SEED:
        raise ValueError(
          f"config.{name} must be in [0, {_MAX_SEED}], got {getattr(self, name)!r}."
        )


def _is(value, kind) -> bool:
  if kind is bool:
    return isinstance(value, (bool, np.bool_))
  if kind is str:
    return isinstance(value, str)
  number = {int: numbers.Integral, float: numbers.Real}[kind]
  return isinstance(value, number) and not isinstance(value, (bool, np.bool_))


# The fields by concern, in the order Config declares them (--help lists
# them so; tests/test_config.py checks that they are every field, in order).
GROUPS = {
  "run": (
    "seed",
    "model",
    "num_steps",
    "batch_size",
    "log_every",
    "checkpoint_every",
    "max_bad_steps",
    "data_parallel",
  ),
  "model": (
    "latent_dim",
    "num_ops",
    "network",
    "image_shape",
    "start_networks",
    "hidden",
    "conv_channels",
    "num_samples",
    "latent_scale",
    "psi_init_std",
    "psi_seed",
    "learn_anchors",
    "closest_anchor",
    "input_rotation",
    "rotation_anchors",
    "num_pseudo",
    "baseline_zeta1",
  ),
  "loss": (
    "zeta1",
    "zeta2",
    "zeta3",
    "zeta4",
    "zeta5",
    "zeta_q",
    "zeta_p",
    "eta",
    "gamma",
    "prior_weight_net",
    "recon_weight_psi",
  ),
  "optimiser": (
    "lr_net",
    "lr_anchor",
    "lr_net_cooldown",
    "lr_net_warmup",
    "lr_psi",
    "max_lr_psi",
    "psi_lr_decay_start",
  ),
  "schedule": (
    "warmup_steps",
    "alternate",
    "net_steps",
    "psi_steps",
    "decoder_polish_steps",
    "decoder_polish_lr",
  ),
  "inference": (
    "num_restarts",
    "init_range",
    "posterior_restarts",
    "posterior_init_range",
    "inference_max_iter",
    "inference_tol",
    "inference_method",
  ),
  "population": ("population", "population_init", "select_at", "select_signal"),
  "evaluation": ("eval_ll_points", "eval_ll_samples", "eval_rotation_digits"),
}
_POSITIVE = (
  "num_steps",
  "batch_size",
  "log_every",
  "checkpoint_every",
  "max_bad_steps",
  "latent_dim",
  "num_ops",
  "conv_channels",
  "num_samples",
  "latent_scale",
  "num_pseudo",
  "baseline_zeta1",
  "zeta3",
  "max_lr_psi",
  "decoder_polish_lr",
  "net_steps",
  "psi_steps",
  "num_restarts",
  "posterior_restarts",
  "inference_max_iter",
  "inference_tol",
  "eval_ll_points",
  "eval_ll_samples",
  "eval_rotation_digits",
)
_NON_NEGATIVE = (
  "psi_init_std",
  "input_rotation",
  "rotation_anchors",
  "zeta1",
  "zeta2",
  "zeta4",
  "zeta5",
  "zeta_q",
  "zeta_p",
  "eta",
  "gamma",
  "prior_weight_net",
  "recon_weight_psi",
  "lr_net",
  "lr_anchor",
  "lr_psi",
  "warmup_steps",
  "decoder_polish_steps",
)
_MINUS_ONE = {"psi_seed": "drawn from config.seed", "psi_lr_decay_start": "never"}
_FLOAT32_TINY = float(np.finfo(np.float32).tiny)  # below it: denormal or 0
_FLOAT32_MAX = float(np.finfo(np.float32).max)
# Seeds, steps and counters are int32 on the device; seed + 1 keys the noise.
_MAX_SEED = 2**31 - 2
_INT32 = 2**31 - 1
# Sizes: an upper bound per field so that a typo (latent_dim=1000000000) is
# refused here; whether the model fits in memory with the data's dimension
# is checked with the data (vaells_jax.training.guards.check_data).
_INT_BOUNDS = {
  "num_steps": _INT32,
  "batch_size": 2**24,
  "latent_dim": 4096,
  "num_ops": 4096,
  "hidden": 2**16,
  "conv_channels": 2**12,
  "image_shape": 2**12,
  "num_samples": 2**16,
  "psi_lr_decay_start": _INT32,
  "psi_seed": _MAX_SEED,
  "warmup_steps": _INT32,
  "net_steps": _INT32,
  "psi_steps": _INT32,
  "decoder_polish_steps": _INT32,
  "num_restarts": 2**16,
  "posterior_restarts": 2**16,
  "inference_max_iter": 2**20,
  "rotation_anchors": 2**16,
  "eval_ll_points": 2**24,
  "eval_ll_samples": 2**20,
  "eval_rotation_digits": 2**24,
  "log_every": _INT32,
  "checkpoint_every": _INT32,
  "max_bad_steps": _INT32,
  "num_pseudo": 2**20,
}


_KINDS: dict[str, type] = {
  "hidden": tuple,
  "image_shape": tuple,
  "init_range": tuple,
  "posterior_init_range": tuple,
}
_TUPLE_ELEMENTS: dict[str, type] = {
  "hidden": int,
  "image_shape": int,
  "init_range": float,
  "posterior_init_range": float,
}
_KINDS.update(
  {
    f.name: {"int": int, "float": float, "bool": bool, "str": str}[cast(str, f.type)]
    for f in dataclasses.fields(Config)
    if f.name not in _KINDS
  }
)


def _unknown_key(key: str) -> ValueError:
  """The error for a key that is no field of ``Config``, naming the closest."""
  fields = sorted(f.name for f in dataclasses.fields(Config))
  near = difflib.get_close_matches(key, fields, n=1)
  hint = f" Did you mean {near[0]!r}?" if near else ""
  return ValueError(f"Unknown config key {key!r}.{hint}")


def _checked_init(init):
  """``Config.__init__`` that names the closest field for an unknown keyword."""

  @functools.wraps(init)
  def __init__(self, *args, **kwargs):  # noqa: N807
    fields = {f.name for f in dataclasses.fields(Config)}
    for key in kwargs:
      if key not in fields:
        raise _unknown_key(key)
    init(self, *args, **kwargs)

  return __init__


Config.__init__ = _checked_init(Config.__init__)  # type: ignore[method-assign]


def _parse(value: str, current: Any, element: type | None = None) -> Any:
  """Parses a command-line string into the type of the current value."""
  if isinstance(current, bool):
    if value.lower() in ("1", "true", "yes"):
      return True
    if value.lower() in ("0", "false", "no"):
      return False
    raise ValueError(f"expected true/false, got {value!r}")
  if isinstance(current, tuple):
    items = [v for v in value.strip("()[] ").split(",") if v.strip()]
    kind = element or (type(current[0]) if current else float)
    return tuple(kind(v) for v in items)
  return type(current)(value)


def override(config: Config, overrides: dict[str, str]) -> Config:
  """Returns ``config`` with string ``overrides`` (``{"num_steps": "10"}``) applied.

  Raises:
    ValueError: for an unknown key (naming the closest valid one) or a value
      that does not parse as the field's type.
  """
  fields = {f.name for f in dataclasses.fields(config)}
  changes = {}
  for key, value in overrides.items():
    if key not in fields:
      raise _unknown_key(key)
    try:
      changes[key] = _parse(value, getattr(config, key), _TUPLE_ELEMENTS.get(key))
    except ValueError as e:
      raise ValueError(f"Bad value for config.{key}: {e}") from None
  return dataclasses.replace(config, **changes)


# Fields that joined Config after runs were saved without them, with the
# value that reproduces those runs: a config.json without one loads with it,
# and a run at that value keeps the identity its checkpoints were written with
# (vaells_jax.training.guards.run_identity).
ADDED_LATER = {
  "lr_net_cooldown": 0.0,
  "decoder_polish_steps": 0,
  "decoder_polish_lr": 3e-4,
  "conv_channels": 64,
  "image_shape": (),
  "start_networks": "",
  "lr_net_warmup": 0,
}


def config_from_json(path) -> Config:
  """Reads a configuration saved by a run (``WORKDIR/config.json``).

  Raises:
    ValueError: one line naming the problem, for a file that cannot be read,
      is not a JSON object, lacks fields of :class:`Config` or has keys that
      are none (a file of another tool, or edited), or holds invalid values.
  """
  path = pathlib.Path(path)
  try:
    raw = json.loads(path.read_text())
  except (OSError, UnicodeDecodeError, ValueError) as e:
    reason = " ".join(str(e).split()) or type(e).__name__
    raise ValueError(f"{path} is not a readable JSON file ({reason}).") from None
  if not isinstance(raw, dict):
    raise ValueError(
      f"{path} must hold a JSON object of config fields, got a {type(raw).__name__}."
    )
  fields = [f.name for f in dataclasses.fields(Config)]
  raw = {**ADDED_LATER, **raw}
  missing = [k for k in fields if k not in raw]
  extra = sorted(k for k in raw if k not in fields)
  if missing or extra:
    parts = [f"missing keys {missing}"] * bool(missing) + [
      f"unknown keys {extra}"
    ] * bool(extra)
    raise ValueError(
      f"{path} is not a vaells_jax run configuration ({'; '.join(parts)})."
    )
  try:
    values: dict[str, Any] = {
      k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()
    }
    return Config(**values)
  except ValueError as e:
    raise ValueError(f"{path}: {e}") from None
