"""Rotation metrics of rotated-MNIST runs: how far a learned operator turns a digit.

:func:`matched_angles` finds the angle at which a rotated copy of a digit best
matches each decoded frame; :func:`rotation_path_stats` turns those angles
along a path into its longest monotonic rise; :func:`path_span` picks how far
to follow an operator; :func:`fit_orbit_operator` fits the reference operator
to the encoder's orbits of rotated digits.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import scipy.stats

from vaells_jax.data.augment import rotated_copies

__all__ = [
  "MAX_FRAME_STEP",
  "fit_orbit_operator",
  "matched_angles",
  "path_span",
  "rotation_path_stats",
]

# Degrees; a larger jump between frames breaks a rise. A path that turns the
# digit once over 37 frames moves it 10 degrees a frame: 3x that is a jump to
# another angle, not a rotation (60 let a barely trained operator "rise" over
# 100 degrees by chance jumps).
MAX_FRAME_STEP = 30.0
SPAN_MIN_SHARE = 0.25  # see path_span


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


def _longest_rise(steps) -> float:
  best = run = 0.0
  for s in steps:
    run = run + s if 0.0 <= s <= MAX_FRAME_STEP else 0.0
    best = max(best, run)
  return best


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
