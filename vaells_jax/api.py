"""A trained VAELLS model as other JAX code uses it: encode, decode, sample, paths."""

from __future__ import annotations

import dataclasses
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from vaells_jax.checkpoint import restore_checkpoint
from vaells_jax.config import CONFIG_NAME, Config, config_from_json
from vaells_jax.data.synthetic import SyntheticData, load_synthetic
from vaells_jax.inference import infer_coefficients
from vaells_jax.laplace import sample_laplace
from vaells_jax.train import Model, init_state
from vaells_jax.transport import transport, transport_path

__all__ = ["TrainedVAELLS", "load"]

DATA_NAME = "dataset.npz"


@dataclasses.dataclass
class TrainedVAELLS:
  """A trained model. Latent points are in the encoder's coordinates ``f(x)``.

  Attributes:
    config: the training configuration.
    params: ``{"encoder", "decoder", "anchors"}`` network and anchor parameters.
    psi: the learned operators ``[M, d, d]`` (acting on ``z / latent_scale``).
    data: the data set it was trained on.
  """

  config: Config
  params: dict
  psi: jax.Array
  data: SyntheticData

  @property
  def _model(self) -> Model:
    return Model.create(self.config, self.data.data_dim)

  @property
  def _scale(self) -> float:
    return self.config.latent_scale

  def encode(self, x):
    """``f(x)``: ``[..., D] -> [..., d]``."""
    return self._model.encode(self.params, jnp.asarray(x)) * self._scale

  def decode(self, z):
    """``g(z)``: ``[..., d] -> [..., D]``."""
    return self._model.decode(self.params, jnp.asarray(z) / self._scale)

  @property
  def anchors_latent(self):
    """Encoded anchors, ``[C, A, d]``."""
    return self.encode(self.params["anchors"])

  def _sample_around(self, key, starts, n, laplace_scale=None, gamma=None):
    """``n`` samples ``T(c) s + gamma eps`` around each start ``[..., d]``."""
    cfg = self.config
    b = 1.0 / cfg.zeta3 if laplace_scale is None else laplace_scale
    gamma = cfg.gamma if gamma is None else gamma
    k_c, k_e = jax.random.split(key)
    shape = starts.shape[:-1] + (n,)
    coeffs = sample_laplace(k_c, shape + (cfg.num_ops,), b)
    eps = jax.random.normal(k_e, shape + (cfg.latent_dim,))
    w = transport(self.psi, coeffs, starts[..., None, :] / self._scale)
    return (w + gamma * eps) * self._scale

  def sample_prior(self, key, n, label=None, laplace_scale=None, gamma=None):
    """``n`` latent samples from the prior (of class ``label``, or all classes).

    Each sample picks an anchor uniformly and moves it along the operators
    with Laplace coefficients (scale ``1 / zeta3`` unless ``laplace_scale``)
    plus Gaussian noise (``gamma`` unless given). Returns ``[n, d]``.
    """
    anchors = self.anchors_latent
    if label is not None:
      if not 0 <= label < anchors.shape[0]:
        raise ValueError(f"label must be in [0, {anchors.shape[0]}), got {label}.")
      anchors = anchors[label]
    anchors = anchors.reshape(-1, anchors.shape[-1])
    k_pick, k_move = jax.random.split(key)
    picked = anchors[jax.random.randint(k_pick, (n,), 0, anchors.shape[0])]
    return self._sample_around(k_move, picked, 1, laplace_scale, gamma)[:, 0]

  def sample_posterior(self, key, x, n, laplace_scale=None, gamma=None):
    """``n`` samples of ``q(z | x)`` for each input: ``[B, D] -> [B, n, d]``."""
    return self._sample_around(key, self.encode(x), n, laplace_scale, gamma)

  def infer_path(self, z0, z1, ts, key=None):
    """The transport path from ``z0`` to ``z1`` (``[..., d]`` each) at times ``ts``.

    Coefficients are inferred with the prior's sparsity weight and restarts;
    ``t in [0, 1]`` interpolates, other ``t`` extrapolate. Returns
    ``[T, ..., d]``.
    """
    cfg = self.config
    key = jax.random.PRNGKey(0) if key is None else key
    w0, w1 = jnp.asarray(z0) / self._scale, jnp.asarray(z1) / self._scale
    result = infer_coefficients(
        self.psi, w0, w1, l1_weight=cfg.zeta_p, key=key,
        num_restarts=cfg.num_restarts, init_range=cfg.init_range,
        max_iter=cfg.inference_max_iter, tol=cfg.inference_tol)
    return transport_path(self.psi, result.coeffs, w0, ts) * self._scale


def load(workdir) -> TrainedVAELLS:
  """Loads the model trained in ``workdir`` (by ``experiments/run.py`` or ``fit``)."""
  workdir = pathlib.Path(workdir)
  for name in (CONFIG_NAME, DATA_NAME):
    if not (workdir / name).exists():
      raise FileNotFoundError(f"{workdir / name} is missing: is {workdir} a "
                              "VAELLS workdir?")
  config = config_from_json(workdir / CONFIG_NAME)
  data = load_synthetic(workdir / DATA_NAME)
  target = init_state(jax.random.PRNGKey(0), config, np.asarray(data.anchors),
                      data.data_dim)
  state = restore_checkpoint(workdir, target)
  return TrainedVAELLS(config, state.params, state.psi, data)
