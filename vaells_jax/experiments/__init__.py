"""The paper's experiments: for each, its configuration per budget and its data.

``get_config(name, budget)`` and ``make_data(name, config)`` are what
``vaells-run --exp=NAME`` (``vaells_jax.cli``) trains on. One module per
experiment holds ``get_config(budget)``, written as the ``Config`` defaults
(the concentric circles) plus what differs; the digits experiments build on
``digits.py`` (paper table 5 and the CPU budget they share) and also name
their ``ANCHORS_PER_CLASS``. Adding an experiment: a module here, its name in
``NAMES``, and its data builder in ``make_data``.
"""

from __future__ import annotations

import importlib

from vaells_jax.config import Config

NAMES = ("concentric", "swiss_roll", "rot_mnist", "nat_mnist")
DIGITS = ("rot_mnist", "nat_mnist")  # MNIST; the others are synthetic

__all__ = ["DIGITS", "NAMES", "get_config", "make_data", "module"]


def module(name: str):
  """The configuration module of experiment ``name``."""
  if name not in NAMES:
    raise ValueError(f"unknown experiment {name!r}; choose one of {', '.join(NAMES)}")
  return importlib.import_module(f"{__name__}.{name}")


def get_config(name: str, budget: str = "paper") -> Config:
  """Experiment ``name``'s configuration at ``budget`` (``paper`` or ``cpu``)."""
  return module(name).get_config(budget)


def make_data(
  name, config, data_dir=None, random_anchors=None, anchors_per_class=None, loaded=None
):
  """Experiment ``name``'s data set for ``config.seed``.

  MNIST (``DIGITS``) is read from the IDX files in ``data_dir`` (or through
  tensorflow-datasets without one) and raises ``MnistUnavailable`` if absent;
  it takes ``anchors_per_class`` (default the experiment module's) and keeps
  the loaded digits of each seed in the dict ``loaded`` when one is given. A
  synthetic set gets ``random_anchors`` anchors (per class) at random places
  on its manifold when that is given (paper appendix F), else evenly spaced.
  """
  from vaells_jax.data import mnist, synthetic  # slow imports (jax)

  module(name)  # checks the name
  if name in DIGITS:
    if anchors_per_class is None:
      anchors_per_class = module(name).ANCHORS_PER_CLASS
    loaded = {} if loaded is None else loaded
    if config.seed not in loaded:
      loaded[config.seed] = mnist.load_mnist(data_dir, seed=config.seed)
    return mnist.digits_experiment(
      name, loaded[config.seed], seed=config.seed, anchors_per_class=anchors_per_class
    )
  if random_anchors is None:
    return getattr(synthetic, f"make_{name}")(seed=config.seed)
  count = "num_anchors" if name == "swiss_roll" else "anchors_per_class"
  return getattr(synthetic, f"make_{name}")(
    seed=config.seed, anchor_placement="random", **{count: random_anchors}
  )
