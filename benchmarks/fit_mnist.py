"""``fit`` on real digits: the 60 000 MNIST training images with their labels.

``python benchmarks/fit_mnist.py --data-dir=../shared/data/mnist-full
--out=fit_mnist.json``

Reads ``train-images-idx3-ubyte.gz`` and ``train-labels-idx1-ubyte.gz``
(``--limit``: the first N only), calls ``fit(images, labels)`` with its
defaults on the ``uint8`` images ``[N, 28, 28]``, evaluation included, and
writes the wall time and where it went (the log's lines, time-stamped, and
the run's compile, training and evaluation seconds), the process's peak
resident memory (``ru_maxrss``) and the verdict. MNIST has no known
transformation manifold: this measures what ``fit`` costs on a real data
set, not whether it learns.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import re
import resource
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--data-dir", default=str(ROOT.parent / "shared/data/mnist-full"))
  parser.add_argument("--files", default="train", help="train or t10k (tests)")
  parser.add_argument("--limit", type=int, default=None, help="first N digits only")
  parser.add_argument(
    "--steps", type=int, default=None, help="num_steps and warm-start steps (tests)"
  )
  parser.add_argument("--out", default="fit_mnist.json")
  args = parser.parse_args(argv)
  import dataclasses

  import vaells_jax
  from vaells_jax.data.mnist import read_idx
  from vaells_jax.runs.fit import image_config
  from vaells_jax.training import warm_start

  folder = pathlib.Path(args.data_dir)
  images = read_idx(folder / f"{args.files}-images-idx3-ubyte.gz")[: args.limit]
  labels = read_idx(folder / f"{args.files}-labels-idx1-ubyte.gz")[: args.limit]
  labels = labels.astype(int)
  config = None
  if args.steps:
    config = dataclasses.replace(image_config(images.shape[1:]), num_steps=args.steps)
    warm_start.STEPS = args.steps
  start = time.perf_counter()
  lines = []
  with tempfile.TemporaryDirectory() as workdir:
    model = vaells_jax.fit(
      images,
      labels,
      config=config,
      workdir=workdir,
      log=lambda line: lines.append(f"{time.perf_counter() - start:7.1f} s  {line}"),
    )
    wall = time.perf_counter() - start
    summary = json.loads(pathlib.Path(workdir, "summary.json").read_text())
  result = {
    "images": list(images.shape),
    "wall_time_s": wall,
    "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    "phases_s": {
      "warm_start_s": _warm_start_seconds(lines),
      **{k: summary.get(k) for k in ("compile_time_s", "train_time_s", "eval_time_s")},
    },
    "verdict": model.verdict["verdict"],
    "reasons": model.verdict["reasons"],
    "log": [line for line in lines if "step" not in line or "compiled" in line],
    "machine": platform.node(),
  }
  pathlib.Path(args.out).write_text(json.dumps(result, indent=2))
  print(
    f"{images.shape[0]} digits: {wall:.0f} s, peak memory "
    f"{result['peak_rss_gb']:.2f} GB, verdict {result['verdict']}"
  )
  return result


def _warm_start_seconds(lines) -> float | None:
  """The warm start's seconds, from fit's log line "warm start: ... (N s)"."""
  for line in lines:
    found = re.search(r"warm start: .*\((\d+) s\)", line)
    if found:
      return float(found.group(1))
  return None


if __name__ == "__main__":
  main()
