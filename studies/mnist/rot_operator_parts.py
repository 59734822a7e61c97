"""Why a learned rotation operator turns digits less far than the reference.

``python benchmarks/rot_operator_parts.py
runs/rot_levers/latent20_alt5000_s{0,1,2}
--out=docs/results/rot_operator_parts.json``

For each finished rotated-MNIST run, with ``L`` its strongest operator and
``R`` the reference (fitted to the encoder's orbits, as the run's evaluation
fits it: ``image_report.reference_operator``):

* **Spans of operators between and beside them**: the gated span (median
  and quartiles over the run's own 200 test digits, its correlation gate and
  digit classifier: ``image_report.gated_operator_spans``) and ``|cos|``
  with ``R`` of ``L``; ``R``; ``R`` fitted with lag 1 alone (orbit steps of
  10 degrees) and with lags 1 and 2 (up to 20 degrees; the closest of ten
  rotation anchors asks ``Psi`` for transports of at most 18 degrees);
  ``L`` with the real parts of its eigenvalues removed (its turning part:
  no growth or decay along a path); and ``(1 - s) L + s b R`` for ``s`` in
  :data:`MIXES` (``b = <L, R> / <R, R>``: ``R`` at ``L``'s scale).
* **The VAELLS objective along the way**: the transport part of the
  objective (``log q - log p + Frobenius``, what a ``Psi`` step lowers and
  its accept/reject rule compares) with ``psi`` set to each of those
  mixtures and to ``L`` and ``b R`` at other scales (times :data:`SCALES`), the
  run's networks fixed: the mean over the training batches of
  the run's last ``--batches`` ``Psi`` steps (the batches it trained on
  there), each with the same samples, noise and inference key for every
  operator, so that the differences from ``L`` are
  paired (their standard error is reported), and each part's difference.

A run already in ``--out`` is skipped, so a rerun continues.
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
import argparse
import json

import numpy as np

from docs.gen.rot_studies import parts_objective_table, parts_table  # noqa: E402

MIXES = (0.25, 0.5, 0.75)  # the operators (1 - s) L + s b R that are measured
SCALES = (0.5, 0.75, 1.25, 1.5)  # L and b R times these (objective only)
FIT_LAGS = {"reference_lag1": (1,), "reference_lags12": (1, 2)}


def turning_part(op) -> np.ndarray:
  """``op`` with the real parts of its eigenvalues set to 0 (same eigenvectors)."""
  lam, vecs = np.linalg.eig(np.asarray(op, np.float64))
  return np.real(vecs @ np.diag(1j * lam.imag) @ np.linalg.inv(vecs))


def operators(trained, encode, learned, reference) -> dict:
  """The operators whose spans are measured (module docstring), by name."""
  from vaells_jax.evaluation.image_report import reference_operator

  ops = {"learned": learned, "reference": reference}
  for name, lags in FIT_LAGS.items():
    ops[name] = reference_operator(trained, encode, lags)
  ops["learned_turning_part"] = turning_part(learned)
  ops.update(mixtures(learned, reference, MIXES))
  return ops


def at_learned_scale(learned, reference) -> np.ndarray:
  """``b R``, ``b = <L, R> / <R, R>``: ``L``'s projection onto ``R``'s line."""
  return np.sum(learned * reference) / np.sum(reference * reference) * reference


def mixtures(learned, reference, fractions) -> dict:
  """``{"mix_s": (1 - s) L + s b R}`` (:func:`at_learned_scale`)."""
  scaled = at_learned_scale(learned, reference)
  return {f"mix_{s:g}": (1 - s) * learned + s * scaled for s in fractions}


def last_psi_batches(trained, batches: int):
  """``(step, batch, key)`` of the run's last ``batches`` ``Psi`` steps: the
  batch it trained on there and one step key per batch (common to every
  operator measured)."""
  import jax

  from vaells_jax.training.guards import batch_indices
  from vaells_jax.training.step import phase_of

  cfg, data = trained.config, trained.data
  psi_steps = []
  for at in range(cfg.num_steps - 1, -1, -1):
    if len(psi_steps) == batches:
      break
    if bool(phase_of(at, cfg).update_psi):
      psi_steps.append(at)
  x = np.asarray(data.x_train, np.float32)
  labels = np.asarray(data.labels_train, np.int32)
  for j, at in enumerate(psi_steps):
    idx = batch_indices(cfg.seed, at, x.shape[0], cfg.batch_size)
    key = jax.random.fold_in(jax.random.PRNGKey(cfg.seed + 3), j)
    yield at, {"x": x[idx], "label": labels[idx]}, key


def objective_values(trained, ops: dict, batches: int) -> dict:
  """The transport part of the objective at each ``psi`` in ``ops``.

  Returns:
    ``{name: {"value", "diff", "diff_se", "parts"}}``: the mean over the
    batches, its mean paired difference from ``ops``'s first operator with
    the standard error, and the differences of ``log q``, ``-log p`` and the
    Frobenius penalty.
  """
  import jax
  import jax.numpy as jnp

  from vaells_jax.models.vaells import Model
  from vaells_jax.training.optim import make_optimizer
  from vaells_jax.training.step import TrainState, train_step_fn

  cfg, params = trained.config, trained.params
  step = jax.jit(train_step_fn(Model.create(cfg, trained.data.data_dim), warmup=False))
  state = TrainState(
    step=jnp.zeros((), jnp.int32),
    params=params,
    opt_state=make_optimizer(cfg).init(params),
  )
  parts = {name: [] for name in ops}
  for at, batch, key in last_psi_batches(trained, batches):
    for name, op in ops.items():
      psi = jnp.asarray(np.asarray(op)[None], jnp.float32)
      _, m = step(
        state.replace(step=jnp.asarray(at, jnp.int32), params={**params, "psi": psi}),
        batch,
        key,
      )
      parts[name].append([float(m["log_q"]), -float(m["log_p"]), float(m["frobenius"])])
  first = np.asarray(parts[next(iter(ops))])
  out = {}
  for name, rows in parts.items():
    rows = np.asarray(rows)
    diff = (rows - first).sum(axis=1)
    out[name] = {
      "value": float(rows.sum(axis=1).mean()),
      "diff": float(diff.mean()),
      "diff_se": float(diff.std() / np.sqrt(len(diff))),
      "parts": (rows - first).mean(axis=0).tolist(),
    }
  return out


def analyse(folder: pathlib.Path, batches: int) -> dict:
  """One run's spans and objective values (module docstring)."""
  import jax

  import vaells_jax
  from vaells_jax.evaluation import image_report as ir
  from vaells_jax.evaluation.rotation import operator_cosine

  trained = vaells_jax.load(folder)
  cfg, model, params = trained.config, trained._model, trained.params
  encode = jax.jit(lambda x: model.encode(params, x))
  decode = jax.jit(lambda w: model.decode(params, w))
  psi = np.asarray(trained.psi, np.float64)
  learned = psi[int(np.argmax(np.linalg.norm(psi, axis=(1, 2))))]
  reference = ir.reference_operator(trained, encode)
  ops = operators(trained, encode, learned, reference)
  key = jax.random.split(jax.random.PRNGKey(cfg.seed + 2), 4)[3]  # the run's own
  found = ir.gated_operator_spans(trained, encode, decode, list(ops.values()), key)
  spans = {}
  for name, (_, s) in zip(ops, found["paths"], strict=True):
    spans[name] = {
      "gated": float(np.median(s["gated"])),
      "quartiles": np.percentile(s["gated"], [25, 75]).tolist(),
      "correlation_only": float(np.median(s["correlation_only"])),
      "class_only": float(np.median(s["class_only"])),
      "cos": operator_cosine(ops[name], reference),
    }
  scaled = at_learned_scale(learned, reference)
  along = {"learned": learned, **mixtures(learned, reference, MIXES)}
  along["reference"] = scaled
  for c in SCALES:
    along[f"learned_x{c:g}"] = c * learned
    along[f"reference_x{c:g}"] = c * scaled
  return {
    "spans": spans,
    "objective": objective_values(trained, along, batches),
    "batches": batches,
  }


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("folders", nargs="+", type=pathlib.Path)
  parser.add_argument("--batches", default=64, type=int)
  parser.add_argument("--out", type=pathlib.Path)
  args = parser.parse_args(argv)
  from vaells_jax.data.files import atomic_write_text

  done = (
    json.loads(args.out.read_text())["runs"] if args.out and args.out.exists() else {}
  )
  for folder in args.folders:
    if str(folder) not in done:
      done[str(folder)] = analyse(folder, args.batches)
      if args.out:
        atomic_write_text(args.out, json.dumps({"runs": done}, indent=1) + "\n")
    print(f"{folder}: done", flush=True)
  runs = {f: done[str(f)] for f in args.folders}
  print(parts_table(runs))
  print(parts_objective_table(runs))
  return runs


if __name__ == "__main__":
  main()
