"""``python -m docs.gen``: rewrite the generated spans; ``--check``: list the
stale ones (exit status 1)."""

from __future__ import annotations

import argparse
import sys

from . import PAGES, ROOT, render, stale


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--check", action="store_true", help="only list stale spans")
  args = parser.parse_args(argv)
  if args.check:
    out = stale()
    print("\n".join(out) or "every generated span is up to date")
    return 1 if out else 0
  cache = {}
  for page in PAGES:
    text = page.read_text()
    new = render(text, cache)
    if new != text:
      page.write_text(new)
      print(f"rewrote {page.relative_to(ROOT)}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
