"""The small runs the tests share: a tiny concentric data set and the
configuration of a run that trains in seconds. A test module takes what it
needs to change with ``dataclasses.replace``; ``conftest.py`` hands the same
objects out as fixtures."""

from vaells_jax.config import Config
from vaells_jax.data.synthetic import make_concentric

# 20 + 20 training points on the two circles, 5 + 5 held out.
TINY_DATA = make_concentric(seed=0, num_per_circle=20, num_test_per_circle=5)
# 12 steps of batches of 8, small networks and two operators.
TINY = Config(
  num_steps=12,
  batch_size=8,
  hidden=(16,),
  num_ops=2,
  inference_max_iter=10,
  log_every=4,
  checkpoint_every=4,
)
