"""Population training: members side by side in one jitted step, then the best.

``config.population = K`` members start from the same networks and anchors
and differ in their dictionary draw (``population_init="dictionary"``), or
also in their networks (``"all"``); member 0 is the single run up to
rounding (the members' program, mapped, vmapped or split over devices,
rounds differently from the single run's). They train in ONE jitted step
over the leading member axis of the state (:func:`make_population_step`),
on the same batches and keys, until ``select_at * num_steps``. Then every
member is scored with signals that need no ground truth
(:func:`selection_signals`), and the member with the best
``config.select_signal`` continues alone (:func:`member`).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from vaells_jax.config import Config
from vaells_jax.data.dataset import Dataset
from vaells_jax.data.files import atomic_write_text
from vaells_jax.models.vaells import Model
from vaells_jax.training import loop
from vaells_jax.training.checkpoint import restore_checkpoint
from vaells_jax.training.coverage import (
  COVERAGE_RADII,
  combined_coverages,
  coverage_points,
  coverage_signals,
  member_data_coverage,
  member_sample_distance,
)
from vaells_jax.training.guards import (
  TrainingInterrupted,
  batch_indices,
  deferred_signals,
)
from vaells_jax.training.step import (
  PhasedStep,
  TrainState,
  describe_vaells,
  diagnose_vaells,
  init_state,
  make_vaells_step,
  train_step_fn,
)

__all__ = [
  "POPULATION_DIR",
  "SELECTION_NAME",
  "SIGNAL_BATCHES",
  "init_population",
  "MemberGroups",
  "core_count",
  "data_signals",
  "describe_members",
  "make_population_step",
  "member_groups",
  "member",
  "select",
  "selection_signals",
  "selection_step",
  "train_population",
]

POPULATION_DIR = "population"  # the members' checkpoints and metrics, in the workdir
SELECTION_NAME = "selection.json"  # in POPULATION_DIR: signals and the choice

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
# whose prior samples lie nearest the data (docs/population-swiss-roll.md).
TIE_BREAK = {"data_coverage": "sample_distance"}


def selection_step(config: Config) -> int:
  """The step at which a population is scored and one member kept."""
  return max(1, round(config.select_at * config.num_steps))


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
  (:func:`member_devices`). On a CPU, XLA runs one program's loops on one
  core; ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` before jax
  starts makes N CPU devices, one per core (``experiments/run.py`` sets it;
  timings: docs/benchmarks-training.md#a-population-over-the-cores). The
  split program rounds differently from the one-device one
  (``tests/test_parallel.py``).

  ``groups``: on one device, the members are stepped as this many groups,
  each group's program launched from its own host thread, so that a CPU
  runs them on as many cores at the same time (:class:`MemberGroups`; for
  a process whose jax started with one CPU device). By default, on one CPU
  device, the most cores that divide the population.
  """
  if vectorize is None:
    vectorize = jax.default_backend() != "cpu"
  if devices is None:
    devices = member_devices(config.population) if mesh is None else ()
  model = Model.create(config, data_dim)
  if len(devices) < 2:
    if groups is None:
      groups = member_groups(config.population) if mesh is None else 1
    return PhasedStep(
      lambda warmup: _all_members(train_step_fn(model, warmup), vectorize),
      config.warmup_steps,
      mesh,
      launch=(lambda program: MemberGroups(program, groups)) if groups > 1 else None,
    )
  if mesh is not None or config.population % len(devices):
    raise ValueError(
      f"the {config.population} members cannot be split evenly over "
      f"{len(devices)} devices{' with a data-parallel mesh' if mesh else ''}"
    )
  spread = jax.sharding.Mesh(np.asarray(devices), ("members",))
  shardings = jax.tree_util.tree_map(
    lambda spec: jax.sharding.NamedSharding(spread, spec), _MEMBER_SPECS
  )
  return PhasedStep(
    lambda warmup: _split_members(
      _all_members(train_step_fn(model, warmup), vectorize), spread
    ),
    config.warmup_steps,
    place=lambda state: jax.device_put(state, shardings),
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
  from jax._src import xla_bridge

  if xla_bridge.backends_are_initialized():
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
  if (
    "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", "")
    and jax.config.jax_num_cpu_devices < 0
  ):
    jax.config.update("jax_num_cpu_devices", count)
  return None


def member_groups(population: int) -> int:
  """How many groups :func:`make_population_step` steps ``population``
  members in by default: on one CPU device, the most cores that divide it;
  else 1 (the members split over devices, or on a GPU or TPU)."""
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

    def split(state):
      size = jax.tree_util.tree_leaves(state.params)[0].shape[0] // groups

      def part(i, tree):
        return jax.tree_util.tree_map(lambda a: a[i * size : (i + 1) * size], tree)

      return tuple(
        state.replace(params=part(i, state.params), opt_state=part(i, state.opt_state))
        for i in range(groups)
      )

    def join(parts, metrics):
      cat = lambda *a: jnp.concatenate(a)  # noqa: E731
      return parts[0].replace(
        params=jax.tree_util.tree_map(cat, *(p.params for p in parts)),
        opt_state=jax.tree_util.tree_map(cat, *(p.opt_state for p in parts)),
      ), jax.tree_util.tree_map(cat, *metrics)

    self._split, self._join = jax.jit(split), jax.jit(join)
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


def member_devices(population: int) -> tuple:
  """The most of this process's devices over which ``population`` members
  split evenly (one device: no split); none in a run across processes."""
  if jax.process_count() > 1:
    return ()
  local = jax.local_devices()
  count = max(n for n in range(1, len(local) + 1) if population % n == 0)
  return tuple(local[:count])


# A population state's layout over devices: members split, the counter on each.
_MEMBER_SPECS = TrainState(
  step=jax.sharding.PartitionSpec(),
  params=jax.sharding.PartitionSpec("members"),
  opt_state=jax.sharding.PartitionSpec("members"),
)


def _split_members(step, mesh):
  """``step`` of all members, each device of ``mesh`` stepping its members."""
  members, shared = jax.sharding.PartitionSpec("members"), jax.sharding.PartitionSpec()
  return _shard_map(
    step,
    mesh=mesh,
    in_specs=(_MEMBER_SPECS, shared, shared),
    out_specs=(_MEMBER_SPECS, members),
  )


def _shard_map(f, **kwargs):
  """``jax.shard_map`` without its replication check (the step counter is
  the same on every device by construction), or its older experimental form."""
  if hasattr(jax, "shard_map"):
    return jax.shard_map(f, check_vma=False, **kwargs)
  from jax.experimental.shard_map import shard_map

  return shard_map(f, check_rep=False, **kwargs)


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
    step_fn: the population's jitted step (:func:`make_population_step`).

  Returns:
    ``{name: [K] list of floats}``.
  """
  x = np.asarray(data.x_train, np.float32)
  labels = np.asarray(data.labels_train, np.int32)
  key = jax.random.PRNGKey(config.seed + 3)
  sums = None
  for i in range(SIGNAL_BATCHES):
    idx = batch_indices(config.seed + 3, i, x.shape[0], config.batch_size)
    _, metrics = step_fn(
      state, {"x": x[idx], "label": labels[idx]}, jax.random.fold_in(key, i)
    )
    terms = {k: np.asarray(metrics[k], np.float64) for k in _TERMS}
    sums = terms if sums is None else {k: sums[k] + terms[k] for k in _TERMS}
  signals = {k: (v / SIGNAL_BATCHES).tolist() for k, v in sums.items()}
  signals["psi_rejected"] = np.asarray(state.psi_rejected).astype(float).tolist()
  model = Model.create(config, data.data_dim)
  encode = jax.jit(model.encode)
  xs, ys = coverage_points(x, labels, config.seed)
  members = [member(state, k) for k in range(config.population)]
  latents = [np.asarray(encode(m.params, xs)) for m in members]
  scores = [
    coverage_signals(z, ys, np.asarray(m.psi), config.seed)
    for z, m in zip(latents, members, strict=True)
  ]
  for name in COVERAGE_RADII:
    signals[name] = [member_scores[name] for member_scores in scores]
  signals.update(combined_coverages(signals))
  if config.select_signal == "data_coverage":  # decodes orbits and samples
    signals.update(data_signals(members, config, data))
  norms = np.linalg.norm(np.asarray(state.params["psi"], np.float64), axis=(-2, -1))
  signals["operator_norm"] = norms.max(axis=-1).tolist()
  return signals


def data_signals(members, config: Config, data: Dataset) -> dict:
  """``data_coverage`` and ``sample_distance`` of each of ``members`` (single
  runs' states, :func:`member`), on the coverage signals' training points."""
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


_TERMS = ("loss", "log_p", "log_q", "recon")
# Operators this large have blown up: the paper's synthetic runs end at norms
# of 0.003-0.1; runs whose reconstructions broke had 1.0-4.5 (docs/fit.md).
OPERATOR_NORM_LIMIT = 1.0


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


def describe_members(metrics: dict) -> str:
  """A population's log line: each member's loss and rejected Psi steps."""
  return (
    "population  loss "
    + " ".join(f"{v:+.3f}" for v in metrics["loss"])
    + "  psi_rejected "
    + " ".join(str(int(v)) for v in metrics["psi_rejected"])
  )


def train_population(
  config: Config,
  data: Dataset,
  workdir,
  *,
  log=print,
  resume=False,
  progress=None,
  already_checked=False,
):
  """Trains a population, keeps the best member and trains it to the end.

  Phase 1 trains all members to :func:`selection_step` in
  ``workdir/population`` (its own checkpoints and per-member
  ``metrics.jsonl``), scores them and writes ``selection.json`` (atomically;
  its presence marks phase 1 done). Phase 2 trains the selected member from
  there to ``config.num_steps`` in ``workdir`` as a single run would (same
  batches and keys), so ``vaells_jax.load(workdir)`` returns it. Both phases
  resume from their checkpoints. ``already_checked``: as :func:`loop.train_loop`'s.

  Returns:
    ``(state of the selected member, info)`` as :func:`loop.train_loop`, with
    ``info["population"]`` the signals and the choice.
  """
  workdir = pathlib.Path(workdir)
  pop_dir = workdir / POPULATION_DIR
  selection_path = pop_dir / SELECTION_NAME
  k = selection_step(config)
  pop_config = dataclasses.replace(config, num_steps=k)
  # the step of the whole run: its rates' cooldown counts config.num_steps
  pop_step = make_population_step(config, data.data_dim)
  if not selection_path.exists():
    spread = len(member_devices(config.population))
    groups = member_groups(config.population)
    over = f" split over {spread} devices" if spread > 1 else ""
    over += f" in {groups} groups from threads" if groups > 1 else ""
    log(
      f"population of {config.population}{over}: training to step {k}, then selecting"
    )
    pop_state, pop_info = loop.train_loop(
      pop_config,
      data,
      pop_dir,
      init=init_population,
      make_step=lambda *_: pop_step,
      log=log,
      resume=resume,
      progress=progress,
      describe=describe_members,
      diagnose=diagnose_vaells,
      already_checked=already_checked,
    )
    with deferred_signals() as received:  # the selection is not cut half way
      signals = selection_signals(pop_state, config, data, pop_step)
      winner, reason = select(signals, config.select_signal)
    selection = {
      "select_step": k,
      "signal": config.select_signal,
      "signals": signals,
      "selected_member": winner,
      "selection_reason": reason,
      "train_time_s": pop_info["train_time_s"],
      "compile_time_s": pop_info["compile_time_s"],
    }
    atomic_write_text(selection_path, json.dumps(selection, indent=2))
    log(f"selected {reason}")
    if received:
      raise TrainingInterrupted(received[0], k)
  selection = json.loads(selection_path.read_text())

  def selected(key, cfg, dat):
    start = init_population(key, pop_config, dat)
    pop = restore_checkpoint(pop_dir, start, step=k, verify=not already_checked)
    return member(pop, selection["selected_member"])

  state, info = loop.train_loop(
    config,
    data,
    workdir,
    init=selected,
    make_step=make_vaells_step,
    log=log,
    resume=resume,
    progress=progress,
    describe=describe_vaells,
    diagnose=diagnose_vaells,
    already_checked=already_checked,
  )
  info = {
    **info,
    "train_time_s": info["train_time_s"] + selection["train_time_s"],
    "compile_time_s": info["compile_time_s"] + selection["compile_time_s"],
    "population": {k_: v for k_, v in selection.items() if k_ != "train_time_s"},
  }
  return state, info
