"""Evaluation of a model trained on 28 x 28 digit images (rotated / natural MNIST).

Metrics (paper section 5, appendix D; SPEC section 6):

* ``log_likelihood`` and ``elbo``: importance-sampled over
  ``config.eval_ll_points`` test points with ``config.eval_ll_samples``
  samples each (:mod:`vaells_jax.likelihood`);
* ``mse``: mean squared pixel error of ``g(f(x))`` on every test digit;
* ``knn_class_accuracy``: leave-one-out 1-NN digit class of the test codes;
* rotated inputs (``config.input_rotation > 0``): ``rotation_span_degrees``
  and ``rotation_spearman``: along the path ``expm(t psi) f(x)`` of the
  strongest operator from an upright digit (``|t|`` up to ``pi / rho``, a half
  turn each way of the slowest rotation of the operator that moves the
  digits, :func:`path_span`), the angle at which a rotated copy of the input
  best matches each decoded frame; the longest monotonic rise of that angle
  (frame steps of 0 to ``MAX_FRAME_STEP`` degrees) and its rank correlation
  with ``t`` (median over one digit per class; also the best);
  ``reference_cosine``, ``|cos|`` between that operator and the reference
  :func:`fit_orbit_operator` fits to the encoder's orbits of rotated training
  digits, and ``reference_rotation_span_degrees``, the reference's median rise
  (what the encoder allows);
* natural digits: ``class_consistency``, the fraction of decoded posterior
  samples that a classifier trained on the training digits assigns the
  input's class, with that classifier's own ``classifier_test_accuracy``.

Figures: posterior-sample grids, extrapolated paths of each operator, the
latent embedding (first two principal components), rotation fidelity.
"""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import optax
import scipy.stats

from vaells_jax import evaluation, plotting
from vaells_jax.classifier import accuracy, predict, train_classifier
from vaells_jax.data.mnist import rotate_images, rotated_copies
from vaells_jax.likelihood import importance_log_likelihood
from vaells_jax.report import write_markdown
from vaells_jax.transport import transport_path

__all__ = ["evaluate_and_report", "fit_orbit_operator", "matched_angles",
           "path_span", "rotation_path_stats"]

GRID_INPUTS = 6  # posterior-sample grids
PATH_FRAMES = 11  # columns of the operator-path figures
FIDELITY_FRAMES = 37  # frames along each rotation-fidelity path
# Degrees; a larger jump between frames breaks a rise. A path that turns the
# digit once over the FIDELITY_FRAMES moves it 10 degrees a frame: 3x that is
# a jump to another angle, not a rotation (60 let a barely trained operator
# "rise" over 100 degrees by chance jumps).
MAX_FRAME_STEP = 30.0
SPAN_MIN_SHARE = 0.25  # see path_span
REFERENCE_DIGITS = 300  # training digits whose orbits fit the reference operator
REFERENCE_ANGLES = 36  # rotated copies per digit (10 degrees apart)
CONSISTENCY_INPUTS = 500
CONSISTENCY_SAMPLES = 8
CHUNK = 500
CLASSIFIER_STEPS = 600


def matched_angles(frames, original, step: float = 1.0) -> np.ndarray:
  """For each frame, the angle (degrees) at which rotated ``original`` fits best.

  Args:
    frames: ``[T, 784]`` decoded images.
    original: ``[784]`` the upright input.
    step: angle grid spacing in degrees (over ``[0, 360)``).

  Returns:
    ``[T]`` angles in ``[0, 360)`` minimising the mean squared pixel error.
  """
  num = round(360.0 / step)
  angles = 360.0 * np.arange(num) / num
  rotated = np.asarray(rotated_copies(np.asarray(original)[None], num))[0]
  frames = np.asarray(frames, np.float64)
  err = ((frames[:, None, :] - rotated[None]) ** 2).mean(axis=-1)
  return angles[np.argmin(err, axis=1)]


def rotation_path_stats(coeffs, angles):
  """Unwrapped angles, longest monotonic rise and rank correlation of a path.

  An operator's sign is arbitrary, so the angles count as rising in whichever
  direction of the coefficient gives the longer run. The rise is the largest
  ``angle[j] - angle[i]`` over runs ``i..j`` whose every step is in
  ``[0, MAX_FRAME_STEP]`` degrees; the angles are unwrapped (period 360)
  along the path.

  Args:
    coeffs: ``[T]`` increasing path coefficients.
    angles: ``[T]`` matched angles in degrees.

  Returns:
    ``(unwrapped [T], rise_degrees, spearman)``: the unwrapped angles,
    oriented to rise along the longer run; ``|spearman|`` of the angles
    against the coefficients (NaN if the angle never changes).
  """
  unwrapped = np.unwrap(np.asarray(angles, np.float64), period=360.0)
  if np.ptp(unwrapped) == 0:
    return unwrapped, 0.0, float("nan")
  rho = abs(scipy.stats.spearmanr(coeffs, unwrapped).statistic)
  rises = [_longest_rise(np.diff(sign * unwrapped)) for sign in (1.0, -1.0)]
  sign = 1.0 if rises[0] >= rises[1] else -1.0
  return sign * unwrapped, float(max(rises)), float(rho)


def fit_orbit_operator(orbits, lags=(1, 2, 4), num_iter: int = 1500,
                       learning_rate: float = 3e-3) -> jax.Array:
  """The one operator that best carries closed orbits forward: a reference.

  Minimises ``sum_k mean_{n, j} ||expm(k psi) z[n, j] - z[n, j + k]||^2 / k``
  over ``k`` in ``lags`` (indices mod ``K``), with Adam from ``psi = 0``:
  ``expm(psi)`` is one step along every orbit. Fed the encodings of each digit
  rotated by ``360 j / K`` degrees, it is the best rotation operator the
  encoder allows, fitted directly rather than through the VAELLS objective;
  how close the learned operator comes to it measures how well ``Psi`` was
  learned, apart from the encoder.

  Args:
    orbits: ``[N, K, d]`` closed orbits, equally spaced.
    lags: steps ahead to fit (longer lags keep the fit stable along the orbit).
    num_iter: Adam iterations.
    learning_rate: Adam rate.

  Returns:
    ``[d, d]``.
  """
  z = jnp.asarray(orbits, jnp.float32)

  def loss(psi):
    return sum(jnp.mean(jnp.sum((z @ jax.scipy.linalg.expm(k * psi).T
                                 - jnp.roll(z, -k, axis=1)) ** 2, -1)) / k
               for k in lags)

  opt = optax.adam(learning_rate)

  def step(carry, _):
    psi, state = carry
    updates, state = opt.update(jax.grad(loss)(psi), state)
    return (psi + updates, state), None

  psi = jnp.zeros((z.shape[-1],) * 2, z.dtype)
  (psi, _), _ = jax.jit(lambda c: jax.lax.scan(step, c, None, num_iter))(
      (psi, opt.init(psi)))
  return psi


def _longest_rise(steps) -> float:
  best = run = 0.0
  for s in steps:
    run = run + s if 0.0 <= s <= MAX_FRAME_STEP else 0.0
    best = max(best, run)
  return best


def _chunked(fn, x, size=CHUNK):
  return np.concatenate([np.asarray(fn(x[i:i + size]))
                         for i in range(0, len(x), size)])


def path_span(psi_m, starts, cap: float) -> float:
  """Coefficient range ``pi / rho``: a half turn each way of a rotation.

  ``rho`` is the slowest rotation of ``psi_m`` that moves the ``starts``
  appreciably: the smallest ``|Im lambda|`` over the eigenvalues that
  oscillate (``|Im| > |Re|``) and whose component of the starts (median over
  them of ``|a_k|`` in ``starts = sum_k a_k v_k``, unit ``v_k``) is at least
  ``SPAN_MIN_SHARE`` of the largest such component. An encoder's orbit of a
  rotated digit is periodic with harmonics (a digit like 0, 1 or 8 looks alike
  after half a turn), so the operator that follows it has eigenvalues at
  ``i w, 2 i w, ...``; the orbit's period is that of the slowest, ``2 pi / w``.
  Without oscillating eigenvalues ``rho`` is the largest ``|lambda|``.

  Args:
    psi_m: one operator ``[d, d]``.
    starts: ``[R, d]`` points the path starts from (inference scale).
    cap: the largest range returned.
  """
  lam, vecs = np.linalg.eig(np.asarray(psi_m, np.float64))
  parts = np.linalg.solve(vecs, np.asarray(starts, np.float64).T)  # [d, R]
  share = np.median(np.abs(parts), axis=1)
  turning = np.abs(lam.imag) > np.abs(lam.real)
  if turning.any():
    share = np.where(turning, share, 0.0)
    rho = np.abs(lam.imag)[share >= SPAN_MIN_SHARE * share.max()].min()
  else:
    rho = np.abs(lam).max()
  return float(min(np.pi / max(rho, 1e-6), cap))


def evaluate_and_report(trained, workdir, summary) -> dict:
  """Computes the image metrics, writes the figures and ``summary.md``.

  Args:
    trained: a :class:`~vaells_jax.api.TrainedVAELLS` with a ``conv``
      network (28 x 28 images).
    workdir: output folder.
    summary: training facts to include in ``summary.md``.

  Returns:
    The metrics.
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
  metrics = {"mse": float(np.mean((recon - x_in) ** 2)),
             "knn_class_accuracy": evaluation.knn_class_accuracy(codes, labels)}

  num = min(cfg.eval_ll_points, len(x_in))
  ll, elbo = importance_log_likelihood(
      model, params, psi,
      {"x": x_in[:num], "source": {"x": x_orig[:num], "label": labels[:num]}},
      k_ll, cfg.eval_ll_samples)
  metrics.update(log_likelihood=float(ll.mean()), elbo=float(elbo.mean()),
                 log_likelihood_points=num,
                 log_likelihood_samples=cfg.eval_ll_samples)

  # One upright test digit per class, moved along each operator.
  firsts = np.asarray([np.flatnonzero(labels == c)[0] for c in np.unique(labels)])
  magnitudes = np.linalg.norm(np.asarray(psi), axis=(1, 2))
  starts = codes[firsts] if not cfg.input_rotation else _chunked(
      encode, x_orig[firsts])
  b = 1.0 / cfg.zeta3

  def decoded_path(op, ts):  # [R, T, 784]: the starts moved along op [d, d]
    path = transport_path(op[None], jnp.ones((1, 1)), starts, ts)
    return np.asarray(decode(jnp.swapaxes(path, 0, 1)))

  def rotation_stats(op):  # matched angles along a half turn each way
    ts = np.linspace(-1, 1, FIDELITY_FRAMES) * path_span(op, starts, 1000 * b)
    stats = [rotation_path_stats(ts, matched_angles(f, x_orig[i]))
             for f, i in zip(decoded_path(op, ts), firsts, strict=True)]
    return ts, *(np.asarray([s[k] for s in stats]) for k in range(3))

  for m in range(cfg.num_ops):
    # A quarter turn each way for rotated digits; up to 10 b otherwise.
    span = (path_span(psi[m], starts, cap=1000 * b) / 2 if cfg.input_rotation
            else path_span(psi[m], starts, cap=10 * b))
    ts = np.linspace(-span, span, PATH_FRAMES)
    plotting.plot_operator_paths(
        workdir / f"operator_path_{m}.png", decoded_path(psi[m], ts), ts,
        f"operator {m} (|psi|_F = {magnitudes[m]:.3g})")

  # As in paper fig. 5, the sampling scale is enlarged for rotated digits so
  # that the samples turn visibly: mean |c| = path_span / 8 (an eighth of a
  # half turn of the slowest rotation path_span finds).
  m = int(np.argmax(magnitudes))
  grid_scale = path_span(psi[m], starts, 1000 * b) / 8 if cfg.input_rotation else b
  samples = trained.sample_posterior(k_grid, x_in[:GRID_INPUTS], 8, grid_scale)
  plotting.plot_posterior_grids(
      workdir / "posterior_samples.png", recon[:GRID_INPUTS],
      np.asarray(trained.decode(samples)),
      f"posterior samples around inputs (Laplace scale {grid_scale:.3g})")

  if cfg.input_rotation:
    ts, unwrapped, rises, rhos = rotation_stats(psi[m])
    metrics.update(rotation_span_degrees=float(np.median(rises)),
                   rotation_span_degrees_best=float(rises.max()),
                   rotation_spearman=float(np.nanmedian(rhos)))
    plotting.plot_rotation_fidelity(workdir / "rotation_fidelity.png", ts,
                                    unwrapped, rises)
    # The reference: the operator fitted to the encoder's own rotation orbits.
    orbits = _chunked(encode, np.asarray(rotated_copies(
        data.x_train[:REFERENCE_DIGITS], REFERENCE_ANGLES)).reshape(
            -1, data.data_dim)).reshape(-1, REFERENCE_ANGLES, cfg.latent_dim)
    reference = np.asarray(fit_orbit_operator(orbits), np.float64)
    learned = np.asarray(psi[m], np.float64)
    metrics.update(
        reference_cosine=float(abs(np.sum(learned * reference))
                               / np.linalg.norm(learned)
                               / np.linalg.norm(reference)),
        reference_rotation_span_degrees=float(np.median(
            rotation_stats(reference)[2])))
  elif len(firsts) > 1:
    metrics.update(_class_consistency(trained, data, k_cons))

  anchors = np.asarray(encode(np.asarray(params["anchors"]).reshape(
      -1, data.data_dim)))
  flat_codes, flat_anchors = evaluation.pca_2d(codes, anchors)
  plotting.plot_latent_embedding(
      workdir / "latent_by_class.png", flat_codes, labels, flat_anchors,
      "test codes (first two principal components), anchors as x", "class")
  metrics["operator_magnitudes"] = magnitudes.tolist()
  write_markdown(workdir, {**summary, **metrics}, cfg, FIGURES)
  return metrics


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
      jax.random.PRNGKey(cfg.seed + 2), 4)
  x_in = np.asarray(data.x_test, np.float32)
  labels = np.asarray(data.labels_test)
  if cfg.input_rotation:
    x_in = np.asarray(jax.jit(rotate_images)(x_in, jax.random.uniform(
        k_present, x_in.shape[:1], maxval=cfg.input_rotation)))
  codes = _chunked(jax.jit(trained.encode), x_in)
  recon = _chunked(jax.jit(trained.decode), codes)
  metrics = {"mse": float(np.mean((recon - x_in) ** 2)),
             "knn_class_accuracy": evaluation.knn_class_accuracy(codes, labels)}
  num = min(cfg.eval_ll_points, len(x_in))
  ll, elbo = trained.log_likelihood(k_ll, x_in[:num], None, cfg.eval_ll_samples)
  metrics.update(log_likelihood=float(ll.mean()), elbo=float(elbo.mean()),
                 log_likelihood_points=num,
                 log_likelihood_samples=cfg.eval_ll_samples)
  samples = trained.sample_posterior(k_grid, x_in[:GRID_INPUTS], 8)
  plotting.plot_posterior_grids(
      workdir / "posterior_samples.png", recon[:GRID_INPUTS],
      np.asarray(trained.decode(samples)), "posterior samples around inputs")
  if not cfg.input_rotation and len(np.unique(labels)) > 1:
    metrics.update(_class_consistency(trained, data, k_cons))
  (flat_codes,) = evaluation.pca_2d(codes)
  plotting.plot_latent_embedding(
      workdir / "latent_by_class.png", flat_codes, labels, None,
      f"{cfg.model}: test codes (first two principal components)", "class")
  write_markdown(workdir, {**summary, **metrics}, cfg, FIGURES)
  return metrics


def _class_consistency(trained, data, key):
  """Classifier accuracy and class consistency of decoded posterior samples."""
  k_train, k_sample = jax.random.split(key)
  classifier = train_classifier(np.asarray(data.x_train, np.float32),
                                np.asarray(data.labels_train), key=k_train,
                                num_steps=CLASSIFIER_STEPS)
  x_test = np.asarray(data.x_test, np.float32)
  labels = np.asarray(data.labels_test)
  num = min(CONSISTENCY_INPUTS, len(x_test))
  samples = trained.sample_posterior(k_sample, x_test[:num], CONSISTENCY_SAMPLES)
  decoded = np.asarray(trained.decode(samples)).reshape(-1, data.data_dim)
  kept = predict(classifier, decoded) == np.repeat(labels[:num],
                                                   CONSISTENCY_SAMPLES)
  return {"classifier_test_accuracy": accuracy(classifier, x_test, labels),
          "class_consistency": float(kept.mean())}


FIGURES = (
    ("latent_by_class.png", "Encoded test digits by class, anchors as x"),
    ("posterior_samples.png", "Posterior samples (centre: decoded input)"),
    ("rotation_fidelity.png", "Rotation fidelity along the operator path"),
) + tuple((f"operator_path_{m}.png", f"Extrapolated path of operator {m}")
          for m in range(16))
