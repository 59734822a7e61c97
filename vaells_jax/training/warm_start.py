"""Networks that start from a layout of each class's manifold (fit on
images, and on vectors of one class).

From random networks, VAELLS on images rarely finds a closed loop for a
periodic transformation: the encoder lays each class's orbit out as a
tangle of open pieces before the operators learn, and the operators then
learn nothing that moves along it (docs/images.md); on vectors, the
encoder keeps an open curve that bends both ways as it is, which no
linear flow follows (docs/studies/fit-open-curves.md). The warm start
gives the networks a layout first, from the data alone:

1. :func:`layout`: each class's points (at most :data:`LAYOUT_POINTS`) are
   embedded in 2-D by Isomap (shortest paths over a k-nearest-neighbour
   graph joined with the minimum spanning tree, then classical scaling). A
   closed loop (:func:`class_layout`) goes to a circle about the origin,
   an orbit of a rotation; an open curve to a horizontal segment, an orbit
   of a shear, at each point's distance along it (or, with ``open_arc``,
   to that part of a turn of the circle, a rotation's orbit), in the first
   two latent axes. With three latent axes or more, class ``c`` of ``C`` lies
   at height ``c - (C - 1) / 2`` on the third (one apart: the decoder
   tells the classes apart, which it could not on nested circles in 2-D);
   in 2-D at radius (or height) ``0.4 + 0.6 (c + 1) / C``. One operator
   moves every class along its own orbit.
2. :func:`pretrain`: the encoder learns the layout and the decoder to
   reconstruct the points from it (:data:`STEPS` Adam steps).
3. :func:`operators`: the operators start at the layout's own: a rotation
   (if a class is a loop) and a shear (if one is open), :data:`TURN` radians
   per unit coefficient; the others at 0 (the run adds its random draw).

The run then trains from these networks as from random ones (the file
``config.start_networks``, read by
:func:`vaells_jax.models.vaells.init_params`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vaells_jax.config import Config
from vaells_jax.core.objective import reconstruction_error
from vaells_jax.data.anchors import NEIGHBOURS
from vaells_jax.models.vaells import Model, init_params
from vaells_jax.training.coverage import pairwise_distances

__all__ = [
  "CLOSED_RATIO",
  "GAP_RATIO",
  "LAYOUT_POINTS",
  "STEPS",
  "class_layout",
  "layout",
  "pretrain",
  "write_start",
]

LAYOUT_POINTS = 600  # points of each class the layout places, at most
CLOSED_RATIO = 0.3
# A chain whose ends lie this many longest tree edges apart or less is a loop:
# on the image battery's loops with a gap 1.0-1.8, on its open curves 3.4-9.8.
GAP_RATIO = 2.5
STEPS = 3000
TURN = 0.5  # radians a unit coefficient turns the layout's rotation
BATCH = 32
CHUNK = 256  # points a call when measuring the fit
LEARNING_RATE = 1e-3
LAYOUT_WEIGHT = 10.0  # on the squared distance of the codes to the layout


def layout(
  x, labels, seed: int, latent_dim: int = 2, open_arc: float = 0.0
) -> tuple[np.ndarray, np.ndarray, list[bool]]:
  """Where the warm start puts points of ``x [N, D]``: ``(index [P],
  codes [P, max(2, latent_dim)], closed [C])``, the points it placed, their
  latent codes and whether each class lies on a circle (a closed loop, or
  with ``open_arc`` > 0 an open curve laid on that fraction of a turn of
  the unit circle, centred on ``+x``, instead of a segment)."""
  rng = np.random.default_rng(seed)
  labels = np.asarray(labels)
  num_classes = int(labels.max()) + 1
  chosen, codes, closed = [], [], []
  for c in range(num_classes):
    index = np.flatnonzero(labels == c)
    if len(index) > LAYOUT_POINTS:
      index = np.sort(rng.choice(index, LAYOUT_POINTS, replace=False))
    code, loop = class_layout(np.asarray(x[index], np.float64))
    if not loop and open_arc > 0:  # the segment's place -> an angle
      angle = np.pi * open_arc * code[:, 0]
      code, loop = np.stack([np.cos(angle), np.sin(angle)], -1), True
    if latent_dim >= 3:  # a unit curve at its class's height on the third axis
      height = np.full((len(code), 1), c - (num_classes - 1) / 2)
      code = np.concatenate([code, height, np.zeros((len(code), latent_dim - 3))], 1)
    else:
      code = (0.4 + 0.6 * (c + 1) / num_classes) * code
    chosen.append(index)
    codes.append(code)
    closed.append(loop)
  return np.concatenate(chosen), np.concatenate(codes).astype(np.float32), closed


def write_start(config: Config, x, labels, path, open_arc: float = 0.0) -> dict:
  """The warm start of ``config``'s networks on ``x [N, D]`` (in the model's
  units) of classes ``labels``: :func:`layout`, :func:`pretrain` and
  :func:`operators`, written to ``path`` (``config.start_networks``'s file).
  Returns :func:`pretrain`'s losses with ``classes`` and ``circles`` (how
  many lie on a circle)."""
  from vaells_jax.models import saved_networks

  index, codes, closed = layout(x, labels, config.seed, config.latent_dim, open_arc)
  networks, info = pretrain(config, x[index], codes, config.seed)
  saved_networks.write(path, {**networks, "psi": operators(config, closed)})
  return {**info, "classes": len(closed), "circles": sum(closed)}


def class_layout(points: np.ndarray) -> tuple[np.ndarray, bool]:
  """One class's codes at size 1 (the unit circle, or ``y = 1`` for
  ``x`` in [-1, 1]) and whether it is a closed loop.

  Closed: Isomap's second eigenvalue is at least :data:`CLOSED_RATIO` of its
  first (the points go to their Isomap angle), or the graph is one chain
  whose two ends lie within :data:`GAP_RATIO` times the longest edge of
  its minimum spanning tree (a loop the sampling left a gap in: the points
  go to their distance along the chain, the gap included)."""
  if len(points) < 3:
    return np.tile([[0.0, 1.0]], (len(points), 1)), False
  geo, longest = _geodesics(points)
  embedding, ratio = _isomap(geo)
  if ratio >= CLOSED_RATIO:
    centred = embedding - embedding.mean(axis=0)
    angle = np.arctan2(centred[:, 1], centred[:, 0])
    return np.stack([np.cos(angle), np.sin(angle)], -1), True
  first, last = np.argmin(embedding[:, 0]), np.argmax(embedding[:, 0])
  along = geo[first]
  gap = float(np.linalg.norm(points[first] - points[last]))
  if gap <= GAP_RATIO * longest:
    angle = 2 * np.pi * along / (along[last] + gap)
    return np.stack([np.cos(angle), np.sin(angle)], -1), True
  position = 2 * along / max(along[last], 1e-12) - 1
  return np.stack([position, np.ones(len(points))], -1), False


def _geodesics(points: np.ndarray) -> tuple[np.ndarray, float]:
  """Shortest-path distances over the k-nearest-neighbour graph of
  ``points`` joined with their minimum spanning tree (which keeps it in one
  piece where the sampling leaves a gap), and the tree's longest edge."""
  from scipy.sparse.csgraph import minimum_spanning_tree, shortest_path

  euclid = pairwise_distances(points, points)
  np.fill_diagonal(euclid, 0.0)
  k = min(NEIGHBOURS, len(points) - 1)
  near = np.argsort(euclid, axis=1)[:, 1 : k + 1]
  graph = np.zeros_like(euclid)
  rows = np.repeat(np.arange(len(points)), k)
  graph[rows, near.ravel()] = euclid[rows, near.ravel()]
  tree = minimum_spanning_tree(euclid).toarray()
  graph = np.maximum(np.maximum(graph, graph.T), np.maximum(tree, tree.T))
  return shortest_path(graph, directed=False), float(tree.max())


def _isomap(geo: np.ndarray) -> tuple[np.ndarray, float]:
  """2-D classical scaling of geodesic distances ``geo``, and its second
  eigenvalue over its first."""
  n = len(geo)
  centring = np.eye(n) - 1.0 / n
  gram = -0.5 * centring @ (geo**2) @ centring
  values, vectors = np.linalg.eigh(gram)
  top = np.argsort(values)[::-1][:2]
  values = np.maximum(values[top], 0.0)
  ratio = float(values[1] / values[0]) if values[0] > 0 else 0.0
  return vectors[:, top] * np.sqrt(values), ratio


def operators(config: Config, closed: list[bool]) -> np.ndarray:
  """``Psi [M, d, d]`` moving the layout's codes along their orbits: the
  rotation of the first two latent axes if a class is closed, then the
  shear along the first if one is open; zero beyond."""
  psi = np.zeros((config.num_ops, config.latent_dim, config.latent_dim), np.float32)
  if config.latent_dim < 2:
    return psi
  moves = [
    m for m, wanted in ((_ROTATION, any(closed)), (_SHEAR, not all(closed))) if wanted
  ]
  for k, move in enumerate(moves[: config.num_ops]):
    psi[k, :2, :2] = TURN * move
  return psi


_ROTATION = np.array([[0.0, -1.0], [1.0, 0.0]])
_SHEAR = np.array([[0.0, 1.0], [0.0, 0.0]])


def pretrain(config: Config, x, codes, seed: int) -> tuple[dict, dict]:
  """Networks of ``config`` fitted to ``codes [P, d]`` of ``x [P, D]`` (in
  the model's units): the encoder to the codes, the decoder to ``x`` from
  them. Returns ``({"encoder", "decoder"}, {"layout_error", "recon"})``,
  the mean squared distance of the codes to the layout and the mean
  ``1/2 ||x - g(f(x))||^2`` after."""
  x = jnp.asarray(np.asarray(x, np.float32))
  codes = jnp.asarray(codes)
  model = Model.create(config, x.shape[-1])
  anchors = jnp.zeros((1, 1, x.shape[-1]))
  params = init_params(jax.random.PRNGKey(seed + 11), config, anchors, x.shape[-1])
  networks = {"encoder": params["encoder"], "decoder": params["decoder"]}
  batch = min(BATCH, x.shape[0])
  optimizer = optax.adam(optax.cosine_decay_schedule(LEARNING_RATE, STEPS))

  def losses(nets, idx):
    full = {**params, **nets}
    z = model.encode(full, x[idx])
    recon = jnp.mean(reconstruction_error(x[idx], model.decode(full, z)))
    return recon, jnp.mean(jnp.sum((z - codes[idx]) ** 2, -1))

  def loss(nets, idx):
    recon, off = losses(nets, idx)
    return recon + LAYOUT_WEIGHT * off

  @jax.jit
  def step(nets, opt_state, key):
    idx = jax.random.randint(key, (batch,), 0, x.shape[0])
    updates, opt_state = optimizer.update(jax.grad(loss)(nets, idx), opt_state, nets)
    return optax.apply_updates(nets, updates), opt_state

  # A Python loop, not lax.scan: XLA on the CPU runs the convolutions inside
  # a scan's loop slower (studies/images/pretrain_loop.py).
  opt_state = optimizer.init(networks)
  for key in jax.random.split(jax.random.PRNGKey(seed + 12), STEPS):
    networks, opt_state = step(networks, opt_state, key)
  # The fit's losses in chunks: memory bounded however many points there are.
  chunk_losses, total = jax.jit(losses), np.zeros(2)
  for start in range(0, x.shape[0], CHUNK):
    idx = jnp.arange(start, min(start + CHUNK, x.shape[0]))
    total += len(idx) * np.asarray(chunk_losses(networks, idx))
  recon, off = total / x.shape[0]
  return networks, {"layout_error": float(off), "recon": float(recon)}
