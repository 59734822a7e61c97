"""Runs a paper experiment: ``python experiments/run.py --exp=concentric``.

The same command as ``vaells-run`` (``vaells_jax.cli``; ``--help`` lists its
flags and config keys), runnable from a checkout without installing. The
configurations are in ``vaells_jax/experiments/``.
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from vaells_jax.cli import main  # noqa: E402

if __name__ == "__main__":
  sys.exit(main())
