"""Tests for the convolutional encoder/decoder of paper table 5.

The Flax layers are compared with plain-NumPy PyTorch-semantics references:
``Conv2d`` as cross-correlation with ``pad`` zeros on each side and
``ConvTranspose2d`` as its scatter-add definition, both with PyTorch weight
layouts. The references are checked against each other (they are adjoint) so
that a shared mistake cannot hide.
"""

from __future__ import annotations

import dataclasses
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vaells_jax.config import Config
from vaells_jax.models.networks import (
  ConvDecoder,
  ConvEncoder,
  _conv,
  _conv_transpose,
  torch_conv_transpose_padding,
)
from vaells_jax.models.vaells import init_params
from vaells_jax.training.baseline_step import create_baseline

LATENT = 6
KERNEL = 4
# (stride, pad) of every layer in table 5.
ENCODER_CONVS = {"conv1": (2, 1), "conv2": (2, 1), "conv3": (1, 0)}
DECODER_CONVS = {"convT1": (1, 1), "convT2": (2, 2), "convT3": (2, 1)}


# ----------------------------------------------------------------------------
# NumPy references, NCHW with PyTorch weight layouts.


def torch_conv2d(x, w, b, stride, pad):
  """PyTorch ``Conv2d``: ``x [n, c, h, w]``, ``w [o, c, k, k]``, ``b [o]``."""
  k = w.shape[-1]
  xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
  out_h = (xp.shape[2] - k) // stride + 1
  out_w = (xp.shape[3] - k) // stride + 1
  out = np.zeros((x.shape[0], w.shape[0], out_h, out_w))
  for i in range(out_h):
    for j in range(out_w):
      patch = xp[:, :, i * stride : i * stride + k, j * stride : j * stride + k]
      out[:, :, i, j] = np.tensordot(patch, w, axes=([1, 2, 3], [1, 2, 3]))
  return out + b[None, :, None, None]


def torch_conv_transpose2d(x, w, b, stride, pad):
  """PyTorch ``ConvTranspose2d``: ``x [n, c, h, w]``, ``w [c, o, k, k]``.

  Every input pixel ``(i, j)`` adds ``x[i, j] * w[:, :, a, b]`` at
  ``(i * stride + a, j * stride + b)``; then ``pad`` rows/columns are cropped
  from each border.
  """
  n, _, h, wd = x.shape
  k = w.shape[-1]
  full = np.zeros((n, w.shape[1], (h - 1) * stride + k, (wd - 1) * stride + k))
  for i in range(h):
    for j in range(wd):
      full[:, :, i * stride : i * stride + k, j * stride : j * stride + k] += (
        np.tensordot(x[:, :, i, j], w, axes=(1, 0))
      )
  out = full[:, :, pad : full.shape[2] - pad, pad : full.shape[3] - pad]
  return out + b[None, :, None, None]


def flax_kernel(w):
  """PyTorch ``Conv2d [o, c, k, k]`` / ``ConvTranspose2d [c, o, k, k]`` -> Flax."""
  return np.transpose(w, (2, 3, 1, 0))


def to_nhwc(x):
  return np.transpose(x, (0, 2, 3, 1))


def to_nchw(x):
  return np.transpose(x, (0, 3, 1, 2))


def test_references_are_adjoint():
  """<conv(x), y> == <x, conv_transpose(y)> for a shared weight, no bias."""
  rng = np.random.default_rng(0)
  for stride, pad, size in ((2, 1, 8), (1, 0, 7), (1, 1, 6), (2, 2, 10)):
    w = rng.standard_normal((5, 3, KERNEL, KERNEL))  # conv [o=5, c=3]
    x = rng.standard_normal((2, 3, size, size))
    cx = torch_conv2d(x, w, np.zeros(5), stride, pad)
    y = rng.standard_normal(cx.shape)
    ty = torch_conv_transpose2d(y, w, np.zeros(3), stride, pad)
    assert ty.shape == x.shape
    np.testing.assert_allclose(np.sum(cx * y), np.sum(x * ty), rtol=1e-12)


def test_conv_transpose_reference_by_hand():
  """A 1x1-channel, 2x2 input, stride 2 kernel of ones tiles the output."""
  x = np.array([[[[1.0, 2.0], [3.0, 4.0]]]])
  w = np.ones((1, 1, 2, 2))
  out = torch_conv_transpose2d(x, w, np.zeros(1), stride=2, pad=0)
  expected = np.kron(x[0, 0], np.ones((2, 2)))
  np.testing.assert_array_equal(out[0, 0], expected)
  cropped = torch_conv_transpose2d(x, w, np.zeros(1), stride=2, pad=1)
  np.testing.assert_array_equal(cropped[0, 0], expected[1:-1, 1:-1])


# ----------------------------------------------------------------------------
# Single layers against the references.


def _assert_layer_matches(layer, w, b, x, expected):
  """``layer`` with PyTorch weights ``w, b`` on NCHW ``x`` gives ``expected``."""
  params = {"params": {"kernel": flax_kernel(w), "bias": b}}
  with jax.enable_x64(True):
    out = np.asarray(layer.apply(params, jnp.asarray(to_nhwc(x))))
  assert out.shape == to_nhwc(expected).shape
  np.testing.assert_allclose(to_nchw(out), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("stride,pad,size", [(2, 1, 9), (2, 1, 8), (1, 0, 7)])
def test_conv_layer_matches_torch_conv2d(stride, pad, size):
  rng = np.random.default_rng(stride * 10 + pad + size)
  w = rng.standard_normal((5, 3, KERNEL, KERNEL))
  b = rng.standard_normal(5)
  x = rng.standard_normal((2, 3, size, size))
  expected = torch_conv2d(x, w, b, stride, pad)
  _assert_layer_matches(_conv(5, stride, pad, "conv"), w, b, x, expected)


@pytest.mark.parametrize(
  "stride,pad,size", [(1, 1, 7), (2, 2, 8), (2, 1, 14), (2, 1, 5)]
)
def test_conv_transpose_layer_matches_torch(stride, pad, size):
  rng = np.random.default_rng(stride * 10 + pad + size)
  w = rng.standard_normal((3, 5, KERNEL, KERNEL))  # [in, out, k, k]
  b = rng.standard_normal(5)
  x = rng.standard_normal((2, 3, size, size))
  expected = torch_conv_transpose2d(x, w, b, stride, pad)
  assert expected.shape[-1] == (size - 1) * stride - 2 * pad + KERNEL
  _assert_layer_matches(_conv_transpose(5, stride, pad, "convT"), w, b, x, expected)


def test_conv_transpose_kernel_flip_matters():
  """Without ``transpose_kernel`` the same PyTorch weight gives another map."""
  rng = np.random.default_rng(1)
  w = rng.standard_normal((3, 5, KERNEL, KERNEL))
  x = rng.standard_normal((1, 3, 5, 5))
  expected = torch_conv_transpose2d(x, w, np.zeros(5), 2, 1)
  layer = nn.ConvTranspose(
    5,
    (KERNEL, KERNEL),
    strides=(2, 2),
    padding=torch_conv_transpose_padding(KERNEL, 1),
    use_bias=False,
  )
  with jax.enable_x64(True):
    out = layer.apply(
      {"params": {"kernel": np.transpose(w, (2, 3, 0, 1))}}, jnp.asarray(to_nhwc(x))
    )
  assert out.shape == to_nhwc(expected).shape
  assert not np.allclose(to_nchw(np.asarray(out)), expected, atol=1e-3)


def test_conv_transpose_padding_rejects_out_of_range():
  with pytest.raises(ValueError, match="padding must lie in"):
    torch_conv_transpose_padding(4, 4)
  with pytest.raises(ValueError, match="padding must lie in"):
    torch_conv_transpose_padding(4, -1)


# ----------------------------------------------------------------------------
# Whole networks.


@functools.cache
def _init(module, in_dim, seed=0):
  """Initial variables, computed once per (module, seed): init is slow eagerly."""
  return module.init(jax.random.key(seed), jnp.zeros((1, in_dim)))


def _torch_params(params):
  """Flax params -> {layer: (PyTorch weight, bias)} as float64 NumPy."""
  out = {}
  for name, p in params["params"].items():
    kernel = np.asarray(p["kernel"], np.float64)
    weight = kernel.T if kernel.ndim == 2 else np.transpose(kernel, (3, 2, 0, 1))
    out[name] = (weight, np.asarray(p["bias"], np.float64))
  return out


def _reference_encoder(tp, x):
  h = x.reshape(-1, 1, 28, 28)
  for name, (stride, pad) in ENCODER_CONVS.items():
    h = np.maximum(torch_conv2d(h, *tp[name], stride, pad), 0.0)
  w, b = tp["dense"]
  return h.reshape(h.shape[0], -1) @ w.T + b  # PyTorch's (c, h, w) flatten


def _reference_decoder(tp, z):
  w, b = tp["dense"]
  h = np.maximum(z @ w.T + b, 0.0).reshape(-1, 64, 7, 7)
  for name, (stride, pad) in DECODER_CONVS.items():
    h = torch_conv_transpose2d(h, *tp[name], stride, pad)
    h = np.maximum(h, 0.0) if name != "convT3" else h
  return (1.0 / (1.0 + np.exp(-h))).reshape(-1, 784)


def test_encoder_matches_pytorch_reference():
  params = _init(ConvEncoder(LATENT), 784)
  x = np.random.default_rng(2).uniform(size=(3, 784)).astype(np.float32)
  out = ConvEncoder(LATENT).apply(params, jnp.asarray(x))
  expected = _reference_encoder(_torch_params(params), x.astype(np.float64))
  np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


def test_decoder_matches_pytorch_reference():
  params = _init(ConvDecoder(), LATENT)
  z = np.random.default_rng(3).standard_normal((3, LATENT)).astype(np.float32)
  out = ConvDecoder().apply(params, jnp.asarray(z))
  expected = _reference_decoder(_torch_params(params), z.astype(np.float64))
  np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-6)


def _param_counts(params):
  return {
    name: sum(int(np.size(v)) for v in p.values())
    for name, p in params["params"].items()
  }


def test_parameter_counts_per_layer():
  d = LATENT
  conv64 = 4 * 4 * 64 * 64 + 64
  assert _param_counts(_init(ConvEncoder(d), 784)) == {
    "conv1": 4 * 4 * 1 * 64 + 64,
    "conv2": conv64,
    "conv3": conv64,
    "dense": 1024 * d + d,
  }
  assert _param_counts(_init(ConvDecoder(), d)) == {
    "dense": d * 3136 + 3136,
    "convT1": conv64,
    "convT2": conv64,
    "convT3": 4 * 4 * 64 * 1 + 1,
  }


def test_conv_channels_reach_every_conv_network():
  """``config.conv_channels`` widens the VAELLS and the baselines' conv
  networks alike (shapes only: traced, not compiled)."""
  config = Config(network="conv", latent_dim=LATENT, conv_channels=32)
  params = jax.eval_shape(
    functools.partial(init_params, config=config, data_dim=784),
    jax.random.PRNGKey(0),
    anchors=np.zeros((1, 1, 784)),
  )
  assert params["encoder"]["conv2"]["kernel"].shape == (4, 4, 32, 32)
  assert params["decoder"]["dense"]["kernel"].shape == (LATENT, 32 * 7 * 7)
  assert params["decoder"]["convT2"]["kernel"].shape == (4, 4, 32, 32)
  baseline = create_baseline(dataclasses.replace(config, model="vae"), 784)
  x = jax.ShapeDtypeStruct((2, 784), jnp.float32)
  enc = jax.eval_shape(baseline.encoder.init, jax.random.PRNGKey(0), x)["params"]
  assert enc["body"]["conv3"]["kernel"].shape == (4, 4, 32, 32)
  with pytest.raises(ValueError, match="config.conv_channels must be > 0"):
    Config(conv_channels=0)


def _intermediate_shapes(module, params, x):
  _, state = module.apply(params, x, capture_intermediates=True)
  return {
    name: v["__call__"][0].shape
    for name, v in state["intermediates"].items()
    if name != "__call__"
  }


def test_intermediate_spatial_sizes():
  x = jnp.zeros((2, 784))
  enc = ConvEncoder(LATENT)
  assert _intermediate_shapes(enc, _init(enc, 784), x) == {
    "conv1": (2, 14, 14, 64),
    "conv2": (2, 7, 7, 64),
    "conv3": (2, 4, 4, 64),
    "dense": (2, LATENT),
  }
  dec = ConvDecoder()
  assert _intermediate_shapes(dec, _init(dec, LATENT), jnp.zeros((2, LATENT))) == {
    "dense": (2, 3136),
    "convT1": (2, 8, 8, 64),
    "convT2": (2, 14, 14, 64),
    "convT3": (2, 28, 28, 1),
  }


@pytest.mark.parametrize("lead", [(), (3,), (2, 3)])
def test_output_shapes_and_range(lead):
  enc, dec = ConvEncoder(LATENT), ConvDecoder(784)
  pe, pd = _init(enc, 784), _init(dec, LATENT)
  x = jax.random.uniform(jax.random.key(4), lead + (784,))
  z = enc.apply(pe, x)
  assert z.shape == lead + (LATENT,)
  xr = dec.apply(pd, z)
  assert xr.shape == lead + (784,)
  assert np.all((np.asarray(xr) > 0) & (np.asarray(xr) < 1))
  # Leading axes are only batch axes: same as the flat batch.
  flat = enc.apply(pe, x.reshape(-1, 784)).reshape(lead + (LATENT,))
  np.testing.assert_allclose(z, flat, rtol=1e-5, atol=1e-6)


def test_bad_sizes_raise():
  with pytest.raises(ValueError, match="data_dim must be 784"):
    ConvDecoder(100)
  enc = ConvEncoder(LATENT)
  with pytest.raises(ValueError, match=r"expects inputs \[\.\.\., 784\]"):
    enc.init(jax.random.key(0), jnp.zeros((2, 100)))


def test_jit_and_grad():
  enc, dec = ConvEncoder(LATENT), ConvDecoder()
  params = {"enc": _init(enc, 784), "dec": _init(dec, LATENT, seed=1)}
  x = jax.random.uniform(jax.random.key(5), (4, 784))

  def loss(p, x):
    return jnp.mean((dec.apply(p["dec"], enc.apply(p["enc"], x)) - x) ** 2)

  np.testing.assert_allclose(jax.jit(loss)(params, x), loss(params, x), rtol=1e-5)
  grads = jax.jit(jax.grad(loss))(params, x)
  for path, g in jax.tree_util.tree_leaves_with_path(grads):
    assert np.all(np.isfinite(g)), path
    assert np.any(g != 0), path


def test_derivative_matches_finite_differences():
  """Forward-mode derivative of the autoencoder along a random direction."""
  enc, dec = ConvEncoder(LATENT), ConvDecoder()
  eps = 1e-6
  with jax.enable_x64(True):
    to64 = lambda t: jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), t)
    pe, pd = to64(_init(enc, 784)), to64(_init(dec, LATENT, seed=1))
    f = lambda x: jnp.sum(dec.apply(pd, enc.apply(pe, x)) ** 2)

    @jax.jit
    def both(x, v):
      _, directional = jax.jvp(f, (x,), (v,))
      return directional, (f(x + eps * v) - f(x - eps * v)) / (2 * eps)

    x = jax.random.uniform(jax.random.key(6), (784,), jnp.float64)
    v = jax.random.normal(jax.random.key(7), (784,), jnp.float64)
    directional, fd = both(x, v)
  np.testing.assert_allclose(directional, fd, rtol=1e-6)
