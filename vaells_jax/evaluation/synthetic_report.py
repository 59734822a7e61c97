"""Evaluation of a trained model on its synthetic data: metrics, figures, summary.md."""

from __future__ import annotations

import functools
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from vaells_jax.core.transport import transport_path as core_transport_path
from vaells_jax.evaluation import metrics as evaluation
from vaells_jax.evaluation import plotting
from vaells_jax.evaluation.fixed_shapes import (
  RowPrograms,
  solve_in_blocks,
  solve_restarts_as_pairs,
)
from vaells_jax.evaluation.likelihood import solve_pairs
from vaells_jax.evaluation.summary_md import write_markdown

__all__ = [
  "evaluate_and_report",
  "operator_orbits",
  "spread_restarts",
  "success",
  "write_markdown",
]

NUM_PRIOR_SAMPLES = 200  # per anchor
NUM_PATHS = 20
PATH_POINTS = 30
TRAVERSAL_TURNS = 2.0  # orbit_coverage follows each orbit this far each way
TRAVERSAL_POINTS = 2001
PATH_RESTARTS = 16  # tiling TRAVERSAL_TURNS turns each way (spread_restarts)
ORBIT_POINTS = 100
CONTOUR_GRID = 41
LL_CHUNK = 25  # points per log-likelihood solve (TrainedVAELLS.log_likelihood)


def _rotation_rates(psi):
  """Each operator's largest eigenvalue modulus, at least 1e-6: ``[M]``.

  For a rotation, the radians it turns per unit coefficient.
  """
  return np.maximum(np.abs(np.linalg.eigvals(np.asarray(psi))).max(axis=-1), 1e-6)


def operator_orbits(
  psi, starts, max_norm, num_points=ORBIT_POINTS, transport_path=None
):
  """Orbits ``expm(t psi_m) s`` of each operator from each start.

  ``t`` spans ``[-pi, pi] / rho_m`` with ``rho_m`` the largest eigenvalue
  modulus of ``psi_m``: a full turn for a rotation, whatever its magnitude.
  Points farther than ``max_norm`` from the origin are set to NaN.

  Args:
    psi: ``[M, d, d]``.
    starts: ``[S, d]``.
    max_norm: cut-off radius.
    num_points: points per orbit.
    transport_path: ``(coeffs, z0, ts) -> [T, ..., d]`` with these operators
      (:meth:`~vaells_jax.evaluation.fixed_shapes.RowPrograms.transport_path`);
      by default :func:`~vaells_jax.core.transport.transport_path`.

  Returns:
    ``[M, S, T, d]``.
  """
  psi = np.asarray(psi)
  if transport_path is None:
    transport_path = functools.partial(core_transport_path, jnp.asarray(psi))
  num_ops = psi.shape[0]
  rho = _rotation_rates(psi)
  ts = np.linspace(-1.0, 1.0, num_points)
  coeffs = (np.eye(num_ops) * np.pi / rho[:, None])[:, None]  # [M, 1, M]
  paths = np.asarray(transport_path(coeffs, starts, ts))  # [T, M, S, d]
  orbits = np.moveaxis(paths, 0, 2)
  too_far = np.linalg.norm(orbits, axis=-1) > max_norm
  return np.where(too_far[..., None], np.nan, orbits)


def _same_class_pairs(labels, num, rng):
  if np.max(np.unique(labels, return_counts=True)[1]) < 2:
    raise ValueError("Path metrics need two test points of one class.")
  pairs = []
  while len(pairs) < num:
    i, j = rng.choice(len(labels), 2, replace=False)
    if labels[i] == labels[j]:
      pairs.append((i, j))
  return np.asarray(pairs)


def _paths(trained, rows, latents, pairs, ts, key):
  """The inferred paths between the pairs of test points, ``[T, P, d]``.

  VAELLS's: :meth:`~vaells_jax.api.TrainedVAELLS.infer_path` with
  :func:`spread_restarts`. When the log-likelihood has a one-restart solve,
  the restarts are solved as its pairs, through its program, from the same
  starts (:func:`~vaells_jax.evaluation.fixed_shapes.solve_restarts_as_pairs`;
  the larger block's rounding moves a few pairs to other local minima).
  """
  z0, z1 = latents[pairs[:, 0]], latents[pairs[:, 1]]
  if trained.psi is None:
    return np.asarray(trained.infer_path(z0, z1, ts, key=key))
  num_restarts, init_range = spread_restarts(trained.psi)
  solver = trained.solvers.prior.replace(
    num_restarts=num_restarts, init_range=init_range
  )
  l1_weight = trained.config.zeta_p
  block = _block_pairs(trained, 1, None)
  if block is None or solver.method == "exact":
    result = solver(
      trained.psi, jnp.asarray(z0), jnp.asarray(z1), l1_weight=l1_weight, key=key
    )
    coeffs = np.asarray(result.coeffs)
  else:
    coeffs, _ = solve_restarts_as_pairs(
      solver, trained.psi, z0, z1, l1_weight=l1_weight, key=key, pairs=block
    )
  return rows.transport_path(coeffs, z0, ts)


def _posterior_contour(trained, rows, center, latents):
  """Posterior terms on a grid around the encodings (paper appendix C)."""
  cfg = trained.config
  lo, hi = latents.min(axis=0), latents.max(axis=0)
  pad = 0.15 * (hi - lo)
  gx = np.linspace(lo[0] - pad[0], hi[0] + pad[0], CONTOUR_GRID)
  gy = np.linspace(lo[1] - pad[1], hi[1] + pad[1], CONTOUR_GRID)
  grid = np.stack(np.meshgrid(gx, gy), axis=-1)  # [G2, G1, 2]
  solver = trained.solvers.prior
  coeffs, _ = solve_in_blocks(
    solver,
    trained.psi,
    center,
    grid.astype(np.float32),
    l1_weight=cfg.zeta_q,
    key=jax.random.PRNGKey(0),
    init_range=solver.init_range,
    pairs=_block_pairs(trained, solver.num_restarts, grid[..., 0].size),
  )
  residual = grid - rows.transport(coeffs, center)
  data_term = -0.5 * cfg.zeta2 * np.sum(residual**2, axis=-1)
  coeff_term = -cfg.zeta3 * np.sum(np.abs(coeffs), axis=-1)
  return gx, gy, data_term, coeff_term


def _block_pairs(trained, restarts: int, default: int) -> int:
  """Pairs per block of a solve with ``restarts``: the log-likelihood's, when
  it has a solve with as many restarts (one compiled program for both)."""
  anchors = trained.params["anchors"].shape[1]
  shapes = solve_pairs(
    trained._model, anchors, trained.config.eval_ll_samples, LL_CHUNK
  )
  return shapes.get(restarts, default)


def _traversals(trained, rows, anchors, m, max_norm):
  """How far operator ``m``'s orbits from the anchors run along the true curves.

  The orbit ``expm(t Psi_m) a`` from each anchor ``a``, for ``t`` up to
  :data:`TRAVERSAL_TURNS` turns of the operator's fastest rotation each way,
  is decoded and scored with :func:`evaluation.orbit_coverage` against the
  true curve of the anchor's class.

  Returns:
    The mean over classes of the best anchor's coverage, and the best
    anchor's orbit of each class split at the anchor into its two halves,
    ``[1, 2 C, T, d]`` (each half starts at the anchor; points beyond
    ``max_norm`` are NaN), for :func:`plotting.plot_orbits`.
  """
  data = trained.data
  rho = _rotation_rates(np.asarray(trained.psi)[m : m + 1])[0]
  ts = np.linspace(-1.0, 1.0, TRAVERSAL_POINTS)
  start = TRAVERSAL_POINTS // 2
  coeffs = np.eye(trained.config.num_ops, dtype=np.float32)[m]
  orbits = rows.transport_path(
    np.float32(2 * np.pi * TRAVERSAL_TURNS / rho) * coeffs, anchors, ts
  )  # [T, C, A, d]
  decoded = rows.decode(orbits.reshape(-1, orbits.shape[-1]))
  decoded = np.nan_to_num(
    decoded.reshape(*orbits.shape[:-1], -1), nan=1e30, posinf=1e30, neginf=-1e30
  )
  best, halves = [], []
  for c in range(anchors.shape[0]):
    curve = data.manifold[data.manifold_labels == c]
    scores = [
      evaluation.orbit_coverage(decoded[:, c, a], curve, data.noise_std, start)
      for a in range(anchors.shape[1])
    ]
    a = int(np.argmax(scores))
    best.append(scores[a])
    halves += [orbits[start:, c, a], orbits[start::-1, c, a]]
  halves = np.stack(halves)[None]
  too_far = ~(np.linalg.norm(halves, axis=-1) <= max_norm)
  return float(np.mean(best)), np.where(too_far[..., None], np.nan, halves)


def spread_restarts(psi):
  """Restarts whose start ranges tile ``TRAVERSAL_TURNS`` turns each way.

  A coefficient ``c`` turns a point by ``c rho`` radians along the fastest
  operator's orbit; the config's starts (``init_range``, two restarts) reach
  a fraction of a turn, so inferred paths stopped at the first local minimum
  on a spiral (swiss roll, draw 2: endpoints 15.1 spacings off, 6.3 with these).

  Returns:
    ``(num_restarts, init_range)`` for ``infer_path``.
  """
  reach = 2 * np.pi * TRAVERSAL_TURNS / _rotation_rates(psi).max()
  return PATH_RESTARTS, (-reach, -reach + 2 * reach / PATH_RESTARTS)


COVERAGE_SUCCESS = 0.9  # SPEC section 6: success on the synthetic sets is
SAMPLE_DISTANCE_SUCCESS = 15.0  # coverage >= 0.9 and samples <= 15 noise levels


def success(orbit_coverage: float, sample_manifold_distance: float) -> bool:
  """Whether a run learned its synthetic manifold (SPEC section 6): orbit
  coverage >= 0.9 and prior samples within 15 noise levels."""
  return bool(
    orbit_coverage >= COVERAGE_SUCCESS
    and sample_manifold_distance <= SAMPLE_DISTANCE_SUCCESS
  )


def learned_structure(trained, key) -> dict:
  """Whether a VAELLS model learned its synthetic manifold (SPEC section 6).

  ``orbit_coverage`` of the strongest operator from the anchors and the
  ``sample_manifold_distance`` of decoded prior samples, as
  :func:`evaluate_and_report` computes them (with ``key`` for the samples),
  and ``success``: coverage >= 0.9 and samples within 15 noise levels.
  """
  data, rows = trained.data, RowPrograms(trained)
  latents = rows.encode(data.x_test)
  max_norm = 1.5 * np.linalg.norm(latents, axis=-1).max()
  anchors = rows.encode(trained.anchors)
  prior = rows.sample_around(
    key, anchors.reshape(-1, anchors.shape[-1]), NUM_PRIOR_SAMPLES
  )
  decoded = rows.decode(prior.reshape(-1, prior.shape[-1]))
  distance = evaluation.manifold_distance(decoded, data.manifold, data.noise_std)
  strongest = int(np.argmax(np.linalg.norm(np.asarray(trained.psi), axis=(1, 2))))
  coverage, _ = _traversals(trained, rows, anchors, strongest, max_norm)
  return {
    "orbit_coverage": coverage,
    "sample_manifold_distance": distance,
    "success": success(coverage, distance),
  }


def eval_keys(seed: int):
  """The keys :func:`evaluate_and_report` draws prior samples, paths and the
  log-likelihood with: ``(k_prior, k_path, k_ll)``. ``k_prior`` is the key
  of :func:`learned_structure` that scores a run as its report does."""
  return jax.random.split(jax.random.PRNGKey(seed + 2), 3)


def evaluate_and_report(trained, workdir, summary, log=None) -> dict:
  """Computes the metrics of SPEC section 6, writes figures and ``summary.md``.

  ``trained`` is a :class:`~vaells_jax.api.TrainedVAELLS` or a
  :class:`~vaells_jax.api.TrainedBaseline`; a baseline has no operators, so
  its prior samples come from its own prior, its paths are its own
  (:meth:`~vaells_jax.api.TrainedBaseline.infer_path`) and the orbit, contour
  and magnitude outputs are left out.

  ``log`` (optional) receives one line per phase and figure.

  Returns:
    The metrics (also merged into ``summary.md`` with ``summary``).
  """
  log = log or (lambda _: None)
  workdir = pathlib.Path(workdir)
  data, cfg = trained.data, trained.config
  rng = np.random.default_rng(cfg.seed)
  k_prior, k_path, k_ll = eval_keys(cfg.seed)
  rows = RowPrograms(trained)
  latents, metrics = _code_metrics(trained, rows, k_ll)
  max_norm = 1.5 * np.linalg.norm(latents, axis=-1).max()
  anchors, prior = _prior_samples(trained, rows, latents, k_prior)
  if data.has_ground_truth:  # distances to the true manifold need it
    metrics.update(_sample_distances(rows, data, prior))
  orbits = magnitudes = traversals = None
  if trained.psi is not None:
    orbit_metrics, orbits, magnitudes, traversals = _orbit_metrics(
      trained, rows, anchors, latents, max_norm
    )
    metrics.update(orbit_metrics)
  log(f"paths between {NUM_PATHS} test pairs ...")
  path_metrics, paths = _path_metrics(trained, rows, latents, rng, k_path)
  metrics.update(path_metrics)
  if trained.psi is not None:
    metrics["operator_magnitudes"] = magnitudes.tolist()
  if latents.shape[-1] == 2:
    figures = _figures(
      workdir, trained, rows, latents, anchors, prior, orbits, paths, magnitudes
    )
    if traversals is not None:
      figures.append(_traversal_figure(workdir, latents, traversals, metrics))
    for k, draw in enumerate(figures, 1):
      log(f"drawing figure {k}/{len(figures)} ...")
      draw()
  write_markdown(workdir, {**summary, **metrics}, cfg, FIGURES)
  return metrics


def _code_metrics(trained, rows, k_ll) -> tuple[np.ndarray, dict]:
  """The test codes ``[N, d]`` and the metrics of codes and reconstructions:
  kNN class accuracy, MSE, log-likelihood and ELBO."""
  data, cfg = trained.data, trained.config
  latents = rows.encode(data.x_test)
  metrics = {
    "knn_class_accuracy": evaluation.knn_class_accuracy(latents, data.labels_test)
  }
  metrics["mse"] = float(np.mean((rows.decode(latents) - data.x_test) ** 2))
  num = min(cfg.eval_ll_points, len(data.x_test))
  ll, elbo = trained.log_likelihood(
    k_ll, data.x_test[:num], data.labels_test[:num], cfg.eval_ll_samples
  )
  metrics.update(log_likelihood=float(ll.mean()), elbo=float(elbo.mean()))
  return latents, metrics


def _prior_samples(trained, rows, latents, k_prior):
  """The encoded anchors ``[C, A, d]`` (none for a baseline) and prior
  samples ``[K, S, d]``: around each anchor, or as many from a baseline's
  own prior."""
  data = trained.data
  if trained.psi is not None:
    anchors = rows.encode(trained.anchors)  # [C, A, d]
    flat_anchors = anchors.reshape(-1, anchors.shape[-1])
    prior = rows.sample_around(k_prior, flat_anchors, NUM_PRIOR_SAMPLES)  # [K, S, d]
  else:  # as many samples as VAELLS draws, from the model's own prior
    anchors = np.zeros((0, 1, latents.shape[-1]))
    prior = np.asarray(
      trained.sample_prior(
        k_prior, NUM_PRIOR_SAMPLES * data.anchors.shape[0] * data.anchors.shape[1]
      )
    )[None]
  return anchors, prior


def _sample_distances(rows, data, prior) -> dict:
  """How far decoded prior samples and the test data lie from the true
  manifold, in the same units."""
  decoded = rows.decode(prior.reshape(-1, prior.shape[-1]))
  return {
    "sample_manifold_distance": evaluation.manifold_distance(
      decoded, data.manifold, data.noise_std
    ),
    # The reference: the noisy test data's own distance, in the same units.
    "data_manifold_distance": evaluation.manifold_distance(
      np.asarray(data.x_test), data.manifold, data.noise_std
    ),
  }


def _orbit_metrics(trained, rows, anchors, latents, max_norm):
  """The operators' orbits from the anchors and how far the strongest one's
  stays on the codes (and, with ground truth, how far it goes along the
  true curve): ``(metrics, orbits, magnitudes, traversals or None)``."""
  magnitudes = np.linalg.norm(np.asarray(trained.psi), axis=(1, 2))
  orbits = operator_orbits(
    trained.psi, anchors[:, 0], max_norm, transport_path=rows.transport_path
  )
  strongest = int(np.argmax(magnitudes))
  dominant = orbits[strongest].reshape(-1, latents.shape[-1])
  metrics = {
    "orbit_manifold_distance": evaluation.latent_path_distance(
      dominant[np.all(np.isfinite(dominant), axis=-1)], latents
    )
  }
  traversals = None
  if trained.data.has_ground_truth:
    metrics["orbit_coverage"], traversals = _traversals(
      trained, rows, anchors, strongest, max_norm
    )
  return metrics, orbits, magnitudes, traversals


def _path_metrics(trained, rows, latents, rng, k_path) -> tuple[dict, np.ndarray]:
  """Paths between :data:`NUM_PATHS` same-class test pairs and how far they
  (and straight lines) stay on the codes: ``(metrics, paths [P, T, d])``."""
  pairs = _same_class_pairs(trained.data.labels_test, NUM_PATHS, rng)
  ts = np.linspace(0.0, 1.0, PATH_POINTS)
  paths = np.swapaxes(_paths(trained, rows, latents, pairs, ts, k_path), 0, 1)
  lines = (
    latents[pairs[:, 0], None] * (1 - ts[:, None])
    + latents[pairs[:, 1], None] * ts[:, None]
  )
  metrics = {"path_manifold_distance": evaluation.latent_path_distance(paths, latents)}
  # A path that never leaves z0 is trivially "on the data": report how far its
  # end is from z1, in the same units (median nearest-neighbour spacing).
  _, spacing = evaluation.nearest_neighbours(latents, latents, True)
  metrics["path_endpoint_error"] = float(
    np.mean(np.linalg.norm(paths[:, -1] - latents[pairs[:, 1]], axis=-1))
    / np.median(spacing)
  )
  metrics["linear_path_manifold_distance"] = evaluation.latent_path_distance(
    lines, latents
  )
  return metrics, paths


def _traversal_figure(workdir, latents, traversals, metrics):
  """The figure of the longest orbit along the true curve, to draw."""
  return lambda: plotting.plot_orbits(
    workdir / "orbit_traversal.png",
    latents,
    traversals,
    title=f"longest orbit along the true curve: coverage "
    f"{metrics['orbit_coverage']:.2f}",
  )


class _Later:
  """Records ``plotting.fn(*args)`` calls as thunks in ``figures``."""

  def __init__(self, figures: list):
    self.figures = figures

  def __getattr__(self, name):
    fn = getattr(plotting, name)
    return lambda *args, **kwargs: self.figures.append(lambda: fn(*args, **kwargs))


def _figures(
  workdir, trained, rows, latents, anchors, prior, orbits, paths, magnitudes
):
  """The figures of a 2-d latent space, as thunks to draw one by one."""
  figures = []
  later = _Later(figures)
  data = trained.data
  flat = anchors.reshape(-1, 2)
  name = "VAELLS" if trained.config.model == "vaells" else trained.config.model
  later.plot_latent_embedding(
    workdir / "latent_by_class.png",
    latents,
    data.labels_test,
    flat,
    f"{name} latent space",
    "class",
  )
  if data.has_ground_truth:
    later.plot_ground_truth(
      workdir / "ground_truth.png",
      data.pos_test,
      data.labels_test if data.num_classes > 1 else data.t_test,
    )
    later.plot_latent_embedding(
      workdir / "latent_by_position.png",
      latents,
      data.t_test,
      flat,
      "coloured by ground truth",
      "curve parameter",
    )
  if orbits is None:
    later.plot_prior_samples(
      workdir / "prior_samples.png", latents, prior, flat, f"{name} prior samples"
    )
    later.plot_paths(
      workdir / "paths.png",
      latents,
      paths,
      f"{name} paths (solid) vs straight lines (dashed)",
    )
    return figures
  later.plot_prior_samples(workdir / "prior_samples.png", latents, prior, flat)
  later.plot_paths(workdir / "paths.png", latents, paths)
  later.plot_orbits(workdir / "orbits.png", latents, orbits, magnitudes)
  center = latents[0]
  gx, gy, data_term, coeff_term = _posterior_contour(trained, rows, center, latents)
  later.plot_posterior_contour(
    workdir / "posterior_contour.png",
    gx,
    gy,
    data_term,
    coeff_term,
    data_term + coeff_term,
    center,
    latents,
  )
  later.plot_operator_magnitudes(workdir / "operator_magnitudes.png", magnitudes)
  return figures


FIGURES = (
  ("ground_truth.png", "Ground-truth latent structure"),
  ("latent_by_class.png", "Encoded test points by class, anchors as x"),
  ("latent_by_position.png", "Encoded test points by ground-truth position"),
  ("orbits.png", "Orbit of each operator"),
  (
    "orbit_traversal.png",
    "The dominant operator's orbit from the anchor "
    "that runs farthest along the true curve (both directions from it)",
  ),
  ("prior_samples.png", "Prior samples (VAELLS: around each anchor)"),
  ("paths.png", "Paths between test pairs vs straight lines"),
  ("posterior_contour.png", "Posterior contours (appendix C)"),
  ("operator_magnitudes.png", "Operator magnitudes"),
)
