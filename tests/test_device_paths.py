"""The GPU/TPU paths (``backend.per_platform``'s other branch: no
conditional as a fusion barrier or around a squaring, one call instead of
chunks, larger exact blocks, no SVD) compute what the CPU paths compute, checked on
the CPU by forcing that branch."""

import dataclasses
import functools
import re
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tiny import TINY, TINY_DATA

from vaells_jax import infer_coefficients
from vaells_jax.core import backend
from vaells_jax.core.expm import expm_pairs
from vaells_jax.core.solvers import columns, exact
from vaells_jax.models.vaells import Model
from vaells_jax.training.guards import batch_indices
from vaells_jax.training.optim import psi_step_state
from vaells_jax.training.step import init_state, make_train_step


def _both_paths(monkeypatch, solve):
  """``solve()`` with the CPU's and the device's branches. The device run
  sets a matmul precision (which a CPU computes alike) because it is part
  of jax's cache keys: every jitted function traces again, with the forced
  branch, and no other test's compiled programs are dropped."""
  cpu = solve()
  monkeypatch.setattr(backend, "per_platform", lambda cpu, other, *a: other(*a))
  with jax.default_matmul_precision("highest"):
    device = solve()
  monkeypatch.undo()
  return cpu, device


def test_device_squarings_are_the_cpu_squarings(monkeypatch):
  # Norms from 0 to ~2^9 x theta: from no squaring to most of them.
  k = jax.random.split(jax.random.PRNGKey(0), 2)
  scale = 10.0 ** jax.random.uniform(k[0], (1, 1, 300), minval=-3, maxval=2.5)
  a = scale * jax.random.normal(k[1], (6, 6, 300))
  cpu, device = _both_paths(monkeypatch, lambda: jax.jit(expm_pairs)(a))
  np.testing.assert_array_equal(device, cpu)
  np.testing.assert_allclose(
    np.moveaxis(device, -1, 0)[:5],
    [jax.scipy.linalg.expm(m) for m in np.moveaxis(np.asarray(a), -1, 0)[:5]],
    rtol=1e-3,  # float32 products of entries up to 1e24
  )


def test_device_norm_bound_is_the_spectral_norm():
  # The exact solver's grid step on a GPU: an upper bound of ||psi||_2 from
  # matrix squarings; it must match the SVD's norm to float32 rounding,
  # with equal top singular values (rotations), rank one, and zero.
  rng = np.random.default_rng(0)
  cases = [np.zeros((3, 3))]
  for d in (2, 3, 8, 16):
    for scale in (1e-4, 1.0, 1e3):
      a, u = rng.standard_normal((d, d)), rng.standard_normal((d, 1))
      cases += [scale * a, scale * (a - a.T), scale * u @ u.T, scale * np.eye(d)]
  bound = jax.jit(exact.spectral_norm_bound)
  for m in cases:
    got, want = float(bound(m.astype(np.float32))), np.linalg.norm(m, ord=2)
    assert want * (1 - 1e-6) <= got <= want * (1 + 1e-5), (m.shape, got, want)
  assert float(bound(np.zeros((3, 3), np.float32))) == 0.0


class _Root(NamedTuple):
  x: jax.Array
  done: jax.Array
  num_iter: jax.Array


def _newton_sqrt(i, state, target):
  """One Newton step towards sqrt(target) per pair; a pair stops once its
  step is below 1e-6 (elementwise: no rounding depends on the array)."""
  new = 0.5 * (state.x + target / state.x)
  active = ~state.done
  return _Root(
    x=jnp.where(active, new, state.x),
    done=state.done | (jnp.abs(new - state.x) <= 1e-6),
    num_iter=state.num_iter + active,
  )


def test_counted_blocks_give_the_checked_results(monkeypatch):
  # Pairs stopping from 3 to beyond max_iter iterations: the counted loop
  # (a device's) runs all 40, the checked loop (a CPU's) ends at the last
  # pair, gathering the running ones; every pair's result is the same.
  target = jnp.asarray(np.geomspace(1e-3, 1e30, 600), jnp.float32)
  state = _Root(jnp.ones_like(target), jnp.zeros(600, bool), jnp.zeros(600, jnp.int32))

  def solve():
    return jax.jit(
      lambda s, t: columns.run_blocks(_newton_sqrt, s, 40, 5, (t,), counted=True)
    )(state, target)

  cpu, device = _both_paths(monkeypatch, solve)
  assert 3 <= int(cpu.num_iter.min()) and int(cpu.num_iter.max()) == 40
  assert not bool(cpu.done.all())  # some pairs need more than 40
  for a, b in zip(cpu, device, strict=True):
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
  "method, num_ops, dim",
  [  # the two 8-21 s solves run with CI's whole runs
    pytest.param("gauss_newton", 2, 2, marks=pytest.mark.whole_run),
    pytest.param("pgd", 3, 4, marks=pytest.mark.whole_run),
    ("exact", 1, 3),
  ],
)
def test_device_paths_solve_as_the_cpu_paths(monkeypatch, method, num_ops, dim):
  # More pairs than a CPU chunk (and, for exact, than a CPU block), so the CPU
  # path chunks and the device path does not.
  pairs = max(columns.CHUNK, exact.PAIR_BLOCK) + 37
  k = jax.random.split(jax.random.PRNGKey(3), 4)
  psi = 0.3 * jax.random.normal(k[0], (num_ops, dim, dim))
  z0 = jax.random.normal(k[1], (pairs, dim))
  coeffs = jax.random.uniform(k[2], (pairs, num_ops), minval=-1.0, maxval=1.0)
  z1 = jax.vmap(lambda c, z: jax.scipy.linalg.expm(jnp.tensordot(c, psi, 1)) @ z)(
    coeffs, z0
  )
  z1 = z1 + 0.01 * jax.random.normal(k[3], z1.shape)

  def solve():
    return infer_coefficients(
      psi, z0, z1, l1_weight=0.01, key=k[3], method=method, max_iter=50
    )

  cpu, device = _both_paths(monkeypatch, solve)
  # Fused differently, the paths round apart, and a pair in a flat valley of
  # its objective can stop elsewhere in it: the objectives agree, the
  # coefficients of nearly every pair too.
  np.testing.assert_allclose(device.objective, cpu.objective, rtol=1e-4, atol=1e-6)
  apart = np.abs(np.asarray(device.coeffs) - np.asarray(cpu.coeffs)).max(-1) > 1e-3
  assert apart.mean() <= 0.02, apart.mean()
  assert np.mean(device.converged != cpu.converged) <= 0.01


def _instructions(text: str) -> list[str]:
  """An optimised HLO module's instructions, without its debug tables,
  source locations and numbered names."""
  lines = text.splitlines()
  start = next(i for i, line in enumerate(lines) if line.startswith(("%", "ENTRY")))
  strip = (r", metadata=\{[^}]*\}", r",?\s*stack_frame_id=\d+")
  lines = [
    functools.reduce(lambda s, p: re.sub(p, "", s), strip, x) for x in lines[start:]
  ]
  return [re.sub(r"(%[A-Za-z_][\w-]*?)(?:[._]\d+)+\b", r"\1", line) for line in lines]


def test_device_choices_leave_the_cpu_program_unchanged(monkeypatch):
  # backend.per_platform's lax.platform_dependent against calling the CPU
  # branch directly: the same compiled step on a CPU.
  config = dataclasses.replace(TINY, warmup_steps=0)
  model = Model.create(config, TINY_DATA.data_dim)
  state = init_state(
    jax.random.PRNGKey(0), config, TINY_DATA.anchors, TINY_DATA.data_dim
  )
  batch = {
    "x": jnp.asarray(TINY_DATA.x_train[:8]),
    "label": jnp.asarray(TINY_DATA.labels_train[:8]),
  }

  def compiled():
    step = make_train_step(model).programs[-1]
    return step.lower(state, batch, jax.random.PRNGKey(0)).compile().as_text()

  chosen = compiled()
  monkeypatch.setattr(backend, "per_platform", lambda cpu, other, *a: cpu(*a))
  direct = compiled()
  assert "conditional" in direct
  assert _instructions(chosen) == _instructions(direct)


@pytest.mark.parametrize("lr_psi, refused", [(1e-3, 0), (0.05, 6)])
def test_device_steps_train_as_the_cpu_steps(monkeypatch, lr_psi, refused):
  # Warm-up, network and Psi steps (accepted, refused), where a device
  # selects instead of branching: the same decisions and parameters.
  config = dataclasses.replace(
    TINY,
    inference_max_iter=20,
    warmup_steps=2,
    alternate=True,
    net_steps=2,
    psi_steps=3,
    lr_psi=lr_psi,
    max_lr_psi=1.0,
  )

  def train():
    dim = TINY_DATA.data_dim
    model = Model.create(config, dim)
    state = init_state(jax.random.PRNGKey(0), config, TINY_DATA.anchors, dim)
    step = make_train_step(model)
    for i in range(config.num_steps):
      rows = batch_indices(config.seed, i, len(TINY_DATA.x_train), config.batch_size)
      batch = {"x": TINY_DATA.x_train[rows], "label": TINY_DATA.labels_train[rows]}
      batch = jax.tree_util.tree_map(jnp.asarray, batch)
      state, _ = step(state, batch, jax.random.PRNGKey(i))
    return state

  cpu, device = _both_paths(monkeypatch, train)
  for state in (cpu, device):
    psi = psi_step_state(state.opt_state)
    assert (int(psi.attempted), int(psi.rejected)) == (6, refused)
    assert int(state.net_skipped) == 0
  # Float32 rounding of other programs, through Adam (which scales each
  # gradient to about the step lr_net = 5e-3): within 2% of one step.
  chex.assert_trees_all_close(cpu.params, device.params, rtol=1e-4, atol=1e-4)
