"""The original method of coefficient inference, in NumPy/SciPy, as a reference.

The VAELLS research code (``trans_opt_objectives.py``) solves every pair
separately, one pair, anchor and restart at a time in Python loops, in
float64, with::

    minimize(transOptObj_c, c0, args=(Psi, x0, x1, zeta), method="CG",
             jac=transOptDerv_c, options={"maxiter": 50, "disp": False},
             tol=10^-7)

on ``1/2 ||z1 - expm(A(c)) z0||^2 + zeta ||c||_1``. In Python ``10^-7`` is a
bitwise XOR, ``-13``; ``tol`` becomes CG's ``gtol``, and a gradient norm is
never ``<= -13``, so CG runs its 50 iterations unless the line search fails.
Its gradient is an eigendecomposition formula (``transOptDerv_c``), evaluated
apart from the objective (each computes its own ``expm``). Its starts:

* posterior pairs (``compute_posterior_coeff``): one start, ``U[0, 1]``;
* prior pairs (``compute_prior_obj``): restart ``r`` from
  ``U[coeffRandStart + r coeffRandAdd, coeffRandStart + (r + 1) coeffRandAdd]``,
  ``-2.5`` and ``2.5`` in its flags, so ``U[-2.5, 0]`` then ``U[0, 2.5]``;
  the restart with the lowest objective is kept.

:func:`original_cg` and :func:`original_step_inference` reproduce that.
:func:`default_tol_cg` is *not* the original: scipy CG at its default
tolerance (``gtol=1e-5``), which stops after a few iterations; it stays as a
cheaper reference for tests. Nothing here is used for training.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.linalg
import scipy.optimize

__all__ = [
  "ORIGINAL_MAX_ITER",
  "ORIGINAL_TOL",
  "OriginalStep",
  "default_tol_cg",
  "default_tol_cg_pairs",
  "frechet_gradient",
  "original_cg",
  "original_cg_pairs",
  "original_gradient",
  "original_prior_starts",
  "original_step_inference",
  "transport_objective",
]

ORIGINAL_TOL = 10 ^ -7  # as the original writes it: XOR, -13 (never met)
ORIGINAL_MAX_ITER = 50
ORIGINAL_POSTERIOR_RANGE = (0.0, 1.0)
ORIGINAL_COEFF_RAND_START = -2.5  # --coeffRandStart
ORIGINAL_COEFF_RAND_ADD = 2.5  # --coeffRandAdd


def _generator(c, psi):
  return np.einsum("m,mij->ij", c, psi)


def transport_objective(c, psi, z0, z1, l1_weight):
  """``1/2 ||z1 - expm(sum_m c_m psi_m) z0||^2 + l1_weight ||c||_1`` (float64).

  Args:
    c: coefficients ``[M]``.
    psi: operators ``[M, d, d]``.
    z0, z1: points ``[d]``.
    l1_weight: sparsity weight.
  """
  r = z1 - np.real(scipy.linalg.expm(_generator(c, psi))) @ z0
  return 0.5 * np.linalg.norm(r) ** 2 + l1_weight * np.sum(np.abs(c))


def original_gradient(c, psi, z0, z1, l1_weight):
  """The original's (sub)gradient, ``transOptDerv_c``: ``[M]``.

  With ``A = U D U^-1``, ``V = U^-T`` and ``G = (expm(A) z0 - z1) z0^T``, the
  gradient in ``A`` is ``V (F o (U^T G V)) U^T`` with the divided differences
  ``F_ab = (e^D_b - e^D_a) / (D_b - D_a)`` (``e^D_a`` where ``D_a == D_b``):
  exact for diagonalizable ``A``. Same arguments as
  :func:`transport_objective`.
  """
  a = _generator(c, psi)
  t = np.real(scipy.linalg.expm(a))
  d, u = np.linalg.eig(a)
  v = np.linalg.inv(u).T
  inner = np.outer(t @ z0 - z1, z0)
  p = u.T @ inner @ v
  f = np.zeros((d.shape[0], d.shape[0]), np.complex128)
  for i in range(d.shape[0]):  # the original's double loop
    for j in range(d.shape[0]):
      if d[i] == d[j]:
        f[i, j] = np.exp(d[i])
      else:
        f[i, j] = (np.exp(d[j]) - np.exp(d[i])) / (d[j] - d[i])
  q = v @ (f * p) @ u.T
  return np.real(np.einsum("mij,ij->m", psi, q)) + l1_weight * np.sign(c)


def frechet_gradient(c, psi, z0, z1, l1_weight):
  """The same (sub)gradient by the adjoint Frechet derivative of ``expm``.

  ``L_expm(A^T, (expm(A) z0 - z1) z0^T)`` (``scipy.linalg.expm_frechet``),
  exact for every ``A``. Same arguments as :func:`transport_objective`.
  """
  a = _generator(c, psi)
  r = z1 - scipy.linalg.expm(a) @ z0
  grad_a = scipy.linalg.expm_frechet(a.T, -np.outer(r, z0), compute_expm=False)
  return np.einsum("mij,ij->m", psi, grad_a) + l1_weight * np.sign(c)


def original_cg(psi, z0, z1, l1_weight, c0, gradient=original_gradient):
  """One pair solved as the original code solves it (CG, ``tol=10^-7``).

  Args:
    psi: operators ``[M, d, d]``.
    z0, z1: points ``[d]``.
    l1_weight: sparsity weight.
    c0: start ``[M]``.
    gradient: :func:`original_gradient` (what the original evaluates) or
      :func:`frechet_gradient`.

  Returns:
    ``(coeffs [M], objective, iterations)``.
  """
  args = tuple(np.asarray(a, np.float64) for a in (psi, z0, z1))
  res = scipy.optimize.minimize(
    transport_objective,
    np.asarray(c0, np.float64),
    args=args + (float(l1_weight),),
    method="CG",
    jac=gradient,
    options={"maxiter": ORIGINAL_MAX_ITER, "disp": False},
    tol=ORIGINAL_TOL,
  )
  return res.x, float(res.fun), int(res.nit)


def default_tol_cg(psi, z0, z1, l1_weight, c0, max_iter=ORIGINAL_MAX_ITER):
  """scipy CG, default tolerance (``gtol=1e-5``): NOT the original's setting.

  Stops once the gradient norm is below ``1e-5``, after a few iterations
  on typical pairs, where :func:`original_cg` runs 50. Gradient:
  :func:`frechet_gradient`.

  Returns:
    ``(coeffs [M], objective, iterations)``.
  """
  res = scipy.optimize.minimize(
    transport_objective,
    np.asarray(c0, np.float64),
    jac=frechet_gradient,
    method="CG",
    args=tuple(np.asarray(a, np.float64) for a in (psi, z0, z1)) + (l1_weight,),
    options={"maxiter": max_iter},
  )
  return res.x, float(res.fun), int(res.nit)


def _best_of_starts(solve, psi, z0, z1, l1_weight, init):
  """Loops ``solve`` over restarts ``[R]`` and pairs ``[N]``, keeping the best."""
  psi, z0, z1, init = (np.asarray(a, np.float64) for a in (psi, z0, z1, init))
  l1_weight = np.broadcast_to(np.asarray(l1_weight, np.float64), init.shape[1:2])
  coeffs = np.zeros(init.shape[1:])
  objective = np.full(init.shape[1], np.inf)
  for r in range(init.shape[0]):
    for n in range(init.shape[1]):
      c, value, _ = solve(psi, z0[n], z1[n], l1_weight[n], init[r, n])
      if value < objective[n]:
        coeffs[n], objective[n] = c, value
  return coeffs, objective


def original_cg_pairs(psi, z0, z1, l1_weight, init, gradient=original_gradient):
  """:func:`original_cg` over pairs from given starts, best restart kept.

  Args:
    psi: operators ``[M, d, d]``.
    z0, z1: points ``[N, d]``.
    l1_weight: sparsity weight, scalar or one per pair ``[N]``.
    init: starting coefficients ``[R, N, M]`` (restarts first).
    gradient: as in :func:`original_cg`.

  Returns:
    ``(coeffs [N, M], objective [N])``.
  """
  solve = lambda *a: original_cg(*a, gradient=gradient)  # noqa: E731
  return _best_of_starts(solve, psi, z0, z1, l1_weight, init)


def default_tol_cg_pairs(psi, z0, z1, l1_weight, init, max_iter=ORIGINAL_MAX_ITER):
  """:func:`default_tol_cg` (not the original) over pairs, as
  :func:`original_cg_pairs`."""
  solve = lambda *a: default_tol_cg(*a, max_iter=max_iter)  # noqa: E731
  return _best_of_starts(solve, psi, z0, z1, l1_weight, init)


def original_prior_starts(rng, num_restarts: int, num_ops: int):
  """The original's prior starts ``[R, M]``: restart ``r`` from
  ``U[-2.5 + 2.5 r, -2.5 + 2.5 (r + 1)]``."""
  lo = ORIGINAL_COEFF_RAND_START + ORIGINAL_COEFF_RAND_ADD * np.arange(num_restarts)
  return rng.uniform(
    lo[:, None],
    (lo + ORIGINAL_COEFF_RAND_ADD)[:, None],
    (
      num_restarts,
      num_ops,
    ),
  )


class OriginalStep(NamedTuple):
  """One step's inference by the original method (float64)."""

  posterior_coeffs: np.ndarray  # [B, S, M]
  posterior_objective: np.ndarray  # [B, S]
  prior_coeffs: np.ndarray  # [B, S, A, M], best restart
  prior_objective: np.ndarray  # [B, S, A]
  iterations: np.ndarray  # [B, S, 1 + R A], CG iterations of every start


def original_step_inference(
  psi,
  mu,
  anchors,
  z,
  zeta_q,
  zeta_p,
  num_restarts: int,
  rng,
  gradient=original_gradient,
) -> OriginalStep:
  """A training step's posterior and prior inference as the original does it.

  Every sample's posterior pair ``mu -> z`` from one start ``U[0, 1]`` with
  weight ``zeta_q``; every anchor pair ``anchor_i -> z`` from
  :func:`original_prior_starts` with ``zeta_p``; one :func:`original_cg` at a
  time in Python loops (``compute_posterior_coeff``, ``compute_prior_obj``).

  Args:
    psi: operators ``[M, d, d]``.
    mu: encodings ``[B, d]``.
    anchors: each sample's encoded anchors ``[B, A, d]``.
    z: samples ``[B, S, d]``.
    zeta_q, zeta_p: posterior and prior sparsity weights.
    num_restarts: prior restarts ``R``.
    rng: ``np.random.Generator`` for the starts.
    gradient: as in :func:`original_cg`.

  Returns:
    An :class:`OriginalStep`.
  """
  psi, mu, anchors, z = (np.asarray(a, np.float64) for a in (psi, mu, anchors, z))
  (batch, samples, _), num_ops = z.shape, psi.shape[0]
  num_anchors = anchors.shape[1]
  post_c = np.zeros((batch, samples, num_ops))
  post_e = np.zeros((batch, samples))
  prior_c = np.zeros((batch, samples, num_anchors, num_ops))
  prior_e = np.zeros((batch, samples, num_anchors))
  iters = np.zeros((batch, samples, 1 + num_restarts * num_anchors), int)
  for s in range(samples):
    for b in range(batch):
      c0 = rng.uniform(*ORIGINAL_POSTERIOR_RANGE, num_ops)
      post_c[b, s], post_e[b, s], iters[b, s, 0] = original_cg(
        psi, mu[b], z[b, s], zeta_q, c0, gradient
      )
    for b in range(batch):
      for a in range(num_anchors):
        prior_e[b, s, a] = np.inf
        for r, c0 in enumerate(original_prior_starts(rng, num_restarts, num_ops)):
          c, value, nit = original_cg(psi, anchors[b, a], z[b, s], zeta_p, c0, gradient)
          iters[b, s, 1 + a * num_restarts + r] = nit
          if value < prior_e[b, s, a]:
            prior_c[b, s, a], prior_e[b, s, a] = c, value
  return OriginalStep(post_c, post_e, prior_c, prior_e, iters)
