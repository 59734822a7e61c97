"""VAELLS against the baselines on the same data: ``run_comparison``.

Each model of :data:`MODEL_NAMES` is trained with the experiment's configuration
(``config.model`` changed, everything else the same) on seeds ``0..N-1``;
seed ``s`` generates the data set (for the synthetic experiments) and
initialises every model, so the models of one seed see the same data. Runs
live in ``workdir/MODEL/seedS`` (each a complete run folder that
:func:`vaells_jax.load` reads). A run whose ``summary.json`` exists with the
same configuration is reused, and one that stopped is resumed from its
checkpoint, so rerunning the command after an interruption finishes the
comparison. ``comparison.json`` and ``comparison.md`` hold the mean and
standard deviation over seeds of each metric; two figures show seed 0's test
encodings side by side and each model's decoded prior samples (over the true
manifold, as images for 784-dimensional data, or else over the test data in
their first two principal components).
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib

import jax
import numpy as np

from vaells_jax.api import load
from vaells_jax.config import CONFIG_NAME, MODEL_NAMES, Config, config_from_json
from vaells_jax.data.files import atomic_write_text
from vaells_jax.evaluation import image_plots, plotting
from vaells_jax.evaluation import metrics as evaluation
from vaells_jax.runs.runner import train_and_evaluate
from vaells_jax.training.checkpoint import checkpoint_steps

__all__ = ["METRICS", "MODEL_NAMES", "run_comparison", "summarise"]

# (summary key, column title, better: +1 higher, -1 lower, 0 neither)
METRICS = (
  ("sample_manifold_distance", "sample dist.", -1),
  ("path_manifold_distance", "path dist.", -1),
  ("linear_path_manifold_distance", "line dist.", -1),
  ("path_endpoint_error", "path endpoint err.", -1),
  ("knn_class_accuracy", "knn acc.", 1),
  ("log_likelihood", "log-lik.", 1),
  ("elbo", "ELBO", 1),
  ("mse", "MSE", -1),
  ("class_consistency", "class consistency", 1),
  ("wall_time_s", "wall time (s)", -1),
)
NUM_PRIOR_SAMPLES = 600
NUM_IMAGES = 12


def _run_one(config: Config, data, run_dir: pathlib.Path, log, overwrite):
  """The summary of one run: reused, resumed or trained from scratch."""
  summary_path = run_dir / "summary.json"
  saved = run_dir / CONFIG_NAME
  if not overwrite and saved.exists() and config_from_json(saved) != config:
    raise ValueError(
      f"{run_dir} holds a run of another configuration; use "
      "--overwrite to replace it, or another --workdir."
    )
  if summary_path.exists() and not overwrite:
    log(f"{run_dir}: done before, reusing its summary.json")
    return json.loads(summary_path.read_text())
  resume = bool(checkpoint_steps(run_dir)) and not overwrite
  _, summary = train_and_evaluate(
    config,
    data,
    run_dir,
    log=lambda line: log(f"[{run_dir.parent.name}/{run_dir.name}] {line}"),
    resume=resume,
    overwrite=overwrite,
  )
  return summary


def summarise(summaries: dict[str, list[dict]]) -> dict:
  """Mean, std (ddof 0) and per-seed values of each metric of each model.

  Args:
    summaries: ``{model: [summary dict of seed 0, seed 1, ...]}``.

  Returns:
    ``{model: {metric: {"mean", "std", "values"}}}`` for the metrics of
    :data:`METRICS` that every seed of that model reports.
  """
  table = {}
  for model, runs in summaries.items():
    table[model] = {}
    for key, _, _ in METRICS:
      if all(key in run for run in runs):
        values = [float(run[key]) for run in runs]
        table[model][key] = {
          "mean": float(np.mean(values)),
          "std": float(np.std(values)),
          "values": values,
        }
  return table


def _markdown_table(table: dict, seeds: int) -> str:
  keys = [
    (k, title, better)
    for k, title, better in METRICS
    if any(k in row for row in table.values())
  ]
  arrows = {1: " (higher better)", -1: " (lower better)", 0: ""}
  lines = [
    "| model | "
    + " | ".join(f"{t}{arrows[b] if k != 'wall_time_s' else ''}" for k, t, b in keys)
    + " |",
    "|---" * (len(keys) + 1) + "|",
  ]
  for model, row in table.items():
    cells = []
    for key, _, _ in keys:
      if key not in row:
        cells.append("–")
        continue
      mean, std = row[key]["mean"], row[key]["std"]
      cells.append(f"{_fmt(mean)} ± {_fmt(std)}")
    lines.append(f"| {model} | " + " | ".join(cells) + " |")
  lines.append("")
  lines.append(f"Mean ± standard deviation over {seeds} seed(s).")
  return "\n".join(lines)


def _fmt(x: float) -> str:
  if x == 0 or not math.isfinite(x):
    return f"{x:g}"
  return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


def _latent_2d(trained, x):
  latents = np.asarray(trained.encode(x))
  return latents if latents.shape[-1] == 2 else evaluation.pca_2d(latents)[0]


def _figures(workdir, models, data, seed_dir):
  """Seed 0's encodings side by side, and each model's decoded prior samples."""
  trained = {m: load(seed_dir(m)) for m in models}
  colour = data.labels_test
  label = "class"
  if data.has_ground_truth and data.num_classes == 1:
    colour, label = data.t_test, "curve parameter"
  panels = [(m, _latent_2d(t, data.x_test), colour) for m, t in trained.items()]
  if data.has_ground_truth:
    panels.insert(0, ("ground truth", data.pos_test, colour))
  plotting.plot_panels(workdir / "latent_embeddings.png", panels, label)

  key = jax.random.PRNGKey(0)
  samples = {
    m: np.asarray(t.decode(t.sample_prior(key, NUM_PRIOR_SAMPLES)))
    for m, t in trained.items()
  }
  if data.has_ground_truth:  # back to ground-truth coordinates: x = A p
    unmap = np.linalg.pinv(data.mapping).T
    curve = data.manifold @ unmap
    panels = [(m, s @ unmap) for m, s in samples.items()]
    plotting.plot_samples_on_manifold(workdir / "prior_samples.png", curve, panels)
  elif data.data_dim == 28 * 28:  # digits
    image_plots.plot_image_rows(
      workdir / "prior_samples.png", [(m, s[:NUM_IMAGES]) for m, s in samples.items()]
    )
  else:  # over the test data, in their first two principal components
    test, *projected = evaluation.pca_2d(data.x_test, *samples.values())
    plotting.plot_samples_on_manifold(
      workdir / "prior_samples.png", test, list(zip(samples, projected, strict=True))
    )


def _check_comparison(models, seeds) -> None:
  """Known models, at least one, and at least one seed."""
  unknown = [m for m in models if m not in MODEL_NAMES]
  if unknown or not models:
    raise ValueError(
      f"models must be a non-empty subset of {MODEL_NAMES}, got {models!r}."
    )
  if seeds < 1:
    raise ValueError(f"seeds must be >= 1, got {seeds}.")


def run_comparison(
  config: Config,
  make_data,
  workdir,
  seeds: int = 3,
  models=MODEL_NAMES,
  log=print,
  overwrite: bool = False,
) -> dict:
  """Trains and evaluates every model on seeds ``0..seeds-1``; writes the table.

  Args:
    config: the experiment's configuration (``seed`` and ``model`` are set
      per run).
    make_data: ``config -> data set`` (called once per seed).
    workdir: output folder.
    seeds: the number of seeds.
    models: the models to compare.
    log: where progress lines go.
    overwrite: retrain runs that exist (otherwise they are reused/resumed).

  Returns:
    ``{"seeds", "models": summarise(...), "markdown_table"}`` (also written
    to ``comparison.json`` and ``comparison.md``).

  Raises:
    ValueError: for an unknown model, ``seeds < 1``, bad data, or a run
      folder of another configuration (without ``overwrite``).
  """
  _check_comparison(models, seeds)
  workdir = pathlib.Path(workdir)
  seed_dir = lambda model, seed=0: workdir / model / f"seed{seed}"  # noqa: E731
  configs = {
    (m, s): dataclasses.replace(
      config, model=m, seed=s, population=config.population if m == "vaells" else 1
    )
    for s in range(seeds)
    for m in models
  }  # validated before training
  summaries = {m: [] for m in models}
  first_data = None
  for seed in range(seeds):
    data = make_data(configs[models[0], seed])
    first_data = data if seed == 0 else first_data
    for model in models:
      log(f"== {model}, seed {seed}")
      summaries[model].append(
        _run_one(configs[model, seed], data, seed_dir(model, seed), log, overwrite)
      )
  table = summarise(summaries)
  markdown = _markdown_table(table, seeds)
  _figures(workdir, models, first_data, seed_dir)
  _write_comparison(workdir, config, models, seeds, table, markdown)
  return {"seeds": seeds, "models": table, "markdown_table": markdown}


def _write_comparison(workdir, config, models, seeds, table, markdown) -> None:
  """``comparison.json`` (the table) and ``comparison.md`` (it and the
  figures)."""
  atomic_write_text(
    workdir / "comparison.json",
    json.dumps(
      {"seeds": seeds, "num_steps": config.num_steps, "models": table}, indent=2
    ),
  )
  atomic_write_text(
    workdir / "comparison.md",
    "\n".join(
      [
        f"# Comparison: {', '.join(models)} ({seeds} seed(s), "
        f"{config.num_steps} steps each)",
        "",
        markdown,
        "",
        "Runs: `MODEL/seedS/` (each with its summary.md and figures).",
        "",
        "## Test encodings (seed 0)",
        "",
        "![embeddings](latent_embeddings.png)",
        "",
        "## Decoded prior samples (seed 0)",
        "",
        "![prior samples](prior_samples.png)",
        "",
      ]
    ),
  )
