"""Image rotation on the device, for rotated MNIST (paper appendix H)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.scipy.ndimage import map_coordinates

__all__ = ["IMAGE_SHAPE", "randomly_rotated", "rotate_images", "rotated_copies"]

IMAGE_SHAPE = (28, 28)


def rotate_images(images: jax.Array, angles: jax.Array | float) -> jax.Array:
  """Rotates each image counter-clockwise about its centre, bilinearly.

  Counter-clockwise as displayed with row 0 at the top, the direction of
  ``np.rot90`` and ``scipy.ndimage.rotate``; the centre is
  ``((H - 1) / 2, (W - 1) / 2)``; pixels whose source lies outside the image
  read 0 (``scipy.ndimage.rotate(..., reshape=False, order=1,
  mode="grid-constant")``). Works under ``jax.jit`` and ``jax.vmap``.

  Args:
    images: ``[N, 784]`` flattened 28x28 images or ``[N, H, W]`` images.
      Integer images are converted to float32.
    angles: ``[N]`` angles in degrees, or a scalar for all images.

  Returns:
    The rotated images, in the layout and (float) dtype of ``images``.

  Raises:
    ValueError: ``images`` is not ``[N, 784]`` or ``[N, H, W]``, or
      ``angles`` is neither a scalar nor ``[N]``.
  """
  images = jnp.asarray(images)
  if not jnp.issubdtype(images.dtype, jnp.floating):
    images = images.astype(jnp.float32)
  flat = images.ndim == 2
  if flat and images.shape[1] != math.prod(IMAGE_SHAPE):
    raise ValueError(f"flat images must be [N, 784] (28x28), got {images.shape}")
  if images.ndim not in (2, 3):
    raise ValueError(f"images must be [N, 784] or [N, H, W], got {images.shape}")
  grid = images.reshape(-1, *IMAGE_SHAPE) if flat else images
  angles = jnp.asarray(angles, images.dtype)
  if angles.ndim == 0:
    angles = jnp.broadcast_to(angles, grid.shape[:1])
  if angles.shape != grid.shape[:1]:
    raise ValueError(
      f"angles must be a scalar or [{grid.shape[0]}], got {angles.shape}"
    )
  rotated = jax.vmap(_rotate_one)(grid, angles)
  return rotated.reshape(images.shape)


def rotated_copies(images: jax.Array, num: int) -> jax.Array:
  """Each image rotated by ``360 k / num`` degrees, ``k = 0 .. num - 1``.

  Args:
    images: ``[N, 784]`` flattened 28x28 images.
    num: copies per image.

  Returns:
    ``[N, num, 784]``; copy 0 is the image itself.
  """
  images = jnp.asarray(images)
  angles = 360.0 * jnp.arange(num) / num
  rotated = rotate_images(
    jnp.repeat(images, num, axis=0), jnp.tile(angles, images.shape[0])
  )
  return rotated.reshape(images.shape[0], num, -1)


def _rotate_one(image: jax.Array, angle: jax.Array) -> jax.Array:
  """Rotates one ``[H, W]`` image by ``angle`` degrees, see :func:`rotate_images`."""
  h, w = image.shape
  cy, cx = (h - 1) / 2, (w - 1) / 2
  rows, cols = jnp.meshgrid(
    jnp.arange(h, dtype=image.dtype), jnp.arange(w, dtype=image.dtype), indexing="ij"
  )
  dr, dc = rows - cy, cols - cx
  theta = jnp.deg2rad(angle)
  cos, sin = jnp.cos(theta), jnp.sin(theta)
  # Output pixel d (relative to the centre) samples the input at R(-theta) d,
  # with (row, col) axes and row pointing down.
  src_rows = cy + cos * dr + sin * dc
  src_cols = cx - sin * dr + cos * dc
  return map_coordinates(
    image, [src_rows, src_cols], order=1, mode="constant", cval=0.0
  )


def randomly_rotated(key, images: jax.Array, max_angle: float) -> jax.Array:
  """Each image rotated to its own angle drawn from ``U[0, max_angle]`` degrees."""
  angles = jax.random.uniform(key, images.shape[:1], maxval=max_angle)
  return rotate_images(images, angles)
