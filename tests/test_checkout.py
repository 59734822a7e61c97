"""The checkout around the package: ``benchmarks/`` (what a user runs to
compare speed and quality), ``studies/`` (one-off studies, imported by
nothing but their own folder's scripts), ``docs/gen/`` (the docs numbers),
``tests/``. What may import what, and no private name of the package outside
it and its tests."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
BENCHMARKS = sorted((ROOT / "benchmarks").glob("*.py"))
STUDIES = sorted((ROOT / "studies").glob("*/*.py"))
STUDY_NAMES = {p.stem for p in STUDIES}
OUTSIDE = [  # code outside the package and its tests
  *BENCHMARKS,
  *STUDIES,
  *sorted((ROOT / "docs" / "gen").glob("*.py")),
  *sorted((ROOT / "experiments").rglob("*.py")),
]


def _imports(path: pathlib.Path) -> list[tuple[str, list[str]]]:
  """``(module, names)`` of every import statement in ``path``."""
  out = []
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.Import):
      out += [(a.name, []) for a in node.names]
    elif isinstance(node, ast.ImportFrom) and not node.level:
      out.append((node.module or "", [a.name for a in node.names]))
  return out


def _ids(p: pathlib.Path) -> str:
  return str(p.relative_to(ROOT))


@pytest.mark.parametrize("path", sorted((ROOT / "tests").glob("*.py")), ids=_ids)
def test_tests_import_nothing_from_benchmarks_or_studies(path):
  outside = {p.stem for p in BENCHMARKS} | STUDY_NAMES
  found = {m.split(".")[0] for m, _ in _imports(path)} & outside
  assert not found, f"{path.name} imports {found}; run the script instead"


@pytest.mark.parametrize(
  "path",
  [
    *BENCHMARKS,
    *sorted((ROOT / "docs" / "gen").glob("*.py")),
    *sorted((ROOT / "vaells_jax").rglob("*.py")),
    *sorted((ROOT / "experiments").rglob("*.py")),
  ],
  ids=_ids,
)
def test_nothing_imports_a_study(path):
  found = {m.split(".")[0] for m, _ in _imports(path)} & STUDY_NAMES
  assert not found, f"{_ids(path)} imports the studies {found}"


@pytest.mark.parametrize("path", STUDIES, ids=_ids)
def test_a_study_imports_only_studies_of_its_folder(path):
  siblings = {p.stem for p in path.parent.glob("*.py")}
  found = {m.split(".")[0] for m, _ in _imports(path)} & STUDY_NAMES
  assert found <= siblings, f"{_ids(path)} imports {found - siblings}"


def _private_names(path: pathlib.Path) -> list[str]:
  """Private names of ``vaells_jax`` that ``path`` imports or reads."""
  tree = ast.parse(path.read_text())
  modules, found = set(), []
  for module, names in _imports(path):
    if module.split(".")[0] != "vaells_jax":
      continue
    found += [f"{module}.{n}" for n in names if n.startswith("_")]
    found += [module] * any(p.startswith("_") for p in module.split("."))
    modules.add(module.split(".")[-1])
    modules.update(n for n in names if not n[:1].isupper())
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      modules.update(
        a.asname for a in node.names if a.asname and "vaells_jax" in a.name
      )
    if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
      "vaells_jax"
    ):
      modules.update(a.asname for a in node.names if a.asname)
  for node in ast.walk(tree):
    if (
      isinstance(node, ast.Attribute)
      and node.attr.startswith("_")
      and not node.attr.startswith("__")
      and isinstance(node.value, ast.Name)
      and node.value.id in modules
    ):
      found.append(f"{node.value.id}.{node.attr}")
  return found


@pytest.mark.parametrize("path", OUTSIDE, ids=_ids)
def test_no_private_name_of_the_package_outside_it(path):
  assert _private_names(path) == []


def test_the_private_name_check_finds_one(tmp_path):
  script = tmp_path / "s.py"
  script.write_text(
    "from vaells_jax.evaluation import likelihood\n"
    "from vaells_jax.cli import _cores\n"
    "likelihood._chunks(1)\n"
  )
  assert sorted(_private_names(script)) == [
    "likelihood._chunks",
    "vaells_jax.cli._cores",
  ]


def test_benchmarks_stay_small():
  lines = sum(len(p.read_text().splitlines()) for p in BENCHMARKS)
  assert lines <= 4500, f"benchmarks/ has {lines} lines: move studies to studies/"
