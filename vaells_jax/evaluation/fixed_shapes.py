"""The evaluation's array work in a few compiled programs of fixed shapes.

XLA compiles a program for every new input shape, and on a CPU compiling,
not computing, is most of a synthetic run's evaluation. Here every row-wise
computation (encode, decode, transport) runs as one jitted program over
blocks of :data:`ROWS` rows (the last block padded by repeating its last
row), and coefficient solves run in blocks of a given number of pairs, so
that the evaluation's solves can reuse the program the log-likelihood
compiles. Each row, and each pair, is computed as it would be alone: a
row's results equal the unblocked call's within float32 rounding. A solve's
do too in one step, but XLA rounds a block of 2 000 pairs differently from
one of a few hundred in the last bit, and 100 iterations can carry that to
another local minimum for some pairs (docs/studies/benchmarks-evaluation.md).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import numpy as np

from vaells_jax.core.inference import _draw_starts
from vaells_jax.core.laplace import sample_laplace
from vaells_jax.core.transport import transport

__all__ = [
  "ROWS",
  "RowPrograms",
  "solve_in_blocks",
  "solve_restarts_as_pairs",
]

ROWS = 4096


def _pad(a: np.ndarray, size: int) -> np.ndarray:
  """``a`` with its last row repeated up to ``size`` rows."""
  return np.concatenate([a, np.repeat(a[-1:], size - len(a), axis=0)])


def map_rows(fn, *arrays, rows: int = ROWS) -> np.ndarray:
  """``fn`` over blocks of ``rows`` rows of ``arrays`` (``[N, ...]`` each).

  Returns:
    ``[N, ...]``: the blocks' results concatenated, as a NumPy array.
  """
  num = len(arrays[0])
  out = []
  for start in range(0, num, rows):
    block = [_pad(np.asarray(a[start : start + rows]), rows) for a in arrays]
    out.append(np.asarray(fn(*block))[: min(rows, num - start)])
  return np.concatenate(out)


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4))
def _draws(key, shape, num_ops, dim, laplace_scale):
  """Laplace coefficients ``shape + [M]`` and normal noise ``shape + [d]``,
  drawn as :meth:`~vaells_jax.api.TrainedVAELLS.sample_prior` draws them."""
  k_c, k_e = jax.random.split(key)
  coeffs = sample_laplace(k_c, shape + (num_ops,), laplace_scale)
  return coeffs, jax.random.normal(k_e, shape + (dim,))


@dataclasses.dataclass
class RowPrograms:
  """A trained model's encode, decode and transport, one program each.

  Attributes:
    trained: a :class:`~vaells_jax.api.TrainedVAELLS` or
      :class:`~vaells_jax.api.TrainedBaseline`.
  """

  trained: object

  def __post_init__(self):
    replace = dataclasses.replace
    self._encode = jax.jit(lambda p, x: replace(self.trained, params=p).encode(x))
    self._decode = jax.jit(lambda p, z: replace(self.trained, params=p).decode(z))
    self._transport = jax.jit(transport)

  def encode(self, x) -> np.ndarray:
    """``trained.encode``: ``[..., D] -> [..., d]``."""
    x = np.asarray(x, np.float32)
    flat = x.reshape(-1, x.shape[-1])
    out = map_rows(functools.partial(self._encode, self.trained.params), flat)
    return out.reshape(x.shape[:-1] + out.shape[-1:])

  def decode(self, z) -> np.ndarray:
    """``trained.decode``: ``[..., d] -> [..., D]``."""
    z = np.asarray(z, np.float32)
    flat = z.reshape(-1, z.shape[-1])
    out = map_rows(functools.partial(self._decode, self.trained.params), flat)
    return out.reshape(z.shape[:-1] + out.shape[-1:])

  def transport(self, coeffs, z0) -> np.ndarray:
    """:func:`~vaells_jax.core.transport.transport` with the trained operators.

    ``coeffs [..., M]`` and ``z0 [..., d]`` broadcast; returns ``[..., d]``.
    """
    coeffs, z0 = np.asarray(coeffs, np.float32), np.asarray(z0, np.float32)
    batch = np.broadcast_shapes(coeffs.shape[:-1], z0.shape[:-1])
    flat = [
      np.broadcast_to(a, batch + a.shape[-1:]).reshape(-1, a.shape[-1])
      for a in (coeffs, z0)
    ]
    psi = self.trained.psi
    out = map_rows(functools.partial(self._transport, psi), *flat)
    return out.reshape(batch + out.shape[-1:])

  def transport_path(self, coeffs, z0, ts) -> np.ndarray:
    """:func:`~vaells_jax.core.transport.transport_path`: ``[T, ..., d]``."""
    coeffs = np.asarray(coeffs, np.float32)
    ts = np.atleast_1d(np.asarray(ts, np.float32))
    batch_ndim = len(np.broadcast_shapes(coeffs.shape[:-1], np.shape(z0)[:-1]))
    return self.transport(ts.reshape((-1,) + (1,) * (batch_ndim + 1)) * coeffs, z0)

  def sample_around(self, key, starts, n: int) -> np.ndarray:
    """``trained._sample_around(key, starts, n)``: ``[..., d] -> [..., n, d]``."""
    cfg = self.trained.config
    starts = np.asarray(starts, np.float32)
    coeffs, eps = _draws(
      key, starts.shape[:-1] + (n,), cfg.num_ops, cfg.latent_dim, 1.0 / cfg.zeta3
    )
    moved = self.transport(coeffs, starts[..., None, :])
    return moved + np.float32(cfg.gamma) * np.asarray(eps)


def solve_in_blocks(solver, psi, z0, z1, *, l1_weight, key, init_range, pairs):
  """``solver(psi, z0, z1, ...)`` in blocks of ``pairs`` pairs.

  Every block compiles to one program, shared with any other solve of
  ``pairs`` pairs with the same solver settings. Block ``i`` draws its
  starts with ``fold_in(key, i)`` for ``i >= 1`` and with ``key`` itself for
  the first, whose starts are then those of an unblocked solve (the random
  bits of a pair depend on its index only).

  Args:
    solver: a :class:`~vaells_jax.core.inference.Solver`.
    psi: ``[M, d, d]``.
    z0, z1: ``[..., d]``, broadcasting.
    l1_weight: scalar or ``[...]``.
    key: ``jax.random`` key.
    init_range: ``(lo, hi)``, scalars or ``[...]``.
    pairs: pairs per block.

  Returns:
    The coefficients ``[..., M]`` and objectives ``[...]`` (NumPy).
  """
  z0, z1 = np.asarray(z0, np.float32), np.asarray(z1, np.float32)
  batch = np.broadcast_shapes(
    z0.shape[:-1], z1.shape[:-1], np.shape(l1_weight), *map(np.shape, init_range)
  )
  flat = [
    np.broadcast_to(np.asarray(a, np.float32), batch + tail).reshape((-1,) + tail)
    for a, tail in (
      (z0, z0.shape[-1:]),
      (z1, z1.shape[-1:]),
      (l1_weight, ()),
      (init_range[0], ()),
      (init_range[1], ()),
    )
  ]
  coeffs, objective = [], []
  for i, start in enumerate(range(0, len(flat[0]), pairs)):
    a, b, lam, lo, hi = (_pad(f[start : start + pairs], pairs) for f in flat)
    result = solver.replace(init_range=(lo, hi))(
      psi, a, b, l1_weight=lam, key=key if i == 0 else jax.random.fold_in(key, i)
    )
    size = min(pairs, len(flat[0]) - start)
    coeffs.append(np.asarray(result.coeffs)[:size])
    objective.append(np.asarray(result.objective)[:size])
  coeffs, objective = np.concatenate(coeffs), np.concatenate(objective)
  return coeffs.reshape(batch + coeffs.shape[-1:]), objective.reshape(batch)


def solve_restarts_as_pairs(solver, psi, z0, z1, *, l1_weight: float, key, pairs):
  """``solver(psi, z0, z1, l1_weight=, key=)``, its restarts solved as pairs.

  Restart ``r`` of pair ``n`` becomes pair ``r N + n`` of a one-restart
  solve from the very starts ``solver`` draws
  (:func:`~vaells_jax.core.inference.solver_starts`), in blocks of
  ``pairs`` pairs (the last padded), so that its program is the one of any
  other one-restart solve of ``pairs`` pairs with the same settings. Each
  pair keeps its lowest objective over its restarts, the first on ties, as
  ``solver`` does. The coefficients equal ``solver``'s to float32 rounding
  where both programs solve at most 512 pairs (bit for bit where XLA:CPU
  compiles both alike, which depends on the CPU); a larger batch rounds
  apart in the last bits, which the iterations can amplify
  (``docs/studies/benchmarks-evaluation.md``).

  Args:
    solver: a :class:`~vaells_jax.core.inference.Solver` with scalar
      ``init_range`` (not ``method="exact"``).
    psi: ``[M, d, d]``.
    z0, z1: ``[N, d]``.
    l1_weight: the sparsity weight.
    key: ``jax.random`` key of the starts.
    pairs: pairs per block.

  Returns:
    The best restart's coefficients ``[N, M]`` and objectives ``[N]`` (NumPy).
  """
  z0, z1 = np.asarray(z0, np.float32), np.asarray(z1, np.float32)
  num, restarts, num_ops = len(z0), solver.num_restarts, np.shape(psi)[0]
  lo, hi = (np.full(num, b, np.float32) for b in solver.init_range)
  flat = [
    np.asarray(_draw_starts(key, restarts, num_ops, lo, hi)).reshape(-1, num_ops),
    np.tile(z0, (restarts, 1)),
    np.tile(z1, (restarts, 1)),
    np.full(restarts * num, l1_weight, np.float32),
  ]
  coeffs, objective = [], []
  for start in range(0, len(flat[0]), pairs):
    c0, a, b, lam = (_pad(f[start : start + pairs], pairs) for f in flat)
    result = solver.from_starts(psi, a, b, l1_weight=lam, starts=c0[None])
    coeffs.append(np.asarray(result.coeffs))
    objective.append(np.asarray(result.objective))
  size = restarts * num
  coeffs = np.concatenate(coeffs)[:size].reshape(restarts, num, num_ops)
  objective = np.concatenate(objective)[:size].reshape(restarts, num)
  best = np.argmin(objective, axis=0)
  return coeffs[best, np.arange(num)], objective[best, np.arange(num)]
