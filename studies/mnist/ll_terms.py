"""Where a run's log-likelihood goes: the importance weights' terms.

``python benchmarks/ll_terms.py runs/nat_seeds/nat_s* runs/nat_seeds_m8/nat_s*
--out=docs/results/ll_terms_nat_seeds.json``

The log-likelihood and ELBO (``vaells_jax/evaluation/likelihood.py``) weigh
each posterior sample ``w = T(c) f(x) + gamma eps`` by
``log p(x | w) + log p(w) - log q(w | x)``. For each finished run this
script recomputes the run's own evaluation (the same presented test points,
samples, starts and chunks as ``benchmarks/ll_iterations.py``) and reports
the mean over points and samples of each part, in nats:

* ``decoder``: ``-zeta1 1/2 ||x - g(w)||^2`` (``log p(x | w)`` less ``C1``);
* ``prior_residual``, ``prior_l1``: the best anchor's
  ``-1/2 gamma^-2 ||w - T(c_i) a_i||^2`` and ``-||c_i||_1 / b``;
  ``prior_mixture``: what the other anchors add,
  ``logsumexp_i - max_i - log N_a`` (in ``[-log N_a, 0]``);
* ``posterior_residual``, ``posterior_l1``: the same two parts of
  ``log q(w | x)`` (``T(c_q) f(x)`` to ``w``);
* ``constants``: ``C1`` (``C2`` cancels between prior and posterior);

their sum is the ELBO. Also medians over the samples: the distance from
``w`` to the best anchor's transport and to the posterior's, in units of
``gamma`` (``w`` is drawn ``gamma ||eps||``, about ``sqrt(d)`` of them, from
its posterior path before the posterior's solve refits ``c_q`` to it); the
dimension of the best anchor's orbit at ``T(c_i) a_i`` and the residual's
share in its tangent space (near 0: the solve stopped at a closest point of
the orbit, a local one where other starts find closer points far along
it). The log-likelihood and ELBO match the run's (``tests/test_digits.py``).

``--solvers=RESTARTS:LOW:HIGH:MAX_ITER,...`` measures each run again with
other solves (the anchors' restarts and start range, every solve's cap; the
run's own are the training steps'): a closer anchor path found by more
starts raises ``log p(w)`` and so the estimate. As in
:func:`vaells_jax.infer_coefficients`, restart ``k`` starts in
``[LOW + k w, HIGH + k w]``, ``w = HIGH - LOW``.
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import argparse
import dataclasses
import json
import math
import time

import jax
import jax.numpy as jnp
import numpy as np
from ll_iterations import CHUNK, evaluation_batch

from vaells_jax.core.objective import gaussian_log_norm, reconstruction_error
from vaells_jax.core.transport import transport
from vaells_jax.data.files import atomic_write_text
from vaells_jax.evaluation import likelihood
from vaells_jax.models.vaells import Model, infer_step_coefficients

RANK_TOL = 1e-4  # singular values below this share of the largest: no direction
PARTS = (
  "decoder",
  "prior_residual",
  "prior_l1",
  "prior_mixture",
  "posterior_residual",
  "posterior_l1",
  "constants",
)


def _orbit(psi, coeffs, start, z):
  """The orbit of ``start`` at ``T(c) start``: its dimension (the rank of
  ``d T(c) start / d c``) and the share of the residual ``z - T(c) start``
  in its tangent space (near 0 where a solve stopped at a closest point of
  the orbit). ``[..., M], [..., d], [..., d] -> ([...], [...])``."""

  def one(c, a, target):
    jac = jax.jacfwd(lambda c: transport(psi, c, a))(c)  # [d, M]
    u, sv, _ = jnp.linalg.svd(jac, full_matrices=False)
    spans = sv > RANK_TOL * sv[0]
    residual = target - transport(psi, c, a)
    along = (u * spans) @ (u.T @ residual)
    return jnp.sum(spans), jnp.linalg.norm(along) / jnp.linalg.norm(residual)

  lead = z.shape[:-1]
  flat = [a.reshape(-1, a.shape[-1]) for a in (coeffs, start, z)]
  dim, share = jax.vmap(one)(*flat)
  return dim.reshape(lead), share.reshape(lead)


def _parts(model, params, batch, samples, inferred):
  """``({part: [P, K]}, {"prior", "posterior", "prior_tangent_share",
  "prior_orbit_dim": [P, K]})``: the parts, the two distances in gamma and the
  best anchor's orbit (module docstring)."""
  cfg = model.config
  gamma, b, psi = cfg.gamma, 1.0 / cfg.zeta3, params["psi"]
  mu, anchors, z, _ = samples

  def residual_and_l1(coeffs, start, target):
    dist = jnp.linalg.norm(target - transport(psi, coeffs, start), axis=-1)
    return -0.5 * (dist / gamma) ** 2, -jnp.sum(jnp.abs(coeffs), -1) / b, dist / gamma

  q_res, q_l1, q_dist = residual_and_l1(inferred.posterior.coeffs, mu[:, None], z)
  p_res, p_l1, p_dist = residual_and_l1(
    inferred.prior.coeffs, anchors[:, None], z[..., None, :]
  )
  per_anchor = p_res + p_l1
  best = jnp.argmax(per_anchor, axis=-1)[..., None]
  pick = lambda a: jnp.take_along_axis(a, best, axis=-1)[..., 0]  # noqa: E731
  at_best = lambda a: jnp.take_along_axis(a, best[..., None], axis=-2)[..., 0, :]  # noqa: E731
  dim, tangent = _orbit(
    psi,
    at_best(inferred.prior.coeffs),
    at_best(jnp.broadcast_to(anchors[:, None], per_anchor.shape + z.shape[-1:])),
    z,
  )
  x = batch["x"]
  decoder = -cfg.zeta1 * reconstruction_error(x[:, None], model.decode(params, z))
  c1 = gaussian_log_norm(x.shape[-1], 1.0 / math.sqrt(cfg.zeta1))
  parts = {
    "decoder": decoder,
    "prior_residual": pick(p_res),
    "prior_l1": pick(p_l1),
    "prior_mixture": jax.nn.logsumexp(per_anchor, -1)
    - jnp.max(per_anchor, -1)
    - math.log(anchors.shape[-2]),
    "posterior_residual": q_res,
    "posterior_l1": q_l1,
    "constants": jnp.full_like(decoder, c1),
  }
  return parts, {
    "prior": pick(p_dist),
    "posterior": q_dist,
    "prior_tangent_share": tangent,
    "prior_orbit_dim": dim,
  }


def measure(workdir, points: int | None = None, **solver) -> dict:
  """The parts' means and the distances' medians of one run (module
  docstring); ``solver`` replaces config fields of the solves (e.g.
  ``num_restarts``, ``init_range``, ``inference_max_iter``)."""
  trained, batch, k_ll = evaluation_batch(workdir, points)
  params, cfg = trained.params, dataclasses.replace(trained.config, **solver)
  model = Model.create(cfg, trained.data.data_dim)
  parts_fn = jax.jit(_parts, static_argnums=0)
  start = time.perf_counter()
  chunks = []
  for i, chunk in likelihood.padded_chunks(batch, CHUNK):
    samples = jax.tree_util.tree_map(
      np.asarray,
      likelihood.posterior_samples(
        model, params, chunk, jax.random.fold_in(k_ll, i), cfg.eval_ll_samples
      ),
    )
    inferred = infer_step_coefficients(model, params["psi"], *samples)
    chunks.append(
      jax.tree_util.tree_map(
        np.asarray, parts_fn(model, params, chunk, samples, inferred)
      )
    )
  num = len(batch["x"])
  parts, dist = jax.tree_util.tree_map(
    lambda *a: np.concatenate(a).astype(np.float64)[:num], *chunks
  )
  log_w = (
    parts["decoder"]
    + parts["constants"]
    + parts["prior_residual"]
    + parts["prior_l1"]
    + parts["prior_mixture"]
    - parts["posterior_residual"]
    - parts["posterior_l1"]
  )
  return {
    "run": str(workdir),
    "num_ops": cfg.num_ops,
    "latent_dim": cfg.latent_dim,
    "seed": cfg.seed,
    "points": num,
    "samples": cfg.eval_ll_samples,
    "solver": {
      "num_restarts": cfg.num_restarts,
      "init_range": list(cfg.init_range),
      "inference_max_iter": cfg.inference_max_iter,
    },
    "log_likelihood": float(np.mean(likelihood.iwae_bound(log_w))),
    "elbo": float(log_w.mean()),
    "parts": {name: float(parts[name].mean()) for name in PARTS},
    "median_distance_gamma": {
      k: float(np.median(dist[k])) for k in ("prior", "posterior")
    },
    "median_prior_tangent_share": float(np.median(dist["prior_tangent_share"])),
    "median_prior_orbit_dim": float(np.median(dist["prior_orbit_dim"])),
    "time_s": time.perf_counter() - start,
  }


def solver_list(text: str) -> list[dict]:
  """``"16:-10:10:300,..."`` as ``measure``'s solver settings."""
  settings = []
  for item in text.split(","):
    try:
      restarts, low, high, max_iter = item.split(":")
      setting = {
        "num_restarts": int(restarts),
        "init_range": (float(low), float(high)),
        "inference_max_iter": int(max_iter),
      }
    except ValueError:
      raise argparse.ArgumentTypeError(
        f"{item!r} is not RESTARTS:LOW:HIGH:MAX_ITER (e.g. 16:-10:10:300)"
      ) from None
    low, high = setting["init_range"]
    if setting["num_restarts"] < 1 or setting["inference_max_iter"] < 1 or low >= high:
      raise argparse.ArgumentTypeError(f"{item!r}: positive counts, LOW < HIGH")
    settings.append(setting)
  return settings


def main(argv=None) -> list:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("workdirs", type=pathlib.Path, nargs="+", help="finished runs")
  parser.add_argument("--points", type=int, help="default: the run's own")
  parser.add_argument(
    "--solvers",
    type=solver_list,
    default=[{}],
    help="solver settings to measure each run with, RESTARTS:LOW:HIGH:MAX_ITER "
    "(the anchors' solves' restarts and start range, the solves' cap) separated "
    "by commas; default: the run's own",
  )
  parser.add_argument("--out", type=pathlib.Path)
  args = parser.parse_args(argv)
  rows = []
  for workdir in args.workdirs:
    for solver in args.solvers:
      rows.append(measure(workdir, args.points, **solver))
      print(json.dumps(rows[-1]), flush=True)
  if args.out:
    atomic_write_text(args.out, json.dumps(rows, indent=1) + "\n")
  return rows


if __name__ == "__main__":
  main()
