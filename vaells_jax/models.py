"""Encoder and decoder networks (Flax): paper table 2, one hidden layer of 512 ReLU."""

from __future__ import annotations

from typing import Sequence

import flax.linen as nn

__all__ = ["MLPDecoder", "MLPEncoder"]


class MLPEncoder(nn.Module):
  """``f_phi``: ``[..., D] -> [..., d]``, hidden ReLU layers then a linear map."""

  latent_dim: int
  hidden: Sequence[int] = (512,)

  @nn.compact
  def __call__(self, x):
    for width in self.hidden:
      x = nn.relu(nn.Dense(width)(x))
    return nn.Dense(self.latent_dim)(x)


class MLPDecoder(nn.Module):
  """``g_theta``: ``[..., d] -> [..., D]``, hidden ReLU layers then a linear map."""

  data_dim: int
  hidden: Sequence[int] = (512,)

  @nn.compact
  def __call__(self, z):
    for width in self.hidden:
      z = nn.relu(nn.Dense(width)(z))
    return nn.Dense(self.data_dim)(z)
