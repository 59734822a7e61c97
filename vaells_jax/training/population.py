"""Population training: members side by side in one jitted step.

``config.population = K`` members start from the same networks and anchors
and differ in their dictionary draw (``population_init="dictionary"``), or
also in their networks (``"all"``); member 0 is the single run up to
rounding (the members' program, mapped, vmapped or split over devices,
rounds differently from the single run's). They train in ONE jitted step
over the leading member axis of the state (:func:`make_population_step`),
on the same batches and keys. Where the members run is
:mod:`vaells_jax.training.placement`; how one is chosen,
:mod:`vaells_jax.training.selection`; the two-phase run,
:mod:`vaells_jax.training.population_run`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from vaells_jax.config import Config
from vaells_jax.data.dataset import Dataset
from vaells_jax.models.vaells import Model
from vaells_jax.training import placement
from vaells_jax.training.step import PhasedStep, TrainState, init_state, train_step_fn

__all__ = [
  "describe_members",
  "init_population",
  "make_population_step",
  "member",
]


def init_population(key, config: Config, data: Dataset) -> TrainState:
  """The members' initial states: ``params`` and ``opt_state`` stacked on a
  leading member axis ``[K, ...]``, one shared ``step``."""
  states = [
    init_state(key, config, data.anchors, data.data_dim, member=k)
    for k in range(config.population)
  ]
  stack = lambda *a: jax.tree_util.tree_map(lambda *x: jnp.stack(x), *a)  # noqa: E731
  return states[0].replace(
    params=stack(*(s.params for s in states)),
    opt_state=stack(*(s.opt_state for s in states)),
  )


# vmap's axes of a population state: members on params and opt_state.
_MEMBER_AXES = TrainState(step=None, params=0, opt_state=0)


def make_population_step(
  config: Config, data_dim: int, mesh=None, vectorize=None, devices=None, groups=None
):
  """The jitted step of all members at once (same batch and key for each).

  ``vectorize=True``: ``jax.vmap`` of the training step over the state's
  member axis, one batched computation (the default on GPU and TPU).
  ``False``: ``jax.lax.map`` over the members inside the same compiled step
  (the default on CPU): under ``vmap`` the coefficient solver's line search
  runs as many trials as the worst pair of ALL members needs; 4 members took
  445 ms a swiss-roll step vmapped and 65 ms mapped, 69 and 37 ms a
  concentric step with ``fista`` (``benchmarks/population_step.py``, a
  shared 2-core CPU). With ``pgd`` (no line search) 8 members vmapped are
  the faster: 49.8 against 64.7 ms (concentric), 20.4 against 26.2 ms
  (swiss roll) (docs/population.md, "How it works").
  Both compute the same function (``tests/test_population.py``).

  ``devices``: the members are split evenly over these devices, each
  stepping its share at the same time (``shard_map``); by default, without a
  ``mesh``, over as many of this process's devices as divide the population
  (:func:`~vaells_jax.training.placement.member_devices`). On a CPU, XLA runs
  one program's loops on one core;
  ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` before jax
  starts makes N CPU devices, one per core (``experiments/run.py`` sets it;
  timings: docs/studies/benchmarks-training.md#a-population-over-the-cores). The
  split program rounds differently from the one-device one
  (``tests/test_parallel.py``).

  ``groups``: on one device, the members are stepped as this many groups,
  each group's program launched from its own host thread, so that a CPU
  runs them on as many cores at the same time
  (:class:`~vaells_jax.training.placement.MemberGroups`; for a process whose
  jax started with one CPU device). By default, on one CPU device, the most
  cores that divide the population.
  """
  if vectorize is None:
    vectorize = jax.default_backend() != "cpu"
  if devices is None:
    devices = placement.member_devices(config.population) if mesh is None else ()
  model = Model.create(config, data_dim)
  if len(devices) < 2:
    if groups is None:
      groups = placement.member_groups(config.population) if mesh is None else 1
    return PhasedStep(
      lambda warmup: _all_members(train_step_fn(model, warmup), vectorize),
      config.warmup_steps,
      mesh,
      launch=(lambda p: placement.MemberGroups(p, groups)) if groups > 1 else None,
    )
  if mesh is not None or config.population % len(devices):
    raise ValueError(
      f"the {config.population} members cannot be split evenly over "
      f"{len(devices)} devices{' with a data-parallel mesh' if mesh else ''}"
    )
  return _split_step(config, model, vectorize, devices)


def _split_step(config: Config, model: Model, vectorize: bool, devices) -> PhasedStep:
  """:func:`make_population_step` with the members split over ``devices``."""
  spread = jax.sharding.Mesh(np.asarray(devices), ("members",))
  shardings = jax.tree_util.tree_map(
    lambda spec: jax.sharding.NamedSharding(spread, spec), placement.MEMBER_SPECS
  )
  return PhasedStep(
    lambda warmup: placement.split_members(
      _all_members(train_step_fn(model, warmup), vectorize), spread
    ),
    config.warmup_steps,
    place=lambda state: jax.device_put(state, shardings),
  )


def _all_members(step, vectorize: bool):
  """``step`` of one member, applied to every member of a population state."""
  if vectorize:
    return jax.vmap(
      step, in_axes=(_MEMBER_AXES, None, None), out_axes=(_MEMBER_AXES, 0)
    )

  def batched(state, batch, key):
    def one(member_state):
      params, opt_state = member_state
      new, metrics = step(state.replace(params=params, opt_state=opt_state), batch, key)
      return (new.params, new.opt_state), metrics

    (params, opt_state), metrics = jax.lax.map(one, (state.params, state.opt_state))
    new = state.replace(step=state.step + 1, params=params, opt_state=opt_state)
    return new, metrics

  return batched


def member(state: TrainState, k: int) -> TrainState:
  """Member ``k`` of a population state, as a single run's state (moved to
  the default device where the members were split over several)."""
  where = getattr(state.step, "sharding", None)
  if isinstance(where, jax.sharding.NamedSharding) and "members" in where.mesh.shape:
    # Through the host: slicing each array on the devices compiles a program
    # per array and device.
    one = lambda a: jnp.asarray(np.asarray(a)[k])  # noqa: E731
    state = state.replace(step=jnp.asarray(np.asarray(state.step)))
  else:
    one = lambda a: a[k]  # noqa: E731
  pick = lambda tree: jax.tree_util.tree_map(one, tree)  # noqa: E731
  return state.replace(params=pick(state.params), opt_state=pick(state.opt_state))


def describe_members(metrics: dict) -> str:
  """A population's log line: each member's loss and rejected Psi steps."""
  return (
    "population  loss "
    + " ".join(f"{v:+.3f}" for v in metrics["loss"])
    + "  psi_rejected "
    + " ".join(str(int(v)) for v in metrics["psi_rejected"])
  )
