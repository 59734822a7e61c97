"""The README and the pages in docs/ hold only what runs and links that resolve.

Every ```python block of README.md and docs/*.md runs as written, offline,
in a fresh namespace inside an empty working directory (so whatever it
writes, e.g. ``runs/toy``, lands in ``tmp_path``). Shell commands belong in
```bash blocks, which are not run. The README stays a short front door:
at most 10 KiB.
"""

from __future__ import annotations

import pathlib
import re
import unicodedata

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_BYTES = 10 * 1024

_PYTHON_BLOCK = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_ANY_BLOCK = re.compile(r"^```.*?^```[ \t]*$", re.S | re.M)
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _python_blocks():
  for page in PAGES:
    for index, match in enumerate(_PYTHON_BLOCK.finditer(page.read_text())):
      yield pytest.param(
        page, index, match.group(1), id=f"{page.relative_to(ROOT)}[{index}]"
      )


def _slug(heading: str) -> str:
  """GitHub's anchor for a heading: lower case, punctuation dropped, - for spaces."""
  text = heading.strip().lower()
  text = "".join(
    ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in "LN"
  )
  return text.replace(" ", "-")


def _anchors(page: pathlib.Path) -> set[str]:
  text = _ANY_BLOCK.sub("", page.read_text())
  return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


@pytest.mark.whole_run
@pytest.mark.parametrize("page,index,code", list(_python_blocks()))
def test_python_block_runs(page, index, code, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  namespace = {"__name__": f"docs_block_{index}"}
  try:
    exec(
      compile(code, f"{page.relative_to(ROOT)} python block {index}", "exec"), namespace
    )
  finally:
    import matplotlib.pyplot as plt

    plt.close("all")


def test_readme_has_a_python_example():
  names = {param.values[0].name for param in _python_blocks()}
  assert "README.md" in names, "the README's quick example is a ```python block"


def test_readme_is_short():
  size = (ROOT / "README.md").stat().st_size
  assert size <= README_MAX_BYTES, (
    f"README.md is {size} bytes; keep it <= {README_MAX_BYTES} and move detail to docs/"
  )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
  text = _ANY_BLOCK.sub("", page.read_text())
  broken = []
  for target in _LINK.findall(text):
    if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
      continue
    path, _, anchor = target.partition("#")
    resolved = (page.parent / path).resolve() if path else page
    if not resolved.exists():
      broken.append(target)
    elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
      broken.append(target)
  assert not broken, f"{page.relative_to(ROOT)}: broken links {broken}"
