"""The numbers in README.md and docs/ that come from docs/results/, rendered.

``python benchmarks/docs_numbers.py`` rewrites every generated span of the
README and the docs pages from the JSON in ``docs/results/``;
``--check`` only lists the spans that differ (exit status 1), as
``tests/test_docs.py`` does. A span is marked in the Markdown as

    <!-- gen:NAME -->...<!-- /gen -->

(inline, e.g. in a table cell, or around whole lines), and ``NAME`` is a key
of :data:`RENDERERS`: a function of the results that returns the span's
text. Change a number by rerunning its measurement into its JSON, then this
script; never by hand.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SPAN = re.compile(r"(<!-- gen:([\w-]+) -->)(.*?)(<!-- /gen -->)", re.S)

# fit_battery.py's families in the order and words the docs use.
FAMILIES = {
  "circles": "10-D circles",
  "circles_scaled": "scaled circles",
  "unequal": "unequal classes",
  "arc": "an open arc",
  "ellipses": "three ellipses",
  "circles_100d": "100-D circles",
  "wobbly_100d": "100-D wobbly curves",
}


def _load(name: str) -> dict:
  return json.loads((RESULTS / name).read_text())


def _fit_runs() -> dict[str, list[dict]]:
  """fit_battery.json's runs of fit's defaults, by family."""
  runs: dict[str, list[dict]] = {family: [] for family in FAMILIES}
  for run in _load("fit_battery.json")["fit_defaults"].values():
    runs[run["family"]].append(run)
  return runs


def _of(k: int, n: int, bold_from: float | None = None) -> str:
  text = f"{k} of {n}"
  return f"**{text}**" if bold_from is not None and k >= bold_from * n else text


def _verdict_counts(runs):
  """(called learned, of those learned, learned, of those called learned)."""
  called = [r for r in runs if r["verdict"] == "learned"]
  learned = [r for r in runs if r["success"]]
  return (
    len(called),
    sum(r["success"] for r in called),
    len(learned),
    sum(r["verdict"] == "learned" for r in learned),
  )


def _block(rows: list[str]) -> str:
  """Lines as a span of their own (blank lines around: a table's end)."""
  return "\n\n" + "\n".join(rows) + "\n\n"


def _seconds(runs) -> str:
  times = [r["wall_time_s"] for r in runs]
  return f"{min(times):.0f}–{max(times):.0f} s"


def fit_battery_table() -> str:
  """docs/fit.md: the battery of fit's defaults, a row per family."""
  runs = _fit_runs()
  rows = [
    "| family | learned (ground truth) | verdict `learned` / `uncertain` / "
    "`not learned` | `learned` that learned (precision) | learned and called "
    "`learned` (recall) | wall time a call |",
    "|---|---|---|---|---|---|",
  ]
  for family, group in runs.items():
    learned = sum(r["success"] for r in group)
    verdicts = " / ".join(
      str(sum(r["verdict"] == v for r in group))
      for v in ("learned", "uncertain", "not learned")
    )
    called, right, truly, found = _verdict_counts(group)
    rows.append(
      f"| `{family}` | {_of(learned, len(group), 0.9)} | {verdicts} | "
      f"{f'{right} / {called}' if called else '–'} | "
      f"{f'{found} / {truly}' if truly else '–'} | {_seconds(group)} |"
    )
  everything = [r for group in runs.values() for r in group]
  called, right, truly, found = _verdict_counts(everything)
  median = statistics.median(r["wall_time_s"] for r in everything)
  rows.append(
    f"| all {len(everything)} fits | "
    f"{sum(r['success'] for r in everything)} of {len(everything)} | | "
    f"**{right} / {called} = {right / called:.2f}** | "
    f"**{found} / {truly} = {found / truly:.2f}** | median {median:.0f} s |"
  )
  return _block(rows)


def fit_rates() -> str:
  """README: each family's rate and the verdict's precision and recall."""
  runs = _fit_runs()
  by_rate: dict[tuple[int, int], list[str]] = {}
  for family, group in runs.items():
    rate = (sum(r["success"] for r in group), len(group))
    by_rate.setdefault(rate, []).append(FAMILIES[family])
  parts = []
  for (k, n), names in sorted(by_rate.items(), key=lambda kv: -kv[0][0] / kv[0][1]):
    each = " each" if len(names) > 1 else ""
    parts.append(f"{', '.join(names)}{':' if each else ''} {k} of {n}{each}")
  everything = [r for group in runs.values() for r in group]
  called, right, truly, found = _verdict_counts(everything)
  return (
    "; ".join(parts) + f"; verdict precision {right / called:.2f} "
    f"({right} of {called}), recall {found / truly:.2f}"
  )


def fit_time() -> str:
  """README: the wall time of a fit call over the battery."""
  times = [r["wall_time_s"] for group in _fit_runs().values() for r in group]
  return (
    f"{min(times):.0f}–{max(times):.0f} s a call, median "
    f"{statistics.median(times):.0f} s"
  )


def fit_anchor_table() -> str:
  """docs/fit.md: learned runs by anchor choice (one try each)."""
  spread = _load("fit_battery.json")["first_tries_spread"].values()
  study = _load("fit_battery.json")["anchor_study"].values()
  choices = {"spread": spread, "random": study, "even": study}
  rows = [
    "| family | spread (the default) | random training points | evenly spaced "
    "on the true curve |",
    "|---|---|---|---|",
  ]
  totals = {c: [0, 0] for c in choices}
  for family in ("circles", "arc"):
    cells = []
    for choice, runs in choices.items():
      group = [r for r in runs if r["family"] == family and r["anchors"] == choice]
      group = [r for r in group if 100 <= r["seed"] <= 109]
      k = sum(r["success"] for r in group)
      totals[choice][0] += k
      totals[choice][1] += len(group)
      cells.append(_of(k, len(group)))
    rows.append(f"| `{family}` | " + " | ".join(cells) + " |")
  rows.append("| both | " + " | ".join(_of(*t) for t in totals.values()) + " |")
  return _block(rows)


def _kept(signals: dict, name: str, members: int) -> int:
  """The member a population of the first ``members`` keeps by ``name``, as
  the command selects (:func:`vaells_jax.training.population.select`)."""
  from vaells_jax.training.population import select  # imports jax

  signals = {k: list(v[:members]) for k, v in signals.items()}
  if "latent_coverage_both" not in signals:
    signals["latent_coverage_both"] = [
      a + b
      for a, b in zip(
        signals["latent_coverage"], signals["latent_coverage_wide"], strict=True
      )
    ]
  return select(signals, name)[0]


def swiss_signal_table() -> str:
  """docs/population-swiss-roll.md: seeds 100-119 whose kept member traverses
  the roll, by signal, for the first 8 and all 16 members."""
  seeds = _load("population_swiss_roll_k16.json")["seeds"]
  rows = ["| signal | 8 members (0–7) | 16 members |", "|---|---|---|"]
  for name, label in (
    ("latent_coverage_wide", "`latent_coverage_wide`"),
    ("latent_coverage", "`latent_coverage`"),
    ("latent_coverage_both", "`latent_coverage_both` (their sum)"),
  ):
    cells = []
    for members in (8, 16):
      failed = [
        seed
        for seed, run in seeds.items()
        if not run["success"][_kept(run["signals"], name, members)]
      ]
      cell = _of(len(seeds) - len(failed), len(seeds), 1.0)
      cells.append(cell + (f" ({', '.join(failed)} fail)" if failed else ""))
    rows.append(f"| {label} | " + " | ".join(cells) + " |")
  return _block(rows)


RENDERERS = {
  "swiss-signal-table": swiss_signal_table,
  "fit-battery-table": fit_battery_table,
  "fit-rates": fit_rates,
  "fit-time": fit_time,
  "fit-anchor-table": fit_anchor_table,
}


def spans(text: str):
  """``(name, text)`` of every generated span in a page's ``text``."""
  return [(m.group(2), m.group(3)) for m in SPAN.finditer(text)]


def render(text: str, rendered: dict) -> str:
  """``text`` with every span replaced by its renderer's output."""
  return SPAN.sub(lambda m: m.group(1) + rendered[m.group(2)] + m.group(4), text)


def stale(pages=PAGES) -> list[str]:
  """``page: name`` of every span that differs from its rendering (or whose
  name has no renderer)."""
  rendered = {name: fn() for name, fn in RENDERERS.items()}
  out = []
  for page in pages:
    for name, text in spans(page.read_text()):
      if name not in rendered or text != rendered[name]:
        where = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page.name
        out.append(f"{where}: {name}")
  return out


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--check", action="store_true", help="only list stale spans")
  args = parser.parse_args(argv)
  if args.check:
    out = stale()
    print("\n".join(out) or "every generated span is up to date")
    return 1 if out else 0
  rendered = {name: fn() for name, fn in RENDERERS.items()}
  for page in PAGES:
    text = page.read_text()
    new = render(text, rendered)
    if new != text:
      page.write_text(new)
      print(f"rewrote {page.relative_to(ROOT)}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
