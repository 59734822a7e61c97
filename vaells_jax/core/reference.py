"""The original method of coefficient inference, in NumPy/SciPy, as a reference.

The VAELLS research code solves each pair separately with
``scipy.optimize.minimize(method="CG", options={"maxiter": 50})`` on the
objective ``1/2 ||z1 - expm(A(c)) z0||^2 + l1_weight ||c||_1`` with an analytic
(sub)gradient, one pair, anchor and restart at a time in Python loops. This
module reproduces that so tests can check the JAX solver against it and
benchmarks can measure the speed-up. It is not used for training.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.optimize

__all__ = ["cg_objective_and_grad", "infer_pair_cg", "infer_pairs_cg"]


def cg_objective_and_grad(c, psi, z0, z1, l1_weight):
  """Objective and analytic (sub)gradient for one pair, in float64.

  The gradient of ``1/2 ||z1 - expm(A) z0||^2`` in ``A`` is the adjoint Frechet
  derivative ``L_expm(A^T, -r z0^T)`` with ``r = z1 - expm(A) z0``; its
  component along ``psi_m`` is the gradient in ``c_m``.

  Args:
    c: coefficients ``[M]``.
    psi: operators ``[M, d, d]``.
    z0, z1: points ``[d]``.
    l1_weight: sparsity weight.

  Returns:
    ``(objective, gradient [M])``.
  """
  a = np.einsum("m,mij->ij", c, psi)
  r = z1 - scipy.linalg.expm(a) @ z0
  grad_a = scipy.linalg.expm_frechet(a.T, -np.outer(r, z0), compute_expm=False)
  value = 0.5 * r @ r + l1_weight * np.abs(c).sum()
  grad = np.einsum("mij,ij->m", psi, grad_a) + l1_weight * np.sign(c)
  return value, grad


def infer_pair_cg(psi, z0, z1, l1_weight, c0, max_iter=50):
  """One pair solved as the original code does (scipy CG, analytic gradient).

  Returns:
    ``(coeffs [M], objective)``.
  """
  res = scipy.optimize.minimize(
    cg_objective_and_grad,
    np.asarray(c0, np.float64),
    jac=True,
    method="CG",
    args=(psi, z0, z1, l1_weight),
    options={"maxiter": max_iter},
  )
  return res.x, float(res.fun)


def infer_pairs_cg(psi, z0, z1, l1_weight, init, max_iter=50):
  """Loops :func:`infer_pair_cg` over pairs and restarts, keeping the best.

  Args:
    psi: operators ``[M, d, d]``.
    z0, z1: points ``[N, d]``.
    l1_weight: sparsity weight, scalar or one per pair ``[N]``.
    init: starting coefficients ``[R, N, M]`` (restarts first).
    max_iter: CG iterations per start (the original code uses 50).

  Returns:
    ``(coeffs [N, M], objective [N])`` of the best restart of each pair.
  """
  psi, z0, z1, init = (np.asarray(a, np.float64) for a in (psi, z0, z1, init))
  l1_weight = np.broadcast_to(np.asarray(l1_weight, np.float64), init.shape[1:2])
  coeffs = np.zeros(init.shape[1:])
  objective = np.full(init.shape[1], np.inf)
  for r in range(init.shape[0]):
    for n in range(init.shape[1]):
      c, value = infer_pair_cg(psi, z0[n], z1[n], l1_weight[n], init[r, n], max_iter)
      if value < objective[n]:
        coeffs[n], objective[n] = c, value
  return coeffs, objective
