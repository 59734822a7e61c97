"""Runs a paper experiment: ``python experiments/run.py --exp=concentric``.

Flags:
  --exp=NAME              concentric | swiss_roll | rot_mnist | nat_mnist, or
                          compare_concentric | compare_swiss_roll |
                          compare_nat_mnist (every model, several seeds), or
                          sensitivity (population study, with --base)
  --base=NAME             concentric | swiss_roll: the study's experiment
  --model=NAME            vaells (default) | vae | vampprior | svae: the model
                          trained on the experiment's data, networks and budget
  --seeds=N               comparisons: seeds 0..N-1 (default 3); studies (default 10)
  --workdir=DIR           output folder (default: runs/NAME, with _MODEL
                          appended for a baseline)
  --budget=paper|cpu      the paper's training budget (default), or the
                          reduced one for a 2-core CPU (MNIST experiments)
  --data-dir=DIR          MNIST from standard IDX files in DIR (.gz or raw);
                          default: tensorflow-datasets (needs internet once)
  --config.KEY=VALUE      override any field of the experiment's config,
                          e.g. --config.num_steps=200 --config.seed=1
  --resume                continue the run in --workdir from its latest
                          checkpoint, with its saved configuration
  --overwrite             start over in a --workdir that holds a run

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
import importlib
import pathlib
import shlex
import signal
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from vaells_jax.config import CONFIG_NAME, config_from_json, override  # noqa: E402

EXPERIMENTS = ("concentric", "swiss_roll", "rot_mnist", "nat_mnist")
COMPARISONS = ("compare_concentric", "compare_swiss_roll", "compare_nat_mnist")
DIGITS = ("rot_mnist", "nat_mnist")
STUDIES = ("sensitivity",)  # --base=concentric|swiss_roll
STUDY_BASES = ("concentric", "swiss_roll")
STUDY_POPULATION = 8  # members per seed unless --config.population says
MODELS = ("vaells", "vae", "vampprior", "svae")


def make_data(exp, config, data_dir):
  """The experiment's data set (MNIST raises ``MnistUnavailable`` if absent)."""
  from vaells_jax.data import mnist, synthetic  # slow imports (jax)

  if exp in DIGITS:
    config_module = importlib.import_module(f"experiments.configs.{exp}")
    return mnist.digits_experiment(
      exp,
      mnist.load_mnist(data_dir, seed=config.seed),
      seed=config.seed,
      anchors_per_class=config_module.ANCHORS_PER_CLASS,
    )
  return getattr(synthetic, f"make_{exp}")(seed=config.seed)


def parse_args(argv):
  parser = argparse.ArgumentParser(
    description=__doc__,
    formatter_class=argparse.RawDescriptionHelpFormatter,
    allow_abbrev=False,  # --seed=5 is not --seeds=5
  )
  parser.add_argument(
    "--exp", required=True, help="|".join(EXPERIMENTS + COMPARISONS + STUDIES)
  )
  parser.add_argument("--base", default=None, help="|".join(STUDY_BASES))
  parser.add_argument("--model", default="vaells", choices=MODELS)
  parser.add_argument("--seeds", type=int, default=None)
  parser.add_argument("--workdir", default=None)
  parser.add_argument("--budget", default="paper", choices=("paper", "cpu"))
  parser.add_argument("--data-dir", default=None)
  parser.add_argument("--resume", action="store_true")
  parser.add_argument("--overwrite", action="store_true")
  args, rest = parser.parse_known_args(argv)
  overrides = {}
  for item in rest:
    if not item.startswith("--config.") or "=" not in item:
      parser.error(
        f"unrecognised argument {item!r}; overrides look like --config.KEY=VALUE"
      )
    key, value = item[len("--config.") :].split("=", 1)
    overrides[key] = value
  if args.resume and args.overwrite:
    parser.error("--resume and --overwrite exclude each other")
  if args.exp not in EXPERIMENTS + COMPARISONS + STUDIES:
    parser.error(
      f"unknown --exp={args.exp!r}; choose one of: "
      f"{', '.join(EXPERIMENTS + COMPARISONS + STUDIES)}"
    )
  if (args.exp in STUDIES) != (args.base is not None):
    parser.error("--base goes with --exp=sensitivity, and only with it")
  if args.exp in STUDIES:
    if args.base not in STUDY_BASES:
      parser.error(f"--base must be one of {', '.join(STUDY_BASES)}")
    args.seeds = 10 if args.seeds is None else args.seeds
    if not 1 <= args.seeds <= 1000 or "seed" in overrides or args.model != "vaells":
      parser.error("a study trains VAELLS on seeds 0..N-1: use --seeds=N in [1, 1000]")
  if args.workdir is not None and not args.workdir.strip():
    parser.error("--workdir is empty; give a folder, or leave the flag out")
  exp = args.exp.removeprefix("compare_")
  if args.data_dir is not None and exp not in DIGITS:
    parser.error(f"--data-dir applies to {', '.join(DIGITS)} only, not {exp}")
  if args.exp in COMPARISONS:
    args.seeds = 3 if args.seeds is None else args.seeds
    if not 1 <= args.seeds <= 1000:
      parser.error(f"--seeds must be >= 1 and <= 1000, got {args.seeds}")
    if args.model != "vaells" or "model" in overrides:
      parser.error("a comparison trains every model; leave out --model")
    if "seed" in overrides:
      parser.error("a comparison runs seeds 0..N-1; use --seeds=N, not --config.seed")
    if args.resume:
      parser.error("a comparison resumes by itself: run the same command again")
  elif "model" in overrides:
    parser.error("choose the model with --model, not --config.model")
  elif args.seeds is not None and args.exp not in STUDIES:
    parser.error("--seeds applies to comparisons and studies only; use --config.seed=S")
  return args, overrides


def compare(args, config, workdir) -> int:
  """Trains every model on seeds 0..N-1 and writes the comparison."""
  from vaells_jax.data.mnist import MnistUnavailable
  from vaells_jax.runs.compare import run_comparison
  from vaells_jax.runs.runner import TrainingDiverged, TrainingInterrupted
  from vaells_jax.training.checkpoint import CheckpointError  # slow imports (jax)

  exp = args.exp[len("compare_") :]
  try:
    result = run_comparison(
      config,
      lambda c: make_data(exp, c, args.data_dir),
      workdir,
      seeds=args.seeds,
      log=lambda line: print(line, flush=True),
      overwrite=args.overwrite,
    )
  except (MnistUnavailable, ValueError, CheckpointError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  except TrainingDiverged as e:
    print(f"error: training diverged: {e}", file=sys.stderr)
    return 1
  except TrainingInterrupted as e:
    return _interrupted(e, [f"--exp={args.exp}", f"--workdir={workdir}"])
  except OSError as e:
    print(f"error: could not write to {workdir}: {e}", file=sys.stderr)
    return 1
  print(result["markdown_table"])
  print(f"comparison: {workdir / 'comparison.md'}")
  return 0


def sensitivity(args, config, workdir) -> int:
  """The population study on seeds 0..N-1 (vaells_jax.runs.sensitivity)."""
  import dataclasses

  from vaells_jax.runs.sensitivity import population_study  # slow imports (jax)

  if config.population == 1:
    config = dataclasses.replace(config, population=STUDY_POPULATION)
  summary = population_study(
    config,
    lambda c: make_data(args.base, c, None),
    range(args.seeds),
    workdir,
    log=lambda line: print(line, flush=True),
  )
  print((workdir / "sensitivity.md").read_text())
  return 0 if summary else 1


def _interrupted(error, flags) -> int:
  """Reports a run stopped by SIGTERM/SIGINT; returns 128 + the signal number."""
  command = shlex.join(["python", "experiments/run.py", *flags, "--resume"])
  print(
    f"{error}; resume with: {command}",
    file=sys.stderr,
    flush=True,
  )
  return 128 + error.signum


def main(argv=None) -> int:
  try:
    return _main(argv)
  except KeyboardInterrupt:  # outside training (which checkpoints first)
    print("interrupted", file=sys.stderr)
    return 130


def _main(argv=None) -> int:
  if hasattr(signal, "SIGXFSZ"):  # a file size limit: an error, not a crash
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
  args, overrides = parse_args(sys.argv[1:] if argv is None else argv)
  exp = args.exp[len("compare_") :] if args.exp in COMPARISONS else args.exp
  if args.exp in STUDIES:
    exp = args.base
  suffix = "" if args.model == "vaells" else f"_{args.model}"
  name = f"sensitivity_{args.base}" if args.exp in STUDIES else args.exp
  workdir = pathlib.Path(args.workdir or ROOT / "runs" / f"{name}{suffix}")
  config_module = importlib.import_module(f"experiments.configs.{exp}")
  saved = workdir / CONFIG_NAME
  try:
    # A resumed run keeps its saved configuration; flags may only repeat it.
    base = (
      config_from_json(saved)
      if args.resume and saved.exists()
      else config_module.get_config(args.budget)
    )
    config = override(base, {"model": args.model, **overrides})
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  if args.exp in COMPARISONS:
    return compare(args, config, workdir)
  if args.exp in STUDIES:
    return sensitivity(args, config, workdir)
  from vaells_jax.data.mnist import MnistUnavailable
  from vaells_jax.runs.runner import (
    TrainingDiverged,
    TrainingInterrupted,
    train_and_evaluate,
    validate_run,
  )

  try:
    data = make_data(args.exp, config, args.data_dir)
  except (MnistUnavailable, ValueError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  try:
    validate_run(config, data, workdir, args.resume, args.overwrite)
  except ValueError as e:  # bad data or workdir: nothing written yet
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(
    f"{args.exp} ({config.model}): {config.num_steps} steps, workdir {workdir}",
    flush=True,
  )
  try:
    _, summary = train_and_evaluate(
      config,
      data,
      workdir,
      log=lambda line: print(line, flush=True),
      resume=args.resume,
      overwrite=args.overwrite,
    )
  except ValueError as e:  # CheckpointError, a workdir in use, a bad log
    print(f"error: {e}", file=sys.stderr)
    return 2
  except TrainingDiverged as e:
    print(f"error: training diverged: {e}", file=sys.stderr)
    return 1
  except TrainingInterrupted as e:
    flags = [f"--exp={args.exp}", f"--workdir={workdir}"]
    flags += [f"--data-dir={args.data_dir}"] if args.data_dir else []
    return _interrupted(e, flags)
  except OSError as e:  # a full disk, a file size limit
    print(f"error: could not write to {workdir}: {e}", file=sys.stderr)
    return 1
  keys = (
    "steps",
    "wall_time_s",
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
    "rotation_span_degrees",
    "rotation_spearman",
    "class_consistency",
    "classifier_test_accuracy",
  )
  for key in keys:
    if key in summary:
      print(f"{key}: {summary[key]}")
  print(f"summary: {workdir / 'summary.md'}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
