"""Decoder polish: the decoder alone fitted to the codes after training."""

import dataclasses

import jax
import numpy as np
import pytest

from vaells_jax.config import Config
from vaells_jax.runs.runner import train_and_evaluate
from vaells_jax.training.checkpoint import checkpoint_steps
from vaells_jax.training.polish import polish_decoder
from vaells_jax.training.step import init_state


def test_polish_moves_the_decoder_alone_and_lowers_its_error(tiny_data, tiny_config):
  config = dataclasses.replace(
    tiny_config, decoder_polish_steps=200, decoder_polish_lr=1e-2
  )
  state = init_state(
    jax.random.PRNGKey(0), config, tiny_data.anchors, tiny_data.data_dim
  )
  params, info = polish_decoder(config, state.params, tiny_data.x_train)
  assert info["steps"] == 200
  assert info["recon_after"] < 0.5 * info["recon_before"]
  for name in ("encoder", "anchors", "psi"):
    for a, b in zip(
      jax.tree_util.tree_leaves(params[name]),
      jax.tree_util.tree_leaves(state.params[name]),
      strict=True,
    ):
      np.testing.assert_array_equal(a, b)
  moved = [
    not np.array_equal(a, b)
    for a, b in zip(
      jax.tree_util.tree_leaves(params["decoder"]),
      jax.tree_util.tree_leaves(state.params["decoder"]),
      strict=True,
    )
  ]
  assert all(moved)


def test_a_polished_run_is_checkpointed_after_its_steps_and_resumes_done(
  tiny_data, tiny_config, tmp_path
):
  """The polish counts as steps: its checkpoint is at num_steps + polish,
  load() returns it, and resuming the finished run polishes nothing again."""
  import vaells_jax as vj

  config = dataclasses.replace(tiny_config, decoder_polish_steps=20)
  lines = []
  trained, summary = train_and_evaluate(
    config, tiny_data, tmp_path, log=lines.append, evaluate=False
  )
  assert checkpoint_steps(tmp_path)[-1] == config.num_steps + 20
  assert summary["decoder_polish_steps"] == 20
  assert summary["polish_recon_after"] < summary["polish_recon_before"]
  assert any(line.startswith("decoder polished: 20 steps") for line in lines)
  loaded = vj.load(tmp_path)
  for a, b in zip(
    jax.tree_util.tree_leaves(loaded.params),
    jax.tree_util.tree_leaves(trained.params),
    strict=True,
  ):
    np.testing.assert_array_equal(a, b)
  lines.clear()
  again, summary = train_and_evaluate(
    config, tiny_data, tmp_path, log=lines.append, resume=True, evaluate=False
  )
  assert "decoder_polish_steps" not in summary
  assert not any("decoder polished" in line for line in lines)
  assert checkpoint_steps(tmp_path)[-1] == config.num_steps + 20
  np.testing.assert_array_equal(
    again.params["decoder"]["Dense_0"]["kernel"],
    trained.params["decoder"]["Dense_0"]["kernel"],
  )
  shorter = dataclasses.replace(config, num_steps=config.num_steps - 4)
  with pytest.raises(ValueError, match=r"step 32 \(less its 20 decoder polish"):
    train_and_evaluate(shorter, tiny_data, tmp_path, resume=True, evaluate=False)


@pytest.mark.parametrize(
  "fields, message",
  [
    ({"decoder_polish_steps": -1}, "decoder_polish_steps must be >= 0"),
    ({"decoder_polish_lr": 0.0}, "decoder_polish_lr must be > 0"),
    ({"decoder_polish_steps": 10, "model": "vae"}, "polishes a VAELLS decoder"),
  ],
)
def test_polish_settings_are_checked(fields, message):
  with pytest.raises(ValueError, match=message):
    Config(**fields)
