"""Data sets: synthetic manifolds with a known ground truth."""

from vaells_jax.data.synthetic import (
  SyntheticData,
  load_synthetic,
  make_concentric,
  make_swiss_roll,
  save_synthetic,
  swiss_roll_arc_length,
)

__all__ = [
  "SyntheticData",
  "load_synthetic",
  "make_concentric",
  "make_swiss_roll",
  "save_synthetic",
  "swiss_roll_arc_length",
]
