"""The optax optimiser of a VAELLS run: the Psi accept/reject step, phase gates,
non-finite skipping; each test on a CPU's conditionals and on the selects a
GPU or TPU gets instead."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from vaells_jax.config import Config
from vaells_jax.core import backend
from vaells_jax.training.optim import (
  PSI_LATE_DECAY,
  PSI_RATE_FACTOR,
  accept_reject_step,
  cooldown,
  make_optimizer,
  phase_gated,
  psi_step_state,
)

PSI = jnp.asarray([[1.0, -2.0], [0.5, 3.0]])


@pytest.fixture(autouse=True, params=["cpu", "device"])
def paths(request, monkeypatch):
  if request.param == "device":
    monkeypatch.setattr(backend, "per_platform", lambda cpu, other, *a: other(*a))


def quadratic(params):
  """``1/2 ||psi||^2``: any step against its gradient of rate < 2 lowers it."""
  return 0.5 * jnp.sum(params["psi"] ** 2)


def _psi_update(tx, state, params, value_fn=quadratic, update_psi=True, step=0):
  grads = jax.grad(value_fn)(params)
  return tx.update(
    grads,
    state,
    params,
    value=value_fn(params),
    value_fn=value_fn,
    update_psi=jnp.asarray(update_psi),
    step=jnp.asarray(step),
  )


def test_accepts_a_step_that_lowers_the_objective_and_grows_the_rate():
  tx = accept_reject_step(0.1, 1.0)
  params = {"psi": PSI}
  updates, state = _psi_update(tx, tx.init(params), params)
  chex.assert_trees_all_close(updates["psi"], -0.1 * PSI)
  np.testing.assert_allclose(float(state.lr), 0.1 / PSI_RATE_FACTOR, rtol=1e-6)
  assert (int(state.attempted), int(state.rejected)) == (1, 0)


def test_rejects_a_step_that_raises_the_objective_and_decays_the_rate():
  tx = accept_reject_step(3.0, 5.0)  # psi - 3 psi = -2 psi: the objective x4
  params = {"psi": PSI}
  updates, state = _psi_update(tx, tx.init(params), params)
  chex.assert_trees_all_equal(updates["psi"], jnp.zeros_like(PSI))
  np.testing.assert_allclose(float(state.lr), 3.0 * PSI_RATE_FACTOR, rtol=1e-6)
  assert (int(state.attempted), int(state.rejected)) == (1, 1)


def test_rejects_a_step_whose_objective_is_not_finite():
  tx = accept_reject_step(0.1, 1.0)
  params = {"psi": PSI}
  blow_up = lambda p: (
    quadratic(p)
    * jnp.where(  # noqa: E731
      jnp.all(p["psi"] == PSI), 1.0, jnp.inf
    )
  )
  updates, state = _psi_update(tx, tx.init(params), params, value_fn=blow_up)
  chex.assert_trees_all_equal(updates["psi"], jnp.zeros_like(PSI))
  assert int(state.rejected) == 1


def test_rate_grows_up_to_the_cap_and_decays_late():
  tx = accept_reject_step(0.01, 0.0102, decay_start=3)
  params, state = {"psi": PSI}, None
  state = tx.init(params)
  rates = []
  for step in range(5):
    updates, state = _psi_update(tx, state, params, step=step)
    params = optax.apply_updates(params, updates)
    rates.append(float(state.lr))
  np.testing.assert_allclose(rates[:3], [0.01 / 0.99, 0.0102, 0.0102], rtol=1e-6)
  np.testing.assert_allclose(
    rates[3:], [0.0102 * PSI_LATE_DECAY, 0.0102 * PSI_LATE_DECAY], rtol=1e-6
  )


def test_no_step_outside_the_psi_phase():
  tx = accept_reject_step(0.1, 1.0)
  params = {"psi": PSI}
  state = tx.init(params)
  updates, new = _psi_update(tx, state, params, update_psi=False)
  chex.assert_trees_all_equal(updates["psi"], jnp.zeros_like(PSI))
  chex.assert_trees_all_equal(new, state)


def test_phase_gated_leaves_state_and_parameters_alone_when_off():
  tx = phase_gated(optax.adam(0.1), "on")
  params = {"w": jnp.ones(3)}
  state = tx.init(params)
  grads = {"w": jnp.asarray([1.0, -2.0, 3.0])}
  off, off_state = tx.update(grads, state, params, on=jnp.asarray(False))
  chex.assert_trees_all_equal(off, {"w": jnp.zeros(3)})
  chex.assert_trees_all_equal(off_state, state)
  on, on_state = tx.update(grads, state, params, on=jnp.asarray(True))
  chex.assert_trees_all_close(on, optax.adam(0.1).update(grads, state, params)[0])
  assert int(on_state[0].count) == 1


def _vaells_params():
  return {
    "encoder": {"w": jnp.ones((2, 2))},
    "decoder": {"w": jnp.ones(2)},
    "anchors": jnp.ones((1, 2, 2)),
    "psi": PSI[None],
  }


def _vaells_update(tx, state, params, grads, *, update_net, update_psi, step=0):
  value_fn = lambda p: 0.5 * jnp.sum(p["psi"] ** 2)  # noqa: E731
  return tx.update(
    grads,
    state,
    params,
    update_net=jnp.asarray(update_net),
    update_psi=jnp.asarray(update_psi),
    step=jnp.asarray(step),
    value=value_fn(params),
    value_fn=value_fn,
  )


@pytest.mark.parametrize(
  "update_net, update_psi", [(True, False), (False, True), (True, True)]
)
def test_phase_masking_moves_only_the_active_groups(update_net, update_psi):
  tx = make_optimizer(Config(lr_psi=0.1, max_lr_psi=1.0))
  params = _vaells_params()
  grads = jax.tree_util.tree_map(jnp.ones_like, params)
  grads["psi"] = PSI[None]  # the gradient of value_fn: an accepted step
  updates, state = _vaells_update(
    tx, tx.init(params), params, grads, update_net=update_net, update_psi=update_psi
  )
  moved = {
    k: bool(jnp.any(jax.tree_util.tree_leaves(updates[k])[0] != 0)) for k in params
  }
  assert moved == {
    "encoder": update_net,
    "decoder": update_net,
    "anchors": update_net,
    "psi": update_psi,
  }
  assert int(psi_step_state(state).attempted) == int(update_psi)
  groups = state.inner_state.inner_states
  assert int(groups["net"].inner_state[0].count) == int(update_net)


def test_non_finite_gradient_skips_every_group_and_is_counted():
  tx = make_optimizer(Config(lr_psi=0.1, max_lr_psi=1.0))
  params = _vaells_params()
  grads = jax.tree_util.tree_map(jnp.ones_like, params)
  state = tx.init(params)
  bad = {**grads, "decoder": {"w": jnp.asarray([1.0, jnp.nan])}}
  updates, skipped = _vaells_update(
    tx, state, params, bad, update_net=True, update_psi=True
  )
  chex.assert_trees_all_equal(updates, jax.tree_util.tree_map(jnp.zeros_like, params))
  chex.assert_trees_all_equal(skipped.inner_state, state.inner_state)
  assert (int(skipped.total_notfinite), int(skipped.notfinite_count)) == (1, 1)
  assert not bool(skipped.last_finite)
  _, good = _vaells_update(tx, skipped, params, grads, update_net=True, update_psi=True)
  assert (int(good.total_notfinite), int(good.notfinite_count)) == (1, 0)
  assert bool(good.last_finite)
  chex.assert_tree_all_finite(good)


def test_cooldown_is_one_then_a_cosine_to_zero():
  assert cooldown(Config()) is None  # the paper's constant rates
  factor = cooldown(Config(num_steps=100, lr_net_cooldown=0.5))
  got = [float(factor(jnp.asarray(s))) for s in (0, 49, 50, 75, 100, 120)]
  np.testing.assert_allclose(got, [1, 1, 1, 0.5, 0, 0], atol=1e-6)
  with pytest.raises(ValueError, match="lr_net_cooldown must be in"):
    Config(lr_net_cooldown=1.5)


def test_warmup_raises_the_rate_from_zero_then_the_cooldown_lowers_it():
  factor = cooldown(Config(num_steps=100, lr_net_warmup=10, lr_net_cooldown=0.5))
  got = [float(factor(jnp.asarray(s))) for s in (0, 4, 9, 49, 75, 100)]
  np.testing.assert_allclose(got, [0.1, 0.5, 1, 1, 0.5, 0], atol=1e-6)
  factor = cooldown(Config(num_steps=100, lr_net_warmup=4))
  got = [float(factor(jnp.asarray(s))) for s in (0, 3, 99)]
  np.testing.assert_allclose(got, [0.25, 1, 1], atol=1e-6)
  with pytest.raises(ValueError, match="lr_net_warmup must be >= 0"):
    Config(lr_net_warmup=-1)


@pytest.mark.parametrize("step, factor", [(10, 1.0), (75, 0.5), (100, 0.0)])
def test_cooldown_scales_the_network_and_anchor_steps_only(step, factor):
  """Net and anchor updates are the constant-rate ones times the factor at
  ``step``; the Psi step is untouched."""
  params = _vaells_params()
  grads = jax.tree_util.tree_map(jnp.ones_like, params)
  grads["psi"] = PSI[None]
  updates = {}
  for fraction in (0.0, 0.5):
    tx = make_optimizer(
      Config(lr_psi=0.1, max_lr_psi=1.0, num_steps=100, lr_net_cooldown=fraction)
    )
    updates[fraction], _ = _vaells_update(
      tx, tx.init(params), params, grads, update_net=True, update_psi=True, step=step
    )
  for group in ("encoder", "decoder", "anchors"):
    chex.assert_trees_all_close(
      updates[0.5][group],
      jax.tree_util.tree_map(lambda u: factor * u, updates[0.0][group]),
      atol=1e-9,
    )
  chex.assert_trees_all_equal(updates[0.5]["psi"], updates[0.0]["psi"])


def test_a_baselines_rate_cools_down_with_its_steps():
  from vaells_jax.training.baseline_step import _optimizer

  config = Config(model="vae", num_steps=10, lr_net_cooldown=1.0, lr_net=0.1)
  tx, params = _optimizer(config), {"w": jnp.zeros(2)}
  state, grads, sizes = tx.init(params), {"w": jnp.ones(2)}, []
  for _ in range(10):
    updates, state = tx.update(grads, state, params)
    sizes.append(float(jnp.abs(updates["w"][0])))
  factor = cooldown(config)
  expected = [0.1 * float(factor(jnp.asarray(n))) for n in range(10)]
  np.testing.assert_allclose(sizes, expected, rtol=1e-3)
