"""The coefficient solvers behind ``infer_coefficients``: one module each, and
one line each in :data:`SOLVERS`.

Every solver is a function of the one form :class:`Solve`: it solves every
start of every pair. ``infer_coefficients`` draws the starts, calls it, and
keeps each pair's best start. A solver whose answer does not depend on a
start (``exact``: ``takes_starts=False`` in its entry) reads only the shape
of ``init`` and is called with one start.

Adding a solver: a module here with its function of the form :class:`Solve`
(tests against ``benchmarks/scipy_reference.py``'s scipy solution, as
``tests/test_pgd.py`` does), and one :class:`SolverEntry` in :data:`SOLVERS`;
``Config``, ``infer_coefficients``, their error messages and ``--help`` then
take its name from :data:`METHODS`. This module imports no JAX
(``vaells_jax.config`` validates against it); the solver modules load on
first use.

The modules: ``columns`` (the blocked loop the per-pair solvers share: pairs
on the minor axis, chunks, compaction of the last running pairs), ``pairs``
(the pairwise objective and its gradient, closed form for ``d = 2``), and
one module per solver (:data:`SOLVERS` names each one's module; ``jaxopt_solvers``
is the one module that imports jaxopt).
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Protocol

__all__ = [
  "AUTO",
  "METHODS",
  "SOLVERS",
  "Solve",
  "SolverEntry",
  "default_max_iter",
  "resolve",
  "unsuitable",
]


class Solve(Protocol):
  """The one form of every solver (``SolverEntry.load()`` returns one)."""

  def __call__(
    self,
    init: Any,
    psi: Any,
    z0: Any,
    z1: Any,
    l1_weight: Any,
    *,
    max_iter: int,
    tol: float,
  ) -> tuple[Any, Any, Any]:
    """Solves every start of every pair.

    Args:
      init: starting coefficients, ``[R, N, M]``.
      psi: the dictionary, ``[M, d, d]``.
      z0, z1: the pairs, ``[N, d]``.
      l1_weight: sparsity weights, ``[N]``.
      max_iter: iterations per start (what an iteration is: the solver's).
      tol: the stopping tolerance.

    Returns:
      ``(coeffs [R, N, M], num_iter [R, N], error [R, N])``; ``error`` is the
      measure the tolerance applies to: ``error <= tol`` is converged.
    """
    ...


@dataclasses.dataclass(frozen=True)
class SolverEntry:
  """One solver: where its ``solve`` is and what it applies to.

  Attributes:
    target: ``"module:function"`` in this package, a :class:`Solve`.
    default_max_iter: iterations when ``max_iter`` is not given.
    takes_starts: whether its answer depends on the starts (module docstring).
    only_dim: it solves codes of this dimension ``d`` only.
    only_ops: it solves dictionaries of this many operators ``M`` only.
    instead: what to use where it does not apply.
  """

  target: str
  default_max_iter: int
  takes_starts: bool = True
  only_dim: int | None = None
  only_ops: int | None = None
  instead: str = ""

  def load(self) -> Solve:
    """The solver's function (imports its module)."""
    module, name = self.target.split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


SOLVERS = {
  "fista": SolverEntry("jaxopt_solvers:solve_fista", 100),
  "lm": SolverEntry("jaxopt_solvers:solve_lm", 20),
  "pgd": SolverEntry("pgd:solve_pgd", 100),
  "gauss_newton": SolverEntry(
    "gauss_newton:solve_gauss_newton", 100, only_dim=2, instead='"pgd" or "fista"'
  ),
  "gauss_newton_fused": SolverEntry(
    "gauss_newton_fused:solve_gauss_newton_fused",
    100,
    only_dim=2,
    instead='"pgd" or "fista"',
  ),
  "exact": SolverEntry(
    "exact:solve_exact", 20, takes_starts=False, only_ops=1, instead='"fista" or "lm"'
  ),
}
AUTO = "auto"
METHODS = (AUTO, *SOLVERS)


def resolve(method: str, num_ops: int, dim: int, starts: bool = False) -> str:
  """The solver ``method`` names for ``num_ops`` operators on ``dim``-D codes:
  itself, or for ``"auto"`` the fastest measured for that shape:
  ``gauss_newton`` for ``d = 2`` (its closed-form 2 x 2 steps), ``exact`` for
  one operator (a global search, tens of times faster than ``fista`` at
  ``d = 10``: docs/studies/benchmarks-inference.md) unless the
  solve is from given ``starts``, ``pgd`` otherwise (``fista`` with a step
  per pair) (docs/benchmarks.md, "Which solver").
  """
  if method != AUTO:
    return method
  if dim == 2:
    return "gauss_newton"
  return "exact" if num_ops == 1 and not starts else "pgd"


def default_max_iter(method: str) -> int:
  """``max_iter`` when none is given: iterations for proximal gradient and
  ``pgd``, Gauss-Newton steps for ``gauss_newton``, Levenberg-Marquardt
  iterations for ``lm``, safeguarded Newton steps per candidate for ``exact``."""
  return SOLVERS[method].default_max_iter


def unsuitable(method: str, num_ops, dim, names=("M", "d")) -> str | None:
  """Why ``method`` cannot solve ``num_ops`` operators on ``dim``-D codes
  (``names``: how to call the two numbers; ``None``: not checked), or None.
  ``"auto"`` suits every shape."""
  if method == AUTO:
    return None
  entry = SOLVERS[method]
  if None not in (entry.only_ops, num_ops) and num_ops != entry.only_ops:
    return (
      f'"{method}" solves one operator ({names[0]}={entry.only_ops}), got '
      f"{names[0]}={num_ops}; use {entry.instead}."
    )
  if None not in (entry.only_dim, dim) and dim != entry.only_dim:
    return (
      f'"{method}" solves {entry.only_dim}-D codes ({names[1]}={entry.only_dim}), '
      f"got {names[1]}={dim}; use {entry.instead}."
    )
  return None
