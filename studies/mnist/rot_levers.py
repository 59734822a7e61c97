"""What moves rotated MNIST's gated span: one lever at a time, over seeds.

``python benchmarks/rot_levers.py --seeds=0-2 --jobs=2
--out=docs/results/rot_mnist_levers.json`` (the default ``--levers``)

Each run is the README's rotated-MNIST command at the CPU budget on the
paper's split of ``--data-dir`` (default ``../shared/data/mnist-full``: all
50 000 training digits), with the seed and the lever's config overrides
(:data:`LEVERS`; ``base`` is the experiment's config). A run lives in
``ROOT/LEVER_sSEED``; a finished one (its ``summary.json``) is read as it
is and an interrupted one resumes, so a rerun continues where it stopped.
A longer lever (:data:`CONTINUES`) waits for its shorter lever's run of
the same seed, starts from a copy of it and resumes it to its own
``num_steps`` (a resumed run trains exactly as an uninterrupted one);
``--collect-only`` tabulates the finished runs without starting any. An
existing ``--out`` file keeps its levers: the finished runs are added to it
(replacing the same lever and seed), so levers can be measured a few at a
time.
``--jobs=2`` runs two at a time, each on one core with one XLA thread (on
this 2-core machine two 2 200-step runs train in 723 s, one on both cores
in 586 s).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
from seed_rates import seed_range  # noqa: E402

from docs.gen.rot_studies import levers_table  # noqa: E402

# lever -> config overrides; each changes one thing of the rot_mnist config
# (base_long, latent20_long: the budget)
LEVERS = {
  "base": (),
  "base_long": ("--config.num_steps=2800",),  # base with 600 Psi steps
  "channels32": ("--config.conv_channels=32",),  # half the networks' width
  "channels96": ("--config.conv_channels=96",),  # 1.5 times the width
  "latent20": ("--config.latent_dim=20",),  # paper: 10
  # latent20 with 800 alternating steps (600 Psi steps) instead of 200 (140)
  "latent20_long": ("--config.latent_dim=20", "--config.num_steps=2800"),
  # latent20 with 2 200 alternating steps (1 640 Psi steps)
  "latent20_xlong": ("--config.latent_dim=20", "--config.num_steps=4200"),
  # latent20 with the paper's 5 000 alternating steps (3 740 Psi steps)
  "latent20_alt5000": ("--config.latent_dim=20", "--config.num_steps=7000"),
  # latent20(_long) with anchors 72 degrees apart: the prior then asks Psi
  # for transports of up to 36 degrees instead of 18
  "latent20_anchors5": ("--config.latent_dim=20", "--config.rotation_anchors=5"),
  "latent20_anchors5_long": (
    "--config.latent_dim=20",
    "--config.rotation_anchors=5",
    "--config.num_steps=2800",
  ),
  # latent20_long with the prior's coefficients from fista's local search
  # (the original's kind of solver) instead of the exact global minimum,
  # which can take a transport the long way round an operator's orbit
  "latent20_fista_long": (
    "--config.latent_dim=20",
    "--config.inference_method=fista",
    "--config.num_steps=2800",
  ),
  # latent20_long with the prior's inference weight 1e-4 (paper 1e-6): the
  # exact solver then keeps the short transport unless the long one fits
  # far better
  "latent20_zetap_long": (
    "--config.latent_dim=20",
    "--config.zeta_p=1e-4",
    "--config.num_steps=2800",
  ),
  # latent20_long with the prior's coefficient weight zeta5 a tenth of the
  # paper's, the term that prefers the learned operator to the reference
  # (with the closest anchor a constant of each step: the runs are the same)
  "latent20_zeta5_long": (
    "--config.latent_dim=20",
    "--config.zeta5=1e-3",
    "--config.num_steps=2800",
  ),
  # latent20_long with the prior the mixture over all the sample's anchors,
  # transports of up to 180 degrees, instead of the closest anchor's
  "latent20_all_anchors_long": (
    "--config.latent_dim=20",
    "--config.closest_anchor=false",
    "--config.num_steps=2800",
  ),
  # latent20_long with the prior's weight in network steps 1e-2 (paper 1e-4)
  "latent20_prior_weight_long": (
    "--config.latent_dim=20",
    "--config.prior_weight_net=1e-2",
    "--config.num_steps=2800",
  ),
  "all_anchors": ("--config.closest_anchor=false",),  # paper: the closest
  "anchors5": ("--config.rotation_anchors=5",),  # 72 degrees apart; paper 10
  "prior_weight": ("--config.prior_weight_net=1e-2",),  # paper 1e-4
  "latent_scale3": ("--config.latent_scale=3",),  # paper: 10
  "anchors20": ("--config.rotation_anchors=20",),  # 18 degrees apart
  "net_rate_paper": ("--config.lr_net=1e-4",),  # the CPU budget's is 3e-4
  # the paper's Psi rate cap; the CPU budget's rate is 0.05
  "psi_cap": ("--config.lr_psi=0.008", "--config.max_lr_psi=0.008"),
}
CONTINUES = {
  "base_long": "base",
  "latent20_long": "latent20",
  "latent20_xlong": "latent20_long",
  "latent20_alt5000": "latent20_xlong",
  "latent20_anchors5_long": "latent20_anchors5",
}
KEYS = (
  "rotation_gated_span_degrees",
  "rotation_gated_span_quartiles",
  "reference_rotation_gated_span_degrees",
  "reference_cosine",
  "rotation_gate_level",
  "rotation_correlation_gate_only_span_degrees",
  "rotation_class_gate_only_span_degrees",
  "mse",
  "psi_rejected_steps",
  "psi_attempted_steps",
  "train_time_s",
  "wall_time_s",
)


def _workdir(root: pathlib.Path, lever: str, seed: int) -> pathlib.Path:
  return root / f"{lever}_s{seed}"


def cpu_budget_command(
  exp: str, seed: int, workdir: pathlib.Path, data_dir: str, flags=()
) -> list:
  """``experiments/run.py`` at the CPU budget for one seed, with ``flags``;
  ``--resume`` where ``workdir`` holds a run that stopped."""
  cmd = [
    sys.executable,
    str(ROOT / "experiments" / "run.py"),
    f"--exp={exp}",
    "--budget=cpu",
    f"--data-dir={data_dir}",
    f"--workdir={workdir}",
    f"--config.seed={seed}",
    *flags,
  ]
  return cmd + ["--resume"] * (workdir / "config.json").exists()


def _command(lever: str, seed: int, workdir: pathlib.Path, data_dir: str) -> list:
  return cpu_budget_command("rot_mnist", seed, workdir, data_dir, LEVERS[lever])


def run_arguments(parser, seeds: str, root: str) -> None:
  """The options every seed study here shares, with its defaults."""
  parser.add_argument("--seeds", default=seeds, type=seed_range)
  parser.add_argument("--data-dir", default=str(ROOT.parent / "shared/data/mnist-full"))
  parser.add_argument("--root", default=root, type=pathlib.Path)
  parser.add_argument("--jobs", default=1, type=int, choices=(1, 2))
  parser.add_argument("--out", type=pathlib.Path)
  parser.add_argument(
    "--collect-only", action="store_true", help="only read the finished runs"
  )


def one_thread_flags(env) -> str:
  """``env``'s ``XLA_FLAGS`` with one XLA thread (as ``--jobs=2`` runs)."""
  return (
    env.get("XLA_FLAGS", "")
    + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
  )


def _start(cmd: list, log: pathlib.Path, core: int | None) -> subprocess.Popen:
  env = dict(os.environ)
  if core is not None:
    cmd = ["taskset", "-c", str(core), *cmd]
    env["XLA_FLAGS"] = one_thread_flags(env)
  return subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env)


def run_all(
  runs: list, root: pathlib.Path, data_dir: str, jobs: int, command=_command
) -> None:
  """Runs ``(lever, seed)`` pairs without a summary, ``jobs`` at a time;
  ``command(lever, seed, workdir, data_dir)`` is each run's command line."""
  todo = [r for r in runs if not (_workdir(root, *r) / "summary.json").exists()]
  running = {}  # core -> (process, run)
  while todo or running:
    for core in range(jobs):
      if core in running:
        continue
      # a longer lever waits for its shorter lever's run of the same seed
      pending = set(todo) | {run for _, run in running.values()}
      ready = [
        (lev, seed) for lev, seed in todo if (CONTINUES.get(lev), seed) not in pending
      ]
      if ready:
        lever, seed = ready[0]
        todo.remove((lever, seed))
        workdir = _workdir(root, lever, seed)
        if lever in CONTINUES and not workdir.exists():
          shorter = _workdir(root, CONTINUES[lever], seed)
          if (shorter / "summary.json").exists():
            ignore = shutil.ignore_patterns("summary.*", "*.png", ".lock")
            shutil.copytree(shorter, workdir, ignore=ignore)
        cmd = command(lever, seed, workdir, data_dir)
        print(" ".join(cmd[1:]), flush=True)
        log = workdir.with_suffix(".log")
        running[core] = (_start(cmd, log, core if jobs > 1 else None), (lever, seed))
    time.sleep(5)
    for core, (proc, (lever, seed)) in list(running.items()):
      if proc.poll() is not None:
        del running[core]
        print(f"{lever} seed {seed}: exit {proc.returncode}", flush=True)
        if proc.returncode:
          raise SystemExit(f"see {_workdir(root, lever, seed).with_suffix('.log')}")


def collect(runs: list, root: pathlib.Path) -> dict:
  """``{lever: {"flags", "seeds": {seed: summary's KEYS}}}`` of finished runs."""
  out = {}
  for lever, seed in runs:
    path = _workdir(root, lever, seed) / "summary.json"
    if path.exists():
      summary = json.loads(path.read_text())
      entry = out.setdefault(lever, {"flags": list(LEVERS[lever]), "seeds": {}})
      entry["seeds"][str(seed)] = {k: summary.get(k) for k in KEYS}
  return out


def merge(before: dict, found: dict) -> dict:
  """``before``'s levers with ``found``'s finished seeds added or replacing."""
  out = {k: dict(entry, seeds=dict(entry["seeds"])) for k, entry in before.items()}
  for lever, entry in found.items():
    out.setdefault(lever, {"flags": entry["flags"], "seeds": {}})
    if out[lever]["flags"] != entry["flags"]:
      raise SystemExit(f"{lever}: flags {entry['flags']} differ from the file's")
    out[lever]["seeds"].update(entry["seeds"])
  return out


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument(
    "--levers",
    default="base,channels96,latent20,base_long,latent20_long,all_anchors,anchors5,"
    "prior_weight,latent_scale3,anchors20,net_rate_paper,psi_cap",
  )
  run_arguments(parser, "0-2", "runs/rot_levers")
  args = parser.parse_args(argv)
  levers = args.levers.split(",")
  unknown = sorted(set(levers) - set(LEVERS))
  if unknown:
    parser.error(f"unknown levers {unknown}; choose from {sorted(LEVERS)}")
  runs = [(lever, seed) for lever in levers for seed in args.seeds]
  args.root.mkdir(parents=True, exist_ok=True)
  if not args.collect_only:
    run_all(runs, args.root, args.data_dir, args.jobs)
  found = collect(runs, args.root)
  if args.out and args.out.exists():  # keep the levers measured before
    found = merge(json.loads(args.out.read_text())["levers"], found)
  given = sys.argv[1:] if argv is None else argv
  flags = [a for a in given if a != "--collect-only" and not a.startswith("--levers")]
  flags = " ".join([f"--levers={','.join(found)}", *flags])
  result = {
    "command": f"python benchmarks/rot_levers.py {flags}",
    "machine": f"{os.cpu_count()}-core CPU, {platform.machine()}",
    "levers": found,
  }
  print(levers_table(result["levers"]))
  if args.out:
    args.out.write_text(json.dumps(result, indent=1) + "\n")
  return result


if __name__ == "__main__":
  main()
