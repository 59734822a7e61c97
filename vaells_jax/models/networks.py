"""Encoder and decoder networks (Flax).

``MLPEncoder`` / ``MLPDecoder``: paper table 2, one hidden layer of 512 ReLU.
``ConvEncoder`` / ``ConvDecoder``: paper table 5, the MNIST networks.
``ImageEncoder`` / ``ImageDecoder``: convolutions whose depth follows an
image's ``(H, W, C)`` (:func:`image_layers`), what ``fit`` trains on images.

The convolutional layers reproduce PyTorch's ``Conv2d`` / ``ConvTranspose2d``
(padding, stride and output size) and its flatten order (channel, row, column),
so PyTorch weights load after permuting axes: a ``Conv2d`` weight
``[out, in, kh, kw]`` and a ``ConvTranspose2d`` weight ``[in, out, kh, kw]``
both become the Flax kernel ``w.transpose(2, 3, 1, 0)``, a ``Linear`` weight
``[out, in]`` becomes ``w.T``.
"""

from __future__ import annotations

import math
from typing import Sequence

import flax.linen as nn
import jax.numpy as jnp

__all__ = [
  "ConvDecoder",
  "ConvEncoder",
  "ImageDecoder",
  "ImageEncoder",
  "MLPDecoder",
  "MLPEncoder",
  "image_layers",
  "torch_conv_padding",
  "torch_conv_transpose_padding",
]


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


_SIDE = 28  # table 5 is written for 28 x 28 single-channel images
_CHANNELS = 64


def torch_conv_padding(pad: int) -> tuple[tuple[int, int], tuple[int, int]]:
  """Flax ``nn.Conv`` padding equal to PyTorch ``Conv2d(padding=pad)``."""
  return ((pad, pad), (pad, pad))


def torch_conv_transpose_padding(
  kernel: int, pad: int
) -> tuple[tuple[int, int], tuple[int, int]]:
  """Flax ``nn.ConvTranspose`` padding equal to PyTorch ``ConvTranspose2d``.

  Flax pads the stride-dilated input by ``(lo, hi)`` and then runs a VALID
  convolution, giving ``(n - 1) * s + 1 + lo + hi - k + 1`` outputs; with
  ``lo = hi = k - 1 - pad`` that is PyTorch's ``(n - 1) * s - 2 * pad + k``.
  """
  if not 0 <= pad <= kernel - 1:
    raise ValueError(
      f"ConvTranspose2d padding must lie in [0, kernel - 1] = [0, {kernel - 1}],"
      f" got {pad}."
    )
  width = kernel - 1 - pad
  return ((width, width), (width, width))


def _conv(features: int, stride: int, pad: int, name: str) -> nn.Conv:
  """A 4x4 ``nn.Conv`` acting as PyTorch ``Conv2d(kernel_size=4)``."""
  return nn.Conv(
    features,
    (4, 4),
    strides=(stride, stride),
    padding=torch_conv_padding(pad),
    name=name,
  )


def _conv_transpose(
  features: int, stride: int, pad: int, name: str
) -> nn.ConvTranspose:
  """A 4x4 ``nn.ConvTranspose`` acting as PyTorch ``ConvTranspose2d``.

  ``transpose_kernel=True`` makes the kernel ``[kh, kw, out, in]`` the
  PyTorch weight ``[in, out, kh, kw]`` with axes permuted ``(2, 3, 1, 0)``.
  """
  return nn.ConvTranspose(
    features,
    (4, 4),
    strides=(stride, stride),
    padding=torch_conv_transpose_padding(4, pad),
    transpose_kernel=True,
    name=name,
  )


def _check_last_dim(x, size: int, name: str):
  if x.ndim < 1 or x.shape[-1] != size:
    raise ValueError(
      f"{name} expects inputs [..., {size}], got shape {tuple(x.shape)}."
    )


class ConvEncoder(nn.Module):
  """``f_phi`` of paper table 5: ``[..., 784] -> [..., latent_dim]``.

  Three 4x4 convolutions with ``channels`` (64) channels and ReLU, spatial
  sizes 28 -> 14 -> 7 -> 4 (stride 2 pad 1, stride 2 pad 1, stride 1 pad 0),
  then a linear map of the 4 * 4 * 64 = 1024 features, flattened in
  PyTorch's (channel, row, column) order.

  Attributes:
    latent_dim: ``d``, the size of the latent code.
    channels: the convolutions' channels (paper: 64).
  """

  latent_dim: int
  channels: int = _CHANNELS

  @nn.compact
  def __call__(self, x):
    """Encodes flattened 28 x 28 images.

    Args:
      x: ``[..., 784]`` images, row-major; any leading shape, or none.

    Returns:
      ``[..., latent_dim]`` latent codes.

    Raises:
      ValueError: if the last axis of ``x`` is not 784.
    """
    _check_last_dim(x, _SIDE * _SIDE, "ConvEncoder")
    lead = x.shape[:-1]
    h = jnp.reshape(x, (-1, _SIDE, _SIDE, 1))
    h = nn.relu(_conv(self.channels, 2, 1, "conv1")(h))  # 14 x 14
    h = nn.relu(_conv(self.channels, 2, 1, "conv2")(h))  # 7 x 7
    h = nn.relu(_conv(self.channels, 1, 0, "conv3")(h))  # 4 x 4
    h = jnp.transpose(h, (0, 3, 1, 2)).reshape(h.shape[0], -1)  # [n, 16 * channels]
    z = nn.Dense(self.latent_dim, name="dense")(h)
    return jnp.reshape(z, lead + (self.latent_dim,))


class ConvDecoder(nn.Module):
  """``g_theta`` of paper table 5: ``[..., d] -> [..., 784]`` in ``(0, 1)``.

  A linear map to 3136 = 64 * 7 * 7 units and ReLU, read as ``[64, 7, 7]``
  (PyTorch's ``view`` order), then three 4x4 transposed convolutions, spatial
  sizes 7 -> 8 -> 14 -> 28 (64 channels stride 1 pad 1, 64 channels stride 2
  pad 2, 1 channel stride 2 pad 1), ReLU between them and a sigmoid at the end.

  Attributes:
    data_dim: the flattened image size; must be 784, the architecture fixes
      28 x 28 images. Kept for the ``MLPDecoder`` constructor signature.
    channels: the first two transposed convolutions' channels (paper: 64).
  """

  data_dim: int = _SIDE * _SIDE
  channels: int = _CHANNELS

  def __post_init__(self):
    if self.data_dim != _SIDE * _SIDE:
      raise ValueError(
        f"ConvDecoder produces 28 x 28 images, data_dim must be 784, got "
        f"{self.data_dim}; use MLPDecoder for other data."
      )
    super().__post_init__()

  @nn.compact
  def __call__(self, z):
    """Decodes latent codes into flattened images.

    Args:
      z: ``[..., d]`` latent codes; any leading shape, or none.

    Returns:
      ``[..., 784]`` pixel intensities in ``(0, 1)``.

    Raises:
      ValueError: if ``z`` has no axes.
    """
    if z.ndim < 1:
      raise ValueError("ConvDecoder expects inputs [..., d], got a scalar.")
    lead = z.shape[:-1]
    c = self.channels
    h = nn.relu(nn.Dense(c * 7 * 7, name="dense")(z))
    h = jnp.reshape(h, (-1, c, 7, 7)).transpose(0, 2, 3, 1)
    h = nn.relu(_conv_transpose(c, 1, 1, "convT1")(h))  # 8 x 8
    h = nn.relu(_conv_transpose(c, 2, 2, "convT2")(h))  # 14 x 14
    x = nn.sigmoid(_conv_transpose(1, 2, 1, "convT3")(h))  # 28 x 28
    return jnp.reshape(x, lead + (self.data_dim,))


# The image networks halve the sides (rounding up) until both are at most
# this: 28 -> 14 -> 7, 16 -> 8 -> 4, 64 -> 32 -> 16 -> 8 -> 4.
_SMALLEST_SIDE = 7


def image_layers(height: int, width: int) -> tuple[int, tuple[int, int]]:
  """The stride-2 layers of the image networks for ``height x width``
  images and the grid they leave: ``(layers, (h, w))``."""
  layers, h, w = 0, height, width
  while max(h, w) > _SMALLEST_SIDE:
    layers, h, w = layers + 1, math.ceil(h / 2), math.ceil(w / 2)
  return layers, (h, w)


class ImageEncoder(nn.Module):
  """``f_phi`` for flattened ``(H, W, C)`` images: ``[..., H*W*C] -> [..., d]``.

  :func:`image_layers` 4x4 convolutions of stride 2 (``SAME`` padding,
  ReLU, ``channels`` each), then a linear map of the remaining grid.

  Attributes:
    latent_dim: ``d``.
    shape: ``(H, W, C)``; the input's last axis is its product, row-major.
    channels: the convolutions' channels.
  """

  latent_dim: int
  shape: tuple[int, int, int]
  channels: int = 32

  @nn.compact
  def __call__(self, x):
    """``[..., H*W*C]`` images to ``[..., latent_dim]`` codes."""
    _check_last_dim(x, math.prod(self.shape), "ImageEncoder")
    lead = x.shape[:-1]
    h = jnp.reshape(x, (-1, *self.shape))
    for i in range(image_layers(*self.shape[:2])[0]):
      h = nn.relu(nn.Conv(self.channels, (4, 4), 2, "SAME", name=f"conv{i}")(h))
    z = nn.Dense(self.latent_dim, name="dense")(h.reshape(h.shape[0], -1))
    return jnp.reshape(z, lead + (self.latent_dim,))


class ImageDecoder(nn.Module):
  """``g_theta`` for ``(H, W, C)`` images: ``[..., d] -> [..., H*W*C]``.

  A hidden layer of ``hidden`` ReLU units, a linear map and ReLU to the grid
  of :func:`image_layers` with ``channels`` channels, one 4x4 transposed
  convolution of stride 2 (ReLU) per encoder layer but the last, one to
  ``C`` channels, cropped to ``H x W``. The output
  is linear: ``fit`` centres and scales pixels (Gaussian likelihood), so no
  squashing fights their range.

  Attributes:
    shape: ``(H, W, C)``.
    channels: the hidden layers' channels.
    hidden: the units of the first layer.
  """

  shape: tuple[int, int, int]
  channels: int = 32
  hidden: int = 512

  @nn.compact
  def __call__(self, z):
    """``[..., d]`` codes to ``[..., H*W*C]`` images, row-major."""
    if z.ndim < 1:
      raise ValueError("ImageDecoder expects inputs [..., d], got a scalar.")
    lead = z.shape[:-1]
    height, width, colours = self.shape
    layers, (h0, w0) = image_layers(height, width)
    c = self.channels
    h = nn.relu(nn.Dense(self.hidden, name="hidden")(z.reshape(-1, z.shape[-1])))
    h = nn.relu(nn.Dense(h0 * w0 * c, name="dense")(h))
    h = h.reshape(-1, h0, w0, c)
    for i in range(layers):
      out = colours if i == layers - 1 else c
      h = nn.ConvTranspose(out, (4, 4), (2, 2), "SAME", name=f"convT{i}")(h)
      h = h if i == layers - 1 else nn.relu(h)
    if not layers:  # images of at most 7 x 7: a 1x1 convolution to C channels
      h = nn.Conv(colours, (1, 1), name="out")(h)
    x = h[:, :height, :width, :]
    return jnp.reshape(x, lead + (height * width * colours,))
