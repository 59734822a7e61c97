"""The package's layers import only downward (docs/architecture.md)."""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "vaells_jax"
# What each layer may import from vaells_jax besides itself.
ALLOWED = {
  "config": {"core"},  # only core/solvers/__init__.py, the registry (no JAX)
  "core": {"config"},
  "data": {"config"},
  "models": {"config", "core", "data"},
  "training": {"config", "core", "data", "models"},
  "evaluation": {"config", "core", "data", "models"},
  "api": {"config", "core", "data", "models", "training", "evaluation"},
  "runs": {"config", "core", "data", "models", "training", "evaluation", "api"},
  "experiments": {"config", "data"},
  "cli": {"config", "data", "training", "runs", "experiments"},
}
# Top-level folders of the checkout that an installed package does not have.
CHECKOUT_ONLY = {"experiments", "tests", "benchmarks", "docs"}


def _layer(path: pathlib.Path) -> str:
  return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def _imported_layers(path: pathlib.Path) -> set[str]:
  layers = set()
  for node in ast.walk(ast.parse(path.read_text())):
    names = (
      [a.name for a in node.names]
      if isinstance(node, ast.Import)
      else [node.module or ""]
      if isinstance(node, ast.ImportFrom)
      else []
    )
    for name in names:
      parts = name.split(".")
      if parts[0] == "vaells_jax" and len(parts) > 1:
        layers.add(parts[1])
      elif parts[0] == "vaells_jax" and isinstance(node, ast.ImportFrom):
        layers.update(a.name for a in node.names)
  return layers


MODULES = [
  p
  for p in sorted(PACKAGE.rglob("*.py"))
  if p.name != "__init__.py" or p.parent != PACKAGE
]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_imports_only_lower_layers(path):
  layer = _layer(path)
  assert layer in ALLOWED, f"{path} is in no known layer"
  upward = _imported_layers(path) - ALLOWED[layer] - {layer}
  assert not upward, f"{path.relative_to(PACKAGE)} imports {sorted(upward)}"


def test_every_module_is_short():
  long = {
    str(p.relative_to(PACKAGE)): n
    for p in MODULES
    if (n := len(p.read_text().splitlines())) > 650
  }
  assert not long, long


# A function (docstring included) a reader holds in their head: at most
# this many lines (``end_lineno - lineno + 1``), but for those listed here,
# "module path:function name" -> why it is longer.
FUNCTION_LINES = 60
LONG_FUNCTIONS = {
  # The public entry point's docstring documents each of its parameters; the
  # code after it is 26 lines of calls to named helpers.
  "runs/fit.py:fit": "a docstring of every parameter",
}


def _long_functions() -> dict[str, int]:
  """Every function of the package over :data:`FUNCTION_LINES` lines."""
  found = {}
  for path in sorted(PACKAGE.rglob("*.py")):
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        lines = node.end_lineno - node.lineno + 1
        if lines > FUNCTION_LINES:
          found[f"{path.relative_to(PACKAGE).as_posix()}:{node.name}"] = lines
  return found


def test_every_function_is_short():
  long = {k: n for k, n in _long_functions().items() if k not in LONG_FUNCTIONS}
  assert not long, (
    f"functions over {FUNCTION_LINES} lines (split them into named helpers, "
    f"or list them in LONG_FUNCTIONS with the reason): {long}"
  )


def test_the_long_function_list_is_current():
  stale = set(LONG_FUNCTIONS) - set(_long_functions())
  assert not stale, f"no longer over {FUNCTION_LINES} lines; drop them: {stale}"


def _module_name(path: pathlib.Path) -> str:
  parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
  return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(path: pathlib.Path, known: set[str]) -> set[str]:
  """The package's modules ``path`` imports anywhere in it (function-level
  imports included)."""
  found = set()
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
      names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    else:
      continue
    found.update(n for n in names if n in known)
  return found


def test_no_import_cycle():
  known = {_module_name(p) for p in PACKAGE.rglob("*.py")}
  graph = {
    _module_name(p): _imported_modules(p, known) - {_module_name(p)}
    for p in PACKAGE.rglob("*.py")
    if p.name != "__init__.py"  # a package's __init__ re-exports its modules
  }
  state = {}

  def visit(module, trail):
    if state.get(module) == "open":
      raise AssertionError("import cycle: " + " -> ".join(trail + [module]))
    if state.get(module) != "done":
      state[module] = "open"
      for other in sorted(graph.get(module, ())):
        visit(other, trail + [module])
      state[module] = "done"

  for module in sorted(graph):
    visit(module, [])


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_from_above_the_package(path):
  """A wheel holds only ``vaells_jax``: nothing in it may import the
  checkout's folders or reach them through ``sys.path``."""
  tree = ast.parse(path.read_text())
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      tops = {a.name.split(".")[0] for a in node.names}
    elif isinstance(node, ast.ImportFrom):
      tops = {(node.module or "").split(".")[0]} if node.level == 0 else set()
    else:
      continue
    assert not tops & CHECKOUT_ONLY, f"{path.name}:{node.lineno} imports {tops}"
  assert "sys.path" not in path.read_text(), f"{path.name} changes sys.path"


def test_config_reads_only_the_solver_registry():
  """``config`` sits below ``core`` but for the solvers' registry
  (``core/solvers/__init__.py``: names and rules, no JAX), so that
  ``Config`` validates ``inference_method`` against the same list
  ``infer_coefficients`` does."""

  def imports(path):
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, ast.Import):
        found |= {a.name for a in node.names}
      elif isinstance(node, ast.ImportFrom) and node.level == 0:
        found.add(node.module or "")
    return found

  ours = {m for m in imports(PACKAGE / "config.py") if m.startswith("vaells_jax")}
  assert ours == {"vaells_jax.core.solvers"}
  registry = imports(PACKAGE / "core" / "solvers" / "__init__.py")
  assert not {m for m in registry if m.split(".")[0] in ("jax", "vaells_jax")}
