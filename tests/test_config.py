"""Config: its fields grouped by concern, read flat, and old files loading."""

import dataclasses
import json

import pytest

from vaells_jax.config import GROUPS, Config, config_from_json, override


def test_groups_are_every_field_in_declaration_order():
  names = [f.name for f in dataclasses.fields(Config)]
  assert [name for group in GROUPS.values() for name in group] == names


def test_a_config_json_in_any_key_order_loads(tmp_path):
  # Files written before the fields were grouped hold them in another order.
  config = Config(num_steps=7, lr_net=0.01, select_signal="loss")
  fields = dataclasses.asdict(config)
  path = tmp_path / "config.json"
  path.write_text(json.dumps(dict(reversed(list(fields.items())))))
  assert config_from_json(path) == config


@pytest.mark.parametrize(
  "key, value, message",
  [
    ("select_at", "0", "select_at must be in (0, 1]"),
    ("lr_net_cooldown", "2", "lr_net_cooldown must be in [0, 1]"),
    ("psi_seed", "-2", "psi_seed must be >= 0, or -1"),
    ("network", "cnn", "network must be one of"),
    ("population_init", "some", "population_init must be one of"),
  ],
)
def test_each_groups_checks_name_the_field(key, value, message):
  with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
    override(Config(), {key: value})
