"""VAELLS training: the state, the schedule and the one jitted training step.

One step (paper Algorithm 1) encodes the batch and the anchors of each sample's
class, samples ``z = T_psi(c_hat) f(x) + gamma eps`` on the latent scale,
infers the posterior and prior coefficients (constants), takes the gradient
of the loss with respect to every parameter group and hands it to the optax
optimiser (:mod:`vaells_jax.training.optim`): Adam on the networks and
anchors, the paper's accept/reject step on ``Psi``, each only in its phase.

Which groups move, and the term weights, depend on the phase (warm-up, network
steps, ``Psi`` steps), computed from ``state.step`` inside the jitted function,
so the schedule never triggers a recompilation. Only warm-up is decided on the
host: a config with warm-up compiles two steps, one for warm-up and one for
after it (:class:`PhasedStep`).

Numerical faults do not crash the step: a step whose loss or gradient is not
finite changes nothing (``optax.apply_if_finite``), and the optimiser counts
such steps, in total and in a row, so that the training loop can stop a run
that does not recover.
"""

from __future__ import annotations

from typing import Any

import flax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding, PartitionSpec

from vaells_jax.config import Config
from vaells_jax.core import backend
from vaells_jax.models.vaells import (
  Model,
  Phase,
  draw_noise,
  infer_step_coefficients,
  init_params,
  objective_terms,
  sample_posterior_latents,
  transport_terms,
)
from vaells_jax.training.guards import likely_cause
from vaells_jax.training.optim import SkippedSteps, make_optimizer, psi_step_state

__all__ = [
  "PhasedStep",
  "TrainState",
  "data_parallel_mesh",
  "describe_vaells",
  "diagnose_vaells",
  "init_state",
  "jit_step",
  "make_train_step",
  "make_vaells_step",
  "phase_of",
  "train_step_fn",
]


@flax.struct.dataclass
class TrainState(SkippedSteps):
  """Everything that changes during training.

  Attributes:
    step: steps taken, scalar int.
    params: ``{"encoder", "decoder", "anchors", "psi"}``; anchors ``[C, A, D]``
      in input space, per class; ``psi`` the operators ``[M, d, d]``.
    opt_state: the optax state of :func:`~vaells_jax.training.optim.make_optimizer`
      (it holds the ``Psi`` rate and the step counters, read through the
      properties below and ``net_skipped``, ``bad_streak``).
  """

  step: jax.Array
  params: Any
  opt_state: Any

  @property
  def psi(self) -> jax.Array:
    return self.params["psi"]

  @property
  def lr_psi(self) -> jax.Array:
    """Current rate of the ``Psi`` step."""
    return psi_step_state(self.opt_state).lr

  @property
  def psi_rejected(self) -> jax.Array:
    return psi_step_state(self.opt_state).rejected

  @property
  def psi_attempted(self) -> jax.Array:
    return psi_step_state(self.opt_state).attempted


def phase_of(step, config: Config, warmup: bool | None = None) -> Phase:
  """Schedule at ``step``: warm-up, then network and/or ``Psi`` updates.

  ``warmup``: whether ``step`` is a warm-up step, when the caller knows it (a
  Python bool, kept as is in ``Phase.warmup``); by default computed from
  ``step``.

  Without ``alternate`` every step after warm-up updates both groups (with the
  prior weights times ``prior_weight_net``, as the original code does). With
  it, ``net_steps`` network steps (prior terms times ``prior_weight_net``)
  alternate with ``psi_steps`` ``Psi`` steps (reconstruction times
  ``recon_weight_psi``).
  """
  step = jnp.asarray(step)
  in_warmup = step < config.warmup_steps if warmup is None else jnp.asarray(warmup)
  one = jnp.ones((), jnp.float32)
  if config.alternate:
    cycle = (step - config.warmup_steps) % (config.net_steps + config.psi_steps)
    net_phase = cycle < config.net_steps
  else:
    net_phase = jnp.ones((), bool)
  update_psi = ~in_warmup & (~net_phase | (not config.alternate))
  psi_only = ~in_warmup & ~net_phase
  return Phase(
    warmup=in_warmup if warmup is None else warmup,
    update_net=in_warmup | net_phase,
    update_psi=update_psi,
    recon_factor=jnp.where(psi_only, config.recon_weight_psi, one),
    prior_factor=jnp.where(psi_only, one, config.prior_weight_net * one),
  )


def first_psi_step(config: Config) -> int:
  """The first step that updates ``Psi`` (:func:`phase_of`): after the warm-up,
  and with ``alternate`` after the first ``net_steps`` network steps."""
  return config.warmup_steps + (config.net_steps if config.alternate else 0)


def init_state(
  key, config: Config, anchors, data_dim: int, member: int = 0
) -> TrainState:
  """Initial state: :func:`~vaells_jax.models.vaells.init_params` and a fresh optimiser.

  Args:
    key: ``jax.random`` key.
    config: the run's configuration.
    anchors: initial anchors in input space, ``[C, A, D]``.
    data_dim: ``D``.
    member: index in a population (see ``init_params``).
  """
  params = init_params(key, config, anchors, data_dim, member)
  return TrainState(
    step=jnp.zeros((), jnp.int32),
    params=params,
    opt_state=make_optimizer(config).init(params),
  )


def poison_if_not_finite(loss, grads):
  """``grads``, or NaN everywhere when ``loss`` is not finite, so that
  ``optax.apply_if_finite`` skips a step whose loss alone overflowed."""
  finite = jnp.isfinite(loss)
  return jax.tree_util.tree_map(lambda g: jnp.where(finite, g, jnp.nan), grads)


def describe_vaells(metrics: dict) -> str:
  """A VAELLS log line's metrics (:func:`vaells_jax.training.loop.train_loop`)."""
  return (
    f"loss {metrics['loss']:+.4f}  recon {metrics['recon']:.4f}"
    f"  log_q {metrics['log_q']:+.4f}  log_p {metrics['log_p']:+.4f}"
    f"  lr_psi {metrics['lr_psi']:.2e}"
    f"  psi_rejected {int(metrics['psi_rejected'])}"
    f"  net_skipped {int(metrics['net_skipped'])}"
    f"  inf_iters {metrics['inference_iters']:.1f}"
  )


def diagnose_vaells(state, config: Config) -> str:
  """What most likely made a VAELLS run's loss non-finite: exploded
  operators, else :func:`vaells_jax.training.guards.likely_cause`."""
  psi = np.abs(np.asarray(state.psi))
  if not np.all(np.isfinite(psi)) or psi.sum(axis=-2).max() > 100:
    return (
      f"the transport operators Psi exploded (largest 1-norm "
      f"{psi.sum(axis=-2).max():.3g}); lower lr_psi/max_lr_psi "
      f"(now {config.lr_psi}/{config.max_lr_psi}) or raise eta "
      f"(now {config.eta})"
    )
  return likely_cause(state, config)


def data_parallel_mesh(devices=None) -> jax.sharding.Mesh:
  """A 1-D mesh, axis ``"data"``, over ``devices`` (default: all devices)."""
  devices = jax.devices() if devices is None else devices
  return jax.sharding.Mesh(np.asarray(devices), ("data",))


def make_train_step(model: Model, mesh: jax.sharding.Mesh | None = None):
  """Builds the jitted ``train_step(state, batch, key) -> (state, metrics)``.

  The step is :func:`train_step_fn` under ``jax.jit``, one compiled program
  for warm-up steps and one for the others (:class:`PhasedStep`).

  ``batch`` is ``{"x": [B, D], "label": [B] int}``; labels pick each sample's
  anchors from ``params["anchors"][label]``.

  With a ``mesh`` (see :func:`data_parallel_mesh`) the step is data-parallel:
  the batch is split over the mesh's ``"data"`` axis, the state and the
  metrics are replicated, and XLA inserts the cross-device reductions. The
  step computes the same function as without a mesh (up to the order of
  floating-point sums); ``B`` must be a multiple of the number of devices.
  """
  step = lambda warmup: train_step_fn(model, warmup)  # noqa: E731
  return PhasedStep(step, model.config.warmup_steps, mesh)


def make_vaells_step(config: Config, data_dim: int, mesh=None):
  """:func:`make_train_step` of ``config``'s model: the ``(config, data_dim,
  mesh)`` form that :func:`~vaells_jax.training.baseline_step.make_baseline_step`
  also has (``vaells_jax.api.MODELS``)."""
  return make_train_step(Model.create(config, data_dim), mesh)


def train_step_fn(model: Model, warmup: bool | None = None):
  """The training step ``(state, batch, key) -> (state, metrics)``, not jitted
  (:func:`make_train_step` jits it; a population vmaps it first).

  ``warmup``: build the step for warm-up steps only (``True``) or for the
  steps after it only (``False``); by default the step works out which from
  ``state.step`` (a ``jax.lax.cond``, slow for convolutional networks on a
  CPU: :func:`~vaells_jax.models.vaells.if_warmup`).
  """
  cfg = model.config
  optimizer = make_optimizer(cfg)

  def train_step(state: TrainState, batch, key):
    phase = phase_of(state.step, cfg, warmup)
    k_noise, k_inf = jax.random.split(key)
    batch = {
      "x": model.present(batch["x"], jax.random.fold_in(key, 7)),
      "source": batch,
    }
    noise = draw_noise(k_noise, cfg, phase, batch["x"].shape[0])
    mu = model.encode(state.params, batch["x"])
    z = sample_posterior_latents(state.psi, mu, noise)
    anchors, inferred = _infer_unless_warmup(model, state, batch, mu, z, k_inf, phase)

    def loss(params):
      terms = objective_terms(model, params, batch, noise, inferred, phase)
      return terms.total, terms

    (_, terms), grads = jax.value_and_grad(loss, has_aux=True)(state.params)
    grads = poison_if_not_finite(terms.total, grads)
    updates, opt_state = optimizer.update(
      grads,
      state.opt_state,
      state.params,
      update_net=phase.update_net,
      update_psi=phase.update_psi,
      step=state.step,
      value=terms.transport_part,
      value_fn=_transport_part_at(cfg, mu, anchors, z, inferred, phase),
    )
    new_state = state.replace(
      step=state.step + 1,
      params=optax.apply_updates(state.params, updates),
      opt_state=opt_state,
    )
    return new_state, _step_metrics(state, new_state, terms, inferred)

  return train_step


def _infer_unless_warmup(model: Model, state, batch, mu, z, key, phase: Phase):
  """The step's inference, ``(anchors, inferred)``: the anchors' codes and
  the coefficients of the posterior and prior pairs; zeros during warm-up.

  Warm-up trains the reconstruction alone: no anchors, no inference (the
  warm-up program does not compile it). Elsewhere, on a CPU, the inference
  stays in a conditional even where warm-up is known to be over (it has no
  gradient, so it runs at full speed there): outside one, XLA's CPU
  scheduler deadlocked the rotated-MNIST step with the exact solver. A GPU
  would read that conditional's predicate on the host every step, so there
  the step past warm-up just infers.
  """

  def infer():
    anchors = model.encode_anchors(state.params, batch["source"])
    args = jax.lax.stop_gradient((state.psi, mu, anchors, z))
    return anchors, infer_step_coefficients(model, *args, key)

  def skipped():
    return jax.tree_util.tree_map(jnp.zeros_like, jax.eval_shape(infer))

  def after_warmup(step):
    return jax.lax.cond(step < model.config.warmup_steps, skipped, infer)

  if phase.warmup is True:
    return skipped()
  if phase.warmup is False:
    return backend.per_platform(after_warmup, lambda step: infer(), state.step)
  return after_warmup(state.step)


def _transport_part_at(cfg: Config, mu, anchors, z, inferred, phase: Phase):
  """The transport part of the objective as a function of ``Psi`` alone:
  the same samples ``z`` and coefficients as the current objective (paper
  Algorithm 1), other ``Psi`` (the ``Psi`` step's accept/reject test)."""

  def transport_part_at(params):
    log_q, log_p, frobenius = transport_terms(
      cfg, params["psi"], *jax.lax.stop_gradient((mu, anchors, z)), inferred, phase
    )
    return log_q - log_p + frobenius

  return transport_part_at


def _step_metrics(state, new_state, terms, inferred) -> dict:
  """A step's metrics: the loss terms, the ``Psi`` step's rate and counts,
  skipped steps and the inference's iterations and convergence."""
  psi_state = psi_step_state(new_state.opt_state)
  accepted = (psi_state.attempted > state.psi_attempted) & (
    psi_state.rejected == state.psi_rejected
  )
  return {
    "loss": terms.total,
    "recon": terms.recon,
    "log_q": terms.log_q,
    "log_p": terms.log_p,
    "frobenius": terms.frobenius,
    "lr_psi": psi_state.lr,
    "psi_rejected": psi_state.rejected,
    "psi_accepted": accepted,
    "net_skipped": new_state.net_skipped,
    "inference_iters": jnp.mean(inferred.prior.num_iter.astype(jnp.float32)),
    "inference_converged": jnp.mean(inferred.prior.converged.astype(jnp.float32)),
  }


class PhasedStep:
  """A jitted training step that runs one of two programs: the warm-up step
  while ``state.step < warmup_steps``, the training step after it.

  ``warmup_steps = 0`` makes one program. The step number is read on the
  host: from the previous call's result without waiting for the device when
  the state is the one it returned, else from the device.

  ``place(state) -> state``, when given, puts a state that this step did not
  return where the programs expect it (e.g. a population's members over
  several devices). ``launch(program) -> callable``, when given, runs each
  jitted program in its place (e.g. a population's members in groups from
  several threads).

  Attributes:
    programs: the jitted functions, ``(warm-up, training)`` or ``(training,)``.
  """

  def __init__(self, make_step, warmup_steps: int, mesh=None, place=None, launch=None):
    self.warmup_steps = warmup_steps
    train = jit_step(make_step(False), mesh)
    warm = (jit_step(make_step(True), mesh),) if warmup_steps else ()
    self.programs = (*warm, train)
    self._run = self.programs if launch is None else tuple(map(launch, self.programs))
    self._place = place
    self._last = None  # (the last returned step counter, its value)

  def __call__(self, state, batch, key):
    if self._last is not None and self._last[0] is state.step:
      number = self._last[1]
    else:  # One process's copy: a multi-process state is not all addressable.
      number = int(np.asarray(state.step.addressable_data(0)))
      state = state if self._place is None else self._place(state)
    program = self._run[0 if number < self.warmup_steps else -1]
    new_state, metrics = program(state, batch, key)
    self._last = (new_state.step, number + 1)
    return new_state, metrics


def jit_step(step, mesh: jax.sharding.Mesh | None = None):
  """Jits ``step(state, batch, key) -> (state, metrics)``; with a ``mesh``, the
  batch is split over its ``"data"`` axis and the rest replicated."""
  if mesh is None:
    return jax.jit(step)
  replicated = NamedSharding(mesh, PartitionSpec())
  split = NamedSharding(mesh, PartitionSpec("data"))
  return jax.jit(
    step,
    in_shardings=(replicated, split, replicated),
    out_shardings=(replicated, replicated),
  )
