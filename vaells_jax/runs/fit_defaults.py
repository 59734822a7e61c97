"""What :func:`vaells_jax.fit` trains when it is given no config: the
settings for vectors of several classes, for one class (a curve) and for
images, and the rule that picks them from the data (:func:`defaults`)."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from vaells_jax.config import Config

__all__ = [
  "CURVE_STEPS",
  "CURVE_TRIES",
  "FIT_CONFIG",
  "FIT_POPULATION",
  "FIT_RETRY_CHANGES",
  "FIT_TRIES",
  "IMAGE_CHANNELS",
  "IMAGE_LATENT_DIM",
  "IMAGE_LR_NET",
  "IMAGE_STEPS",
  "IMAGE_TRIES",
  "MIN_IMAGE_SIDE",
  "Defaults",
  "curve_config",
  "defaults",
  "image_config",
]

# What fit() trains when it is given no config: the concentric experiment's
# settings (paper table 4, gauss_newton, 8 dictionary draws, the best kept at
# half the steps by latent_coverage) with ten times the paper's starting Psi
# rate, the network rates cooling to 0 over the kept member's half and a
# latent scale of 2, on data conditioned to that experiment's spread, anchors
# spread along each class's manifold. The Psi rate: on the README's circles
# one try with the paper's 4e-4 learned 4 of 10 seeds, with 4e-3 7 of 10. The
# cooldown: a constant Adam rate leaves the decoder about 0.1 off the manifold
# (data at RMS 2), 20-70 noise levels in 100-D; cooled down, 9-10. The latent
# scale: on the ellipses one try learned 3 of the 4 seeds that failed at 1.
# Rates, tries, the verdict's precision: docs/fit.md, benchmarks/fit_battery.py.
FIT_POPULATION = 8
FIT_CONFIG = Config(
  latent_scale=2.0,
  lr_psi=4e-3,
  lr_net_cooldown=0.5,
  population=FIT_POPULATION,
  select_at=0.5,
  select_signal="latent_coverage",
)
# Images (image_config): image networks (models.networks.image_layers,
# IMAGE_CHANNELS channels, sides >= MIN_IMAGE_SIDE) from the warm start, one
# member, one try, 3 latent axes, IMAGE_STEPS steps that train the operators
# alone (network rate IMAGE_LR_NET = 0: every rate tried degraded the
# networks; anchors fixed: trained, they drifted off their class's orbit on
# the battery's failures): docs/studies/fit-images.md.
MIN_IMAGE_SIDE = 8
IMAGE_CHANNELS = 32
IMAGE_STEPS = 500
IMAGE_LR_NET = 0.0
IMAGE_TRIES = 1
IMAGE_LATENT_DIM = 3


# Populations fit() trains at most: while the verdict is not "learned", a fresh
# one (another seed) in WORKDIR/try<k>; the best by verdict, then coverage, is kept.
FIT_TRIES = 4
# What the second try changes in fit's own config: the prior weighted 30
# times in the network steps, the decoder polished and twice the steps. On
# the wobbly 100-D curves the defaults never learned and one such try learned
# 8 of 10 seeds; on the 10-D circles it learned fewer than the defaults
# (docs/fit.md). Later tries train the config of the first two tries whose
# prior samples lay closer to the data (the verdict's sample_noise_levels).
FIT_RETRY_CHANGES = {
  "prior_weight_net": 30.0,
  "decoder_polish_steps": 2000,
  "num_steps": 8000,
}
# One class of vectors (curve_config): the warm start's layout (an open
# curve on three quarters of a circle) and one member, CURVE_STEPS steps that
# train the operators alone (networks and anchors held), one try. With several
# classes the layout's nested rings in 2-D left the prior's samples off the
# curves (2 of 10 circles): docs/studies/fit-open-curves.md. The steps: the
# layout's rotation is the orbit; trained longer it turns into a spiral that
# leaves a long curve (a spiral of 1.75 turns: 4 of 10 seeds at 1000 steps,
# 8 of 10 at 250; arc, S-curve and wave: 30 of 30 at 1000, 29 of 30 at 250):
# docs/studies/fit-shapes.md.
CURVE_STEPS = 250
CURVE_TRIES = 1


def curve_config() -> Config:
  """What :func:`fit` trains on vectors of one class when it is given no
  config: :data:`FIT_CONFIG` from the warm start, the operators alone."""
  return dataclasses.replace(
    FIT_CONFIG, population=1, num_steps=CURVE_STEPS, lr_net=0.0, learn_anchors=False
  )


def image_config(shape: tuple[int, ...]) -> Config:
  """What :func:`fit` trains on images of ``shape`` (``(H, W)`` or
  ``(H, W, C)``) when it is given no config: :data:`FIT_CONFIG` with the
  image networks (docs/images.md)."""
  return dataclasses.replace(
    FIT_CONFIG,
    network="image",
    image_shape=hwc(shape),
    conv_channels=IMAGE_CHANNELS,
    population=1,
    num_steps=IMAGE_STEPS,
    lr_net=IMAGE_LR_NET,
    learn_anchors=False,
    latent_dim=IMAGE_LATENT_DIM,
  )


def hwc(shape: tuple[int, ...]) -> tuple[int, int, int]:
  """``(H, W)`` or ``(H, W, C)`` as ``(H, W, C)``."""
  return (shape[0], shape[1], shape[2] if len(shape) == 3 else 1)


class Defaults(NamedTuple):
  """What :func:`fit` trains without a config: the config, its tries and
  what the second try changes."""

  config: Config
  tries: int
  retry_changes: dict[str, Any]


def defaults(shape: tuple[int, ...] | None, labels: ArrayLike | None) -> Defaults:
  """:func:`fit`'s defaults for samples of ``shape`` (None: vectors) and
  these ``labels`` (None: one class)."""
  if shape is not None:
    return Defaults(image_config(shape), IMAGE_TRIES, dict(FIT_RETRY_CHANGES))
  if labels is None or np.unique(np.asarray(labels)).size <= 1:
    return Defaults(curve_config(), CURVE_TRIES, dict(FIT_RETRY_CHANGES))
  return Defaults(FIT_CONFIG, FIT_TRIES, dict(FIT_RETRY_CHANGES))
