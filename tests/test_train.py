"""The training step: finiteness, which groups move in each phase, Psi accept/reject."""

import dataclasses
import json

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tiny import TINY_DATA

from vaells_jax.config import INFERENCE_METHODS, Config, override
from vaells_jax.core import inference
from vaells_jax.models.vaells import Model, infer_step_coefficients
from vaells_jax.training.step import (
  init_state,
  make_train_step,
  phase_of,
  train_step_fn,
)

DATA = TINY_DATA
BASE = Config(
  num_steps=10,
  batch_size=8,
  hidden=(16,),
  num_ops=2,
  inference_max_iter=20,
  warmup_steps=2,
  alternate=True,
  net_steps=2,
  psi_steps=2,
)


def _setup(config=BASE):
  model = Model.create(config, DATA.data_dim)
  state = init_state(jax.random.PRNGKey(0), config, DATA.anchors, DATA.data_dim)
  batch = {
    "x": jnp.asarray(DATA.x_train[: config.batch_size], jnp.float32),
    "label": jnp.asarray(DATA.labels_train[: config.batch_size]),
  }
  return model, state, make_train_step(model), batch


def _changed(a, b):
  return any(
    not np.array_equal(x, y)
    for x, y in zip(
      jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True
    )
  )


def _net_opt(state):
  """The optimiser state of the network and anchor groups (not Psi's)."""
  groups = state.opt_state.inner_state.inner_states
  return groups["net"], groups["anchor"]


def test_phase_schedule():
  phases = [phase_of(s, BASE) for s in range(8)]
  warm = [bool(p.warmup) for p in phases]
  net = [bool(p.update_net) for p in phases]
  psi = [bool(p.update_psi) for p in phases]
  assert warm == [True, True, False, False, False, False, False, False]
  assert net == [True, True, True, True, False, False, True, True]
  assert psi == [False, False, False, False, True, True, False, False]
  no_alt = dataclasses.replace(BASE, alternate=False, warmup_steps=0)
  p = phase_of(3, no_alt)
  assert bool(p.update_net) and bool(p.update_psi)
  assert float(p.prior_factor) == no_alt.prior_weight_net


def test_each_phase_moves_the_right_groups():
  _, state, step, batch = _setup()
  key = jax.random.PRNGKey(1)
  for i in range(6):
    phase = phase_of(i, BASE)
    new, metrics = step(state, batch, jax.random.fold_in(key, i))
    assert all(np.isfinite(float(v)) for v in metrics.values()), metrics
    nets_moved = _changed(
      (new.params["encoder"], new.params["decoder"]),
      (state.params["encoder"], state.params["decoder"]),
    )
    assert nets_moved == bool(phase.update_net), i
    if bool(phase.warmup):  # reconstruction only: no prior gradient on anchors
      assert not _changed(new.params["anchors"], state.params["anchors"])
    if bool(phase.update_psi):
      assert int(new.psi_attempted) == int(state.psi_attempted) + 1
      assert _changed(new.psi, state.psi) == bool(metrics["psi_accepted"])
      assert float(new.lr_psi) != float(state.lr_psi)
    else:
      assert not _changed(new.psi, state.psi)
      assert float(new.lr_psi) == float(state.lr_psi)
    if not bool(phase.update_net):
      assert not _changed(_net_opt(new), _net_opt(state))
    else:
      assert _changed(_net_opt(new), _net_opt(state))
    state = new
  assert int(state.step) == 6


def test_rejected_psi_step_keeps_psi_and_lowers_rate():
  config = dataclasses.replace(
    BASE, warmup_steps=0, alternate=False, lr_psi=1e6, max_lr_psi=1e7
  )
  _, state, step, batch = _setup(config)
  new, metrics = step(state, batch, jax.random.PRNGKey(3))
  assert not bool(metrics["psi_accepted"])
  np.testing.assert_array_equal(new.psi, state.psi)
  np.testing.assert_allclose(float(new.lr_psi), 0.99 * 1e6, rtol=1e-6)
  assert int(new.psi_rejected) == 1


def test_accepted_psi_step_grows_rate_up_to_cap():
  config = dataclasses.replace(
    BASE, warmup_steps=0, alternate=False, lr_psi=1e-6, max_lr_psi=1.001e-6
  )
  _, state, step, batch = _setup(config)
  new, metrics = step(state, batch, jax.random.PRNGKey(3))
  assert bool(metrics["psi_accepted"])
  assert _changed(new.psi, state.psi)
  np.testing.assert_allclose(float(new.lr_psi), 1.001e-6, rtol=1e-6)


def test_no_recompilation_across_phases():
  _, state, step, batch = _setup()
  for i in range(12):  # warm-up, net and Psi phases, twice round the cycle
    state, _ = step(state, batch, jax.random.PRNGKey(i))
  # One program for warm-up and one for after it, each compiled once.
  assert [program._cache_size() for program in step.programs] == [1, 1]


def test_phased_step_computes_the_traced_schedule():
  # The two programs together equal one program that reads the phase from
  # state.step, at every phase, also for a state the step did not return.
  model, state, step, batch = _setup()
  traced = jax.jit(train_step_fn(model))
  states = [state]
  for i in range(8):  # warm-up, net and Psi phases, into the second cycle
    key = jax.random.PRNGKey(i)
    new, metrics = step(states[-1], batch, key)
    want, want_metrics = traced(states[-1], batch, key)
    chex.assert_trees_all_close((new, metrics), (want, want_metrics), atol=1e-6)
    states.append(new)
  again, _ = step(states[1], batch, jax.random.PRNGKey(1))  # back into warm-up
  chex.assert_trees_all_close(again, states[2], atol=1e-6)


def test_override_parses_and_rejects():
  cfg = override(
    BASE,
    {"num_steps": "7", "alternate": "false", "hidden": "(8, 8)", "init_range": "-1,1"},
  )
  assert (cfg.num_steps, cfg.alternate, cfg.hidden, cfg.init_range) == (
    7,
    False,
    (8, 8),
    (-1.0, 1.0),
  )
  with pytest.raises(ValueError, match="Did you mean 'num_steps'"):
    override(BASE, {"num_step": "3"})
  with pytest.raises(ValueError, match="batch_size"):
    override(BASE, {"batch_size": "0"})


def test_step_makes_no_host_round_trips():
  # Everything the step needs is already on the device; inside the step there
  # are no callbacks or transfers, so it runs unchanged on a GPU or TPU.
  model, state, step, batch = _setup()
  key = jax.random.PRNGKey(0)
  state, _ = step(state, batch, key)  # compile outside the guard
  keys = list(jax.random.split(key, 4))  # indexing transfers: do it outside
  with jax.transfer_guard("disallow"):
    for i in range(4):  # warm-up, net and Psi phases
      state, metrics = step(state, batch, keys[i])
  hlo = step.programs[-1].lower(state, batch, key).as_text()
  assert "callback" not in hlo and "outfeed" not in hlo
  assert np.isfinite(float(metrics["loss"]))


def test_lm_inference_method_trains_and_is_validated():
  # The step with config.inference_method="lm": finite, Psi steps taken, and
  # the config rejects an unknown method.
  config = dataclasses.replace(
    BASE, warmup_steps=0, alternate=False, inference_method="lm", inference_max_iter=10
  )
  _, state, step, batch = _setup(config)
  new, metrics = step(state, batch, jax.random.PRNGKey(3))
  assert all(np.isfinite(float(v)) for v in metrics.values()), metrics
  assert int(new.psi_attempted) == 1
  assert _changed(new.psi, state.psi) == bool(metrics["psi_accepted"])
  assert INFERENCE_METHODS == inference.METHODS
  with pytest.raises(ValueError, match="inference_method must be one of"):
    override(BASE, {"inference_method": "cg"})


def test_psi_seed_redraws_only_the_dictionary():
  key = jax.random.PRNGKey(0)
  base = init_state(key, BASE, DATA.anchors, DATA.data_dim)
  assert dataclasses.replace(BASE).psi_seed == -1  # default: Psi from the key
  redrawn = [
    init_state(key, dataclasses.replace(BASE, psi_seed=s), DATA.anchors, DATA.data_dim)
    for s in (0, 1)
  ]
  without_psi = lambda s: {k: v for k, v in s.params.items() if k != "psi"}  # noqa: E731
  for state in redrawn:
    assert not _changed(without_psi(state), without_psi(base))  # networks, anchors
    assert _changed(state.psi, base.psi)
  assert _changed(redrawn[0].psi, redrawn[1].psi)
  again = init_state(
    jax.random.PRNGKey(5),
    dataclasses.replace(BASE, psi_seed=1),
    DATA.anchors,
    DATA.data_dim,
  )
  np.testing.assert_array_equal(again.psi, redrawn[1].psi)  # key-independent
  with pytest.raises(ValueError, match="psi_seed must be >= 0, or -1"):
    override(BASE, {"psi_seed": -2})


@pytest.mark.whole_run
def test_logged_metrics_are_window_means(tmp_path):
  # Each metrics.jsonl line holds the mean over the steps since the previous
  # line; counters and the Psi rate hold their value at the line's step.
  from vaells_jax.runs.runner import train_run
  from vaells_jax.training.guards import batch_indices

  config = dataclasses.replace(BASE, num_steps=6, log_every=3)
  train_run(config, DATA, tmp_path, log=lambda line: None)
  lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").open()]
  model, state, step, _ = _setup(config)
  x = np.asarray(DATA.x_train, np.float32)
  step_key = jax.random.PRNGKey(config.seed + 1)
  losses, last = [], None
  for i in range(config.num_steps):
    idx = batch_indices(config.seed, i, x.shape[0], config.batch_size)
    batch = {"x": x[idx], "label": np.asarray(DATA.labels_train[idx], np.int32)}
    state, last = step(state, batch, jax.random.fold_in(step_key, i))
    losses.append(float(last["loss"]))
  assert [line["step"] for line in lines] == [3, 6]

  def window_mean(values):  # the loop's running float32 sum over the window
    total = np.float32(0.0)
    for v in values:
      total = total + np.float32(v)
    return float(total / np.float32(len(values)))

  assert lines[0]["loss"] == window_mean(losses[:3])
  assert lines[1]["loss"] == window_mean(losses[3:])
  assert lines[1]["psi_rejected"] == int(last["psi_rejected"])
  assert lines[1]["lr_psi"] == pytest.approx(float(last["lr_psi"]))


def test_step_inference_draws_the_original_starts():
  """Posterior pairs: one start in U[0, 1]; anchor pairs: U[-2.5, 0], U[0, 2.5].

  The original code (``compute_posterior_coeff``, ``compute_prior_obj``)
  solves each posterior pair once and each anchor pair once per restart, with
  restart ``r`` in ``[-2.5 + 2.5 r, 2.5 r]``; swiss roll's 30 samples, 4
  anchors and 2 restarts make 270 pair-solves, not 300.
  """
  config = dataclasses.replace(BASE, num_restarts=2)
  model = Model.create(config, DATA.data_dim)
  post, prior = model.solvers
  assert (post.num_restarts, post.init_range) == (1, (0.0, 1.0))
  assert (prior.num_restarts, prior.init_range) == (2, (-2.5, 0.0))
  lo, hi = jnp.full((1000,), -2.5), jnp.full((1000,), 0.0)
  starts = np.asarray(inference.solver_starts(jax.random.PRNGKey(0), 2, 1, lo, hi))
  assert -2.5 <= starts[0].min() and starts[0].max() <= 0.0 < starts[1].min()
  assert starts[1].max() <= 2.5

  keys = jax.random.split(jax.random.PRNGKey(3), 5)
  psi = 0.3 * jax.random.normal(keys[0], (2, 2, 2))
  mu = jax.random.normal(keys[1], (4, 2))
  anchors = jax.random.normal(keys[2], (4, 3, 2))
  z = jax.random.normal(keys[3], (4, 2, 2))
  got = infer_step_coefficients(model, psi, mu, anchors, z, keys[4])
  post_key, prior_key = jax.random.split(keys[4])
  want_post = post(psi, mu[:, None], z, l1_weight=config.zeta_q, key=post_key)
  want_prior = prior(
    psi, anchors[:, None], z[:, :, None], l1_weight=config.zeta_p, key=prior_key
  )
  chex.assert_trees_all_close(got.posterior, want_post, rtol=1e-6)
  chex.assert_trees_all_close(got.prior, want_prior, rtol=1e-6)
  assert got.prior.coeffs.shape == (4, 2, 3, 2)


@pytest.mark.parametrize("closest", [True, False])
def test_zeta5_moves_training_only_through_the_anchor_mixture(closest):
  """With the closest anchor the prior's ``zeta5 ||c_p||_1`` is a constant of
  each step (coefficients held fixed): no gradient, and the same offset on
  both values the Psi accept/reject rule compares. Over all anchors it
  weights the mixture, so it changes the run."""
  runs = []
  for zeta5 in (1e-2, 1e-3):
    config = dataclasses.replace(BASE, closest_anchor=closest, zeta5=zeta5)
    _, state, step, batch = _setup(config)
    for i in range(8):  # warm-up, network and Psi steps
      state, _ = step(state, batch, jax.random.PRNGKey(i))
    runs.append(state.params)
  assert _changed(*runs) != closest
