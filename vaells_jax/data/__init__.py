"""Data sets: the :class:`Dataset` type (saved to one ``.npz``), and the
synthetic manifolds with a known ground truth."""

from vaells_jax.data.dataset import Dataset, load_dataset, save_dataset
from vaells_jax.data.synthetic import (
  make_concentric,
  make_swiss_roll,
  swiss_roll_arc_length,
)

__all__ = [
  "Dataset",
  "load_dataset",
  "make_concentric",
  "make_swiss_roll",
  "save_dataset",
  "swiss_roll_arc_length",
]
