"""``summary.md``: a run's numbers with which way is better and their reference,
then its figures."""

from __future__ import annotations

import re

from vaells_jax.data.files import atomic_write_text

__all__ = ["METRIC_GUIDE", "write_markdown"]


# metric -> (which direction is better, the reference it is read against;
# "{key}" is filled from the run's own numbers).
METRIC_GUIDE = {
  "knn_class_accuracy": ("higher", "1 = classes separated; chance = 1 / classes"),
  "mse": ("lower", "synthetic: the data noise variance; natural MNIST goal <= 0.03"),
  "log_likelihood": ("higher", ">= elbo"),
  "elbo": ("higher", "<= log_likelihood"),
  "sample_manifold_distance": ("lower", "the noisy data: {data_manifold_distance}"),
  "data_manifold_distance": ("-", "noise floor of sample_manifold_distance"),
  "orbit_manifold_distance": ("lower", "in spacings of the encodings"),
  "orbit_coverage": ("higher", "1 = an orbit traverses the whole true curve"),
  "path_manifold_distance": (
    "lower",
    "straight lines: {linear_path_manifold_distance}",
  ),
  "linear_path_manifold_distance": ("-", "reference of path_manifold_distance"),
  "path_endpoint_error": ("lower", "0 = paths reach their endpoints"),
  "rotation_gated_span_degrees": (
    "higher",
    "HEADLINE: median span of rotation that keeps the digit (both gates); "
    "goal >= 180; the reference operator: {reference_rotation_gated_span_degrees}",
  ),
  "rotation_gated_span_quartiles": ("higher", "25 % and 75 % of the gated span"),
  "rotation_gated_span_per_class": ("higher", "median gated span of classes 0..9"),
  "rotation_gated_digits": ("-", "held-out digits of the gated span"),
  "rotation_correlation_gate_only_span_degrees": (
    "-",
    "the span with the correlation gate alone",
  ),
  "rotation_class_gate_only_span_degrees": ("-", "the span with the class gate alone"),
  "rotation_gate_level": (
    "-",
    "correlation gate: percentile {rotation_gate_percentile} of the "
    "autoencoder's own, median {rotation_autoencoder_correlation_median}",
  ),
  "rotation_start_class_kept": ("higher", "decoded start frames of the input's class"),
  "reference_rotation_gated_span_degrees": ("-", "what encoder and decoder allow"),
  "ungated_rotation_rise_degrees": (
    "-",
    "NOT the headline: no check that a frame is still the digit",
  ),
  "ungated_rotation_rise_degrees_best": ("-", "not the headline (ungated)"),
  "ungated_rotation_spearman": ("-", "of the ungated angle along the path"),
  "reference_cosine": ("higher", "1 = the operator fitted to the encoder's orbits"),
  "class_consistency": ("higher", "classifier accuracy {classifier_test_accuracy}"),
  "classifier_test_accuracy": ("higher", "reference of class_consistency"),
  "operator_reach_rms": (
    "higher",
    "per operator: median RMS pixel change (both directions summed) of a "
    "digit moved along its path while the classifier keeps its class",
  ),
  "operator_reach_changed_fraction": (
    "higher",
    "per operator: the same reach as the fraction of pixels changed by > 0.1 (0 to 2)",
  ),
  "operator_reach_coefficient": (
    "-",
    "per operator: median absolute coefficient reached",
  ),
  "operator_reach_at_end": (
    "-",
    "per operator: directions still of the class at the range's end "
    "(reach cut by the range)",
  ),
  "operator_reach_start_class_kept": ("higher", "decoded start frames of the class"),
  "operator_reach_digits": ("-", "held-out digits of the operator reach"),
  "psi_rejected_steps": ("-", "Psi steps refused by the accept/reject rule"),
  "net_skipped_steps": ("lower", "non-finite steps skipped; 0 expected"),
  "resumed_from_step": ("-", "0: trained from the start"),
  "polish_recon_before": ("-", "decoder's 1/2 ||x - g(f(x))||^2 before the polish"),
  "polish_recon_after": ("lower", "the same after it"),
}


def _cell(value) -> str:
  if isinstance(value, float):
    return f"{value:.4g}"
  if isinstance(value, list):
    return ", ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in value)
  return str(value)


def _verdict_lines(verdict) -> list[str]:
  """The verdict, its reasons and its signals against their thresholds."""
  limits = verdict["thresholds"]
  if "image_coverage_learned" in limits:  # an image model (runs.verdict)
    rows = {
      "image_coverage": f">= {limits['image_coverage_learned']} learned, "
      f"< {limits['image_coverage_low']} not learned",
      "image_purity": f">= {limits['image_purity_min']} for learned",
      "sample_class": f">= {limits['sample_class_min']} for learned",
      "sample_spreads": f"<= {limits['sample_spreads_max']} for learned",
    }
  else:
    rows = {
      "latent_coverage": f">= {limits['coverage_learned']} learned, "
      f"< {limits['coverage_low']} not learned",
      "reconstruction_noise_levels": f"<= {limits['reconstruction_noise_levels_max']} "
      "for learned",
      "sample_noise_levels": f"<= {limits.get('sample_noise_levels_max')} for learned",
    }
  rows["reconstruction_error"] = f"<= {limits['reconstruction_error_max']}"
  rows["operator_norm"] = f"<= {limits['operator_norm_max']}"
  lines = [f"## Verdict: **{verdict['verdict']}**", ""]
  lines += [f"- {reason}" for reason in verdict["reasons"]]
  lines += ["", "| signal | value | threshold |", "|---|---|---|"]
  for name, value in verdict["signals"].items():
    lines.append(f"| {name} | {_cell(value)} | {rows.get(name, '-')} |")
  return lines + [""]


def _members_lines(population) -> list[str]:
  """The population's members: their signals at the selection, the one kept."""
  signals = population["signals"]
  names = [n for n in signals if n != "log_q"]
  kept = population["selected_member"]
  lines = [
    f"## Population: member {kept} kept at step {population['select_step']} "
    f"(by {population['signal']})",
    "",
    f"{population['selection_reason']}.",
    "",
    "| member | " + " | ".join(names) + " | kept |",
    "|---" * (len(names) + 2) + "|",
  ]
  for k in range(len(signals[names[0]])):
    cells = " | ".join(_cell(float(signals[n][k])) for n in names)
    lines.append(f"| {k} | {cells} | {'**yes**' if k == kept else ''} |")
  return lines + [""]


def write_markdown(workdir, numbers, cfg, figures=()):
  """Writes ``summary.md``: the verdict and the population's members where
  the run has them, the numbers as a table, then the figures present
  (``figures``: ``(file name, caption)`` pairs).

  Each metric says which direction is better and what it is read against
  (:data:`METRIC_GUIDE`); those in ``numbers["not_meaningful"]`` are marked.
  """
  doubtful = set(numbers.get("not_meaningful", ()))
  lines = ["# VAELLS run summary", ""]
  if "verdict" in numbers:
    lines += _verdict_lines(numbers["verdict"])
  population = numbers.get("population")
  if population:
    lines += _members_lines(population)
  if doubtful:
    lines += [
      "**The run ended before Psi learning started: the metrics marked "
      "_not meaningful_ measure the operators' random start.**",
      "",
    ]
  lines += [
    "## Metrics",
    "",
    "| metric | value | better | reference |",
    "|---|---|---|---|",
  ]
  for key, value in numbers.items():
    if key in ("not_meaningful", "verdict", "population"):
      continue
    if key == "resumed_from_step" and population:  # the kept member's start
      continue
    better, reference = METRIC_GUIDE.get(key, ("", ""))
    try:
      reference = reference.format(
        **{k: _cell(v) for k, v in numbers.items() if not isinstance(v, list)}
      )
    except KeyError:  # drop the part that quotes a number this run lacks
      reference = re.sub(r"[;:]?[^;:]*\{[^}]*\}", "", reference).strip()
    value = _cell(value) + (" (_not meaningful_)" if key in doubtful else "")
    lines.append(f"| {key} | {value} | {better} | {reference} |")
  lines += [
    "",
    f"Config: steps={cfg.num_steps}, batch={cfg.batch_size}, "
    f"M={cfg.num_ops}, seed={cfg.seed} (full config in config.json).",
    "",
  ]
  for name, caption in figures:
    if (workdir / name).exists():
      lines += [f"## {caption}", "", f"![{caption}]({name})", ""]
  atomic_write_text(workdir / "summary.md", "\n".join(lines))
