"""The README and the pages in docs/ hold only what runs and links that resolve.

Every ```python block of README.md and docs/*.md runs as written, offline,
in a fresh namespace inside an empty working directory (so whatever it
writes, e.g. ``runs/toy``, lands in ``tmp_path``). Shell commands belong in
```bash blocks, which are not run. The README stays a short front door:
at most 10 KiB.
"""

from __future__ import annotations

import importlib
import pathlib
import re
import sys
import unicodedata

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
REFERENCE = sorted((ROOT / "docs").glob("*.md"))  # docs/studies/: the studies
PAGES = [ROOT / "README.md", *REFERENCE, *sorted((ROOT / "docs/studies").glob("*.md"))]
README_MAX_BYTES = 10 * 1024  # the developers' guide: <= 10 KB
REFERENCE_MAX_BYTES = 128 * 1024  # docs/*.md together
RESULTS_MAX_ROWS = 8

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


# Citations of the docs from code: a comment or docstring that names a page
# of docs/ by its path, an anchor of it (the path, "#" and the anchor) or one
# of its sections (the path, then a comma and the quoted heading, or the quoted
# heading in parentheses), or a section of the README (README, then the quoted
# heading), must name one that exists. Wrapped comments are joined first.
CITING_FILES = sorted(
  {
    *ROOT.glob("vaells_jax/**/*.py"),
    *ROOT.glob("benchmarks/*.py"),
    *ROOT.glob("studies/*/*.py"),
    *ROOT.glob("docs/gen/*.py"),
    *ROOT.glob("experiments/**/*.py"),
    *ROOT.glob("tests/*.py"),
  }
)
_DOC_CITATION = re.compile(
  r"docs/((?:studies/)?[\w.-]+?\.md)(?:#([\w-]+))?"
  r'(?:,\s*"([^"]{1,100})"|\s*\(\s*"([^"]{1,100})"\s*\))?'
)
_README_CITATION = re.compile(r'\bREADME(?:\.md)?(?:,\s*|\s+|\s*\(\s*)"([^"]{1,100})"')
# A comment or docstring wrapped over lines: the next line's indentation and
# comment sign join the two as one space.
_LINE_BREAK = re.compile(r"[ \t]*\n[ \t]*(?:#[ \t]*)?")
_BOLD_LEAD = re.compile(r"\*\*([^*\n]+)\*\*")


def _has_section(page: pathlib.Path, heading: str) -> bool:
  """Whether ``page`` has a section called ``heading``: a heading whose
  anchor is the citation's (or starts with it, for a citation that leaves
  off a heading's parenthesis), or a bold paragraph title."""
  slug = _slug(heading.rstrip(".:"))
  anchors = _anchors(page)
  if slug in anchors or any(a.startswith(slug + "-") for a in anchors):
    return True
  text = _ANY_BLOCK.sub("", page.read_text())
  return slug in {_slug(m.group(1).rstrip(".:")) for m in _BOLD_LEAD.finditer(text)}


def _doc_citations(path: pathlib.Path):
  """``(citation, page, anchor, heading)`` for each docs citation in ``path``."""
  text = _LINE_BREAK.sub(" ", path.read_text())
  for m in _DOC_CITATION.finditer(text):
    page = ROOT / "docs" / m.group(1)
    yield m.group(0), page, m.group(2), m.group(3) or m.group(4)
  for m in _README_CITATION.finditer(text):
    yield m.group(0), ROOT / "README.md", None, m.group(1)


def test_code_cites_docs_that_exist():
  assert CITING_FILES, "no source files found"
  broken = []
  for path in CITING_FILES:
    for citation, page, anchor, heading in _doc_citations(path):
      where = f"{path.relative_to(ROOT)}: {citation!r}"
      if not page.exists():
        broken.append(f"{where} (no page {page.relative_to(ROOT)})")
      elif anchor and anchor not in _anchors(page):
        broken.append(f"{where} (no anchor #{anchor})")
      elif heading and not _has_section(page, heading):
        broken.append(f"{where} (no section {heading!r})")
  assert not broken, "citations of missing docs:\n" + "\n".join(broken)


def test_citation_patterns():
  """The citation forms the scan above recognises, on made-up text (built
  from pieces, so that this file does not cite pages that do not exist)."""
  docs, readme = "docs" + "/", "READ" + "ME"
  text = _LINE_BREAK.sub(
    " ",
    f'# see {docs}a.md, "Two\n  # words" and {docs}b.md#c-d, {docs}e.md ("F")\n'
    f'# {docs}g.md and {readme} "H", not ROOT / "{readme}.md", "x"',
  )
  found = [
    (m.group(1), m.group(2), m.group(3) or m.group(4))
    for m in _DOC_CITATION.finditer(text)
  ]
  assert found == [
    ("a.md", None, "Two words"),
    ("b.md", "c-d", None),
    ("e.md", None, "F"),
    ("g.md", None, None),
  ]
  assert [m.group(1) for m in _README_CITATION.finditer(text)] == ["H"]


def test_readme_lists_every_docs_page():
  readme = (ROOT / "README.md").read_text()
  for page in [*REFERENCE, ROOT / "docs/studies/README.md"]:
    assert f"]({page.relative_to(ROOT)})" in readme, page.name


def test_readme_results_table_is_short():
  readme = (ROOT / "README.md").read_text()
  section = readme.split("## Results", 1)[1].split("\n## ", 1)[0]
  rows = [line for line in section.splitlines() if line.startswith("|")]
  assert 0 < len(rows) - 2 <= RESULTS_MAX_ROWS  # less the header and its rule


def test_reference_pages_are_short_together():
  size = sum(page.stat().st_size for page in REFERENCE)
  assert size <= REFERENCE_MAX_BYTES, (
    f"docs/*.md hold {size} bytes; keep the reference pages <= "
    f"{REFERENCE_MAX_BYTES} together and move study logs to docs/studies/"
  )


# Every page, each short enough to read: at most 20 KiB.
DOCS_PAGE_MAX_BYTES = 20 * 1024


@pytest.mark.parametrize("page", PAGES[1:], ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_page_is_at_most_20_kib(page):
  size = page.stat().st_size
  assert size <= DOCS_PAGE_MAX_BYTES, (
    f"{page.relative_to(ROOT)} is {size} bytes; keep each docs page <= "
    f"{DOCS_PAGE_MAX_BYTES} and split it into pages by subject"
  )


def test_generated_numbers_match_docs_results():
  """Every ``<!-- gen:NAME -->`` span of the README and docs equals what
  ``python -m docs.gen`` renders from docs/results/ (rerun it after a
  measurement), and every renderer has a span."""
  gen = _docs_gen()
  assert gen.stale() == []
  used = {
    name.split(":")[0] for page in gen.PAGES for name, _ in gen.spans(page.read_text())
  }
  assert used == set(gen.RENDERERS)


def test_a_hand_edited_number_is_stale(tmp_path):
  gen = _docs_gen()
  page = ROOT / "README.md"
  edited = tmp_path / "README.md"
  text = page.read_text()
  name, span = gen.spans(text)[0]
  digit = next(c for c in span if c.isdigit())
  other = str((int(digit) + 1) % 10)
  edited.write_text(text.replace(span, span.replace(digit, other, 1), 1))
  assert gen.stale([edited]) == [f"README.md: {name}"]
  assert gen.render(edited.read_text(), {}) == text


def _docs_gen():
  """The docs generator, ``docs/gen/`` (``python -m docs.gen``)."""
  if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
  return importlib.import_module("docs.gen")
