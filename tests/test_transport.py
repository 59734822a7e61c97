"""Tests of ``vaells_jax.core.transport``: ``transport`` and ``transport_path``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

from vaells_jax import transport, transport_path


def _random_inputs(seed, num_ops, dim, coeff_shape, z_shape):
  """Random float64 NumPy ``psi [M, d, d]``, ``coeffs`` and ``z0``."""
  rng = np.random.default_rng(seed)
  psi = rng.standard_normal((num_ops, dim, dim)) / np.sqrt(dim)
  coeffs = rng.standard_normal(coeff_shape + (num_ops,))
  z0 = rng.standard_normal(z_shape + (dim,))
  return psi, coeffs, z0


def _scipy_transport(psi, coeffs, z0):
  """``expm(sum_m c_m psi_m) @ z0`` for one ``coeffs [M]`` and ``z0 [d]``."""
  return scipy.linalg.expm(np.einsum("m,mij->ij", coeffs, psi)) @ z0


@pytest.mark.parametrize("num_ops,dim", [(1, 2), (4, 3), (6, 8)])
def test_transport_matches_scipy_expm(num_ops, dim):
  psi, coeffs, z0 = _random_inputs(num_ops * 10 + dim, num_ops, dim, (7,), (7,))
  expected = np.stack(
    [_scipy_transport(psi, c, z) for c, z in zip(coeffs, z0, strict=True)]
  )
  with jax.enable_x64(True):
    out = transport(jnp.asarray(psi), jnp.asarray(coeffs), jnp.asarray(z0))
    assert out.dtype == jnp.float64
    out = np.asarray(out)
  assert out.shape == (7, dim)
  np.testing.assert_allclose(
    out, expected, rtol=1e-10, atol=1e-12 * np.abs(expected).max()
  )


@pytest.mark.parametrize(
  "coeff_shape,z_shape,out_shape",
  [
    ((5, 1), (1, 3), (5, 3)),
    ((4,), (), (4,)),
    ((2, 1, 3), (4, 1), (2, 4, 3)),
  ],
)
def test_transport_broadcasts_leading_dims(coeff_shape, z_shape, out_shape):
  num_ops, dim = 3, 4
  psi, coeffs, z0 = _random_inputs(1, num_ops, dim, coeff_shape, z_shape)
  with jax.enable_x64(True):
    out = np.asarray(transport(jnp.asarray(psi), jnp.asarray(coeffs), jnp.asarray(z0)))
  assert out.shape == out_shape + (dim,)
  coeffs_b = np.broadcast_to(coeffs, out_shape + (num_ops,))
  z0_b = np.broadcast_to(z0, out_shape + (dim,))
  for idx in np.ndindex(*out_shape):
    np.testing.assert_allclose(
      out[idx], _scipy_transport(psi, coeffs_b[idx], z0_b[idx]), rtol=1e-10, atol=1e-12
    )


def test_transport_zero_coeffs_is_identity():
  psi, _, z0 = _random_inputs(2, 3, 4, (), (6,))
  out = transport(
    jnp.asarray(psi, jnp.float32), jnp.zeros(3), jnp.asarray(z0, jnp.float32)
  )
  np.testing.assert_allclose(np.asarray(out), z0, rtol=1e-6, atol=1e-6)


def test_transport_path_endpoints_and_shape():
  num_ops, dim = 2, 3
  psi, coeffs, z0 = _random_inputs(3, num_ops, dim, (5, 1), (1, 4))
  ts = np.array([0.0, 0.25, 0.5, 1.0, 1.5])
  with jax.enable_x64(True):
    psi_j, coeffs_j, z0_j = (jnp.asarray(a) for a in (psi, coeffs, z0))
    path = transport_path(psi_j, coeffs_j, z0_j, jnp.asarray(ts))
    path, end = np.asarray(path), np.asarray(transport(psi_j, coeffs_j, z0_j))
  scaled = np.stack(
    [
      np.stack([_scipy_transport(psi, t * coeffs[i, 0], z0[0, j]) for j in range(4)])
      for t in ts
      for i in range(5)
    ]
  ).reshape(path.shape)
  assert path.shape == (5, 5, 4, dim)
  np.testing.assert_allclose(
    path[0], np.broadcast_to(z0, (5, 4, dim)), rtol=1e-12, atol=1e-12
  )
  np.testing.assert_allclose(path[3], end, rtol=1e-12, atol=1e-12)
  # Every time is the transport by the scaled coefficients (t = 1.5
  # extrapolates beyond z1).
  np.testing.assert_allclose(path, scaled, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
  "coeff_shape,z_shape", [((), (4,)), ((4,), ()), ((1,), (2, 4))]
)
def test_transport_path_broadcasts_unequal_leading_ndims(coeff_shape, z_shape):
  # coeffs and z0 with different numbers of leading dimensions: the time axis
  # must stay in front of the broadcast batch shape.
  num_ops, dim = 2, 3
  psi, coeffs, z0 = _random_inputs(9, num_ops, dim, coeff_shape, z_shape)
  ts = np.array([0.0, 0.5, 1.0])
  with jax.enable_x64(True):
    path = np.asarray(
      transport_path(
        jnp.asarray(psi), jnp.asarray(coeffs), jnp.asarray(z0), jnp.asarray(ts)
      )
    )
  batch = np.broadcast_shapes(coeff_shape, z_shape)
  assert path.shape == (3,) + batch + (dim,)
  coeffs_b = np.broadcast_to(coeffs, batch + (num_ops,))
  z0_b = np.broadcast_to(z0, batch + (dim,))
  for t_index, t in enumerate(ts):
    for idx in np.ndindex(*batch):
      np.testing.assert_allclose(
        path[(t_index,) + idx],
        _scipy_transport(psi, t * coeffs_b[idx], z0_b[idx]),
        rtol=1e-10,
        atol=1e-12,
      )


def test_transport_path_scalar_time_and_bad_ts():
  psi, coeffs, z0 = _random_inputs(4, 2, 3, (), ())
  path = transport_path(
    psi.astype(np.float32), coeffs.astype(np.float32), z0.astype(np.float32), 1.0
  )
  assert path.shape == (1, 3)
  end = transport(
    psi.astype(np.float32), coeffs.astype(np.float32), z0.astype(np.float32)
  )
  np.testing.assert_allclose(np.asarray(path[0]), np.asarray(end), rtol=1e-6)
  with pytest.raises(ValueError, match="ts must be 1-D"):
    transport_path(psi, coeffs, z0, np.zeros((2, 3)))


def test_transport_path_of_rotation_stays_on_circle(rotation_psi):
  angle = 2.0
  ts = np.linspace(-1.0, 2.0, 31)
  with jax.enable_x64(True):
    path = np.asarray(
      transport_path(
        jnp.asarray(rotation_psi),
        jnp.array([angle]),
        jnp.array([1.0, 0.0]),
        jnp.asarray(ts),
      )
    )
  assert path.shape == (31, 2)
  np.testing.assert_allclose(np.linalg.norm(path, axis=-1), 1.0, rtol=1e-12)
  expected = np.stack([np.cos(angle * ts), np.sin(angle * ts)], axis=-1)
  np.testing.assert_allclose(path, expected, atol=1e-12)


def _central_difference(fun, x, h=1e-6):
  """Central finite-difference gradient of a scalar ``fun`` at NumPy ``x``."""
  grad = np.zeros_like(x)
  for idx in np.ndindex(*x.shape):
    step = np.zeros_like(x)
    step[idx] = h
    grad[idx] = (fun(x + step) - fun(x - step)) / (2 * h)
  return grad


@pytest.mark.parametrize("dim", [2, 3])  # 2: the closed form (expm_2x2)
def test_transport_gradients_match_finite_differences(dim):
  num_ops = 3
  psi, coeffs, z0 = _random_inputs(5, num_ops, dim, (4,), (4,))
  weights = np.random.default_rng(6).standard_normal((4, dim))
  with jax.enable_x64(True):

    @jax.jit
    def loss(p, c, z):
      out = transport(p, c, z)
      return jnp.sum(weights * out) + 0.5 * jnp.sum(out**2)

    args = [jnp.asarray(a) for a in (psi, coeffs, z0)]
    grads = [np.asarray(g) for g in jax.grad(loss, argnums=(0, 1, 2))(*args)]
    for i, (x, grad) in enumerate(zip((psi, coeffs, z0), grads, strict=True)):

      def partial(v, i=i):
        a = list(args)
        a[i] = jnp.asarray(v)
        return float(loss(*a))

      fd = _central_difference(partial, x)
      assert grad.shape == x.shape
      np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_transport_2x2_rotations_and_degenerate_generators(dtype):
  # d = 2 runs the closed form: exact for rotations of any angle (no norm
  # limit), for nilpotent (delta = 0) and for real-eigenvalue generators.
  with jax.enable_x64(dtype == jnp.float64):
    angles = np.array([0.0, 1e-4, 0.7, np.pi, 40.0, 1e3])
    rotation = jnp.asarray([[[0.0, -1.0], [1.0, 0.0]]], dtype)
    out = np.asarray(
      transport(
        rotation, jnp.asarray(angles[:, None], dtype), jnp.asarray([1.0, 0.0], dtype)
      )
    )
    expected = np.stack([np.cos(angles), np.sin(angles)], -1)
    np.testing.assert_allclose(
      out, expected, atol=1e-12 if dtype == jnp.float64 else 2e-4
    )
    psi = np.array(
      [[[0.0, 1.0], [0.0, 0.0]], [[0.3, 0.0], [0.0, -1.2]], [[1.0, 2.0], [0.5, -0.3]]]
    )
    coeffs = np.array(
      [[2.0, 0.0, 0.0], [0.0, 1.5, 0.0], [0.1, -0.4, 0.8], [0.0, 0.0, 3.0]]
    )
    z0 = np.array([0.3, -1.1])
    out = np.asarray(
      transport(
        jnp.asarray(psi, dtype), jnp.asarray(coeffs, dtype), jnp.asarray(z0, dtype)
      )
    )
    expected = np.stack([_scipy_transport(psi, c, z0) for c in coeffs])
    np.testing.assert_allclose(
      out, expected, rtol=1e-12 if dtype == jnp.float64 else 1e-5
    )


def test_jit_vmap_grad_composition_matches_loop():
  num_ops, dim, batch = 2, 3, 6
  psi, coeffs, z0 = _random_inputs(7, num_ops, dim, (batch,), (batch,))
  with jax.enable_x64(True):
    psi_j, coeffs_j, z0_j = (jnp.asarray(a) for a in (psi, coeffs, z0))

    def loss(p, c, z):
      return jnp.sum(jnp.sin(transport(p, c, z)))

    grad_fn = jax.grad(loss, argnums=(0, 1, 2))
    batched = jax.jit(jax.vmap(grad_fn, in_axes=(None, 0, 0)))(psi_j, coeffs_j, z0_j)
    single = jax.jit(grad_fn)
    looped = [single(psi_j, coeffs_j[n], z0_j[n]) for n in range(batch)]
    for k in range(3):
      expected = np.stack([np.asarray(g[k]) for g in looped])
      assert batched[k].shape == expected.shape
      np.testing.assert_allclose(
        np.asarray(batched[k]), expected, rtol=1e-12, atol=1e-14
      )


@pytest.mark.parametrize(
  "psi_shape,coeff_shape,z_shape,message",
  [
    ((3, 2, 2), (2,), (2,), r"coeffs.*M=3"),
    ((3, 2, 2), (4, 4), (4, 2), r"coeffs.*M=3"),
    ((3, 2, 2), (3,), (3,), r"z0.*d=2"),
    ((3, 2, 2), (5, 3), (5, 4), r"z0.*d=2"),
    ((2, 3), (2,), (3,), r"psi must have shape \[M, d, d\]"),
    ((2, 3, 4), (2,), (3,), r"psi must have shape \[M, d, d\]"),
    ((0, 2, 2), (0,), (2,), r"psi must have shape \[M, d, d\]"),
    ((3, 2, 2), (5, 3), (4, 2), r"do not broadcast.*\(5, 3\).*\(4, 2\)"),
    ((3, 2, 2), (2, 5, 3), (3, 1, 2), r"do not broadcast"),
    ((3, 2, 2), (), (2,), r"coeffs"),
    ((3, 2, 2), (3,), (), r"z0"),
  ],
)
def test_transport_shape_errors(psi_shape, coeff_shape, z_shape, message):
  psi, coeffs, z0 = (np.zeros(s, np.float32) for s in (psi_shape, coeff_shape, z_shape))
  with pytest.raises(ValueError, match=message):
    transport(psi, coeffs, z0)
  with pytest.raises(ValueError, match=message):
    transport_path(psi, coeffs, z0, np.linspace(0.0, 1.0, 3))


def test_float32_inputs_give_float32_outputs():
  psi, coeffs, z0 = _random_inputs(8, 2, 3, (4,), (4,))
  psi, coeffs, z0 = (a.astype(np.float32) for a in (psi, coeffs, z0))
  out = transport(psi, coeffs, z0)
  assert out.dtype == jnp.float32
  with jax.enable_x64(True):
    # Even with 64-bit enabled, float32 inputs must stay float32.
    args = [jnp.asarray(a, jnp.float32) for a in (psi, coeffs, z0)]
    out64_mode = transport(*args)
    path = transport_path(*args, jnp.linspace(0.0, 1.0, 3, dtype=jnp.float32))
    assert out64_mode.dtype == jnp.float32
    assert path.dtype == jnp.float32
  expected = np.stack(
    [
      _scipy_transport(psi.astype(np.float64), c, z)
      for c, z in zip(coeffs.astype(np.float64), z0.astype(np.float64), strict=True)
    ]
  )
  np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(np.asarray(out64_mode), expected, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(np.asarray(path[-1]), expected, rtol=1e-5, atol=1e-5)
