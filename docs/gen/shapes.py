"""The numbers of docs/studies/fit-shapes.md: spirals, unlabelled curves, a torus."""

from __future__ import annotations

from .common import _and, _block, _load, _span


def _runs(key: str) -> dict[str, list[dict]]:
  """fit_battery.json's runs of ``key``, by family."""
  runs: dict[str, list[dict]] = {}
  for run in _load("fit_battery.json")[key].values():
    runs.setdefault(run["family"], []).append(run)
  return runs


def _rate(group) -> str:
  """ "k of n" learned, and the verdict's false ``learned`` calls."""
  learned = sum(r["success"] for r in group)
  false = sum(r["verdict"] == "learned" and not r["success"] for r in group)
  return f"{learned} of {len(group)} ({false} failed and called `learned`)"


def fit_curve_steps() -> str:
  """The one-class families at 1000 steps of the operators and at the
  default CURVE_STEPS."""
  long, default = _runs("curve_steps_1000"), _runs("fit_defaults")
  rows = [
    "| family | 1 000 steps | 250 steps (the default) |",
    "|---|---|---|",
  ]
  for family in ("arc", "s_curve", "wave", "spiral"):
    rows.append(f"| `{family}` | {_rate(long[family])} | {_rate(default[family])} |")
  return _block(rows)


def fit_pieces() -> str:
  """studies/fit/pieces.py: the families whose curves separate_pieces finds."""
  result = _load("fit_pieces.json")
  found = {f: sum(r["found"] for r in rows) for f, rows in result.items()}
  every = [f"`{f}`" for f, k in found.items() if k == len(result[f])]
  some = [
    f"`{f}` {k} of {len(result[f])}" for f, k in found.items() if k < len(result[f])
  ]
  return (
    f"it finds the true curves on every seed of {_and(every)}; on {_and(some)} "
    "(`python studies/fit/pieces.py --seeds=100-109 "
    "--out=docs/results/fit_pieces.json`)"
  )


def fit_torus() -> str:
  """The torus at fit's defaults and at FIT_CONFIG with 4 latent axes."""
  defaults = _runs("torus")["torus"]

  def signal(name, digits=2):
    return _span([r["signals"][name] for r in defaults], digits)

  text = (
    f"at the defaults {_rate(defaults)}: surface coverage "
    f"{_span([r['orbit_coverage'] for r in defaults], 2)}, prior samples "
    f"{_span([r['sample_manifold_distance'] for r in defaults])} noise levels "
    f"off. The verdict said `not learned` on "
    f"{sum(r['verdict'] == 'not learned' for r in defaults)} of {len(defaults)}: "
    f"the held networks reconstruct the torus only roughly "
    f"(`reconstruction_error` {signal('reconstruction_error')}, above 0.05), "
    f"and `surface_coverage` reads {signal('surface_coverage')}, while one "
    f"orbit follows a circle on it (`data_coverage` {signal('data_coverage')}, "
    f"`latent_coverage` {signal('latent_coverage')})"
  )
  probe = _runs("torus_fit_config_latent_4").get("torus", [])
  if probe:
    text += (
      f". `FIT_CONFIG` with 4 latent axes (networks trained, no warm start, one "
      f"try; `--set latent_dim=4` and the rest of `FIT_CONFIG`): {_rate(probe)}, "
      f"surface coverage {_span([r['orbit_coverage'] for r in probe], 2)}, "
      f"samples {_span([r['sample_manifold_distance'] for r in probe])} noise "
      "levels off"
    )
  return text


RENDERERS = {
  "fit-curve-steps": fit_curve_steps,
  "fit-pieces": fit_pieces,
  "fit-torus": fit_torus,
}
