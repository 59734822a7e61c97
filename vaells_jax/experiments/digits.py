"""What the two MNIST experiments share: the settings of paper table 5 and
the reduced budget for a 2-core CPU."""

import dataclasses

from vaells_jax.config import Config

# Paper table 5 (rotated and natural MNIST), where it differs from the
# Config defaults: 30 000 warm-up steps, then alternating network and Psi
# steps.
PAPER = dict(
  network="conv",
  batch_size=32,
  lr_net=1e-4,
  lr_psi=1e-5,
  max_lr_psi=0.008,
  zeta1=1.0,
  zeta_p=1e-6,
  warmup_steps=30000,
  alternate=True,
  psi_steps=60,
  prior_weight_net=1e-4,
  recon_weight_psi=1e-4,
  closest_anchor=True,
  latent_scale=10.0,
  eval_ll_points=500,
  eval_ll_samples=100,
  num_pseudo=500,
)


def for_budget(budget: str, paper: Config, **cpu) -> Config:
  """``paper`` for ``budget="paper"``; for ``"cpu"`` 2 000 warm-up steps at a
  3x higher network rate, 20 inference iterations and a checkpoint every
  500 steps, with the experiment's own changes ``cpu``."""
  if budget == "paper":
    return paper
  if budget == "cpu":
    return dataclasses.replace(
      paper,
      warmup_steps=2000,
      lr_net=3e-4,
      inference_max_iter=20,
      checkpoint_every=500,
      **cpu,
    )
  raise ValueError(f"unknown budget {budget!r}; choose paper or cpu")
