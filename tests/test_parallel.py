"""Data-parallel training on 4 (virtual CPU) devices equals 1-device training.

Runs in a subprocess because the device count is fixed when jax starts:
``XLA_FLAGS=--xla_force_host_platform_device_count=4``.
"""

import os
import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent("""
    import dataclasses, sys, tempfile
    import jax, numpy as np
    from vaells_jax.runs import runner
    from vaells_jax.config import Config
    from vaells_jax.data.synthetic import make_concentric

    assert jax.device_count() == 4, jax.devices()
    data = make_concentric(seed=0, num_per_circle=20, num_test_per_circle=5)
    config = Config(num_steps=6, batch_size=8, hidden=(16,), num_ops=2,
                    inference_max_iter=10, log_every=3, checkpoint_every=100)
    quiet = lambda line: None
    one, _ = runner.train(config, data, tempfile.mkdtemp(), log=quiet)
    parallel = dataclasses.replace(config, data_parallel=True)
    four, _ = runner.train(parallel, data, tempfile.mkdtemp(), log=quiet)

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


def test_four_device_training_matches_one_device():
  env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
  result = subprocess.run(
    [sys.executable, "-c", SCRIPT],
    capture_output=True,
    text=True,
    timeout=600,
    cwd=ROOT,
    env=env,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert "max abs difference" in result.stdout


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
  plain, _ = runner.train(config, data, tmp_path / "plain", log=quiet)
  mesh, _ = runner.train(
    dataclasses.replace(config, data_parallel=True), data, tmp_path / "mesh", log=quiet
  )
  for a, b in zip(
    jax.tree_util.tree_leaves(plain), jax.tree_util.tree_leaves(mesh), strict=True
  ):
    np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-6, atol=1e-8)
