"""Several (virtual CPU) devices: data-parallel training on 4 equals 1-device
training; a population's members split over 2.

Run in subprocesses because the device count is fixed when jax starts:
``XLA_FLAGS=--xla_force_host_platform_device_count=N``.
"""

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent("""
    import dataclasses, sys, tempfile
    import jax, numpy as np
    from vaells_jax.runs import runner
    from vaells_jax.config import Config
    from vaells_jax.data.synthetic import make_concentric

    assert jax.device_count() == 4, jax.devices()
    data = make_concentric(seed=0, num_per_circle=20, num_test_per_circle=5)
    # fista: "gauss_newton" solves each device's pairs in other blocks, which
    # round apart (parameters 1% apart after 6 steps).
    config = Config(num_steps=6, batch_size=8, hidden=(16,), num_ops=2,
                    inference_max_iter=10, log_every=3, checkpoint_every=100,
                    inference_method="fista")
    quiet = lambda line: None
    one, _ = runner.train_run(config, data, tempfile.mkdtemp(), log=quiet)
    parallel = dataclasses.replace(config, data_parallel=True)
    four, _ = runner.train_run(parallel, data, tempfile.mkdtemp(), log=quiet)

    for leaf in jax.tree_util.tree_leaves(four):
      assert len(leaf.sharding.device_set) == 4, leaf.sharding
      assert leaf.sharding.is_fully_replicated, leaf.sharding
    worst = 0.0
    for a, b in zip(jax.tree_util.tree_leaves(one), jax.tree_util.tree_leaves(four),
                    strict=True):
      a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
      np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)
      worst = max(worst, float(np.max(np.abs(a - b), initial=0.0)))
    assert int(four.step) == 6 and int(four.psi_attempted) == 6

    bad = dataclasses.replace(parallel, batch_size=10)
    try:
      runner.check_data(bad, data)
      sys.exit("no error for a batch of 10 on 4 devices")
    except ValueError as e:
      assert "cannot be split evenly over 4 devices" in str(e), e
    print(f"max abs difference {worst:.3g}")
""")


def _run_on_devices(script: str, count: int) -> str:
  """Runs ``script`` in a fresh python with ``count`` CPU devices; its stdout."""
  flags = f"--xla_force_host_platform_device_count={count}"
  result = subprocess.run(
    [sys.executable, "-c", script],
    capture_output=True,
    text=True,
    timeout=600,
    cwd=ROOT,
    env={**os.environ, "XLA_FLAGS": flags},
  )
  assert result.returncode == 0, result.stderr[-3000:]
  return result.stdout


@pytest.mark.whole_run
def test_four_device_training_matches_one_device():
  assert "max abs difference" in _run_on_devices(SCRIPT, 4)


MEMBERS_SCRIPT = textwrap.dedent("""
    import dataclasses, tempfile
    import chex, jax, numpy as np
    from vaells_jax.config import Config
    from vaells_jax.data.synthetic import make_concentric
    from vaells_jax.training import loop, placement, population

    devices = tuple(jax.devices())
    assert len(devices) == 2, devices
    assert placement.member_devices(4) == devices
    assert placement.member_devices(3) == devices[:1]
    data = make_concentric(seed=0, num_per_circle=20, num_test_per_circle=5)
    config = Config(num_steps=6, batch_size=8, hidden=(16,), num_ops=2,
                    inference_max_iter=10, log_every=3, checkpoint_every=2,
                    population=4, select_at=1.0, warmup_steps=0)
    split = population.make_population_step(config, data.data_dim)
    alone = population.make_population_step(config, data.data_dim, devices=devices[:1])
    start = population.init_population(jax.random.PRNGKey(0), config, data)
    batch = {"x": data.x_train[:8], "label": data.labels_train[:8]}
    key = jax.random.PRNGKey(5)
    state, metrics = split(start, batch, key)
    _, one_device = alone(start, batch, key)
    for leaf in jax.tree_util.tree_leaves((state.params, state.opt_state)):
      assert leaf.sharding.device_set == set(devices), leaf.sharding
      assert not leaf.sharding.is_fully_replicated, leaf.sharding
    # Member k's loss on its device (the members' losses differ by 5e-3 or more).
    np.testing.assert_allclose(metrics["loss"], one_device["loss"], rtol=1e-3)
    last = population.member(state, 3)
    for leaf in jax.tree_util.tree_leaves(last):
      assert leaf.sharding.device_set == {devices[0]}, leaf.sharding

    quiet = dict(init=population.init_population, make_step=lambda *_: split,
                 log=lambda line: None)
    straight, _ = loop.train_loop(config, data, tempfile.mkdtemp(), **quiet)
    stopped = tempfile.mkdtemp()
    loop.train_loop(dataclasses.replace(config, num_steps=4), data, stopped, **quiet)
    resumed, _ = loop.train_loop(config, data, stopped, resume=True, **quiet)
    chex.assert_trees_all_equal(jax.device_get(resumed), jax.device_get(straight))
    try:
      population.make_population_step(
        dataclasses.replace(config, population=3), data.data_dim, devices=devices)
      raise SystemExit("no error for 3 members on 2 devices")
    except ValueError as e:
      assert "cannot be split evenly over 2 devices" in str(e), e
    print("members split")
""")


@pytest.mark.whole_run
def test_population_members_split_over_two_devices():
  assert "members split" in _run_on_devices(MEMBERS_SCRIPT, 2)


@pytest.mark.whole_run
def test_data_parallel_on_one_device_is_the_plain_step(tmp_path):
  import dataclasses

  import jax
  import numpy as np

  from vaells_jax.config import Config
  from vaells_jax.data.synthetic import make_concentric
  from vaells_jax.runs import runner

  data = make_concentric(seed=0, num_per_circle=20, num_test_per_circle=5)
  config = Config(
    num_steps=4,
    batch_size=8,
    hidden=(16,),
    num_ops=2,
    inference_max_iter=10,
    log_every=2,
  )
  quiet = lambda line: None  # noqa: E731
  plain, _ = runner.train_run(config, data, tmp_path / "plain", log=quiet)
  mesh, _ = runner.train_run(
    dataclasses.replace(config, data_parallel=True), data, tmp_path / "mesh", log=quiet
  )
  for a, b in zip(
    jax.tree_util.tree_leaves(plain), jax.tree_util.tree_leaves(mesh), strict=True
  ):
    np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-6, atol=1e-8)
