"""The ``vaells-run`` console command: ``python experiments/run.py`` after install.

``pip install -e .`` puts ``vaells-run`` on the PATH; it runs the checkout's
``experiments/run.py`` (the experiments' configurations live there, beside
the package) with the same flags, output folders and exit status.
"""

from __future__ import annotations

import pathlib
import sys

__all__ = ["main"]

ROOT = pathlib.Path(__file__).resolve().parents[2]


def main(argv=None) -> int:
  """Runs ``experiments/run.py``'s ``main`` with ``argv`` (default: sys.argv)."""
  if not (ROOT / "experiments" / "run.py").is_file():
    print(
      f"error: vaells-run needs the experiments/ folder of a source checkout "
      f"beside the package (looked in {ROOT}); install with `pip install -e .` "
      "from a clone of the repository",
      file=sys.stderr,
    )
    return 2
  if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
  from experiments import run

  return run.main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
  sys.exit(main())
