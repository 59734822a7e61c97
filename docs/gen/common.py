"""What the renderers share: the results folder and number formats."""

from __future__ import annotations

import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"


def _load(name: str) -> dict:
  """``docs/results/<name>``, read."""
  return json.loads((RESULTS / name).read_text())


def _block(rows: list[str]) -> str:
  """Lines as a span of their own (blank lines around: a table's end)."""
  return "\n\n" + "\n".join(rows) + "\n\n"


def _span(values, digits: int = 0) -> str:
  """``values``' range, "low–high" with ``digits`` decimals; one number
  where both read the same."""
  low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
  return low if low == high else f"{low}–{high}"


def _n(n: float) -> str:
  """``n`` rounded, with thin groups: 100 000."""
  return f"{n:,.0f}".replace(",", " ")


def _fmt(x: float, key: str = "") -> str:
  if key in ("knn_class_accuracy", "class_consistency"):
    return f"{x:.2f}"
  if key == "wall_time_s":
    return f"{x:.0f}"
  if abs(x) < 1e-4 and key != "mse":
    return "0"
  if abs(x) >= 1000:
    return f"{x:,.0f}".replace(",", " ").replace("-", "−")
  if abs(x) >= 100:
    return f"{x:.1f}".replace("-", "−")
  if abs(x) >= 1:
    return f"{x:.3g}".replace("-", "−")
  return f"{x:#.2g}".replace("-", "−")


def _of(k: int, n: int, bold_from: float | None = None) -> str:
  text = f"{k} of {n}"
  return f"**{text}**" if bold_from is not None and k >= bold_from * n else text


def _and(items) -> str:
  """``["a", "b", "c"]`` as "a, b and c"."""
  items = [str(i) for i in items]
  return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
