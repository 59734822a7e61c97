"""A trained model refuses inputs of the wrong width with a clear ValueError
(not Flax's ScopeParamShapeError). Untrained parameters suffice (~3 s)."""

import jax
import numpy as np
import pytest

from vaells_jax.api import TrainedVAELLS
from vaells_jax.config import Config
from vaells_jax.data.synthetic import make_concentric
from vaells_jax.training.step import init_state


@pytest.fixture(scope="module")
def model():
  data = make_concentric(seed=0)
  config = Config(hidden=(8,), num_ops=2)
  state = init_state(jax.random.PRNGKey(0), config, data.anchors, data.data_dim)
  return TrainedVAELLS(config, state.params, data)


def test_encode_and_decode_check_the_width(model):
  width = model.data.data_dim
  assert model.encode(np.zeros((3, width), np.float32)).shape == (3, 2)
  with pytest.raises(ValueError, match=rf"encode's input must be \[\.\.\., {width}\]"):
    model.encode(np.zeros((3, width + 1), np.float32))
  with pytest.raises(
    ValueError, match=r"decode's input must be \[\.\.\., 2\].*\(3, 5\)"
  ):
    model.decode(np.zeros((3, 5), np.float32))
