"""Evaluation of a model trained on 28 x 28 digit images (rotated / natural MNIST).

Metrics (paper section 5, appendix D; SPEC section 6):

* ``log_likelihood`` and ``elbo``: importance-sampled over
  ``config.eval_ll_points`` test points with ``config.eval_ll_samples``
  samples each (:mod:`vaells_jax.evaluation.likelihood`);
* ``mse``: mean squared pixel error of ``g(f(x))`` on every test digit;
* ``knn_class_accuracy``: leave-one-out 1-NN digit class of the test codes;
* rotated inputs (``config.input_rotation > 0``), the headline
  ``rotation_gated_span_degrees`` (:mod:`vaells_jax.evaluation.rotation`):
  ``config.eval_rotation_digits`` held-out upright digits (a fixed draw) are
  moved along the path ``expm(t psi) f(x)`` of the strongest operator
  (``|t|`` up to ``pi / rho``, a half turn each way of the slowest rotation
  of the operator that moves the digits, :func:`path_span`; frames a
  thirty-sixth of a half turn of its fastest rotation by how fast it moves
  the digits' codes apart, :func:`gated_path_grid`); each frame is matched
  to rotated copies of the decoded start frame, and the two-sided span of
  monotonic rotation from ``t = 0`` lasts while the best correlation stays at least
  ``rotation_gate_level`` (the ``GATE_PERCENTILE``-th percentile of the same
  correlation for the autoencoder's reconstructions of truly rotated
  digits) and a digit classifier trained in the run on the upright training
  digits still gives the input's class to the frame turned back upright.
  Median, quartiles, per-class medians, each gate alone
  (:func:`summarize_spans`); ``reference_cosine``, ``|cos|`` between that
  operator and the reference :func:`fit_orbit_operator` fits to the
  encoder's orbits of rotated training digits, and
  ``reference_rotation_gated_span_degrees``, the reference's gated median
  (what the encoder and decoder allow). ``ungated_rotation_rise_degrees``
  (and ``_best``, ``ungated_rotation_spearman``) is the earlier measure, kept
  to compare with earlier runs: the longest monotonic rise of the
  least-squares angle against the input over one digit per class, with no
  check that a frame is still the digit;
* natural digits: ``class_consistency``, the fraction of decoded posterior
  samples that a classifier trained on the training digits assigns the
  input's class, with that classifier's own ``classifier_test_accuracy``;
  and each operator's reach (:mod:`vaells_jax.evaluation.reach`,
  :func:`_operator_reach`): how far its path moves ``eval_rotation_digits``
  held-out digits (RMS pixel difference from the decoded start, the
  headline, and the fraction of pixels changed by more than 0.1) while that
  classifier keeps their class, over the operator-path figure's range.

Figures: posterior-sample grids, extrapolated paths of each operator, the
latent embedding (first two principal components), rotation fidelity.
"""

from __future__ import annotations

import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np

from vaells_jax.core.transport import transport_path
from vaells_jax.data.augment import rotate_images, rotated_copies
from vaells_jax.evaluation import image_plots, plotting
from vaells_jax.evaluation import metrics as evaluation
from vaells_jax.evaluation.classifier import accuracy, predict, train_classifier
from vaells_jax.evaluation.likelihood import importance_log_likelihood
from vaells_jax.evaluation.reach import class_kept_reach, summarize_reach
from vaells_jax.evaluation.rotation import (
  GATE_PERCENTILE,
  fit_orbit_operator,
  gated_path_grid,
  gated_rotation_spans,
  matched_angles,
  operator_cosine,
  path_span,
  rotation_gate_level,
  rotation_path_stats,
  summarize_spans,
)
from vaells_jax.evaluation.rotation_grid import plot_rotation_grid
from vaells_jax.evaluation.summary_md import write_markdown

__all__ = ["evaluate_and_report", "rotation_report"]

GRID_INPUTS = 6  # posterior-sample grids
PATH_FRAMES = 11  # columns of the operator-path figures
REACH_FRAMES = 41  # frames along each operator-reach path (t = 0 in the middle)
FIDELITY_FRAMES = 37  # frames along each ungated rotation path
GATED_CHUNK = 25  # digits whose paths are decoded at once
REFERENCE_DIGITS = 300  # training digits whose orbits fit the reference operator
REFERENCE_ANGLES = 36  # rotated copies per digit (10 degrees apart)
CONSISTENCY_INPUTS = 500
CONSISTENCY_SAMPLES = 8
CHUNK = 500
CLASSIFIER_STEPS = 600


def _chunked(fn, x):
  return evaluation.chunked(fn, x, CHUNK)


def evaluate_and_report(trained, workdir, summary, log=None) -> dict:
  """Computes the image metrics, writes the figures and ``summary.md``.

  Args:
    trained: a :class:`~vaells_jax.api.TrainedVAELLS` with a ``conv``
      network (28 x 28 images).
    workdir: output folder.
    summary: training facts to include in ``summary.md``.

  Returns:
    The metrics. (``log``, unused: the image report draws few figures.)
  """
  if trained.psi is None:
    return _baseline_report(trained, workdir, summary)
  workdir = pathlib.Path(workdir)
  data, cfg, model = trained.data, trained.config, trained._model
  params, psi = trained.params, trained.psi
  key = jax.random.PRNGKey(cfg.seed + 2)
  k_present, k_ll, k_grid, k_cons = jax.random.split(key, 4)
  x_orig = np.asarray(data.x_test, np.float32)
  labels = np.asarray(data.labels_test)
  x_in = np.asarray(jax.jit(model.present)(x_orig, k_present))

  encode = jax.jit(lambda x: model.encode(params, x))
  decode = jax.jit(lambda w: model.decode(params, w))
  codes = _chunked(encode, x_in)  # inference scale
  recon = _chunked(decode, codes)
  metrics = {
    "mse": float(np.mean((recon - x_in) ** 2)),
    "knn_class_accuracy": evaluation.knn_class_accuracy(codes, labels),
  }

  metrics.update(_log_likelihood(model, params, cfg, x_in, x_orig, labels, k_ll))
  # One upright test digit per class, moved along each operator.
  firsts = np.asarray([np.flatnonzero(labels == c)[0] for c in np.unique(labels)])
  magnitudes = np.linalg.norm(np.asarray(psi), axis=(1, 2))
  starts = codes[firsts] if not cfg.input_rotation else _chunked(encode, x_orig[firsts])
  spans = _operator_paths(workdir, cfg, psi, starts, decode, magnitudes)
  _posterior_grid(workdir, trained, psi, starts, magnitudes, x_in, recon, k_grid)
  if cfg.input_rotation:
    metrics.update(rotation_report(trained, workdir))
  elif len(firsts) > 1:
    metrics.update(_class_metrics(trained, decode, spans, codes, labels, key, k_cons))
  _latent_figure(workdir, encode, params, data, codes, labels)
  metrics["operator_magnitudes"] = magnitudes.tolist()
  write_markdown(workdir, {**summary, **metrics}, cfg, FIGURES)
  return metrics


def _log_likelihood(model, params, cfg, x_in, x_orig, labels, k_ll) -> dict:
  """Importance-sampled log-likelihood and ELBO of the first
  ``cfg.eval_ll_points`` test images, with their count, samples and time."""
  num = min(cfg.eval_ll_points, len(x_in))
  ll_start = time.perf_counter()
  ll, elbo = importance_log_likelihood(
    model,
    params,
    {"x": x_in[:num], "source": {"x": x_orig[:num], "label": labels[:num]}},
    k_ll,
    cfg.eval_ll_samples,
  )
  return dict(
    log_likelihood=float(ll.mean()),
    elbo=float(elbo.mean()),
    log_likelihood_points=num,
    log_likelihood_samples=cfg.eval_ll_samples,
    log_likelihood_eval_time_s=time.perf_counter() - ll_start,
  )


def _operator_paths(workdir, cfg, psi, starts, decode, magnitudes) -> list:
  """Draws each operator's decoded paths from ``starts``; returns each
  operator's coefficient span."""
  b = 1.0 / cfg.zeta3
  spans = []
  for m in range(cfg.num_ops):
    # A quarter turn each way for rotated digits; up to 10 b otherwise.
    span = (
      path_span(psi[m], starts, cap=1000 * b) / 2
      if cfg.input_rotation
      else path_span(psi[m], starts, cap=10 * b)
    )
    spans.append(span)
    ts = np.linspace(-span, span, PATH_FRAMES)
    image_plots.plot_operator_paths(
      workdir / f"operator_path_{m}.png",
      _decoded_paths(decode, psi[m], starts, ts),
      ts,
      f"operator {m} (|psi|_F = {magnitudes[m]:.3g})",
    )
  return spans


def _posterior_grid(workdir, trained, psi, starts, magnitudes, x_in, recon, k_grid):
  """Draws posterior samples around the first :data:`GRID_INPUTS` inputs."""
  cfg = trained.config
  b = 1.0 / cfg.zeta3
  # As in paper fig. 5, the sampling scale is enlarged for rotated digits so
  # that the samples turn visibly: mean |c| = path_span / 8 (an eighth of a
  # half turn of the slowest rotation path_span finds).
  m = int(np.argmax(magnitudes))
  grid_scale = path_span(psi[m], starts, 1000 * b) / 8 if cfg.input_rotation else b
  samples = trained.sample_posterior(k_grid, x_in[:GRID_INPUTS], 8, grid_scale)
  image_plots.plot_posterior_grids(
    workdir / "posterior_samples.png",
    recon[:GRID_INPUTS],
    np.asarray(trained.decode(samples)),
    f"posterior samples around inputs (Laplace scale {grid_scale:.3g})",
  )


def _class_metrics(trained, decode, spans, codes, labels, key, k_cons) -> dict:
  """Upright digits: whether samples keep their class, and how far each
  operator reaches, by a digit classifier trained here."""
  data, cfg = trained.data, trained.config
  classifier = _digit_classifier(data, jax.random.split(k_cons)[0])
  metrics = dict(_class_consistency(trained, data, k_cons, classifier))
  reach_start = time.perf_counter()
  metrics.update(
    _operator_reach(
      cfg,
      decode,
      trained.psi,
      spans,
      codes,
      labels,
      classifier,
      jax.random.fold_in(key, 4),
    )
  )
  metrics["operator_reach_eval_time_s"] = time.perf_counter() - reach_start
  return metrics


def _latent_figure(workdir, encode, params, data, codes, labels) -> None:
  """Draws the test codes and anchors on their first two principal axes."""
  anchors = np.asarray(encode(np.asarray(params["anchors"]).reshape(-1, data.data_dim)))
  flat_codes, flat_anchors = evaluation.pca_2d(codes, anchors)
  plotting.plot_latent_embedding(
    workdir / "latent_by_class.png",
    flat_codes,
    labels,
    flat_anchors,
    "test codes (first two principal components), anchors as x",
    "class",
  )


def rotation_report(trained, workdir) -> dict:
  """The rotated-digit metrics of a trained VAELLS run (module docstring):
  the gated span of its strongest operator and of the reference operator,
  ``reference_cosine`` and the ungated rise; writes
  ``rotation_fidelity.png`` and ``rotation_grid.png`` (random test digits
  along the operator, the paper's fig. 4) into ``workdir``. Deterministic in the run's
  seed, so a finished run can be evaluated again (``rot_regrid.py``)."""
  data, cfg, model = trained.data, trained.config, trained._model
  params, psi = trained.params, np.asarray(trained.psi)
  k_cons = jax.random.split(jax.random.PRNGKey(cfg.seed + 2), 4)[3]
  x_orig = np.asarray(data.x_test, np.float32)
  labels = np.asarray(data.labels_test)
  encode = jax.jit(lambda x: model.encode(params, x))
  decode = jax.jit(lambda w: model.decode(params, w))
  m = int(np.argmax(np.linalg.norm(psi, axis=(1, 2))))
  b = 1.0 / cfg.zeta3

  reference = reference_operator(trained, encode)
  learned = np.asarray(psi[m], np.float64)
  metrics = _gated_rotation(
    trained, encode, decode, (psi[m], reference), k_cons, pathlib.Path(workdir)
  )
  metrics["reference_cosine"] = operator_cosine(learned, reference)

  # The ungated rise: matched angles along a half turn each way of one
  # upright test digit per class.
  firsts = np.asarray([np.flatnonzero(labels == c)[0] for c in np.unique(labels)])
  starts = _chunked(encode, x_orig[firsts])
  ts = np.linspace(-1, 1, FIDELITY_FRAMES) * path_span(psi[m], starts, 1000 * b)
  stats = [
    rotation_path_stats(ts, matched_angles(f, x_orig[i]))
    for f, i in zip(_decoded_paths(decode, psi[m], starts, ts), firsts, strict=True)
  ]
  rises, rhos = np.asarray([s[1] for s in stats]), np.asarray([s[2] for s in stats])
  metrics.update(
    ungated_rotation_rise_degrees=float(np.median(rises)),
    ungated_rotation_rise_degrees_best=float(rises.max()),
    ungated_rotation_spearman=float(np.nanmedian(rhos)),
  )
  plot_rotation_grid(trained, pathlib.Path(workdir) / "rotation_grid.png")
  return metrics


def reference_operator(trained, encode, lags=(1, 2, 4)) -> np.ndarray:
  """The reference: the operator :func:`fit_orbit_operator` fits (at
  ``lags``) to the encoder's own orbits of ``REFERENCE_DIGITS`` training
  digits rotated by ``REFERENCE_ANGLES`` equal steps, ``[d, d]`` float64."""
  data = trained.data
  orbits = _chunked(
    encode,
    np.asarray(
      rotated_copies(data.x_train[:REFERENCE_DIGITS], REFERENCE_ANGLES)
    ).reshape(-1, data.data_dim),
  ).reshape(-1, REFERENCE_ANGLES, trained.config.latent_dim)
  return np.asarray(fit_orbit_operator(orbits, lags), np.float64)


def _gated_rotation(trained, encode, decode, operators, key, workdir) -> dict:
  """The gated rotation span of ``operators = (learned, reference)``.

  See the module docstring; also writes ``rotation_fidelity.png`` (the
  learned operator's paths of the first drawn digit of each class) and
  reports ``rotation_eval_time_s``, what this part of the evaluation took.
  """
  start_time = time.perf_counter()
  found = gated_operator_spans(trained, encode, decode, operators, key)
  labels, level = found["labels"], found["level"]
  (ts, spans), (_, reference) = found["paths"]
  metrics = summarize_spans(spans, labels, level)
  metrics.update(
    rotation_gate_percentile=GATE_PERCENTILE,
    rotation_autoencoder_correlation_median=float(np.median(found["corrs"])),
    rotation_autoencoder_angle_error_median=float(
      np.median(np.abs((found["found"] - found["angles"] + 180.0) % 360.0 - 180.0))
    ),
    reference_rotation_gated_span_degrees=float(np.median(reference["gated"])),
    classifier_test_accuracy=found["classifier_accuracy"],
  )
  shown = [np.flatnonzero(labels == c)[0] for c in np.unique(labels)]
  image_plots.plot_rotation_fidelity(
    workdir / "rotation_fidelity.png",
    ts,
    spans["angles"][shown],
    spans["gated"][shown],
    spans["kept"][shown],
  )
  metrics["rotation_eval_time_s"] = time.perf_counter() - start_time
  return metrics


def gated_operator_spans(trained, encode, decode, operators, key) -> dict:
  """:func:`gated_rotation_spans` of each operator on one draw of test digits.

  ``config.eval_rotation_digits`` test digits (drawn by ``key``) are moved
  along each operator's :func:`gated_path_grid`, with one correlation gate
  and one digit classifier for all operators (module docstring).

  Returns:
    ``{"paths": [(coefficients, spans)] per operator, "labels", "level",
    "corrs", "found", "angles" (the autoencoder's own rotated
    reconstructions: best correlations, angles found, true angles),
    "classifier_accuracy"}``.
  """
  data, cfg = trained.data, trained.config
  k_pick, k_angle, k_train = jax.random.split(key, 3)
  x_all = np.asarray(data.x_test, np.float32)
  num = min(cfg.eval_rotation_digits, len(x_all))
  pick = np.sort(np.asarray(jax.random.permutation(k_pick, len(x_all)))[:num])
  x, labels = x_all[pick], np.asarray(data.labels_test)[pick]
  starts = _chunked(encode, x)
  upright = _chunked(decode, starts)

  # The autoencoder's own level: its reconstructions of truly rotated digits.
  angles = jax.random.uniform(k_angle, (num,), maxval=cfg.input_rotation)
  turned = _chunked(decode, _chunked(encode, np.asarray(rotate_images(x, angles))))
  level, corrs, found = rotation_gate_level(turned, upright)

  classifier = _digit_classifier(data, k_train)
  b = 1.0 / cfg.zeta3
  paths = []
  for op in operators:
    ts = gated_path_grid(op, starts, 1000 * b)
    frames = _decoded_paths(decode, op, starts, ts)
    spans = gated_rotation_spans(
      frames, labels, lambda im: predict(classifier, im), level, len(ts) // 2
    )
    paths.append((ts, spans))
  return {
    "paths": paths,
    "labels": labels,
    "level": level,
    "corrs": corrs,
    "found": found,
    "angles": np.asarray(angles),
    "classifier_accuracy": accuracy(classifier, x_all, data.labels_test),
  }


def _baseline_report(trained, workdir, summary) -> dict:
  """The metrics and figures that apply to a baseline (it has no operators).

  As for VAELLS: ``mse``, ``knn_class_accuracy``, ``log_likelihood`` and
  ``elbo`` on the test digits as presented (rotated for rotated MNIST),
  posterior-sample grids, the latent embedding and, for natural digits, the
  class consistency. The operator paths and rotation fidelity need operators
  and are left out.
  """
  workdir = pathlib.Path(workdir)
  data, cfg = trained.data, trained.config
  k_present, k_ll, k_grid, k_cons = jax.random.split(
    jax.random.PRNGKey(cfg.seed + 2), 4
  )
  x_in = np.asarray(data.x_test, np.float32)
  labels = np.asarray(data.labels_test)
  if cfg.input_rotation:
    x_in = np.asarray(
      jax.jit(rotate_images)(
        x_in, jax.random.uniform(k_present, x_in.shape[:1], maxval=cfg.input_rotation)
      )
    )
  codes = _chunked(jax.jit(trained.encode), x_in)
  recon = _chunked(jax.jit(trained.decode), codes)
  metrics = {
    "mse": float(np.mean((recon - x_in) ** 2)),
    "knn_class_accuracy": evaluation.knn_class_accuracy(codes, labels),
  }
  num = min(cfg.eval_ll_points, len(x_in))
  ll, elbo = trained.log_likelihood(k_ll, x_in[:num], None, cfg.eval_ll_samples)
  metrics.update(
    log_likelihood=float(ll.mean()),
    elbo=float(elbo.mean()),
    log_likelihood_points=num,
    log_likelihood_samples=cfg.eval_ll_samples,
  )
  samples = trained.sample_posterior(k_grid, x_in[:GRID_INPUTS], 8)
  image_plots.plot_posterior_grids(
    workdir / "posterior_samples.png",
    recon[:GRID_INPUTS],
    np.asarray(trained.decode(samples)),
    "posterior samples around inputs",
  )
  if not cfg.input_rotation and len(np.unique(labels)) > 1:
    metrics.update(_class_consistency(trained, data, k_cons))
  (flat_codes,) = evaluation.pca_2d(codes)
  plotting.plot_latent_embedding(
    workdir / "latent_by_class.png",
    flat_codes,
    labels,
    None,
    f"{cfg.model}: test codes (first two principal components)",
    "class",
  )
  write_markdown(workdir, {**summary, **metrics}, cfg, FIGURES)
  return metrics


def _decoded_paths(decode, op, starts, ts) -> np.ndarray:
  """``decode(expm(t op) z)`` for every start ``z`` and coefficient ``t``,
  ``GATED_CHUNK`` starts at a time: ``[N, T, D]`` for ``starts [N, d]``."""
  op = jnp.asarray(op, jnp.float32)[None]
  return np.concatenate(
    [
      np.asarray(
        decode(
          jnp.swapaxes(
            transport_path(op, jnp.ones((1, 1)), starts[i : i + GATED_CHUNK], ts),
            0,
            1,
          )
        )
      )
      for i in range(0, len(starts), GATED_CHUNK)
    ]
  )


def _digit_classifier(data, key):
  """The run's digit classifier, trained on its training digits."""
  return train_classifier(
    np.asarray(data.x_train, np.float32),
    np.asarray(data.labels_train),
    key=key,
    num_steps=CLASSIFIER_STEPS,
  )


def _operator_reach(cfg, decode, psi, spans, codes, labels, classifier, key) -> dict:
  """Each operator's reach (:mod:`vaells_jax.evaluation.reach`).

  ``config.eval_rotation_digits`` test digits (a fixed draw by ``key``) are
  moved along ``expm(t psi_m) f(x)`` for ``REACH_FRAMES`` coefficients
  evenly over ``[-spans[m], spans[m]]`` (the operator-path figure's range)
  and decoded ``GATED_CHUNK`` digits at a time.

  Returns:
    ``operator_reach_rms``, ``operator_reach_changed_fraction``,
    ``operator_reach_coefficient``, ``operator_reach_at_end``: lists over the
    operators (:func:`summarize_reach`); ``operator_reach_digits`` and
    ``operator_reach_start_class_kept`` (decoded start frames of the input's
    class).
  """
  num = min(cfg.eval_rotation_digits, len(codes))
  pick = np.sort(np.asarray(jax.random.permutation(key, len(codes)))[:num])
  starts, picked = codes[pick], labels[pick]

  def classify(images):
    return predict(classifier, np.clip(images, 0.0, 1.0))

  rows, kept = [], None
  for m, span in enumerate(spans):
    ts = np.linspace(-span, span, REACH_FRAMES)
    frames = _decoded_paths(decode, psi[m], starts, ts)
    reach = class_kept_reach(frames, picked, classify, REACH_FRAMES // 2)
    rows.append(summarize_reach(reach, ts))
    kept = reach["start_class_kept"]
  out = {
    f"operator_reach_{name}": [row[name] for row in rows]
    for name in ("rms", "changed_fraction", "coefficient", "at_end")
  }
  out.update(
    operator_reach_digits=num,
    operator_reach_start_class_kept=float(np.mean(kept)),
  )
  return out


def _class_consistency(trained, data, key, classifier=None):
  """Classifier accuracy and class consistency of decoded posterior samples
  (the classifier trained here from ``key`` unless given)."""
  k_train, k_sample = jax.random.split(key)
  if classifier is None:
    classifier = _digit_classifier(data, k_train)
  x_test = np.asarray(data.x_test, np.float32)
  labels = np.asarray(data.labels_test)
  num = min(CONSISTENCY_INPUTS, len(x_test))
  samples = trained.sample_posterior(k_sample, x_test[:num], CONSISTENCY_SAMPLES)
  decoded = np.asarray(trained.decode(samples)).reshape(-1, data.data_dim)
  kept = predict(classifier, decoded) == np.repeat(labels[:num], CONSISTENCY_SAMPLES)
  return {
    "classifier_test_accuracy": accuracy(classifier, x_test, labels),
    "class_consistency": float(kept.mean()),
  }


FIGURES = (
  ("latent_by_class.png", "Encoded test digits by class, anchors as x"),
  ("posterior_samples.png", "Posterior samples (centre: decoded input)"),
  ("rotation_grid.png", "Random test digits along the operator"),
  ("rotation_fidelity.png", "Rotation fidelity along the operator path"),
) + tuple(
  (f"operator_path_{m}.png", f"Extrapolated path of operator {m}") for m in range(16)
)
