"""Rotated MNIST in the paper's figure format (its fig. 4): upright test
digits drawn at random (not picked), each moved along the strongest learned
operator with negative and positive coefficients, the decoded digit in the
middle, ``FRAMES`` frames a digit over a half turn each way."""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from vaells_jax.core.transport import transport_path
from vaells_jax.evaluation import image_plots
from vaells_jax.evaluation.rotation import path_span

__all__ = ["FRAMES", "ROWS", "plot_rotation_grid"]

ROWS = 10  # digits, drawn at random from the test set with the run's seed
FRAMES = 9  # frames a digit: a half turn each way, the decoded digit in the middle


def plot_rotation_grid(trained, path, rows: int = ROWS, frames: int = FRAMES):
  """Writes ``rows`` random upright test digits × ``frames`` frames along the
  strongest operator, ``|t| <= pi / rho``: a half turn each way of its
  slowest rotation (:func:`~vaells_jax.evaluation.rotation.path_span`), the
  decoded digit (``t = 0``, boxed) in the middle.

  Args:
    trained: a :class:`~vaells_jax.api.TrainedVAELLS` of rotated digits.
    path: output PNG path.
    rows: digits drawn (with the run's seed) from ``trained.data.x_test``.
    frames: frames along the path.

  Returns:
    ``(figure, picked, coeffs)``: the figure written, the test indices
    ``[rows]`` drawn and the coefficients ``[frames]``.
  """
  cfg, model, params = trained.config, trained._model, trained.params
  psi = np.asarray(trained.psi)
  x = np.asarray(trained.data.x_test, np.float32)
  picked = np.sort(np.random.default_rng(cfg.seed).choice(len(x), rows, replace=False))
  starts = np.asarray(jax.jit(lambda v: model.encode(params, v))(x[picked]))
  m = int(np.argmax(np.linalg.norm(psi, axis=(1, 2))))
  coeffs = np.linspace(-1.0, 1.0, frames) * path_span(
    psi[m], starts, 1000.0 / cfg.zeta3
  )
  op = jnp.asarray(psi[m], jnp.float32)[None]
  moved = transport_path(op, jnp.ones((1, 1)), jnp.asarray(starts), jnp.asarray(coeffs))
  decoded = np.asarray(model.decode(params, jnp.swapaxes(moved, 0, 1)))
  title = f"operator {m}: {rows} random test digits, a half turn each way"
  figure = image_plots.plot_operator_paths(pathlib.Path(path), decoded, coeffs, title)
  return figure, picked, coeffs
