"""The ``"gauss_newton"`` solve as one Pallas kernel: ``"gauss_newton_fused"``.

The same iterations as :mod:`vaells_jax.core.solvers.gauss_newton` (its
docstring has the method), each pair's results the same to rounding
(``tests/test_gauss_newton_fused.py``), written for a GPU: on a GPU the
blocked XLA loop is a few dozen small kernels per iteration and a round trip
to the host per block of iterations (docs/studies/benchmarks-gpu.md); here each
program of the kernel's grid holds :data:`BLOCK` pairs in registers and
iterates them until all have stopped (a device-side loop), so a solve is one
launch.

Arrays in the kernel are rows of ``[BLOCK]`` pairs (Triton wants every
dimension a power of two, so the ``M`` coefficients and ``K`` trial
dampings are Python lists of rows and their sums and minima are unrolled);
the operators enter as ``4 M`` scalars. The kernel is Triton's (a GPU,
CUDA or ROCm); in a program for a CPU it runs in Pallas's interpret mode
(for tests: a CPU wants ``"gauss_newton"``), and for any other platform
(a TPU) the solve is ``"gauss_newton"``'s.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from vaells_jax.core.expm import (
  MAX_SQUARINGS,
  _cosh_sinhc,
  cosh_minus_one,
  cosh_sinhc_slope,
)
from vaells_jax.core.solvers import gauss_newton
from vaells_jax.core.solvers.columns import solve_columns
from vaells_jax.core.solvers.gauss_newton import (
  _DAMPING,
  _GIVE_UP,
  _START_DAMPING,
  RADIUS,
)
from vaells_jax.core.solvers.pairs import parts_2x2

__all__ = ["BLOCK", "solve_gauss_newton_fused"]

BLOCK = 128  # pairs per program of the kernel's grid: one per thread of _WARPS warps
_WARPS = 4


def _combine(weights, rows):
  return sum(weights[m] * rows[m] for m in range(len(rows)))


def _dot(u, v):
  return sum(x * y for x, y in zip(u, v, strict=True))


def _forward(parts, c, z0, z1, *, with_slope):
  """:func:`vaells_jax.core.solvers.pairs.forward_2x2` on rows: ``(mu, h,
  a01, a10, delta, scale, sinhc, slope, v0, v1, w0, w1, r0, r1)``."""
  mu, h, a01, a10 = (_combine(p, c) for p in parts)
  delta = h * h + a01 * a10
  if with_slope:
    cosh, sinhc, slope = cosh_sinhc_slope(delta)
  else:
    (cosh, sinhc), slope = _cosh_sinhc(delta), None
  scale_m1 = jnp.expm1(mu)
  cosh_m1 = cosh_minus_one(delta, cosh)
  scale = 1.0 + scale_m1
  v0 = h * z0[0] + a01 * z0[1]
  v1 = a10 * z0[0] - h * z0[1]
  shift = scale_m1 * cosh + cosh_m1
  s0 = shift * z0[0] + scale * sinhc * v0
  s1 = shift * z0[1] + scale * sinhc * v1
  w0, w1 = z0[0] + s0, z0[1] + s1
  r0, r1 = s0 - (z1[0] - z0[0]), s1 - (z1[1] - z0[1])
  return mu, h, a01, a10, scale, sinhc, slope, v0, v1, w0, w1, r0, r1


def _data(parts, c, z0, z1):
  """``f`` (:func:`vaells_jax.core.solvers.pairs.data_2x2`, its NaN beyond
  ``expm_small``'s range included)."""
  mu, h, a01, a10, *_, r0, r1 = _forward(parts, c, z0, z1, with_slope=False)
  value = 0.5 * (r0 * r0 + r1 * r1)
  a00, a11 = mu + h, mu - h
  norm = jnp.maximum(jnp.abs(a00) + jnp.abs(a10), jnp.abs(a01) + jnp.abs(a11))
  return jnp.where(norm > 0.5 * 2.0**MAX_SQUARINGS, jnp.nan, value)


def _objective(parts, c, z0, z1, l1):
  """``F = f + l1 ||c||_1``, ``inf`` where not finite."""
  value = _data(parts, c, z0, z1) + l1 * sum(jnp.abs(u) for u in c)
  return jnp.where(jnp.isfinite(value), value, jnp.inf)


def _jacobian(parts, c, z0, z1):
  """:func:`vaells_jax.core.solvers.gauss_newton._jacobian_2x2` on rows."""
  _, h, a01, a10, scale, sinhc, slope, v0, v1, w0, w1, r0, r1 = _forward(
    parts, c, z0, z1, with_slope=True
  )
  d0 = scale * (0.5 * sinhc * z0[0] + slope * v0)
  d1 = scale * (0.5 * sinhc * z0[1] + slope * v1)
  e_s = scale * sinhc
  by_part = (
    (w0, w1),
    (2.0 * h * d0 + e_s * z0[0], 2.0 * h * d1 - e_s * z0[1]),
    (a10 * d0 + e_s * z0[1], a10 * d1),
    (a01 * d0, a01 * d1 + e_s * z0[0]),
  )
  jac = [
    [sum(parts[k][m] * by_part[k][i] for k in range(4)) for m in range(len(c))]
    for i in range(2)
  ]
  return 0.5 * (r0 * r0 + r1 * r1), r0, r1, jac[0], jac[1]


def _iterate(parts, state, z0, z1, l1, tol):
  """:func:`vaells_jax.core.solvers.gauss_newton._iterate` on rows."""
  c, objective, damping, error_was, done, num_iter = state
  value, r0, r1, j0, j1 = _jacobian(parts, c, z0, z1)
  ok = jnp.isfinite(value) & jnp.isfinite(objective)
  sign, q, free = [], [], []
  for m, cm in enumerate(c):
    grad = j0[m] * r0 + j1[m] * r1
    s = jnp.where(
      cm != 0,
      jnp.sign(cm),
      jnp.where(grad + l1 < 0, 1.0, jnp.where(grad - l1 > 0, -1.0, 0.0)),
    )
    f = ok & (s != 0)
    sign.append(s)
    free.append(f)
    q.append(jnp.where(f, grad + l1 * s, 0.0))
    j0[m], j1[m] = jnp.where(f, j0[m], 0.0), jnp.where(f, j1[m], 0.0)
  error = jnp.where(ok, jnp.sqrt(sum(u * u for u in q)), jnp.inf)
  a, b, d = _dot(j0, j0), _dot(j0, j1), _dot(j1, j1)
  jq0, jq1 = _dot(j0, q), _dot(j1, q)
  f_trials, trials = [], []
  for scale in _DAMPING:
    lam = scale * damping * jnp.maximum(a + d, 1e-30)
    det = (lam + a) * (lam + d) - b * b
    y0 = ((lam + d) * jq0 - b * jq1) / det
    y1 = ((lam + a) * jq1 - b * jq0) / det
    step = [-(q[m] - j0[m] * y0 - j1[m] * y1) / lam for m in range(len(c))]
    mu, h, a01, a10 = (_combine(p, step) for p in parts)
    norm = jnp.sqrt(2.0 * (mu * mu + h * h) + a01 * a01 + a10 * a10)
    cut = jnp.minimum(1.0, RADIUS / jnp.maximum(norm, 1e-30))
    trial = [cm + s * cut for cm, s in zip(c, step, strict=True)]
    trial = [
      jnp.where(f & (t * s > 0), t, 0.0)
      for t, f, s in zip(trial, free, sign, strict=True)
    ]
    trials.append(trial)
    f_trials.append(_objective(parts, trial, z0, z1, l1))
  # The first lowest trial (argmin), its damping and coefficients.
  lowest, chosen_scale, chosen = f_trials[0], _DAMPING[0], trials[0]
  for scale, f, trial in zip(_DAMPING[1:], f_trials[1:], trials[1:], strict=True):
    lower = f < lowest
    lowest = jnp.where(lower, f, lowest)
    chosen_scale = jnp.where(lower, scale, chosen_scale)
    chosen = [jnp.where(lower, t, u) for t, u in zip(trial, chosen, strict=True)]
  active = ~done
  take = active & ok & (lowest < objective)
  new_damping = jnp.where(take, damping * chosen_scale / 3.0, damping * 1e3)
  unmoved = functools.reduce(
    jnp.logical_and, [t == u for t, u in zip(trials[-1], c, strict=True)]
  )
  stuck = ~take & ((damping > _GIVE_UP) | unmoved)
  return (
    [jnp.where(take, t, u) for t, u in zip(chosen, c, strict=True)],
    jnp.where(take, lowest, objective),
    jnp.where(active, jnp.maximum(new_damping, 1e-12), damping),
    jnp.where(active, error, error_was),
    done | ~ok | (error <= tol) | stuck,
    num_iter + active.astype(num_iter.dtype),
  )


def _kernel(parts_ref, *refs, num_ops, max_iter, tol):
  """One program: :data:`BLOCK` pairs from their starts to their results."""
  *c, z00, z01, z10, z11, l1 = (r[...] for r in refs[: num_ops + 5])
  z0, z1 = (z00, z01), (z10, z11)
  parts = [[parts_ref[k * num_ops + m] for m in range(num_ops)] for k in range(4)]
  state = (
    c,
    _objective(parts, c, z0, z1, l1),
    jnp.full_like(l1, _START_DAMPING),
    jnp.full_like(l1, jnp.inf),
    jnp.zeros(l1.shape, bool),
    jnp.zeros(l1.shape, jnp.int32),
  )

  def running(carry):
    i, state = carry
    return (i < max_iter) & (jnp.max(jnp.where(state[4], 0, 1)) > 0)

  def body(carry):
    i, state = carry
    return i + 1, _iterate(parts, state, z0, z1, l1, tol)

  c, _, _, error, _, num_iter = jax.lax.while_loop(running, body, (0, state))[1]
  for ref, row in zip(refs[num_ops + 5 :], (*c, num_iter, error), strict=True):
    ref[...] = row


def fused_solve(coeffs, psi, z0, z1, l1, *, max_iter, tol, interpret):
  """``coeffs [M, P]``, ``z0, z1 [2, P]``, ``l1 [P]`` -> ``(coeffs [M, P],
  num_iter [P], error [P])`` (the layout of
  :func:`vaells_jax.core.solvers.columns.solve_columns`'s chunks; on a GPU
  it makes one chunk of every start of every pair)."""
  num_ops, num_pairs = coeffs.shape
  padded = -(-num_pairs // BLOCK) * BLOCK
  rows = [*coeffs, *z0, *z1, l1]  # padding pairs (all zero) stop at once
  rows = [jnp.pad(r, (0, padded - num_pairs)) for r in rows]
  parts = jnp.concatenate(parts_2x2(psi)).astype(coeffs.dtype)  # [4 M]
  size = max(8, 1 << (len(parts) - 1).bit_length())  # a power of two
  parts = jnp.pad(parts, (0, size - len(parts)))
  row = pl.BlockSpec((BLOCK,), lambda i: (i,))
  kwargs = {}
  if not interpret:
    from jax.experimental.pallas import triton as pl_triton

    kwargs["compiler_params"] = pl_triton.CompilerParams(num_warps=_WARPS)
  out = pl.pallas_call(
    functools.partial(_kernel, num_ops=num_ops, max_iter=max_iter, tol=tol),
    out_shape=[jax.ShapeDtypeStruct((padded,), coeffs.dtype)] * num_ops
    + [
      jax.ShapeDtypeStruct((padded,), jnp.int32),
      jax.ShapeDtypeStruct((padded,), coeffs.dtype),
    ],
    grid=(padded // BLOCK,),
    in_specs=[pl.BlockSpec((size,), lambda i: (0,))] + [row] * len(rows),
    out_specs=[row] * (num_ops + 2),
    interpret=interpret,
    **kwargs,
  )(parts, *rows)
  out = [o[:num_pairs] for o in out]
  return jnp.stack(out[:num_ops]), out[num_ops], out[num_ops + 1]


def solve_gauss_newton_fused(init, psi, z0, z1, l1_weight, *, max_iter, tol):
  """As :func:`vaells_jax.core.solvers.gauss_newton.solve_gauss_newton`
  (``d = 2`` only), the whole solve one kernel (module docstring)."""
  if psi.shape[-1] != 2:
    raise ValueError(
      f'method="gauss_newton_fused" solves 2-D codes (d = 2), got d = '
      f'{psi.shape[-1]}; use "pgd" or "fista".'
    )

  def fused(interpret):
    return lambda c, *a: fused_solve(
      c, psi, *a, max_iter=max_iter, tol=tol, interpret=interpret
    )

  def unfused(c, *a):
    return gauss_newton._solve_chunk(c, psi, *a, max_iter=max_iter, tol=tol)

  def solve_chunk(*columns):
    return jax.lax.platform_dependent(
      *columns, cpu=fused(True), cuda=fused(False), rocm=fused(False), default=unfused
    )

  return solve_columns(solve_chunk, init, z0, z1, l1_weight)
