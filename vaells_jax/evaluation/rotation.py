"""Rotation metrics of rotated-MNIST runs: how far a learned operator turns a digit.

The headline is the *gated* span (SPEC section 6, rotation fidelity):
:func:`best_rotation_matches` finds, for each decoded frame of a path, the
angle and Pearson correlation of the best-matching rotated copy of the
decoded start frame; :func:`rotation_gate_level` measures the correlation the
autoencoder itself reaches for truly rotated inputs; :func:`gated_rotation_spans`
follows each path from its start both ways while the angle turns
monotonically, the correlation stays at that level and a classifier still
gives the input's class; :func:`summarize_spans` reports the spans.

:func:`matched_angles` and :func:`rotation_path_stats` give the older,
ungated rise (the longest monotonic run of the least-squares angle against
the input, with no check that a frame is still the digit); :func:`path_span`
picks how far to follow an operator; :func:`fit_orbit_operator` fits the
reference operator to the encoder's orbits of rotated digits.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import scipy.stats

from vaells_jax.data.augment import rotate_images, rotated_copies

__all__ = [
  "ANGLE_STEP",
  "GATED_DIGITS",
  "GATE_PERCENTILE",
  "MAX_FRAME_STEP",
  "best_rotation_matches",
  "fit_orbit_operator",
  "gated_rotation_spans",
  "matched_angles",
  "operator_cosine",
  "gated_path_grid",
  "path_span",
  "rotation_gate_level",
  "rotation_path_stats",
  "summarize_spans",
]

# Degrees; a larger jump between frames breaks a rise. A path that turns the
# digit once over 37 frames moves it 10 degrees a frame: 3x that is a jump to
# another angle, not a rotation (60 let a barely trained operator "rise" over
# 100 degrees by chance jumps).
MAX_FRAME_STEP = 30.0
SPAN_MIN_SHARE = 0.25  # see _turning_rates
FRAME_DIVISIONS = 36  # frames per half turn of the fastest rotation (gated_path_grid)
GATED_SIDE_FRAMES = 180  # most frames each side of t = 0 (gated_path_grid)
# The correlation gate is this percentile of the best correlations the
# autoencoder reaches for truly rotated inputs (rotation_gate_level): 95 % of
# its own rotated reconstructions pass, so a frame that fails is less like a
# rotated start frame than nearly all true rotations are.
GATE_PERCENTILE = 5.0
GATED_DIGITS = 200  # held-out digits of the gated span (config.eval_rotation_digits)
ANGLE_STEP = 1.0  # degrees between the rotated copies a frame is matched against


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


def fit_orbit_operator(
  orbits, lags=(1, 2, 4), num_iter: int = 1500, learning_rate: float = 3e-3
) -> jax.Array:
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
    return sum(
      jnp.mean(
        jnp.sum(
          (z @ jax.scipy.linalg.expm(k * psi).T - jnp.roll(z, -k, axis=1)) ** 2, -1
        )
      )
      / k
      for k in lags
    )

  opt = optax.adam(learning_rate)

  def step(carry, _):
    psi, state = carry
    updates, state = opt.update(jax.grad(loss)(psi), state)
    return (psi + updates, state), None

  psi = jnp.zeros((z.shape[-1],) * 2, z.dtype)
  (psi, _), _ = jax.jit(lambda c: jax.lax.scan(step, c, None, num_iter))(
    (psi, opt.init(psi))
  )
  return psi


def operator_cosine(a, b) -> float:
  """``|cos|`` between two operators as vectors: ``|<a, b>| / (|a| |b|)``
  (an operator's sign is arbitrary)."""
  return float(abs(np.sum(a * b)) / np.linalg.norm(a) / np.linalg.norm(b))


def _longest_rise(steps) -> float:
  best = run = 0.0
  for s in steps:
    run = run + s if 0.0 <= s <= MAX_FRAME_STEP else 0.0
    best = max(best, run)
  return best


def _turning_rates(psi_m, starts) -> tuple[float, float]:
  """``(slowest, fastest)`` rotation rate of ``psi_m`` that moves the
  ``starts`` appreciably; without oscillating eigenvalues both are the
  largest ``|lambda|``.

  The slowest is the smallest ``|Im lambda|`` whose component of the starts
  (its *share*) is at least ``SPAN_MIN_SHARE`` of the largest share
  (:func:`path_span`); the fastest is the largest ``|Im lambda|`` whose
  *speed*, share times ``|Im lambda|`` (how fast that rotation moves the
  starts), is at least ``SPAN_MIN_SHARE`` of the largest speed. By speed,
  a plane the starts lie mostly in but that turns a hundred times slower
  does not hide the rotation that moves them (:func:`gated_path_grid`).
  """
  lam, vecs = np.linalg.eig(np.asarray(psi_m, np.float64))
  parts = np.linalg.solve(vecs, np.asarray(starts, np.float64).T)  # [d, R]
  share = np.median(np.abs(parts), axis=1)
  turning = np.abs(lam.imag) > np.abs(lam.real)
  if not turning.any():
    rho = np.abs(lam).max()
    return rho, rho
  rate = np.abs(lam.imag)
  share = np.where(turning, share, 0.0)
  speed = share * rate
  slowest = rate[share >= SPAN_MIN_SHARE * share.max()].min()
  fastest = rate[speed >= SPAN_MIN_SHARE * speed.max()].max()
  return slowest, fastest


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
  slowest, _ = _turning_rates(psi_m, starts)
  return float(min(np.pi / max(slowest, 1e-6), cap))


def gated_path_grid(psi_m, starts, cap: float) -> np.ndarray:
  """Coefficients of a gated rotation path's frames, ``[2 n + 1]``, ``0`` in
  the middle.

  The frames cover :func:`path_span` each way, at most
  ``GATED_SIDE_FRAMES`` frames a side, ``pi / (FRAME_DIVISIONS rho_max)``
  apart (a half turn in ``FRAME_DIVISIONS`` frames of ``rho_max``, the
  fastest rotation that moves the starts appreciably, :func:`_turning_rates`),
  so that a digit turned by any of the
  operator's rotations moves by a few degrees from frame to frame and the
  ``MAX_FRAME_STEP`` rule stops only at real jumps. Where the fastest
  rotation is the slowest (``rho_max = rho_min``) that is ``FRAME_DIVISIONS``
  frames a side over the half turn.
  """
  slowest, fastest = _turning_rates(psi_m, starts)
  span = min(np.pi / max(slowest, 1e-6), cap)
  step = np.pi / max(fastest, 1e-6) / FRAME_DIVISIONS
  side = int(min(np.ceil(span / step - 1e-9), GATED_SIDE_FRAMES))
  return np.arange(-side, side + 1) * min(step, span / side)


def best_rotation_matches(frames, references, step: float = ANGLE_STEP, chunk=25):
  """Angle and correlation of the best-matching rotated copy of each reference.

  Each reference is rotated by ``0, step, 2 step, ...`` degrees
  (:func:`~vaells_jax.data.augment.rotated_copies`); a frame's match is the
  copy with the largest Pearson correlation over the pixels.

  Args:
    frames: ``[N, T, 784]``, ``T`` frames per reference.
    references: ``[N, 784]``.
    step: angle grid spacing in degrees (over ``[0, 360)``).
    chunk: references rotated at once (memory: ``chunk * 360 / step`` images).

  Returns:
    ``(angles [N, T], correlations [N, T])``: angles in ``[0, 360)`` such
    that ``rotate(reference, angle)`` best matches the frame; the frame's
    correlation with that copy (0 for a constant frame).
  """
  frames = np.asarray(frames, np.float32)
  references = np.asarray(references, np.float32)
  num = round(360.0 / step)
  angles, corrs = [], []
  for i in range(0, len(references), chunk):
    a, c = _best_matches(
      jnp.asarray(frames[i : i + chunk]), references[i : i + chunk], num
    )
    angles.append(np.asarray(a))
    corrs.append(np.asarray(c))
  return np.concatenate(angles) * (360.0 / num), np.concatenate(corrs)


def _standardized(x):
  x = x - x.mean(axis=-1, keepdims=True)
  return x / jnp.maximum(jnp.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


@functools.partial(jax.jit, static_argnums=2)
def _best_matches(frames, references, num):
  copies = _standardized(rotated_copies(references, num))  # [n, A, 784]
  corr = jnp.einsum("ntp,nap->nta", _standardized(frames), copies)
  return jnp.argmax(corr, axis=-1), jnp.max(corr, axis=-1)


def rotation_gate_level(
  decoded_rotated, decoded_upright, percentile: float = GATE_PERCENTILE
):
  """The correlation the autoencoder reaches for truly rotated inputs.

  Args:
    decoded_rotated: ``[N, 784]`` ``g(f(rotate(x, angle)))`` of held-out
      digits ``x`` at random angles.
    decoded_upright: ``[N, 784]`` ``g(f(x))`` of the same digits.
    percentile: which percentile of the best correlations is the level.

  Returns:
    ``(level, correlations [N], angles [N])``: each decoded rotated digit's
    best correlation with a rotated copy of its decoded upright digit (the
    matching of :func:`best_rotation_matches`) and the angle found.
  """
  angles, corrs = best_rotation_matches(
    np.asarray(decoded_rotated)[:, None], decoded_upright
  )
  return float(np.percentile(corrs[:, 0], percentile)), corrs[:, 0], angles[:, 0]


def _gated_spans(angles, gates: dict, start: int):
  """Each path's span under each gate (``gates``: name -> ``[N, T]`` frames
  that pass), and under ``"gated"`` its oriented angles and kept frames:
  ``(spans {name: [N]}, angles [N, T], kept [N, T])``."""
  n, t = angles.shape
  out = {name: np.zeros(n) for name in gates}
  unwrapped, kept = np.zeros((n, t)), np.zeros((n, t), bool)
  for i in range(n):
    for name, ok in gates.items():
      span, lo, hi, sign, rel = _span_from_start(angles[i], ok[i], start)
      out[name][i] = span
      if name == "gated":
        unwrapped[i] = sign * rel
        kept[i, lo : hi + 1] = ok[i, start]
  return out, unwrapped, kept


def gated_rotation_spans(
  frames, labels, classify, level: float, start: int, step: float = ANGLE_STEP
) -> dict:
  """Two-sided spans of monotonic rotation that keep the digit, per path.

  Each frame is matched to rotated copies of its path's start frame
  (``frames[:, start]``, the decoded digit at ``t = 0``) by
  :func:`best_rotation_matches`, turned back by the angle found and given
  to ``classify``. From the start the path is followed in each direction of
  the coefficient until the first frame that fails a gate: its correlation
  below ``level`` (the correlation gate), its class not the input's (the
  class gate), or its angle stepping against the sense of rotation or by
  more than ``MAX_FRAME_STEP`` degrees from the previous frame. The sense
  (an operator's sign is arbitrary) is the one that gives the longer span;
  the two directions turn opposite ways. A start frame that fails the class
  gate has span 0.

  Args:
    frames: ``[N, T, 784]`` decoded frames at increasing coefficients.
    labels: ``[N]`` the inputs' classes.
    classify: ``[K, 784] images -> [K]`` classes, e.g. a digit classifier
      trained on upright digits.
    level: the correlation gate.
    start: index of ``t = 0`` along the paths.
    step: angle grid spacing of the matching.

  Returns:
    ``{"gated", "correlation_only", "class_only", "monotonic"}``: ``[N]``
    spans in degrees with both gates, each gate alone, and neither (only
    monotonic, steps of at most ``MAX_FRAME_STEP``); and
    ``"angles"`` ``[N, T]`` (unwrapped from the start, oriented to turn
    positive with the coefficient), ``"correlations"`` and ``"classes"``
    ``[N, T]``, ``"kept"`` ``[N, T]`` (the frames the gated span covers) and
    ``"start_class_kept"`` ``[N]`` (the start frame has the input's class).
  """
  frames = np.asarray(frames, np.float32)
  n, t, pixels = frames.shape
  angles, corrs = best_rotation_matches(frames, frames[:, start], step)
  derotated = np.asarray(rotate_images(frames.reshape(-1, pixels), -angles.reshape(-1)))
  classes = np.asarray(classify(np.clip(derotated, 0.0, 1.0))).reshape(n, t)
  labels = np.asarray(labels).reshape(n, 1)
  corr_ok, class_ok = corrs >= level, classes == labels
  gates = {
    "gated": corr_ok & class_ok,
    "correlation_only": corr_ok,
    "class_only": class_ok,
    "monotonic": np.ones_like(corr_ok),
  }
  out, unwrapped, kept = _gated_spans(angles, gates, start)
  out.update(
    angles=unwrapped,
    correlations=corrs,
    classes=classes,
    kept=kept,
    start_class_kept=class_ok[:, start],
  )
  return out


def _span_from_start(angles, ok, start):
  """``(span, lo, hi, sign, relative angles)`` of one path, see above."""
  steps = (np.diff(np.asarray(angles, np.float64)) + 180.0) % 360.0 - 180.0
  rel = np.concatenate([[0.0], np.cumsum(steps)])
  rel -= rel[start]
  if not ok[start]:
    return 0.0, start, start, 1.0, rel
  best = (-1.0, start, start, 1.0)
  for sign in (1.0, -1.0):
    hi = start
    while hi + 1 < len(rel) and ok[hi + 1]:
      if not 0.0 <= sign * (rel[hi + 1] - rel[hi]) <= MAX_FRAME_STEP:
        break
      hi += 1
    lo = start
    while lo > 0 and ok[lo - 1]:
      if not 0.0 <= sign * (rel[lo] - rel[lo - 1]) <= MAX_FRAME_STEP:
        break
      lo -= 1
    span = sign * (rel[hi] - rel[lo])
    if span > best[0]:
      best = (span, lo, hi, sign)
  return (float(best[0]), *best[1:], rel)


def summarize_spans(spans: dict, labels, level: float, prefix: str = "rotation_"):
  """The summary numbers of :func:`gated_rotation_spans` (degrees).

  ``{prefix}gated_span_degrees`` (median: the headline),
  ``{prefix}gated_span_quartiles`` ``[25 %, 75 %]``,
  ``{prefix}gated_span_per_class`` (median per class ``0..9``, None for a
  class without digits), ``{prefix}gated_digits``,
  ``{prefix}correlation_gate_only_span_degrees`` and
  ``{prefix}class_gate_only_span_degrees`` (medians with one gate),
  ``{prefix}gate_level`` and ``{prefix}start_class_kept`` (the fraction of
  start frames with the input's class).
  """
  gated = np.asarray(spans["gated"])
  labels = np.asarray(labels)
  per_class = [
    float(np.median(gated[labels == c])) if np.any(labels == c) else None
    for c in range(10)
  ]
  return {
    f"{prefix}gated_span_degrees": float(np.median(gated)),
    f"{prefix}gated_span_quartiles": np.percentile(gated, [25, 75]).tolist(),
    f"{prefix}gated_span_per_class": per_class,
    f"{prefix}gated_digits": len(gated),
    f"{prefix}correlation_gate_only_span_degrees": float(
      np.median(spans["correlation_only"])
    ),
    f"{prefix}class_gate_only_span_degrees": float(np.median(spans["class_only"])),
    f"{prefix}gate_level": float(level),
    f"{prefix}start_class_kept": float(np.mean(spans["start_class_kept"])),
  }
