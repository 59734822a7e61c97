"""Time of a synthetic run's evaluation and figures on a cold compilation cache.

Trains a short concentric run once (or takes ``--workdir``, a finished run),
then times ``synthetic_report.evaluate_and_report`` on it in fresh
subprocesses with JAX's persistent compilation cache turned off, as on a
fresh machine. Each measurement reports the wall time of the evaluation, the
XLA compile time (the sum of ``/jax/core/compile/backend_compile_duration``
events from ``jax.monitoring``), the number of compiled programs, and the
largest metric difference from the first measurement.

``--against=REV`` also measures git revision ``REV`` (extracted with ``git
archive`` into a temporary folder) on the same trained run, alternating the
two trees, so that a shared machine's load falls on both alike.

Usage::

    python benchmarks/eval_time.py                       # current tree
    python benchmarks/eval_time.py --against=main --repeats=3
    python benchmarks/eval_time.py --workdir=runs/concentric --top=10
    python benchmarks/eval_time.py --repeats=3 --out=docs/results/eval_time.json
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


def train(workdir: pathlib.Path, steps: int) -> None:
  """A short single-draw concentric run in ``workdir``."""
  command = [
    sys.executable,
    str(ROOT / "experiments" / "run.py"),
    "--exp=concentric",
    f"--workdir={workdir}",
    f"--config.num_steps={steps}",
    "--config.population=1",
    "--overwrite",
  ]
  print(f"training: {' '.join(command[1:])}", flush=True)
  subprocess.run(command, check=True, capture_output=True)


def child(workdir: str, out: str) -> None:
  """Runs in a fresh process: evaluates ``workdir``'s model, prints JSON."""
  import time

  import jax

  jax.config.update("jax_enable_compilation_cache", False)
  compiles = []
  jax.monitoring.register_event_duration_secs_listener(
    lambda event, secs, **kw: (
      compiles.append((kw.get("fun_name", "?"), secs))
      if event == COMPILE_EVENT
      else None
    )
  )
  import vaells_jax
  from vaells_jax.evaluation import synthetic_report

  trained = vaells_jax.load(workdir)
  summary = json.loads((pathlib.Path(workdir) / "summary.json").read_text())
  compiles.clear()  # loading compiles nothing the evaluation needs; count apart
  start = time.perf_counter()
  metrics = synthetic_report.evaluate_and_report(trained, out, summary)
  wall = time.perf_counter() - start
  print(
    json.dumps(
      {
        "wall_s": wall,
        "compile_s": sum(s for _, s in compiles),
        "compiles": len(compiles),
        "programs": compiles,
        "metrics": metrics,
      }
    )
  )


def measure(tree: pathlib.Path, workdir: pathlib.Path) -> dict:
  """One cold evaluation of ``workdir`` with ``tree``'s code, in a new process."""
  env = {**os.environ, "PYTHONPATH": str(tree)}
  env.pop("JAX_COMPILATION_CACHE_DIR", None)
  with tempfile.TemporaryDirectory() as out:
    done = subprocess.run(
      [sys.executable, __file__, "--child", str(workdir), out],
      env=env,
      capture_output=True,
      text=True,
      check=False,
    )
  if done.returncode:
    raise RuntimeError(f"evaluation failed:\n{done.stderr[-3000:]}")
  return json.loads(done.stdout.strip().splitlines()[-1])


def _flat(metrics: dict) -> dict:
  out = {}
  for k, v in metrics.items():
    for i, x in enumerate(v if isinstance(v, list) else [v]):
      if isinstance(x, (int, float)) and not isinstance(x, bool):
        out[f"{k}[{i}]" if isinstance(v, list) else k] = float(x)
  return out


def max_difference(a: dict, b: dict) -> tuple[float, float, str]:
  """Largest absolute and relative metric difference and the metric's name."""
  a, b = _flat(a), _flat(b)
  worst = (0.0, 0.0, "")
  for k in sorted(a.keys() & b.keys()):
    diff = abs(a[k] - b[k])
    rel = diff / max(abs(a[k]), 1e-30)
    if rel > worst[1]:
      worst = (diff, rel, k)
  return worst


def archive_revision(rev: str, folder: pathlib.Path) -> pathlib.Path:
  """Extracts revision ``rev`` of this repository into ``folder``."""
  archive = subprocess.run(
    ["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True
  ).stdout
  subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
  return folder


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--workdir", help="a finished concentric run to evaluate")
  parser.add_argument("--steps", type=int, default=300, help="training steps")
  parser.add_argument("--against", help="git revision to compare with")
  parser.add_argument("--repeats", type=int, default=2)
  parser.add_argument("--top", type=int, default=0, help="longest compiles shown")
  parser.add_argument("--out", help="write the measurements as JSON")
  args = parser.parse_args(argv)
  rows = []
  with tempfile.TemporaryDirectory() as tmp:
    workdir = pathlib.Path(args.workdir or pathlib.Path(tmp) / "run")
    if args.workdir is None:
      train(workdir, args.steps)
    trees = {"current": ROOT}
    if args.against:
      folder = pathlib.Path(tmp) / "against"
      folder.mkdir()
      trees = {args.against: archive_revision(args.against, folder), **trees}
    print(f"load average {os.getloadavg()[0]:.2f} at start", flush=True)
    first = None
    for r in range(args.repeats):
      for name, tree in trees.items():
        result = measure(tree, workdir)
        first = first or result
        diff, rel, metric = max_difference(first["metrics"], result["metrics"])
        print(
          f"{name:>10} #{r}: evaluation {result['wall_s']:6.2f} s, compile "
          f"{result['compile_s']:6.2f} s in {result['compiles']:3d} programs; "
          f"max metric difference {diff:.3g} ({rel:.2g} relative, {metric or '-'}); "
          f"load {os.getloadavg()[0]:.2f}",
          flush=True,
        )
        programs = sorted(result["programs"], key=lambda p: -p[1])
        for fun, secs in programs[: args.top]:
          print(f"{'':>14}{secs:6.2f} s  {fun}")
        rows.append(
          {
            "code": name,
            "steps": None if args.workdir else args.steps,
            "wall_s": result["wall_s"],
            "compile_s": result["compile_s"],
            "programs": result["compiles"],
            "longest_compiles": programs[:5],
            "max_metric_difference": diff,
          }
        )
  if args.out:
    pathlib.Path(args.out).write_text(json.dumps({"runs": rows}, indent=1) + "\n")


if __name__ == "__main__":
  if len(sys.argv) == 4 and sys.argv[1] == "--child":
    child(sys.argv[2], sys.argv[3])
  else:
    main()
