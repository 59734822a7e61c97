"""The numbers in README.md and docs/ that come from docs/results/, rendered.

``python -m docs.gen`` (from the checkout's root) rewrites every generated
span of the README and the docs pages (``docs/*.md``, ``docs/studies/*.md``)
from the JSON in ``docs/results/``; ``--check`` only lists the spans that
differ (exit status 1), as ``tests/test_docs.py`` does. A span is marked in
the Markdown as

    <!-- gen:NAME -->...<!-- /gen -->

(inline, e.g. in a table cell, or around whole lines), and ``NAME`` is a key
of one page group's ``RENDERERS``: a function of the results that returns the
span's text. ``NAME:ARG:ARG`` passes the arguments to it (one renderer for
every cell of a kind, e.g. ``gen:inference-speedup:concentric:auto:cg``).
Each page group has its module: ``fit``, ``shapes``, ``population``, ``mnist``,
``inference``, ``original``, ``training``, ``synthetic``, ``baselines``,
``gpu``; ``common`` holds what they share. Change a number by rerunning its
measurement into its JSON, then this command; never by hand.
"""

from __future__ import annotations

import re

from . import (
  baselines,
  fit,
  gpu,
  inference,
  mnist,
  original,
  population,
  shapes,
  synthetic,
  training,
)
from .common import ROOT

__all__ = ["PAGES", "RENDERERS", "ROOT", "render", "spans", "stale"]

PAGES = [
  ROOT / "README.md",
  *sorted((ROOT / "docs").glob("*.md")),
  *sorted((ROOT / "docs" / "studies").glob("*.md")),
]
SPAN = re.compile(r"(<!-- gen:([\w:.-]+) -->)(.*?)(<!-- /gen -->)", re.S)
GROUPS = (
  fit,
  shapes,
  population,
  mnist,
  inference,
  original,
  training,
  synthetic,
  baselines,
  gpu,
)
RENDERERS = {name: f for group in GROUPS for name, f in group.RENDERERS.items()}


def spans(text: str):
  """``(name, text)`` of every generated span in a page's ``text``."""
  return [(m.group(2), m.group(3)) for m in SPAN.finditer(text)]


def _render(name: str, cache: dict) -> str | None:
  """A span's text: ``RENDERERS[head](*args)`` for ``head:arg:arg``; None
  for a name without a renderer."""
  if name not in cache:
    head, *args = name.split(":")
    cache[name] = RENDERERS[head](*args) if head in RENDERERS else None
  return cache[name]


def render(text: str, cache: dict) -> str:
  """``text`` with every span replaced by its renderer's output."""
  return SPAN.sub(lambda m: m.group(1) + _render(m.group(2), cache) + m.group(4), text)


def stale(pages=PAGES) -> list[str]:
  """``page: name`` of every span that differs from its rendering (or whose
  name has no renderer)."""
  cache, out = {}, []
  for page in pages:
    for name, text in spans(page.read_text()):
      if text != _render(name, cache):
        where = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page.name
        out.append(f"{where}: {name}")
  return out
