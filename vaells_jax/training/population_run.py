"""A population's run in two phases: all members to the selection step, then
the chosen one alone to the end (:func:`train_population`)."""

from __future__ import annotations

import dataclasses
import json
import pathlib

from vaells_jax.config import Config
from vaells_jax.data.dataset import Dataset
from vaells_jax.data.files import atomic_write_text
from vaells_jax.training import loop, placement
from vaells_jax.training.checkpoint import restore_checkpoint
from vaells_jax.training.guards import TrainingInterrupted, deferred_signals
from vaells_jax.training.population import (
  describe_members,
  init_population,
  make_population_step,
  member,
)
from vaells_jax.training.selection import select, selection_signals, selection_step
from vaells_jax.training.step import describe_vaells, diagnose_vaells, make_vaells_step

__all__ = ["POPULATION_DIR", "SELECTION_NAME", "train_population"]

POPULATION_DIR = "population"  # the members' checkpoints and metrics, in the workdir
SELECTION_NAME = "selection.json"  # in POPULATION_DIR: signals and the choice


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

  Phase 1 trains all members to
  :func:`~vaells_jax.training.selection.selection_step` in
  ``workdir/population`` (its own checkpoints and per-member
  ``metrics.jsonl``), scores them and writes ``selection.json`` (atomically;
  its presence marks phase 1 done). Phase 2 trains the selected member from
  there to ``config.num_steps`` in ``workdir`` as a single run would (same
  batches and keys), so ``vaells_jax.load(workdir)`` returns it. Both phases
  resume from their checkpoints. ``already_checked``: as
  :func:`loop.train_loop`'s.

  Returns:
    ``(state of the selected member, info)`` as :func:`loop.train_loop`, with
    ``info["population"]`` the signals and the choice.
  """
  workdir = pathlib.Path(workdir)
  pop_dir = workdir / POPULATION_DIR
  selection_path = pop_dir / SELECTION_NAME
  k = selection_step(config)
  pop_config = dataclasses.replace(config, num_steps=k)
  if not selection_path.exists():
    _train_members(
      config, pop_config, data, pop_dir, log, resume, progress, already_checked
    )
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
  return state, _with_selection(info, selection)


def _with_selection(info: dict, selection: dict) -> dict:
  """Phase 2's ``info`` with phase 1's times added and its selection."""
  return {
    **info,
    "train_time_s": info["train_time_s"] + selection["train_time_s"],
    "compile_time_s": info["compile_time_s"] + selection["compile_time_s"],
    "population": {k: v for k, v in selection.items() if k != "train_time_s"},
  }


def _train_members(
  config, pop_config, data, pop_dir, log, resume, progress, already_checked
):
  """Phase 1 of :func:`train_population`: every member to ``pop_config``'s
  last step in ``pop_dir``, then the selection, written to
  :data:`SELECTION_NAME` there.

  Raises:
    TrainingInterrupted: for a signal received while selecting, once the
      selection is written.
  """
  k = pop_config.num_steps
  # the step of the whole run: its rates' cooldown counts config.num_steps
  pop_step = make_population_step(config, data.data_dim)
  spread = len(placement.member_devices(config.population))
  groups = placement.member_groups(config.population)
  over = f" split over {spread} devices" if spread > 1 else ""
  over += f" in {groups} groups from threads" if groups > 1 else ""
  log(f"population of {config.population}{over}: training to step {k}, then selecting")
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
  atomic_write_text(pop_dir / SELECTION_NAME, json.dumps(selection, indent=2))
  log(f"selected {reason}")
  if received:
    raise TrainingInterrupted(received[0], k)
