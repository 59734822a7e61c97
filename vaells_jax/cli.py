"""Runs a paper experiment: ``vaells-run --exp=concentric``.

``python experiments/run.py`` in a checkout is the same command. The
experiments' configurations and data are in ``vaells_jax.experiments``. Flags are
listed by ``--help``, with every config key that ``--config.KEY=VALUE`` (or
``--config.KEY VALUE``) overrides.

``--exp=sensitivity --base=concentric|swiss_roll --seeds=N [--first-seed=S]``
runs the population study (``vaells_jax.runs.sensitivity``) on seeds
S..S+N-1.
``--exp=sensitivity --base=nat_mnist --grid [--ops=2,4,8] [--anchors=8,12,16]``
runs the paper's table-1 grid of single natural-MNIST runs (dictionary size
``M`` x anchors per class ``N_a``; ``--seeds`` default 1) at the budget of
``--budget`` and ``--config.KEY=VALUE``, and writes ``grid.md/json``; the
same command again reuses the finished runs and resumes a stopped one.

Exit status: 0 done; 2 bad input (flags, config, data, workdir, a checkpoint
that fails its checksums, a workdir in use by another run), with a one-line
message and nothing written; 1 training diverged (the message names the
likely cause; the last good checkpoint is kept) or a write failed (e.g. a
full disk; the previous checkpoints are kept); 143 / 130 stopped by SIGTERM /
SIGINT (Ctrl-C) after finishing and checkpointing the current step, with the
command that resumes it.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import pathlib
import shlex
import signal
import sys
import textwrap

from vaells_jax import experiments
from vaells_jax.config import (
  CONFIG_NAME,
  GROUPS,
  INFERENCE_METHODS,
  MODEL_NAMES,
  Config,
  config_from_json,
  override,
)
from vaells_jax.experiments import DIGITS, make_data
from vaells_jax.runs.cache import compilation_cache

__all__ = ["main", "parse_args"]

EXPERIMENTS = experiments.NAMES
COMPARISONS = ("compare_concentric", "compare_swiss_roll", "compare_nat_mnist")
STUDIES = ("sensitivity",)  # --base=concentric|swiss_roll, or nat_mnist --grid
STUDY_BASES = ("concentric", "swiss_roll")
GRID_BASES = ("nat_mnist",)  # --grid: paper table 1
GRID_OPS = (2, 4, 8)  # dictionary sizes M
GRID_ANCHORS = (8, 12, 16)  # anchors per class N_a
STUDY_POPULATION = 4  # members per seed unless --config.population says


def _config_keys() -> str:
  """Every config key with its default, by group, for ``--help``."""
  defaults = {f.name: f.default for f in dataclasses.fields(Config)}
  return "\n".join(
    textwrap.fill(
      ", ".join(f"{name}={defaults[name]!r}" for name in names),
      78,
      initial_indent=f"  {group}: ",
      subsequent_indent="    ",
    )
    for group, names in GROUPS.items()
  )


def _suggest(word: str, choices) -> str:
  near = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.5)
  return f"; did you mean {near[0]!r}?" if near else ""


def make_parser() -> argparse.ArgumentParser:
  """The command's flags (``--config.KEY=VALUE`` items are read apart)."""
  parser = argparse.ArgumentParser(
    description=__doc__.split("\n\n")[0].replace("``", ""),
    epilog=_epilog(),
    formatter_class=argparse.RawDescriptionHelpFormatter,
    allow_abbrev=False,  # --seed=5 is not --seeds=5
  )
  _add_run_flags(parser)
  _add_seed_flags(parser)
  _add_output_flags(parser)
  return parser


def _epilog() -> str:
  """``--help``'s text after the flags: config keys, processes, exit status."""
  return (
    "--config.KEY=VALUE (or --config.KEY VALUE) overrides any of these\n"
    "config keys (defaults shown; each experiment sets its own values, saved in\n"
    "the run's config.json):\n"
    + _config_keys()
    + "\n"
    + textwrap.fill(
      f"inference_method: {' | '.join(INFERENCE_METHODS)}",
      78,
      initial_indent="  ",
      subsequent_indent="    ",
    )
    + "\n\nAcross processes (hosts): set VAELLS_COORDINATOR=HOST:PORT, "
    "VAELLS_NUM_PROCESSES=N and VAELLS_PROCESS_ID=I on each and run the same "
    "command with --config.data_parallel=true (docs/devices.md)."
    + "\n\nExit status: 0 done; 2 bad input (one-line message, nothing written); "
    "1 training diverged (last good checkpoint kept) or a write failed; 143 / 130 "
    "stopped by SIGTERM / SIGINT after checkpointing (the message says how to "
    "resume)."
  )


def _add_run_flags(parser) -> None:
  """What runs: the experiment, comparison, study or grid, and the model."""
  parser.add_argument(
    "--exp",
    required=True,
    metavar="NAME",
    help=f"experiment: {' | '.join(EXPERIMENTS)}; or a comparison of every "
    f"model over seeds: {' | '.join(COMPARISONS)}; or the population study: "
    "sensitivity (with --base); or paper table 1: sensitivity with "
    "--base=nat_mnist --grid",
  )
  parser.add_argument(
    "--base",
    default=None,
    choices=STUDY_BASES + GRID_BASES,
    help="the experiment of --exp=sensitivity (nat_mnist with --grid only)",
  )
  parser.add_argument(
    "--grid",
    action="store_true",
    help="with --exp=sensitivity --base=nat_mnist: paper table 1, one run per "
    "dictionary size (--ops), anchors per class (--anchors) and seed, at the "
    "budget of --budget and --config.*; writes grid.md/json, and the same "
    "command again reuses the finished runs",
  )
  parser.add_argument(
    "--ops",
    default=None,
    metavar="M,M,...",
    help=f"the grid: dictionary sizes M (default {','.join(map(str, GRID_OPS))})",
  )
  parser.add_argument(
    "--model",
    default="vaells",
    choices=MODEL_NAMES,
    help="the model trained on the experiment's data and budget (default vaells)",
  )


def _add_seed_flags(parser) -> None:
  """The seeds and anchors of comparisons, studies and grids."""
  parser.add_argument(
    "--seeds",
    type=int,
    default=None,
    help="comparisons: seeds 0..N-1 (default 3); the study (default 10); the "
    "grid (default 1)",
  )
  parser.add_argument(
    "--first-seed",
    type=int,
    default=0,
    metavar="S",
    help="the study and the grid: seeds S..S+N-1 with --seeds=N (default 0)",
  )
  parser.add_argument(
    "--anchors",
    default=None,
    metavar="A,B,...",
    help="the study: anchor counts, each placed at random on the manifold "
    "(paper appendix F), e.g. 3,4,6,8; the grid: anchors per class N_a "
    f"(default {','.join(map(str, GRID_ANCHORS))})",
  )


def _add_output_flags(parser) -> None:
  """Where a run writes and reads, its budget, and resuming."""
  parser.add_argument(
    "--workdir",
    default=None,
    metavar="DIR",
    help="output folder (default runs/EXP, with _MODEL for a baseline; "
    "runs/sensitivity_BASE for the study and the grid)",
  )
  parser.add_argument(
    "--budget",
    default="paper",
    choices=("paper", "cpu"),
    help="the paper's training budget (default) or the reduced 2-core CPU one "
    "(MNIST experiments)",
  )
  parser.add_argument(
    "--data-dir",
    default=None,
    metavar="DIR",
    help="MNIST IDX files in DIR (get them with `python -m vaells_jax.data.mnist "
    "download DIR`) for rot_mnist, nat_mnist and the grid; default: "
    "tensorflow-datasets, if installed ([tfds] extra)",
  )
  parser.add_argument(
    "--resume",
    action="store_true",
    help="continue the run in --workdir from its latest checkpoint",
  )
  parser.add_argument(
    "--overwrite",
    action="store_true",
    help="start over in a --workdir that holds a run",
  )


def _overrides(parser, rest) -> dict[str, str]:
  """``--config.KEY=VALUE`` and ``--config.KEY VALUE`` items of ``rest``."""
  flags = [o for a in parser._actions for o in a.option_strings]
  overrides, i = {}, 0
  while i < len(rest):
    item = rest[i]
    if item.startswith("--config."):
      key, eq, value = item[len("--config.") :].partition("=")
      if not eq:
        if i + 1 >= len(rest) or rest[i + 1].startswith("--"):
          parser.error(f"{item} needs a value: {item}=VALUE")
        value, i = rest[i + 1], i + 1
      overrides[key] = value
    elif item.startswith("--"):
      flag = item.split("=", 1)[0]
      parser.error(
        f"unrecognised argument {flag!r}{_suggest(flag, flags)} (config "
        "overrides look like --config.KEY=VALUE; --help lists flags and keys)"
      )
    else:
      parser.error(f"unexpected argument {item!r}")
    i += 1
  return overrides


def parse_args(argv):
  parser = make_parser()
  args, rest = parser.parse_known_args(argv)
  args.argv = list(argv)  # to name the command that finishes a stopped study
  overrides = _overrides(parser, rest)
  if args.resume and args.overwrite:
    parser.error("--resume and --overwrite exclude each other")
  names = EXPERIMENTS + COMPARISONS + STUDIES
  if args.exp not in names:
    parser.error(
      f"unknown --exp={args.exp!r}{_suggest(args.exp, names)} "
      f"Choose one of: {', '.join(names)}"
    )
  if (args.exp in STUDIES) != (args.base is not None):
    parser.error("--base goes with --exp=sensitivity, and only with it")
  _grid_flags(parser, args)
  if args.anchors is not None:
    if args.exp not in STUDIES:
      parser.error("--anchors goes with --exp=sensitivity, and only with it")
    example = "8,12,16" if args.grid else "3,4,6,8"
    args.anchors = _counts(parser, "--anchors", args.anchors, example)
  if args.grid:
    args.ops = GRID_OPS if args.ops is None else args.ops
    args.anchors = GRID_ANCHORS if args.anchors is None else args.anchors
  if args.workdir is not None and not args.workdir.strip():
    parser.error("--workdir is empty; give a folder, or leave the flag out")
  exp = args.base if args.exp in STUDIES else args.exp.removeprefix("compare_")
  if args.data_dir is not None and exp not in DIGITS:
    parser.error(f"--data-dir applies to {', '.join(DIGITS)} only, not {exp}")
  if args.exp in COMPARISONS + STUDIES:
    default = 3 if args.exp in COMPARISONS else 1 if args.grid else 10
    args.seeds = default if args.seeds is None else args.seeds
    if not 1 <= args.seeds <= 1000:
      parser.error(f"--seeds must be >= 1 and <= 1000, got {args.seeds}")
    if args.model != "vaells" or "model" in overrides:
      parser.error(f"{args.exp} chooses its models; leave out --model")
    if "seed" in overrides:
      parser.error(f"{args.exp} runs seeds 0..N-1; use --seeds=N, not --config.seed")
    if args.first_seed and args.exp in COMPARISONS:
      parser.error("--first-seed goes with --exp=sensitivity, and only with it")
    if args.first_seed < 0:
      parser.error(f"--first-seed must be >= 0, got {args.first_seed}")
    try:  # the last seed within the config's seed range
      Config(seed=args.first_seed + args.seeds - 1)
    except ValueError as e:
      parser.error(f"--first-seed={args.first_seed} with --seeds={args.seeds}: {e}")
    if args.grid and "num_ops" in overrides:
      parser.error("--grid sets M per run; use --ops=M,M,..., not --config.num_ops")
    if args.resume:
      parser.error(f"{args.exp} resumes by itself: run the same command again")
  elif "model" in overrides:
    parser.error("choose the model with --model, not --config.model")
  elif args.seeds is not None or args.first_seed:
    parser.error(
      "--seeds and --first-seed apply to comparisons and the study only; use "
      "--config.seed=S"
    )
  return args, overrides


def _counts(parser, flag, text, example) -> tuple[int, ...]:
  """``"2,4,8"`` as ``(2, 4, 8)``: distinct counts from 1 to 1000."""
  try:
    counts = tuple(int(a) for a in text.split(","))
  except ValueError:
    parser.error(f"{flag} must be counts like {example}, got {text!r}")
  if not all(1 <= a <= 1000 for a in counts):
    parser.error(f"{flag} must be counts from 1 to 1000, got {text!r}")
  if len(set(counts)) != len(counts):
    parser.error(f"{flag} repeats a count: {text!r}")
  return counts


def _grid_flags(parser, args) -> None:
  """``--grid`` goes with ``--base=nat_mnist`` and the other way round;
  ``--ops`` with ``--grid``."""
  if args.grid and args.base not in GRID_BASES:
    parser.error(
      "--grid goes with --exp=sensitivity --base=nat_mnist, and only with it"
    )
  if args.base in GRID_BASES and not args.grid:
    parser.error(
      "--base=nat_mnist runs paper table 1: add --grid (the population study "
      f"takes --base={' or '.join(STUDY_BASES)})"
    )
  if args.ops is not None:
    if not args.grid:
      parser.error("--ops goes with --grid, and only with it")
    args.ops = _counts(parser, "--ops", args.ops, "2,4,8")


def compare(args, config, workdir) -> None:
  """Trains every model on seeds 0..N-1 and writes the comparison."""
  from vaells_jax.runs.compare import run_comparison  # slow imports (jax)

  exp = args.exp.removeprefix("compare_")
  result = run_comparison(
    config,
    lambda c: make_data(exp, c, args.data_dir),
    workdir,
    seeds=args.seeds,
    log=lambda line: print(line, flush=True),
    overwrite=args.overwrite,
  )
  print(result["markdown_table"])
  print(f"comparison: {workdir / 'comparison.md'}")


def study(args, config, workdir) -> None:
  """The population study, the anchor study or paper table 1 (the grid) on
  seeds S..S+N-1 (``vaells_jax.runs.sensitivity``)."""
  from vaells_jax.runs import sensitivity  # slow imports (jax)

  seeds = range(args.first_seed, args.first_seed + args.seeds)
  log = lambda line: print(line, flush=True)  # noqa: E731
  if args.grid:  # single runs: no population default
    loaded = {}  # the digits of each seed, loaded once
    sensitivity.grid_study(
      config,
      lambda c, a: make_data(
        args.base, c, args.data_dir, anchors_per_class=a, loaded=loaded
      ),
      args.ops,
      args.anchors,
      seeds,
      workdir,
      log=log,
      overwrite=args.overwrite,
    )
    print((workdir / "grid.md").read_text())
    print(f"grid: {workdir / 'grid.md'}")
    return
  if config.population == 1:
    config = dataclasses.replace(config, population=STUDY_POPULATION)
  if args.anchors:
    sensitivity.anchor_study(
      config,
      lambda c, count: make_data(args.base, c, None, random_anchors=count),
      args.anchors,
      seeds,
      workdir,
      log,
    )
    print((workdir / "anchors.md").read_text())
    return
  sensitivity.population_study(
    config, lambda c: make_data(args.base, c, None), seeds, workdir, log
  )
  print((workdir / "sensitivity.md").read_text())


def single(args, config, workdir) -> None:
  """One run of ``args.exp``: trains, evaluates and prints the summary."""
  from vaells_jax.runs.progress import Progress
  from vaells_jax.runs.runner import execute, plan_run
  from vaells_jax.training.distributed import is_main  # slow imports (jax)

  data = make_data(args.exp, config, args.data_dir)
  plan = plan_run(config, data, workdir, args.resume, args.overwrite)
  if not is_main():  # another process of a run across processes: silent
    execute(plan)
    return
  print(
    f"{args.exp} ({config.model}): {config.num_steps} steps, workdir {workdir}",
    flush=True,
  )
  with Progress() as progress:
    _, summary = execute(plan, log=progress.log, progress=progress.step)
  keys = (
    "steps",
    "wall_time_s",
    "compile_time_s",
    "train_time_s",
    "eval_time_s",
    "psi_rejected_steps",
    "knn_class_accuracy",
    "sample_manifold_distance",
    "orbit_manifold_distance",
    "orbit_coverage",
    "path_manifold_distance",
    "path_endpoint_error",
    "linear_path_manifold_distance",
    "log_likelihood",
    "elbo",
    "mse",
    "rotation_gated_span_degrees",
    "rotation_gated_span_quartiles",
    "rotation_gate_level",
    "ungated_rotation_rise_degrees",
    "class_consistency",
    "classifier_test_accuracy",
  )
  doubtful = summary.get("not_meaningful", ())
  for key in keys:
    if key in summary:
      note = "  (not meaningful: Psi was never trained)" if key in doubtful else ""
      print(f"{key}: {_number(summary[key])}{note}")
  print(f"summary: {workdir / 'summary.md'}")


def _exit_status(error: BaseException, args, workdir) -> int:
  """The one mapping from what stopped a command to its exit status and
  message (the module docstring); re-raises anything else. A process of a
  run across processes other than 0 stays silent but for bad input."""
  from vaells_jax.data.download import MnistUnavailable
  from vaells_jax.training.distributed import is_main
  from vaells_jax.training.guards import TrainingDiverged, TrainingInterrupted

  if isinstance(error, (MnistUnavailable, ValueError)):  # CheckpointError too
    print(f"error: {error}", file=sys.stderr)
    return 2
  if isinstance(error, TrainingInterrupted):
    if not is_main():
      return 128 + error.signum
    if args.exp in EXPERIMENTS:
      flags = [f"--exp={args.exp}", f"--workdir={workdir}"]
      flags += [f"--data-dir={args.data_dir}"] if args.data_dir else []
      return _interrupted(error, [*flags, "--resume"])
    # A comparison or a study resumes by itself: the same command again.
    return _interrupted(error, _rerun_flags(args.argv, workdir))
  if isinstance(error, TrainingDiverged):
    if is_main():
      print(f"error: training diverged: {error}", file=sys.stderr)
    return 1
  if isinstance(error, OSError):  # a full disk, a file size limit
    print(f"error: could not write to {workdir}: {error}", file=sys.stderr)
    return 1
  raise error


def _rerun_flags(argv, workdir) -> list[str]:
  """``argv`` to run a stopped comparison or grid again: the same flags but
  ``--overwrite`` (which would discard the finished runs), with the workdir
  named."""
  flags, skip = [], False
  for item in argv:
    if skip:
      skip = False
    elif item == "--workdir":
      skip = True
    elif not item.startswith(("--workdir=", "--overwrite")):
      flags.append(item)
  return [*flags, f"--workdir={workdir}"]


def _interrupted(error, flags) -> int:
  """Reports a run stopped by SIGTERM/SIGINT; returns 128 + the signal number."""
  program = os.path.basename(sys.argv[0] if sys.argv else "")
  command = (
    ["vaells-run"] if program == "vaells-run" else ["python", "experiments/run.py"]
  )
  print(
    f"{error}; resume with: {shlex.join([*command, *flags])}",
    file=sys.stderr,
    flush=True,
  )
  return 128 + error.signum


def _number(value) -> str:
  """A summary value for a log line: 4 significant digits, not 16."""
  if isinstance(value, float):
    return f"{value:.4g}"
  return str(value)


def _cores_for_members(population: int) -> None:
  """Gives a population's members this machine's cores: XLA runs a program's
  loops on one core, so ``XLA_FLAGS`` gets one CPU device per core (as many as
  divide the population), over which the population step splits its members
  (``vaells_jax.training.placement.member_devices``). An ``XLA_FLAGS`` that
  sets the device count is left as it is. Called before jax starts."""
  from vaells_jax.training.placement import core_count  # imports jax, unstarted

  flags = os.environ.get("XLA_FLAGS", "")
  if population < 2 or "xla_force_host_platform_device_count" in flags:
    return
  count = core_count(population)
  if count > 1:
    os.environ["XLA_FLAGS"] = (
      f"{flags} --xla_force_host_platform_device_count={count}".strip()
    )


def main(argv=None) -> int:
  """Runs the command ``argv`` (default ``sys.argv[1:]``); returns its exit
  status."""
  try:
    code = _main(argv)
  except KeyboardInterrupt:  # outside training (which checkpoints first)
    print("interrupted", file=sys.stderr)
    code = 130
  jax = sys.modules.get("jax")
  if code and jax is not None and jax.distributed.is_initialized():
    # At exit jax waits for every other process of the run (minutes) while
    # they wait for this one in a collective: stop now, so that they stop too.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
  return code


def _join_processes(args) -> str | None:
  """Joins a run across processes if ``VAELLS_COORDINATOR`` etc. are set
  (``vaells_jax.training.distributed``); returns what is wrong, or None."""
  from vaells_jax.training.distributed import initialize_from_env

  try:
    across = initialize_from_env()
  except ValueError as e:
    return str(e)
  if across and args.exp in COMPARISONS + STUDIES:
    return f"--exp={args.exp} runs in one process; unset VAELLS_COORDINATOR"
  return None


def _main(argv=None) -> int:
  if hasattr(signal, "SIGXFSZ"):  # a file size limit: an error, not a crash
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
  args, overrides = parse_args(sys.argv[1:] if argv is None else argv)
  exp = args.base if args.exp in STUDIES else args.exp.removeprefix("compare_")
  suffix = "" if args.model == "vaells" else f"_{args.model}"
  name = f"sensitivity_{args.base}" if args.exp in STUDIES else args.exp
  workdir = pathlib.Path(args.workdir or pathlib.Path("runs", f"{name}{suffix}"))
  saved = workdir / CONFIG_NAME
  try:
    # A resumed run keeps its saved configuration; flags may only repeat it.
    base = (
      config_from_json(saved)
      if args.resume and saved.exists()
      else experiments.get_config(exp, args.budget)
    )
    if args.model != "vaells":  # the experiment's population is VAELLS's
      base = dataclasses.replace(base, population=1)
    config = override(base, {"model": args.model, **overrides})
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  if not (config.data_parallel or os.environ.get("VAELLS_COORDINATOR")):
    counted = args.exp in STUDIES and not args.grid and config.population == 1
    _cores_for_members(STUDY_POPULATION if counted else config.population)
  compilation_cache(force=True)
  problem = _join_processes(args)
  if problem:
    print(f"error: {problem}", file=sys.stderr)
    return 2
  run = compare if args.exp in COMPARISONS else study if args.exp in STUDIES else single
  try:
    run(args, config, workdir)
  except Exception as e:  # noqa: BLE001 -- _exit_status re-raises the unknown
    return _exit_status(e, args, workdir)
  return 0
