"""One run, end to end: ``train_and_evaluate(config, data, workdir)``.

:func:`plan_run` checks everything once (the data, the workdir, a resumed
run's configuration, data and checkpoint digests) and returns a
:class:`RunPlan`; :func:`execute` follows it: trains ``config.model`` (looked
up in :data:`vaells_jax.api.MODELS`) with
:func:`vaells_jax.training.loop.train_loop`, then evaluates it with the report
of its data (images or synthetic manifolds) and writes ``summary.json``.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import shutil
import time

import numpy as np

from vaells_jax.api import DATA_NAME, MODELS, TrainedBaseline, TrainedVAELLS
from vaells_jax.config import CONFIG_NAME, Config, config_from_json
from vaells_jax.data.conditioning import INPUT_MAP_NAME, InputMap
from vaells_jax.data.dataset import Dataset, load_dataset, save_dataset
from vaells_jax.data.files import atomic_write_text
from vaells_jax.evaluation import synthetic_report
from vaells_jax.runs.verdict import verdict
from vaells_jax.runs.workdir import WorkdirInUse, check_workdir, lock_workdir
from vaells_jax.training import loop, placement, population_run
from vaells_jax.training.checkpoint import (
  CHECKPOINT_DIR,
  CheckpointError,
  checkpoint_steps,
  save_checkpoint,
  saved_steps,
  verify_checkpoint,
)
from vaells_jax.training.distributed import checkpointable, is_main
from vaells_jax.training.guards import (
  TrainingDiverged,
  TrainingInterrupted,
  check_data,
  run_identity,
)
from vaells_jax.training.polish import polish_decoder
from vaells_jax.training.step import first_psi_step

__all__ = [
  "RunPlan",
  "STRUCTURE_METRICS",
  "TrainingDiverged",
  "TrainingInterrupted",
  "WorkdirInUse",
  "check_data",
  "evaluate_run",
  "execute",
  "plan_run",
  "short_run_warning",
  "train_run",
  "train_and_evaluate",
]

# Metrics that measure the learned operators Psi (orbits, paths, samples moved
# along them, rotations): without a single Psi step they measure Psi's random
# start, so a run that ends before Psi learning lists them in
# summary["not_meaningful"] (and summary.md says so).
STRUCTURE_METRICS = (
  "sample_manifold_distance",
  "orbit_manifold_distance",
  "orbit_coverage",
  "path_manifold_distance",
  "path_endpoint_error",
  "operator_magnitudes",
  "rotation_gated_span_degrees",
  "rotation_gated_span_quartiles",
  "rotation_gated_span_per_class",
  "rotation_correlation_gate_only_span_degrees",
  "rotation_class_gate_only_span_degrees",
  "ungated_rotation_rise_degrees",
  "ungated_rotation_rise_degrees_best",
  "ungated_rotation_spearman",
  "reference_cosine",
)


def short_run_warning(config: Config) -> str | None:
  """A warning if VAELLS's run ends before its first ``Psi`` step, else None."""
  first = first_psi_step(config)
  if config.model != "vaells" or config.num_steps > first:
    return None
  return (
    f"warning: config.num_steps={config.num_steps} ends before Psi learning "
    f"starts (step {first}: config.warmup_steps={config.warmup_steps}"
    + (f" + net_steps={config.net_steps}" if config.alternate else "")
    + "); the operators stay at their random start and the structure metrics "
    "(orbits, paths, rotations) are marked not meaningful."
  )


def train_run(
  config: Config,
  data: Dataset,
  workdir,
  log=print,
  resume: bool = False,
  progress=None,
  already_checked: bool = False,
):
  """Trains ``config.model`` (see :func:`vaells_jax.training.loop.train_loop`), or a
  population of VAELLS members and its best (``config.population > 1``,
  :func:`vaells_jax.training.population_run.train_population`), then polishes
  the decoder (``config.decoder_polish_steps``,
  :mod:`vaells_jax.training.polish`). ``already_checked``: a :class:`RunPlan` has
  checked the data, workdir and checkpoints."""
  if config.population > 1:
    state, info = population_run.train_population(
      config,
      data,
      workdir,
      log=log,
      resume=resume,
      progress=progress,
      already_checked=already_checked,
    )
  else:
    state, info = _train_single(
      config, data, workdir, log, resume, progress, already_checked
    )
  if config.decoder_polish_steps and int(state.step) == config.num_steps:
    params, polished = polish_decoder(config, state.params, data.x_train)
    state = state.replace(params=params, step=state.step + polished["steps"])
    if is_main():
      save_checkpoint(workdir, checkpointable(state), run_identity(config, data))
    log(
      f"decoder polished: {polished['steps']} steps, reconstruction error "
      f"{polished['recon_before']:.4g} -> {polished['recon_after']:.4g}"
    )
    info = {
      **info,
      "decoder_polish_steps": polished["steps"],
      "polish_recon_before": polished["recon_before"],
      "polish_recon_after": polished["recon_after"],
    }
  return state, info


def _train_single(config, data, workdir, log, resume, progress, already_checked):
  entry = MODELS[config.model]
  return loop.train_loop(
    config,
    data,
    workdir,
    init=entry.init,
    make_step=entry.make_step,
    log=log,
    resume=resume,
    progress=progress,
    describe=entry.describe,
    diagnose=entry.diagnose,
    already_checked=already_checked,
  )


# What a resumed run may change: a single run may train longer (a population
# may not: it selects its member at a fraction of num_steps), and log or
# checkpoint at another interval.
_RESUMABLE_CHANGES = ("num_steps", "log_every", "checkpoint_every")


def _may_change_on_resume(name: str, config: Config) -> bool:
  if name == "num_steps" and config.population > 1:
    return False
  return name in _RESUMABLE_CHANGES


@dataclasses.dataclass(frozen=True)
class RunPlan:
  """A run that :func:`plan_run` has checked, for :func:`execute` to follow.

  Attributes:
    config, data, workdir, resume, overwrite: as given to :func:`plan_run`.
    found: the checkpoint steps of the run and of its population when
      checked; :func:`execute` checks again only if they changed.
    cores: why a population's members run on fewer devices than cores
      (:func:`vaells_jax.training.placement.claim_cores`), or None.
  """

  config: Config
  data: Dataset
  workdir: pathlib.Path
  resume: bool
  overwrite: bool
  found: tuple
  cores: str | None = None


def _found(workdir: pathlib.Path) -> tuple:
  return (
    tuple(saved_steps(workdir)),
    tuple(saved_steps(workdir / population_run.POPULATION_DIR)),
  )


def plan_run(
  config: Config,
  data: Dataset,
  workdir,
  resume: bool = False,
  overwrite: bool = False,
) -> RunPlan:
  """Checks everything about a run before anything is written, once.

  The data against ``config``; the workdir; and when resuming, that the
  saved run has the same configuration and data and that the checkpoints it
  resumes from (its own, or its population's) pass their checksums. Training
  then skips these checks (:func:`execute`). In a run across processes only
  process 0 owns ``workdir``; the others check only the data. First of all
  it gives a population's members the CPU cores as devices, which works only
  before jax starts (the data checks may start it).

  Raises:
    ValueError: for data that do not fit ``config``, a ``workdir`` that
      cannot be one (:func:`vaells_jax.runs.workdir.check_workdir`), or one
      that already holds a run (unless ``resume`` or ``overwrite``).
    CheckpointError: when resuming a run of another configuration or data,
      or from a checkpoint that fails its checksums. A resumed single run may
      change ``num_steps`` (to train longer), ``log_every`` and
      ``checkpoint_every``; nothing else.
  """
  cores = placement.claim_cores(config.population)
  check_data(config, data)
  if not is_main():
    return RunPlan(
      config, data, pathlib.Path(workdir), resume, overwrite, ((), ()), cores
    )
  workdir = check_workdir(workdir)
  found = _found(workdir)
  steps, population_steps = found
  if resume:
    _check_resumable(config, data, workdir, steps, population_steps)
  elif (steps or population_steps) and not overwrite:
    raise ValueError(
      f"{workdir} already holds a run (checkpoints at steps "
      f"{steps or population_steps}); resume it "
      "(--resume, resume=True), start it over (--overwrite, overwrite=True), or "
      "choose another folder (--workdir=DIR)."
    )
  return RunPlan(config, data, workdir, resume, overwrite, found, cores)


def _check_resumable(config, data, workdir, steps, population_steps) -> None:
  """:func:`plan_run`'s checks of a run to resume: the same configuration
  and data, enough steps, and checkpoints that pass their checksums."""
  _check_same_run(config, data, workdir)
  polish = config.decoder_polish_steps  # a polished run's last checkpoint
  if steps and config.num_steps + polish < steps[-1]:
    least = steps[-1] - polish
    raise ValueError(
      f"config.num_steps={config.num_steps} is below the run's checkpoint at "
      f"step {steps[-1]}"
      + (f" (less its {polish} decoder polish steps: {least})" if polish else "")
      + f"; resume with num_steps >= {least}."
    )
  identity = run_identity(config, data)
  if steps:
    verify_checkpoint(workdir, (checkpoint_steps(workdir) or steps)[-1], identity)
  elif population_steps:
    pop_dir = workdir / population_run.POPULATION_DIR
    last = (checkpoint_steps(pop_dir) or population_steps)[-1]
    verify_checkpoint(pop_dir, last, identity)


def _check_same_run(config, data, workdir) -> None:
  """The saved run in ``workdir`` has ``config`` (but what may change on
  resume) and ``data``."""
  if not (workdir / CONFIG_NAME).exists():
    raise ValueError(
      f"Nothing to resume: {workdir} holds no run ({CONFIG_NAME} is missing)."
    )
  saved = config_from_json(workdir / CONFIG_NAME)
  changed = [
    f"{f.name}: saved {getattr(saved, f.name)!r}, now {getattr(config, f.name)!r}"
    for f in dataclasses.fields(Config)
    if getattr(saved, f.name) != getattr(config, f.name)
    and not _may_change_on_resume(f.name, config)
  ]
  if changed:
    raise CheckpointError(
      f"The run in {workdir} has a different "
      f"configuration ({'; '.join(changed)}); resume "
      "with the same flags, or start another workdir."
    )
  if (workdir / DATA_NAME).exists():
    saved_data = load_dataset(workdir / DATA_NAME)
    if not (
      np.array_equal(saved_data.x_train, data.x_train)
      and np.array_equal(saved_data.labels_train, data.labels_train)
    ):
      raise CheckpointError(
        f"The run in {workdir} was trained on different "
        "data; resume with the same data."
      )


def train_and_evaluate(
  config: Config,
  data: Dataset,
  workdir,
  log=print,
  resume: bool = False,
  overwrite: bool = False,
  progress=None,
  input_map: InputMap | None = None,
  evaluate: bool = True,
) -> tuple[TrainedVAELLS | TrainedBaseline, dict]:
  """Trains ``config.model`` (VAELLS or a baseline) and writes every output.

  Outputs: ``config.json``, ``dataset.npz``, ``metrics.jsonl``,
  ``checkpoints/``, ``summary.json``, ``summary.md`` and the figures.
  Everything is validated before the first file is written.

  Args:
    config: the run's configuration.
    data: the data set.
    workdir: output folder.
    log: where progress lines go.
    resume: continue the run in ``workdir`` from its latest checkpoint (the
      configuration and data must be the same).
    overwrite: start over in a ``workdir`` that already holds a run
      (its checkpoints are deleted); without it that is an error.
    progress: called as ``progress(done, num_steps)`` after every step.
    input_map: ``data`` are the user's data conditioned by this map
      (:func:`vaells_jax.fit`): it is saved as ``input_map.json``, and the
      returned model and the report work in the user's units.
    evaluate: False: train and write ``summary.json`` with the verdict but
      without the metrics and figures (:func:`evaluate_run` adds them; fit
      evaluates only the try it returns).

  Returns:
    ``(trained model, summary dict)``.

  In a run across processes (:mod:`vaells_jax.training.distributed`) every
  process calls this alike; process 0 writes every output, and the others
  return the trained model with ``info`` as the summary.

  Raises:
    ValueError, CheckpointError: as :func:`plan_run`; ``WorkdirInUse``
      (a ``ValueError``) while another live process runs in ``workdir``
      (an exclusive ``fcntl.flock`` on ``WORKDIR/.lock``, held until this
      returns and released by the kernel if the process dies).
    TrainingDiverged, TrainingInterrupted: from
      :func:`vaells_jax.training.loop.train_loop`.
  """
  plan = plan_run(config, data, workdir, resume, overwrite)
  return execute(
    plan, log=log, progress=progress, input_map=input_map, evaluate=evaluate
  )


def execute(
  plan: RunPlan,
  log=print,
  progress=None,
  input_map: InputMap | None = None,
  evaluate: bool = True,
) -> tuple[TrainedVAELLS | TrainedBaseline, dict]:
  """Trains and evaluates the run ``plan`` describes (:func:`train_and_evaluate`,
  whose arguments these are), without checking again what :func:`plan_run`
  checked: only if the workdir's checkpoints changed since (another run
  wrote there) is the run planned again, under the workdir's lock."""
  start = time.perf_counter()
  if plan.cores:
    log(f"note: {plan.cores}")
  if not is_main():
    return _train_along(plan)
  warning = short_run_warning(plan.config)
  if warning:
    log(warning)
  plan.workdir.mkdir(parents=True, exist_ok=True)
  with lock_workdir(plan.workdir):
    if _found(plan.workdir) != plan.found:
      plan = plan_run(plan.config, plan.data, plan.workdir, plan.resume, plan.overwrite)
    trained, summary = _train(plan, log, start, progress, warning, input_map)
    if evaluate:  # summary.json once, complete: callers take it as a finished run
      summary = _evaluate(trained, plan.config, plan.workdir, summary, log, warning)
    else:
      summary["evaluated"] = False
      atomic_write_text(plan.workdir / "summary.json", json.dumps(summary, indent=2))
    return trained, summary


def evaluate_run(trained, workdir, log=print) -> dict:
  """Evaluates a run trained with ``evaluate=False`` (:func:`train_and_evaluate`):
  the metrics and figures, merged into its ``summary.json``, which it returns."""
  workdir = pathlib.Path(workdir)
  with lock_workdir(workdir):
    summary = json.loads((workdir / "summary.json").read_text())
    if summary.get("evaluated", True):
      return summary
    summary.pop("evaluated")
    config = trained.config
    return _evaluate(trained, config, workdir, summary, log, short_run_warning(config))


def _train_along(plan: RunPlan):
  """:func:`execute` in a process other than 0 of a run across
  processes: it trains with the others and writes nothing; process 0 writes
  the outputs and the evaluation. Returns ``(trained model, info)``."""
  config, data = plan.config, plan.data
  state, info = train_run(
    config,
    data,
    plan.workdir,
    log=lambda line: None,
    resume=plan.resume,
    already_checked=True,
  )
  entry = MODELS[config.model]
  return entry.trained(config, state, data), {"model": config.model, **info}


def _train(plan: RunPlan, log, start, progress, warning, input_map):
  """:func:`execute`'s training, once the workdir is locked: the trained
  model and its summary (not yet written)."""
  config, data, workdir = plan.config, plan.data, plan.workdir
  if plan.overwrite and not plan.resume:
    shutil.rmtree(workdir / CHECKPOINT_DIR, ignore_errors=True)
    shutil.rmtree(workdir / population_run.POPULATION_DIR, ignore_errors=True)
  atomic_write_text(
    workdir / CONFIG_NAME, json.dumps(dataclasses.asdict(config), indent=2)
  )
  save_dataset(workdir / DATA_NAME, data)
  if input_map is not None:
    input_map.save(workdir / INPUT_MAP_NAME)
  else:
    (workdir / INPUT_MAP_NAME).unlink(missing_ok=True)
  state, info = train_run(
    config,
    data,
    workdir,
    log,
    resume=plan.resume,
    progress=progress,
    already_checked=True,
  )
  entry = MODELS[config.model]
  summary = {
    "model": config.model,
    **info,
    "net_skipped_steps": int(state.net_skipped),
    **entry.summary(state),
  }
  if warning:  # summary.md (written by the report) marks these
    summary["not_meaningful"] = list(STRUCTURE_METRICS)
  trained = entry.trained(config, state, data)
  if input_map is not None:
    trained = dataclasses.replace(
      trained, data=input_map.user_data(data), input_map=input_map
    )
  if config.model == "vaells" and config.network != "conv":
    summary["verdict"] = verdict(trained, config.seed)
    trained = dataclasses.replace(trained, verdict=summary["verdict"])
    log(
      f"verdict: {summary['verdict']['verdict']} "
      f"({'; '.join(summary['verdict']['reasons'])})"
    )
  summary["wall_time_s"] = time.perf_counter() - start
  return trained, summary


def _image_figures(trained, workdir, log) -> None:
  """The figures of a model of images in the user's image shape, atop
  ``summary.md`` (:mod:`vaells_jax.evaluation.image_fit_figures`)."""
  from vaells_jax.evaluation import image_fit_figures

  log("drawing the image figures ...")
  names = image_fit_figures.draw(trained, workdir)
  lines = ["## Images", ""]
  for name in names:
    lines += [f"![{name}]({name})", "", f"*{image_fit_figures.FIGURES[name]}*", ""]
  path = workdir / "summary.md"
  text = path.read_text() if path.exists() else ""
  atomic_write_text(path, text + "\n" + "\n".join(lines))


def _evaluate(trained, config, workdir, summary, log, warning) -> dict:
  """The report of ``trained``'s data (metrics, figures, ``summary.md``)
  merged into ``summary``, written to ``summary.json``."""
  if config.network == "conv":  # digits only: its imports take about 0.4 s
    from vaells_jax.evaluation import image_report as report
  else:
    report = synthetic_report
  log("evaluating ...")
  evaluated = time.perf_counter()
  metrics = report.evaluate_and_report(trained.flat(), workdir, summary, log=log)
  if config.network == "image":
    _image_figures(trained, workdir, log)
  summary.update(metrics)
  if warning:
    summary["not_meaningful"] = [k for k in STRUCTURE_METRICS if k in summary]
  summary["eval_time_s"] = time.perf_counter() - evaluated
  summary["wall_time_s"] += summary["eval_time_s"]
  log(f"writing {workdir / 'summary.json'}")
  atomic_write_text(workdir / "summary.json", json.dumps(summary, indent=2))
  return summary
