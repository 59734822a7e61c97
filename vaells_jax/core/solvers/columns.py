"""The blocked loop shared by the per-pair solvers (``pgd``, ``gauss_newton``).

Pairs lie on the last (minor) axis of every array, so each operation is
elementwise over contiguous pairs and vectorises. :func:`solve_columns` lays
every start of every pair out that way and solves them in ``lax.map`` chunks
of :data:`CHUNK` pairs (so that the working set stays in cache);
:func:`run_blocks` iterates a solver until every pair has stopped, gathering
the last running pairs into smaller arrays.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from vaells_jax.core import backend

__all__ = [
  "CHUNK",
  "compacted_sizes",
  "first_true",
  "map_chunks",
  "materialize",
  "pick",
  "run_blocks",
  "solve_columns",
]

CHUNK = 1024  # pairs per lax.map chunk (benchmarks/inference_scaling.py)
_STAGES = 3  # times run_blocks gathers its running pairs into a smaller array


def materialize(index, fn, *args):
  """``fn(*args)``, computed once and stored.

  XLA:CPU fuses an elementwise producer into each of its consumers and
  recomputes it there: a gradient with ``M`` rows, or a state with a dozen
  fields, each recomputed the transcendental functions of the matrix
  exponential (measured: 3x the time of one evaluation). A conditional is a
  fusion boundary; ``index`` is a loop counter (never batched by ``vmap``,
  so the conditional stays one), always ``>= 0``. On a GPU a conditional
  costs a round trip to the host (its branch index is read there) while
  recomputing is cheap, so there it is plain ``fn(*args)``.
  """
  return backend.per_platform(
    lambda i, *a: jax.lax.cond(i >= 0, fn, fn, *a), lambda i, *a: fn(*a), index, *args
  )


def first_true(flags):
  """Index of the first true row of ``flags [K, P]`` (0 where none is)."""
  index = jnp.zeros(flags.shape[1:], jnp.int32)
  for k in range(len(flags) - 1, -1, -1):
    index = jnp.where(flags[k], k, index)
  return index


def pick(rows, choice):
  """``rows[choice[p], p]`` for ``K`` rows, as a chain of selects (a gather
  costs many times more on XLA:CPU)."""
  result = rows[-1]
  for k in range(len(rows) - 2, -1, -1):
    result = jnp.where(choice == k, rows[k], result)
  return result


def run_blocks(iterate, state, max_iter: int, block: int, pairs, *, counted=False):
  """``state = iterate(i, state, *pairs)`` until ``max_iter`` iterations or
  every pair has stopped (``state.done``), checked every ``block`` iterations.

  ``counted``: in a program for a GPU or TPU, run all ``max_iter``
  iterations instead, a loop of known trip count (its condition is not read
  on the host every block, and no pairs are gathered). For a solver whose
  pairs run to ``max_iter`` anyway; the results are the same, since a
  stopped pair no longer changes.

  Blocks are a ``fori_loop`` (whose counter ``vmap`` leaves unbatched, so
  :func:`materialize`'s conditional stays one) inside a ``while_loop``; a
  pair is frozen (marked done for ``iterate``) once it has run
  ``max_iter`` iterations, and a pair done before an iteration stays done.

  The loop runs as long as its slowest pair, while most pairs stop far
  earlier. So once no more pairs are running than half the array holds,
  they are gathered (with ``pairs``: arrays with the pairs on their last
  axis, as every field of ``state``) into an array of that size
  (:func:`compacted_sizes`), which goes on, and is scattered back at the
  end. Each pair's iterations are elementwise, so the results do not
  change (``tests/test_pgd.py``; on a training step's real pairs the same
  to the bit, docs/studies/benchmarks-solvers.md).
  """

  def checked(state, pairs):
    sizes = compacted_sizes(state.done.shape[-1])
    return _compacting(iterate, max_iter, block, 0, state, pairs, sizes)[1]

  def all_iterations(state, pairs):
    def body(i, state):
      new = iterate(i, state, *pairs)
      return new._replace(done=state.done | new.done)

    return jax.lax.fori_loop(0, max_iter, body, state)

  if not counted:
    return checked(state, pairs)
  return backend.per_platform(checked, all_iterations, state, pairs)


def _blocks_while_running(iterate, max_iter, block, start, state, pairs, running):
  """:func:`run_blocks`'s blocks from iteration ``start`` while more than
  ``running`` pairs run and iterations are left: ``(next start, state)``."""

  def run_block(carry):
    start, state = carry

    def body(i, state):
      frozen = state._replace(done=state.done | (start + i >= max_iter))
      new = iterate(i, frozen, *pairs)
      return new._replace(done=state.done | (new.done & ~frozen.done))

    return start + block, jax.lax.fori_loop(0, block, body, state)

  return jax.lax.while_loop(
    lambda carry: (carry[0] < max_iter) & (jnp.sum(~carry[1].done, axis=-1) > running),
    run_block,
    (start, state),
  )


def _compacting(iterate, max_iter, block, start, state, pairs, sizes):
  """:func:`run_blocks`'s loop, the running pairs gathered into arrays of
  each of ``sizes`` in turn once they fit, scattered back at the end:
  ``(next start, state)``."""
  if not sizes:
    return _blocks_while_running(iterate, max_iter, block, start, state, pairs, 0)
  start, state = _blocks_while_running(
    iterate, max_iter, block, start, state, pairs, sizes[0]
  )
  order = jnp.argsort(state.done, stable=True)[: sizes[0]]  # running pairs first
  gather = lambda a: jnp.take(a, order, axis=-1)  # noqa: E731
  start, rest = _compacting(
    iterate,
    max_iter,
    block,
    start,
    jax.tree_util.tree_map(gather, state),
    jax.tree_util.tree_map(gather, pairs),
    sizes[1:],
  )
  return start, jax.tree_util.tree_map(
    lambda a, b: a.at[..., order].set(b), state, rest
  )


def compacted_sizes(num_pairs: int) -> list:
  """The arrays :func:`run_blocks` gathers its running pairs into: each half
  the last, rounded up to a multiple of 16 pairs (another vectorisation of
  the tail of an array could round differently), at most :data:`_STAGES`."""
  sizes = [num_pairs]
  while len(sizes) <= _STAGES and (size := -(-sizes[-1] // 32) * 16) < sizes[-1]:
    sizes.append(size)
  return sizes[1:]


def map_chunks(fn, arrays, *, chunk, axis, mode="constant"):
  """``fn(*arrays)``, in ``lax.map`` chunks of ``chunk`` entries along ``axis``.

  ``axis`` (0 or -1) indexes the entries in every array and in every output
  of ``fn``. With more than ``chunk`` entries the arrays are padded
  (``jnp.pad`` ``mode``) to whole chunks, each chunk solved by one ``fn``
  call, and the padding dropped from the outputs; otherwise one call. The
  chunks keep a CPU's working set in cache; a GPU runs them one after the
  other, so there it is always one call.
  """
  total = arrays[0].shape[axis]
  if total <= chunk:
    return fn(*arrays)
  return backend.per_platform(
    lambda *a: _map_chunks(fn, a, chunk, axis, mode), lambda *a: fn(*a), *arrays
  )


def _map_chunks(fn, arrays, chunk, axis, mode):
  total = arrays[0].shape[axis]
  chunks = math.ceil(total / chunk)

  def split(a):  # [..., total, ...] -> [chunks, ..., chunk, ...]
    k = axis % a.ndim
    widths = [(0, 0)] * a.ndim
    widths[k] = (0, chunks * chunk - total)
    a = jnp.pad(a, widths, mode=mode)
    return jnp.moveaxis(
      a.reshape(a.shape[:k] + (chunks, chunk) + a.shape[k + 1 :]), k, 0
    )

  def merge(a):  # [chunks, ..., chunk, ...] -> [..., total, ...]
    k = axis % (a.ndim - 1)
    a = jnp.moveaxis(a, 0, k)
    a = a.reshape(a.shape[:k] + (chunks * chunk,) + a.shape[k + 2 :])
    return jax.lax.slice_in_dim(a, 0, total, axis=k)

  out = jax.lax.map(lambda args: fn(*args), [split(a) for a in arrays])
  return jax.tree_util.tree_map(merge, out)


def solve_columns(solve_chunk, init, z0, z1, l1_weight, *, chunk=CHUNK):
  """``solve_chunk(coeffs [M, P], z0 [d, P], z1 [d, P], l1 [P])`` on every
  start of every pair, the pairs on the minor axis, in chunks of ``chunk``.

  Args:
    solve_chunk: returns ``(coeffs [M, P], num_iter [P], error [P])``.
    init: starting coefficients, ``[R, N, M]``.
    z0, z1: points, ``[N, d]``.
    l1_weight: sparsity weights, ``[N]``.
    chunk: pairs (starts) per ``lax.map`` chunk.

  Returns:
    ``(coeffs [R, N, M], num_iter [R, N], error [R, N])``.
  """
  num_restarts, num_pairs, num_ops = init.shape
  total = num_restarts * num_pairs
  tile = lambda a: jnp.tile(a.T, (1,) * (a.ndim - 1) + (num_restarts,))  # noqa: E731
  columns = [init.reshape(total, num_ops).T, tile(z0), tile(z1), tile(l1_weight)]
  # Padding pairs (z0 = z1 = 0, c = 0, no weight) stop at once.
  coeffs, num_iter, error = map_chunks(solve_chunk, columns, chunk=chunk, axis=-1)
  return (
    coeffs.T.reshape(num_restarts, num_pairs, num_ops),
    num_iter.reshape(num_restarts, num_pairs),
    error.reshape(num_restarts, num_pairs),
  )
