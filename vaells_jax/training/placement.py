"""Where a population's members run: devices, CPU cores and host threads.

On a CPU, XLA runs one program's loops on one core. A population uses its
cores either as one CPU device per core, the members split over them
(:func:`member_devices`, :func:`split_members`; :func:`claim_cores` makes the
devices before jax starts), or, on one device, as groups of members stepped
from their own host threads (:class:`MemberGroups`, :func:`member_groups`).
"""

from __future__ import annotations

import concurrent.futures
import os

import jax
import jax.numpy as jnp

from vaells_jax.training.step import TrainState

__all__ = [
  "MEMBER_SPECS",
  "MemberGroups",
  "claim_cores",
  "core_count",
  "member_devices",
  "member_groups",
  "split_members",
]

# A population state's layout over devices: members split, the counter on each.
MEMBER_SPECS = TrainState(
  step=jax.sharding.PartitionSpec(),
  params=jax.sharding.PartitionSpec("members"),
  opt_state=jax.sharding.PartitionSpec("members"),
)


def claim_cores(population: int) -> str | None:
  """Gives a population one CPU device per core (as many as divide it), so
  the step splits its members over the cores: XLA runs a program's loops on
  one core. Works only before jax's backends start (the first computation;
  importing jax is fine); an ``XLA_FLAGS`` or ``jax_num_cpu_devices`` that
  sets the count is left as it is.

  Returns:
    None, or a sentence saying why the members stay on fewer devices than
    cores.
  """
  count = core_count(population)
  if count < 2 or jax.distributed.is_initialized():
    return None
  if _backends_started():
    return _fewer_devices_note(population, count)
  if (
    "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", "")
    and jax.config.jax_num_cpu_devices < 0
  ):
    jax.config.update("jax_num_cpu_devices", count)
  return None


def _backends_started() -> bool:
  """Whether jax's backends have started (the device count is then fixed).

  jax has no public API for this: ``jax.devices``, ``jax.local_devices`` and
  ``jax.extend.backend.backends`` all start the backends they would report
  on. This is the one private jax import of the package.
  """
  from jax._src import xla_bridge

  return xla_bridge.backends_are_initialized()


def _fewer_devices_note(population: int, count: int) -> str | None:
  """:func:`claim_cores`'s sentence once jax has started: why the members
  use fewer than ``count`` devices, or None where they do not."""
  used = len(member_devices(population))
  if jax.default_backend() != "cpu" or used >= count:
    return None
  where = (
    f"are split over {used} devices"
    if used > 1
    else f"run on one device, in {count} groups from {count} threads"
  )
  return (
    f"the population's {population} members {where}: jax had started "
    f"before training, so the cores could not be given {count} devices "
    f"(faster: call vaells_jax.fit before any other jax computation, or set "
    f"XLA_FLAGS=--xla_force_host_platform_device_count={count})"
  )


def member_groups(population: int) -> int:
  """How many groups :func:`~vaells_jax.training.population.make_population_step`
  steps ``population`` members in by default: on one CPU device, the most
  cores that divide it; else 1 (the members split over devices, or on a GPU
  or TPU)."""
  if jax.default_backend() != "cpu" or len(member_devices(population)) > 1:
    return 1
  return core_count(population)


def core_count(population: int) -> int:
  """The most of this process's CPU cores over which ``population`` members
  split evenly."""
  if hasattr(os, "sched_getaffinity"):
    cores = len(os.sched_getaffinity(0))
  else:
    cores = os.cpu_count() or 1
  return max(n for n in range(1, min(cores, population) + 1) if population % n == 0)


def member_devices(population: int) -> tuple:
  """The most of this process's devices over which ``population`` members
  split evenly (one device: no split); none in a run across processes."""
  if jax.process_count() > 1:
    return ()
  local = jax.local_devices()
  count = max(n for n in range(1, len(local) + 1) if population % n == 0)
  return tuple(local[:count])


class MemberGroups:
  """Runs a jitted population step as ``groups`` steps of equal groups of
  members, each launched from its own host thread, then joins them.

  XLA runs a CPU program's loops on one core, and one device's programs
  launched from one thread run one after another; launched from several
  threads they run at the same time, on as many cores. Each member is
  stepped as in the whole population's program, to rounding
  (``tests/test_population.py``).
  """

  def __init__(self, program, groups: int):
    self.program, self.groups = program, groups
    self._pool = concurrent.futures.ThreadPoolExecutor(groups)
    self._split = jax.jit(lambda state: _split_groups(state, groups))
    self._join = jax.jit(_join_groups)
    self._last = None  # (the last returned state, its groups)

  def __call__(self, state, batch, key):
    if self._last is not None and self._last[0] is state:
      parts = self._last[1]
    else:
      parts = self._split(state)
    run = lambda part: jax.block_until_ready(self.program(part, batch, key))  # noqa: E731
    outs = list(self._pool.map(run, parts))
    parts = tuple(o[0] for o in outs)
    new, metrics = self._join(parts, tuple(o[1] for o in outs))
    self._last = (new, parts)
    return new, metrics


def _split_groups(state, groups: int) -> tuple:
  """A population state as ``groups`` states of equal groups of members."""
  size = jax.tree_util.tree_leaves(state.params)[0].shape[0] // groups

  def part(i, tree):
    return jax.tree_util.tree_map(lambda a: a[i * size : (i + 1) * size], tree)

  return tuple(
    state.replace(params=part(i, state.params), opt_state=part(i, state.opt_state))
    for i in range(groups)
  )


def _join_groups(parts, metrics):
  """The groups' states and metrics joined back on the member axis."""
  cat = lambda *a: jnp.concatenate(a)  # noqa: E731
  return parts[0].replace(
    params=jax.tree_util.tree_map(cat, *(p.params for p in parts)),
    opt_state=jax.tree_util.tree_map(cat, *(p.opt_state for p in parts)),
  ), jax.tree_util.tree_map(cat, *metrics)


def split_members(step, mesh):
  """``step`` of all members, each device of ``mesh`` stepping its members."""
  members, shared = jax.sharding.PartitionSpec("members"), jax.sharding.PartitionSpec()
  return _shard_map(
    step,
    mesh=mesh,
    in_specs=(MEMBER_SPECS, shared, shared),
    out_specs=(MEMBER_SPECS, members),
  )


def _shard_map(f, **kwargs):
  """``jax.shard_map`` without its replication check (the step counter is
  the same on every device by construction), or its older experimental form."""
  if hasattr(jax, "shard_map"):
    return jax.shard_map(f, check_vma=False, **kwargs)
  from jax.experimental.shard_map import shard_map

  return shard_map(f, check_rep=False, **kwargs)
