"""Sparse coefficient inference: the transport path that carries ``z0`` to ``z1``.

Solves, for every pair at once,

    c*(z0 -> z1) = argmin_c  1/2 ||z1 - expm(sum_m c_m psi_m) z0||^2 + l1_weight ||c||_1

from random starts, vmapped over every pair and every restart, with one of
these solvers (``method``):

* ``"auto"`` (default): the fastest measured for the problem's shape,
  ``"gauss_newton"`` for ``d = 2``, ``"exact"`` for ``M = 1``, ``"pgd"``
  otherwise (:func:`vaells_jax.core.solvers.resolve`);
* ``"fista"``: accelerated proximal gradient (``ProximalGradient``,
  ``prox_lasso``, backtracking line search) on the objective itself;
* ``"lm"``: Levenberg-Marquardt (``LevenbergMarquardt``) on the objective with
  the l1 term smoothed, ``|c| ~ sqrt(c^2 + eps^2)`` (``eps = 1e-3``), written as
  the extra residuals ``sqrt(2 l1_weight) (c^2 + eps^2)^(1/4)``; then a few
  proximal-gradient iterations on the exact objective, which set the
  coefficients that belong at zero to exactly zero and give ``converged`` the
  same meaning as for ``"fista"``. The problems are rank deficient (``M``
  coefficients, ``d`` equations) and their curvature grows with ``expm``:
  proximal gradient's step is bounded by the stiffest direction, while
  Gauss-Newton steps solve the local linear model in every direction at once
  (``benchmarks/inference_speed.py`` measures both against scipy CG);
* ``"pgd"``: accelerated proximal gradient without jaxopt
  (:mod:`vaells_jax.core.solvers.pgd`): each pair keeps its own step, tried at four
  lengths per iteration in one batched evaluation, instead of a vmapped line
  search that runs as many trials as the worst pair needs; for ``d = 2`` the
  value and gradient are one closed-form pass. Same starts, results and
  diagnostics as ``"fista"``; 2.5-2.7x faster inference on the synthetic steps
  (``docs/studies/benchmarks-solvers.md``).
* ``"gauss_newton"`` (2-D codes, ``d = 2``, only): damped Gauss-Newton in
  orthants (:mod:`vaells_jax.core.solvers.gauss_newton`), the Jacobian of the closed
  form and a ``2 x 2`` system per step, so it follows the valley of ``M > d``
  problems in tens of iterations where proximal gradient needs hundreds.
* ``"gauss_newton_fused"`` (``d = 2`` only): the same iterations as one
  Pallas kernel (:mod:`vaells_jax.core.solvers.gauss_newton_fused`), for a
  GPU: a solve is one launch, its loop on the device; on a CPU it runs in
  Pallas's interpret mode (slow: for tests).
* ``"exact"`` (one operator, ``M = 1``, only): the global minimum over a
  dense grid of the single coefficient, refined by safeguarded Newton
  (:mod:`vaells_jax.core.solvers.exact`); deterministic, so ``key``, ``num_restarts``
  and ``init_range`` do not enter.

Each solver is a module of :mod:`vaells_jax.core.solvers` and a line of its
registry (``SOLVERS``), which this module calls: it validates the inputs,
draws the starts and keeps each pair's best start. jaxopt is imported by
``core/solvers/jaxopt_solvers.py`` alone.

``max_iter`` counts proximal-gradient iterations for ``"fista"`` and
``"pgd"``, Gauss-Newton steps for the Gauss-Newton solvers,
Levenberg-Marquardt iterations for ``"lm"`` (which then adds 10
proximal-gradient ones), refinement steps per grid candidate for
``"exact"``. ``tol`` applies to the proximal-gradient mapping norm (for
``"lm"`` also to the smoothed objective's gradient norm; for the
Gauss-Newton solvers to the minimum-norm subgradient of the objective).

Valid range of :func:`infer_coefficients`: finite ``psi``, ``z0``, ``z1``
and starts whose generator ``sum_m c_m psi_m`` has ``||.||_1 <= 512``
(:func:`vaells_jax.expm_small`'s range). A start outside it has a non-finite
objective, so the solver has no gradient to follow: its result is reported as
``converged=False`` whatever the iterations did. Non-finite ``psi``, ``z0``
or ``z1`` give a NaN ``objective`` and ``converged=False``. ``converged`` is
the flag to test; nothing here raises inside ``jit``. All pairs and restarts
run in one vmapped solve, so this works inside ``jit``. The inputs are
treated as constants (``stop_gradient``): by Danskin's theorem the gradient
of the optimal value is the partial gradient of the objective at ``c*``, so
differentiate :func:`inference_objective` at the returned coefficients
instead.

The data term uses the ``1/2 ||.||^2`` convention throughout the library.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from vaells_jax.core.solvers import METHODS, SOLVERS, resolve, unsuitable
from vaells_jax.core.solvers.jaxopt_solvers import data_term
from vaells_jax.core.transport import _transport, check_psi

__all__ = [
  "DEFAULT_MAX_ITER",
  "DEFAULT_TOL",
  "METHODS",
  "InferenceResult",
  "Solver",
  "inference_objective",
  "infer_coefficients",
  "infer_from_starts",
  "solver_starts",
]


# Iterations when ``max_iter`` is not given, per method (the registry's).
DEFAULT_MAX_ITER = {name: entry.default_max_iter for name, entry in SOLVERS.items()}
DEFAULT_TOL = 1e-4


class InferenceResult(NamedTuple):
  """Output of :func:`infer_coefficients` (``...`` is the broadcast pair shape).

  Attributes:
    coeffs: the inferred coefficients of the best restart, ``[..., M]``.
    objective: its objective value, ``[...]``.
    num_iter: solver iterations that restart ran, ``[...]``.
    converged: whether that restart met the tolerance before ``max_iter``, ``[...]``.
  """

  coeffs: jax.Array
  objective: jax.Array
  num_iter: jax.Array
  converged: jax.Array


def inference_objective(
  psi: ArrayLike,
  coeffs: ArrayLike,
  z0: ArrayLike,
  z1: ArrayLike,
  l1_weight: ArrayLike,
) -> jax.Array:
  """The inference objective ``1/2 ||z1 - T_psi(c) z0||^2 + l1_weight ||c||_1``.

  Evaluated with :func:`vaells_jax.core.transport` (the closed form for ``d = 2``,
  ``jax.scipy.linalg.expm`` otherwise), like every other use of the
  operators; the solvers' inner loops use their own exponentials, equal to it
  within rounding.

  Args:
    psi: operator dictionary, ``[M, d, d]``.
    coeffs: coefficients, ``[..., M]``.
    z0: starting points, ``[..., d]``.
    z1: end points, ``[..., d]``.
    l1_weight: sparsity weight, scalar or ``[...]``.

  Returns:
    The objective of each pair, ``[...]`` (all leading shapes broadcast).
  """
  residual = z1 - _transport(psi, coeffs, z0)
  return 0.5 * jnp.sum(residual**2, axis=-1) + l1_weight * jnp.sum(
    jnp.abs(coeffs), axis=-1
  )


def _check_inputs(
  psi, z0, z1, l1_weight, num_restarts, init_range, max_iter, tol, method
):
  """Validates the arguments of ``infer_coefficients``; returns the pair
  shape, the solver (``"auto"`` resolved) and its ``max_iter`` (``None``
  resolved)."""
  num_ops, dim = check_psi(psi)
  for name, z in (("z0", z0), ("z1", z1)):
    if jnp.ndim(z) < 1 or jnp.shape(z)[-1] != dim:
      raise ValueError(
        f"{name} must have shape [..., d] with d={dim} (psi is "
        f"[M, d, d]), got {tuple(jnp.shape(z))}."
      )
  if len(init_range) != 2:
    raise ValueError(f"init_range must be (lo, hi), got {init_range}.")
  shapes = [
    jnp.shape(z0)[:-1],
    jnp.shape(z1)[:-1],
    jnp.shape(l1_weight),
    jnp.shape(init_range[0]),
    jnp.shape(init_range[1]),
  ]
  try:
    batch = jnp.broadcast_shapes(*shapes)
  except ValueError:
    raise ValueError(
      "The leading dimensions of z0, z1, l1_weight and init_range do not "
      f"broadcast: {', '.join(str(tuple(s)) for s in shapes)}."
    ) from None
  if not isinstance(l1_weight, jax.core.Tracer) and np.any(np.asarray(l1_weight) < 0):
    raise ValueError(f"l1_weight must be >= 0, got {l1_weight}.")
  if not isinstance(num_restarts, int) or num_restarts < 1:
    raise ValueError(f"num_restarts must be an integer >= 1, got {num_restarts}.")
  if not any(isinstance(b, jax.core.Tracer) for b in init_range):
    lo, hi = (np.asarray(b) for b in init_range)
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
      raise ValueError(f"init_range must be finite, got {init_range}.")
    if np.any(lo > hi):
      raise ValueError(f"init_range must be (lo, hi) with lo <= hi, got {init_range}.")
  if method not in METHODS:
    raise ValueError(f"method must be one of {METHODS}, got {method!r}.")
  problem = unsuitable(method, num_ops, dim)
  if problem:
    raise ValueError(f"method={problem}")
  method = resolve(method, num_ops, dim)
  if max_iter is None:
    max_iter = DEFAULT_MAX_ITER[method]
  if not isinstance(max_iter, int) or max_iter < 1:
    raise ValueError(f"max_iter must be an integer >= 1, got {max_iter}.")
  if not (isinstance(tol, (int, float, np.floating)) and 0 < tol < np.inf):
    raise ValueError(f"tol must be finite and > 0, got {tol}.")
  return batch, method, max_iter


def _check_key(key) -> None:
  """A ``jax.random`` key: a typed key array, or the raw ``uint32 [2]`` kind."""
  if isinstance(key, jax.Array) and jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
    return
  if (
    isinstance(key, (jax.Array, np.ndarray))
    and key.shape == (2,)
    and key.dtype == np.uint32
  ):
    return
  raise ValueError(
    "key must be a jax.random key (jax.random.PRNGKey(seed) or "
    f"jax.random.key(seed)), got {type(key).__name__} "
    f"{getattr(key, 'dtype', '')}{tuple(getattr(key, 'shape', ()))}."
  )


def infer_coefficients(
  psi: ArrayLike,
  z0: ArrayLike,
  z1: ArrayLike,
  *,
  l1_weight: ArrayLike,
  key: jax.Array,
  num_restarts: int = 1,
  init_range: tuple[ArrayLike, ArrayLike] = (0.0, 1.0),
  max_iter: int | None = None,
  tol: float = DEFAULT_TOL,
  method: str = "auto",
) -> InferenceResult:
  """Infers the sparse coefficients that transport ``z0`` to ``z1``, batched.

  Minimises ``1/2 ||z1 - expm(sum_m c_m psi_m) z0||^2 + l1_weight ||c||_1`` for
  every pair with the solver ``method`` (module docstring: each solver, the
  valid range, ``jit`` and gradients). Restart ``r`` starts from
  ``c0 ~ U[lo + r w, hi + r w]^M`` with ``w = hi - lo``; the restart with the
  lowest final objective wins (a start that diverges to a non-finite
  objective is replaced by ``c = 0``, reported as not converged).

  Args:
    psi: operator dictionary, ``[M, d, d]``.
    z0: starting points, ``[..., d]``.
    z1: end points, ``[..., d]``; broadcasts with ``z0`` (e.g. anchors
      ``[B, A, d]`` against samples ``[B, 1, d]``).
    l1_weight: sparsity weight ``>= 0``, scalar or broadcasting with the pair
      shape (so pairs with different weights can share one solve).
    key: ``jax.random`` key of the random starts.
    num_restarts: number of random starts per pair.
    init_range: ``(lo, hi)`` of the first restart's uniform start; each a
      scalar or an array broadcasting with the pair shape.
    max_iter: maximum iterations per start (each solver's kind of
      iteration: module docstring); ``None`` for ``DEFAULT_MAX_ITER[method]``.
    tol: stopping tolerance (on what: module docstring).
    method: one of :data:`METHODS`: ``"auto"`` or a name in the registry
      :data:`vaells_jax.core.solvers.SOLVERS`.

  Returns:
    An :class:`InferenceResult`: ``coeffs [..., M]``, the others ``[...]``.

  Raises:
    ValueError: for shapes that do not fit, a negative ``l1_weight`` (checked
      when it is concrete), a ``key`` that is not one, invalid solver
      settings or a solver that does not apply to this ``M`` or ``d``.
  """
  _check_key(key)
  batch, method, max_iter = _check_inputs(
    psi, z0, z1, l1_weight, num_restarts, init_range, max_iter, tol, method
  )
  dtype = jnp.result_type(psi, z0, z1, jnp.float32)
  flat = _flat_pairs(batch, dtype, z0, z1, l1_weight, *init_range)
  psi, settings = jnp.asarray(psi, dtype), dict(max_iter=max_iter, tol=float(tol))
  if not SOLVERS[method].takes_starts:
    result = _infer_without_starts(psi, *flat[:3], **settings, method=method)
  else:
    starts = _draw_starts(key, num_restarts, jnp.shape(psi)[0], *flat[3:])
    result = _infer_flat(psi, *flat[:3], starts, **settings, method=method)
  return InferenceResult(*(r.reshape(batch + r.shape[1:]) for r in result))


def infer_from_starts(
  psi, z0, z1, *, l1_weight, starts, max_iter=None, tol=DEFAULT_TOL, method="auto"
) -> InferenceResult:
  """:func:`infer_coefficients` from given starts instead of random ones.

  Runs the program ``infer_coefficients`` runs for as many pairs and
  restarts, so for ``starts = solver_starts(key, R, M, lo, hi)`` (reshaped
  to the pair shape) the results are ``infer_coefficients``'s with ``key``,
  ``num_restarts=R`` and ``init_range=(lo, hi)``. Restarts can be moved into
  pairs: one restart each of ``R N`` pairs, then the lowest objective of
  every pair's ``R`` (first on ties, as here), is a solve with ``R``
  restarts through the program of a one-restart solve.

  Args:
    psi: ``[M, d, d]``.
    z0, z1, l1_weight: as for :func:`infer_coefficients`.
    starts: ``[R, ..., M]``, ``...`` the pair shape (``z0``, ``z1`` and
      ``l1_weight`` broadcast to it).
    max_iter, tol: as for :func:`infer_coefficients`.
    method: as for :func:`infer_coefficients`, but a solver that takes
      starts (here ``"auto"`` never picks one that does not).

  Returns:
    An :class:`InferenceResult` of the best start of every pair.

  Raises:
    ValueError: as :func:`infer_coefficients`, or if ``starts`` is not
      ``[R, ..., M]``.
  """
  num_ops, dim = check_psi(psi)
  method = resolve(method, num_ops, dim, starts=True)
  if method in SOLVERS and not SOLVERS[method].takes_starts:
    raise ValueError(f'method="{method}" takes no starts; use infer_coefficients.')
  if jnp.ndim(starts) < 2 or jnp.shape(starts)[-1] != num_ops:
    raise ValueError(
      f"starts must have shape [R, ..., M] with M={num_ops}, got "
      f"{tuple(jnp.shape(starts))}."
    )
  batch = jnp.shape(starts)[1:-1]
  bounds = (np.zeros(batch), np.zeros(batch))
  got, method, max_iter = _check_inputs(
    psi, z0, z1, l1_weight, len(starts), bounds, max_iter, tol, method
  )
  if got != batch:
    raise ValueError(
      f"z0, z1 and l1_weight broadcast to pairs {tuple(got)}, starts hold "
      f"{tuple(batch)}."
    )
  dtype = jnp.result_type(psi, z0, z1, jnp.float32)
  flat = _flat_pairs(batch, dtype, z0, z1, l1_weight)
  result = _infer_flat(
    jnp.asarray(psi, dtype),
    *flat,
    jnp.asarray(starts, dtype).reshape(len(starts), -1, num_ops),
    max_iter=max_iter,
    tol=float(tol),
    method=method,
  )
  return InferenceResult(*(r.reshape(batch + r.shape[1:]) for r in result))


def _flat_pairs(batch, dtype, z0, z1, *scalars):
  """``z0``, ``z1`` (``[..., d]``) and per-pair ``scalars`` broadcast to the
  pair shape ``batch`` and flattened: ``[N, d]``, ``[N, d]``, then ``[N]`` each."""
  size = math.prod(batch)
  return [
    jnp.broadcast_to(jnp.asarray(a, dtype), batch + tail).reshape((size,) + tail)
    for a, tail in [(z0, z0.shape[-1:]), (z1, z1.shape[-1:])]
    + [(a, ()) for a in scalars]
  ]


@dataclasses.dataclass(frozen=True)
class Solver:
  """Settings of the coefficient solver: a frozen, hashable value.

  Built once (e.g. :func:`vaells_jax.models.vaells.solvers` makes one for the
  posterior and one for the prior from a config) and passed to every caller;
  calling it solves a batch of pairs with these settings.

  Attributes:
    method: one of :data:`METHODS` (see :func:`infer_coefficients`).
    max_iter: iterations per start; ``None`` for ``DEFAULT_MAX_ITER[method]``.
    tol: stopping tolerance.
    num_restarts: random starts per pair.
    init_range: ``(lo, hi)`` of the first restart's uniform start.
  """

  method: str = "auto"
  max_iter: int | None = None
  tol: float = DEFAULT_TOL
  num_restarts: int = 1
  init_range: tuple[float, float] = (0.0, 1.0)

  def __call__(self, psi, z0, z1, *, l1_weight, key) -> InferenceResult:
    """``infer_coefficients(psi, z0, z1, l1_weight=, key=)`` with these settings."""
    return infer_coefficients(
      psi,
      z0,
      z1,
      l1_weight=l1_weight,
      key=key,
      num_restarts=self.num_restarts,
      init_range=self.init_range,
      max_iter=self.max_iter,
      tol=self.tol,
      method=self.method,
    )

  def from_starts(self, psi, z0, z1, *, l1_weight, starts) -> InferenceResult:
    """:func:`infer_from_starts` with these settings (``starts [R, ..., M]``)."""
    return infer_from_starts(
      psi,
      z0,
      z1,
      l1_weight=l1_weight,
      starts=starts,
      max_iter=self.max_iter,
      tol=self.tol,
      method=self.method,
    )

  def replace(self, **changes) -> "Solver":
    """A copy with ``changes`` (``None`` values keep the current setting)."""
    return dataclasses.replace(
      self, **{k: v for k, v in changes.items() if v is not None}
    )


def solver_starts(key, num_restarts, num_ops, lo, hi):
  """The starts ``infer_coefficients`` draws for ``N`` flattened pairs.

  Restart ``r`` of pair ``n`` starts from ``U[lo_n + r w_n, hi_n + r w_n]^M``,
  ``w_n = hi_n - lo_n``; pairs are in C order of the broadcast pair shape.
  Exposed so that another solver can be run from the very same starts (the
  benchmarks and tests compare with scipy CG this way).

  Args:
    key: the ``key`` given to ``infer_coefficients``.
    num_restarts: ``R``.
    num_ops: ``M``.
    lo: lower ends of the first restart's range, ``[N]`` (floating).
    hi: upper ends, ``[N]``.

  Returns:
    ``[R, N, M]`` starting coefficients, in the dtype of ``lo``.
  """
  lo, hi = lo[None, :, None], hi[None, :, None]
  offsets = jnp.arange(num_restarts, dtype=lo.dtype)[:, None, None]
  init = jax.random.uniform(
    key, (num_restarts, lo.shape[1], num_ops), dtype=lo.dtype, minval=lo, maxval=hi
  )
  return init + offsets * (hi - lo)


@functools.partial(jax.jit, static_argnames=("max_iter", "tol", "method"))
def _infer_without_starts(psi, z0, z1, l1_weight, *, max_iter, tol, method):
  """A solver without starts (``"exact"``) on ``N`` pairs ``[N, d]``, weights
  ``[N]``."""
  psi, z0, z1, l1_weight = jax.lax.stop_gradient((psi, z0, z1, l1_weight))
  init = jnp.zeros((1, z0.shape[0], psi.shape[0]), z0.dtype)  # read: its shape
  coeffs, num_iter, error = SOLVERS[method].load()(
    init, psi, z0, z1, l1_weight, max_iter=max_iter, tol=tol
  )
  coeffs, num_iter, converged = coeffs[0], num_iter[0], error[0] <= tol
  objective = inference_objective(psi, coeffs, z0, z1, l1_weight)
  return coeffs, objective, num_iter, converged & jnp.isfinite(objective)


# Its own program, so that a solve's program takes the starts as input (and
# one program solves R restarts of N pairs or one restart of R N pairs).
_draw_starts = jax.jit(solver_starts, static_argnums=(1, 2))


@functools.partial(jax.jit, static_argnames=("max_iter", "tol", "method"))
def _infer_flat(psi, z0, z1, l1_weight, init, *, max_iter, tol, method):
  """Solves ``N`` pairs ``z0 [N, d] -> z1 [N, d]`` (weights ``[N]``) from the
  starts ``init [R, N, M]``; returns the best restart's results."""
  psi, z0, z1, l1_weight = jax.lax.stop_gradient((psi, z0, z1, l1_weight))
  num_pairs = z0.shape[0]
  coeffs, num_iter, error = SOLVERS[method].load()(
    init, psi, z0, z1, l1_weight, max_iter=max_iter, tol=tol
  )
  # A start outside expm_small's range gave the solver no gradient to follow.
  error = jnp.where(jnp.isfinite(data_term(init, psi, z0, z1)), error, jnp.inf)
  objective = inference_objective(psi, coeffs, z0, z1, l1_weight)
  # A start that diverged (expm overflow) falls back to the identity path c=0.
  failed = ~jnp.isfinite(objective)
  coeffs = jnp.where(failed[..., None], 0.0, coeffs)
  objective = jnp.where(failed, data_term(coeffs, psi, z0, z1), objective)
  error = jnp.where(failed, jnp.inf, error)
  best = jnp.argmin(objective, axis=0)
  pick = lambda a: jnp.take_along_axis(  # noqa: E731
    a, best.reshape((1, num_pairs) + (1,) * (a.ndim - 2)), axis=0
  )[0]
  return (pick(coeffs), pick(objective), pick(num_iter), pick(error) <= tol)
