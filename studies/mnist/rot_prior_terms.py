"""Which term of the ``Psi`` objective prefers the learned rotation operator.

``python benchmarks/rot_prior_terms.py
runs/rot_levers/latent20_alt5000_s{0,1,2}
--out=docs/results/rot_prior_terms.json``

``benchmarks/rot_operator_parts.py`` finds the transport part of the
objective lower at a run's learned operator ``L`` than at the reference ``R``
scaled to ``L`` (``b R``), the whole difference in ``-log p``. Here that
part is split, for ``psi`` in ``L``, ``(L + b R) / 2`` and ``b R``, into

* ``q_fit``: ``zeta2/2 ||z - T(c_q) mu||^2``, ``q_l1``: ``zeta3 ||c_q||_1``
  (``log q = -q_fit - q_l1``);
* ``p_fit``: ``zeta4/2 ||z - T(c_p) a||^2``, ``p_l1``: ``zeta5 ||c_p||_1``
  with ``a`` the closest anchor (``-log p = p_fit + p_l1``; prior factor
  applied);

and the distances behind them: ``travel`` ``||z - mu||`` (how far a sample
moves from its encoding), ``to_anchor`` ``||z - a||``, ``c_p`` ``||c_p||_1``.

Each ``psi`` is measured with the samples ``z = T(c) mu + gamma eps`` drawn
along each of the three operators (same ``c`` and ``eps``), coefficients
inferred at ``psi``: the diagonal (samples along ``psi`` itself) is the
objective ``rot_operator_parts`` measures; a row holds the samples fixed, so
the grid tells apart an operator that reaches given samples from the anchors
more cheaply from one whose own samples are cheaper to reach. Batches, noise
and inference keys are those of the run's last ``--batches`` ``Psi`` steps,
common to every cell; differences from the cell (samples ``L``, ``psi = L``)
are paired (standard errors reported). A run already in ``--out`` is skipped.
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
import argparse
import dataclasses
import json

import numpy as np

from docs.gen.rot_studies import (  # noqa: E402
  ANGLES,
  DISTANCES,
  TERMS,
  terms_reach_table,
  terms_table,
)


def operators(trained) -> dict:
  """``{"learned": L, "mix_0.5": (L + b R) / 2, "reference": b R}``."""
  import jax
  from rot_operator_parts import at_learned_scale, mixtures

  from vaells_jax.evaluation.image_report import reference_operator

  params, model = trained.params, trained._model
  psi = np.asarray(trained.psi, np.float64)
  learned = psi[int(np.argmax(np.linalg.norm(psi, axis=(1, 2))))]
  reference = reference_operator(trained, jax.jit(lambda x: model.encode(params, x)))
  return {
    "learned": learned,
    **mixtures(learned, reference, (0.5,)),
    "reference": at_learned_scale(learned, reference),
  }


def terms_fn(model):
  """``f(params, psi_samples, psi, batch, key, step) -> {term: batch mean}``:
  the step's samples drawn along ``psi_samples``, its inference and terms at
  ``psi`` (keys as in ``train_step_fn``)."""
  import jax
  import jax.numpy as jnp

  from vaells_jax.core.transport import transport
  from vaells_jax.models.vaells import (
    draw_noise,
    infer_step_coefficients,
    sample_posterior_latents,
  )
  from vaells_jax.training.step import phase_of

  cfg = model.config
  if not cfg.closest_anchor:
    raise ValueError("rot_prior_terms splits the closest-anchor prior only.")

  def terms(params, psi_samples, psi, batch, key, step):
    phase = phase_of(step, cfg, False)
    k_noise, k_inf = jax.random.split(key)
    x = model.present(batch["x"], jax.random.fold_in(key, 7))
    noise = draw_noise(k_noise, cfg, phase, x.shape[0])
    mu = model.encode(params, x)
    z = sample_posterior_latents(psi_samples, mu, noise)
    anchors = model.encode_anchors(params, batch)
    inferred = infer_step_coefficients(model, psi, mu, anchors, z, k_inf)
    c_q = inferred.posterior.coeffs
    q_res = z - transport(psi, c_q, mu[:, None, :])
    best = jnp.argmin(inferred.prior.objective, axis=-1)[..., None]  # closest

    def at_best(a):
      return jnp.take_along_axis(a, best[..., None], axis=-2)[..., 0, :]

    c_p = at_best(inferred.prior.coeffs)
    a = at_best(jnp.broadcast_to(anchors[:, None], z.shape[:2] + anchors.shape[1:]))
    p_res = z - transport(psi, c_p, a)
    pf = phase.prior_factor
    per_sample = {
      "q_fit": 0.5 * cfg.zeta2 * jnp.sum(q_res**2, -1),
      "q_l1": cfg.zeta3 * jnp.sum(jnp.abs(c_q), -1),
      "p_fit": 0.5 * cfg.zeta4 * pf * jnp.sum(p_res**2, -1),
      "p_l1": cfg.zeta5 * pf * jnp.sum(jnp.abs(c_p), -1),
      "travel": jnp.linalg.norm(z - mu[:, None, :], axis=-1),
      "to_anchor": jnp.linalg.norm(z - a, axis=-1),
      "c_p": jnp.sum(jnp.abs(c_p), -1),
    }
    return {k: jnp.mean(v) for k, v in per_sample.items()}

  return terms


def grid(trained, ops: dict, batches: int) -> dict:
  """``{samples: {psi: {"value", "diff", "diff_se", term...}}}`` over the
  batches of the run's last ``batches`` ``Psi`` steps (module docstring)."""
  import jax
  import jax.numpy as jnp
  from rot_operator_parts import last_psi_batches

  from vaells_jax.models.vaells import Model

  cfg = trained.config
  f = jax.jit(terms_fn(Model.create(cfg, trained.data.data_dim)))
  as_psi = {n: jnp.asarray(np.asarray(op)[None], jnp.float32) for n, op in ops.items()}
  rows = {s: {n: [] for n in ops} for s in ops}
  for at, batch, key in last_psi_batches(trained, batches):
    for s in ops:
      for n in ops:
        m = f(trained.params, as_psi[s], as_psi[n], batch, key, at)
        rows[s][n].append([float(m[k]) for k in TERMS + DISTANCES])
  first = next(iter(ops))
  sign = np.asarray([-1.0, -1.0, 1.0, 1.0])  # log q - log p, from TERMS

  def value(r, n):  # the transport part of the objective, per batch
    frobenius = 0.5 * trained.config.eta * np.sum(np.asarray(ops[n]) ** 2)
    return r[:, : len(TERMS)] @ sign + frobenius

  base = value(np.asarray(rows[first][first]), first)
  out = {}
  for s in ops:
    out[s] = {}
    for n in ops:
      r = np.asarray(rows[s][n])
      diff = value(r, n) - base
      out[s][n] = {
        "value": float(value(r, n).mean()),
        "diff": float(diff.mean()),
        "diff_se": float(diff.std() / np.sqrt(len(diff))),
        **{k: float(v) for k, v in zip(TERMS + DISTANCES, r.mean(axis=0), strict=True)},
      }
  return out


def reach(trained, ops: dict, digits: int = 200) -> dict:
  """``{psi: {angle: {"c", "long_way", "residual"}}}``: the prior's inference
  (the run's solver and ``zeta_p``) from the code ``a`` of each of the first
  ``digits`` test digits to the code ``z`` of that digit turned by
  ``+-angle``: the median ``|c|``, the share of pairs transported against
  the turn (``c``'s sign opposite to the one ``psi`` takes for the
  smallest turn in that direction: the long way round the orbit) and the
  median of ``||z - T(c) a|| / ||z - a||`` (how much of the offset the
  transport leaves)."""
  import jax
  import jax.numpy as jnp

  from vaells_jax.core.transport import transport
  from vaells_jax.data.augment import rotate_images

  cfg, model, params = trained.config, trained._model, trained.params
  encode = jax.jit(lambda x: model.encode(params, x))
  x = np.asarray(trained.data.x_test[:digits], np.float32)
  start = encode(x)
  signs = (1, -1)
  out = {}
  for name, op in ops.items():
    psi = jnp.asarray(np.asarray(op)[None], jnp.float32)
    found = {}
    for a in ANGLES:
      for sign in signs:
        z = encode(rotate_images(x, np.full(len(x), sign * a, np.float32)))
        c = model.solvers.prior(
          psi,
          start[:, None],
          z[:, None],
          l1_weight=cfg.zeta_p,
          key=jax.random.PRNGKey(0),
        ).coeffs[:, 0]
        left = jnp.linalg.norm(z - transport(psi, c, start), axis=-1)
        found[a, sign] = (
          np.asarray(c[:, 0]),
          np.asarray(left / jnp.linalg.norm(z - start, axis=-1)),
        )
    # psi's direction for a turn of +ANGLES[0]: the sign most pairs take
    way = np.sign(np.median(found[ANGLES[0], 1][0]))
    out[name] = {}
    for a in ANGLES:
      c = np.concatenate([found[a, s][0] for s in signs])
      wrong = np.concatenate([found[a, s][0] * s * way < 0 for s in signs])
      res = np.concatenate([found[a, s][1] for s in signs])
      out[name][str(a)] = {
        "c": float(np.median(np.abs(c))),
        "long_way": float(wrong.mean()),
        "residual": float(np.median(res)),
      }
  return out


def analyse(folder: pathlib.Path, batches: int, **inference) -> dict:
  """The :func:`grid` and :func:`reach` of one run, inference settings
  ``inference`` in place of the run's."""
  import vaells_jax

  trained = vaells_jax.load(folder)
  ops = operators(trained)
  config = dataclasses.replace(trained.config, **inference)
  trained = dataclasses.replace(trained, config=config)
  return {
    "grid": grid(trained, ops, batches),
    "reach": reach(trained, ops),
    "batches": batches,
    "inference": inference,
  }


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("folders", nargs="+", type=pathlib.Path)
  parser.add_argument("--batches", default=64, type=int)
  parser.add_argument("--out", type=pathlib.Path)
  parser.add_argument(
    "--inference",
    action="append",
    default=[],
    metavar="FIELD=VALUE",
    help="an inference setting in place of the run's: zeta_p=1e-4, "
    "inference_method=fista",
  )
  args = parser.parse_args(argv)
  inference = {}
  for item in args.inference:
    field, value = item.split("=", 1)
    inference[field] = value if field == "inference_method" else float(value)
  from vaells_jax.data.files import atomic_write_text

  done = (
    json.loads(args.out.read_text())["runs"] if args.out and args.out.exists() else {}
  )
  for folder in args.folders:
    if str(folder) not in done:
      done[str(folder)] = analyse(folder, args.batches, **inference)
      if args.out:
        atomic_write_text(args.out, json.dumps({"runs": done}, indent=1) + "\n")
    print(f"{folder}: done", flush=True)
  runs = {f: done[str(f)] for f in args.folders}
  print(terms_table(runs))
  print(terms_reach_table(runs))
  return runs


if __name__ == "__main__":
  main()
