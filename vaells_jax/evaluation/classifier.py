"""A small MNIST digit classifier, the judge of class-preserving VAE samples.

Decoded samples are labelled with ``predict`` and compared with the labels of
the inputs they came from. The network is a two-block CNN trained with Adam
on softmax cross-entropy; on 8 000 MNIST digits the defaults reach about 98 %
test accuracy in well under a minute on two CPU cores.
"""

from __future__ import annotations

import functools
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

__all__ = ["DigitCNN", "accuracy", "predict", "train_classifier"]

_SIDE = 28
_PIXELS = _SIDE * _SIDE
_CLASSES = 10


class DigitCNN(nn.Module):
  """``[n, 784]`` images in ``[0, 1]`` -> ``[n, 10]`` class logits.

  conv 3x3 (``features[0]``) -> ReLU -> max-pool 2 -> conv 3x3
  (``features[1]``) -> ReLU -> max-pool 2 -> Dense ``hidden`` -> ReLU ->
  Dense 10; spatial sizes 28 -> 14 -> 7. The default widths are half the
  usual (32, 64): on 8 000 training digits they were as accurate (about 98 %)
  and trained about four times faster per step on a CPU.
  """

  features: tuple[int, int] = (16, 32)
  hidden: int = 128

  @nn.compact
  def __call__(self, x):
    h = jnp.reshape(x, (-1, _SIDE, _SIDE, 1))
    for width in self.features:
      h = nn.relu(nn.Conv(width, (3, 3))(h))
      h = nn.max_pool(h, (2, 2), strides=(2, 2))
    h = nn.relu(nn.Dense(self.hidden)(h.reshape(h.shape[0], -1)))
    return nn.Dense(_CLASSES)(h)


_MODEL = DigitCNN()


def _check_images(x, name: str = "x") -> np.ndarray:
  x = np.asarray(x)
  if x.ndim != 2 or x.shape[1] != _PIXELS:
    raise ValueError(
      f"{name} must be flattened 28 x 28 images [N, {_PIXELS}], got shape {x.shape}."
    )
  if x.shape[0] == 0:
    raise ValueError(f"{name} holds no images (shape {x.shape}).")
  if not np.all(np.isfinite(x)):
    raise ValueError(f"{name} contains non-finite values.")
  if x.min() < 0.0 or x.max() > 1.0:
    raise ValueError(
      f"{name} must hold intensities in [0, 1], got range "
      f"[{x.min():.3g}, {x.max():.3g}]; divide uint8 pixels by 255."
    )
  return x.astype(np.float32)


def _check_labels(y, n: int) -> np.ndarray:
  y = np.asarray(y)
  if y.ndim != 1:
    raise ValueError(f"labels y must be [N], got shape {y.shape}.")
  if not np.issubdtype(y.dtype, np.integer):
    raise ValueError(f"labels y must be integers, got dtype {y.dtype}.")
  if y.shape[0] != n:
    raise ValueError(
      f"x holds {n} images but y holds {y.shape[0]} labels; they must match."
    )
  if y.min() < 0 or y.max() >= _CLASSES:
    raise ValueError(
      f"labels y must lie in 0..{_CLASSES - 1}, got range [{y.min()}, {y.max()}]."
    )
  return y.astype(np.int32)


def _check_positive(**values):
  for name, value in values.items():
    if not value > 0:
      raise ValueError(f"{name} must be positive, got {value}.")


def train_classifier(
  x, y, *, key, num_steps: int = 600, batch_size: int = 32, learning_rate: float = 3e-3
) -> dict:
  """Trains ``DigitCNN`` with Adam on minibatches drawn with replacement.

  The step size decays from ``learning_rate`` to 0 on a cosine schedule. With
  the defaults, 8 000 MNIST digits give about 98.4 % accuracy on 2 000 others
  in 15-30 s on two (shared) CPU cores, compilation included.

  Args:
    x: ``[N, 784]`` training images, intensities in ``[0, 1]``.
    y: ``[N]`` integer labels in ``0..9``.
    key: PRNG key; it fixes the initialisation and the batches, so the same
      key gives the same parameters.
    num_steps: number of Adam steps.
    batch_size: images per step.
    learning_rate: the first Adam step size, decayed to 0 by a cosine.

  Returns:
    The Flax variables ``{"params": ...}`` for ``predict`` and ``accuracy``.

  Raises:
    ValueError: for misshapen or out-of-range images or labels, different
      numbers of images and labels, or a non-positive setting.
  """
  x = _check_images(x)
  y = _check_labels(y, x.shape[0])
  _check_positive(
    num_steps=num_steps, batch_size=batch_size, learning_rate=learning_rate
  )
  init_key, batch_key = jax.random.split(key)
  variables = _MODEL.init(init_key, jnp.zeros((1, _PIXELS)))
  opt_state = optax.adam(learning_rate).init(variables)
  x, y = jnp.asarray(x), jnp.asarray(y)
  for step in range(num_steps):
    # Cosine decay from learning_rate to 0; a traced scalar, so no recompiles.
    rate = 0.5 * learning_rate * (1.0 + math.cos(math.pi * step / num_steps))
    variables, opt_state = _train_step(
      variables,
      opt_state,
      jax.random.fold_in(batch_key, step),
      x,
      y,
      np.float32(rate),
      batch_size=batch_size,
    )
  return variables


@functools.partial(jax.jit, static_argnames="batch_size")
def _train_step(variables, opt_state, key, x, y, learning_rate, *, batch_size: int):
  """One Adam step on ``batch_size`` images of ``x [N, 784]`` drawn by ``key``."""
  idx = jax.random.randint(key, (batch_size,), 0, x.shape[0])

  def loss_fn(v):
    logits = _MODEL.apply(v, x[idx])
    return optax.softmax_cross_entropy_with_integer_labels(logits, y[idx]).mean()

  grads = jax.grad(loss_fn)(variables)
  updates, opt_state = optax.adam(learning_rate).update(grads, opt_state)
  return optax.apply_updates(variables, updates), opt_state


@jax.jit
def _predict_batch(variables, x):
  return jnp.argmax(_MODEL.apply(variables, x), axis=-1)


def predict(variables, x, batch_size: int = 1000) -> np.ndarray:
  """Predicted digit of each image.

  Args:
    variables: the output of ``train_classifier``.
    x: ``[N, 784]`` images, intensities in ``[0, 1]``.
    batch_size: images per jitted call; the last batch is zero-padded so that
      only one shape is compiled.

  Returns:
    ``[N]`` int array of classes in ``0..9``.

  Raises:
    ValueError: for misshapen or out-of-range images or a non-positive
      ``batch_size``.
  """
  x = _check_images(x)
  _check_positive(batch_size=batch_size)
  n = x.shape[0]
  batch_size = min(batch_size, n)
  padded = np.pad(x, ((0, -n % batch_size), (0, 0)))
  out = [
    _predict_batch(variables, padded[i : i + batch_size])
    for i in range(0, padded.shape[0], batch_size)
  ]
  return np.asarray(jnp.concatenate(out))[:n].astype(np.int64)


def accuracy(variables, x, y, batch_size: int = 1000) -> float:
  """Fraction of images whose predicted digit equals the label.

  Args:
    variables: the output of ``train_classifier``.
    x: ``[N, 784]`` images, intensities in ``[0, 1]``.
    y: ``[N]`` integer labels in ``0..9``.
    batch_size: images per jitted call (see ``predict``).

  Returns:
    The accuracy in ``[0, 1]``.

  Raises:
    ValueError: as ``predict``, or for labels that do not match ``x``.
  """
  x = _check_images(x)
  y = _check_labels(y, x.shape[0])
  return float(np.mean(predict(variables, x, batch_size) == y))
