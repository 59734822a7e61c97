"""VAELLS: Variational Autoencoder with Learned Latent Structure, in JAX/Flax.

The public names are imported on first use (PEP 562), so that importing
``vaells_jax.config`` or a command's ``--help`` does not load JAX; type
checkers see them through the ``TYPE_CHECKING`` imports below.

Importing the package changes one thing outside it: on jaxlib 0.4.30 to
0.12 it appends ``--xla_cpu_enable_concurrency_optimized_scheduler=false``
to the ``XLA_FLAGS`` environment variable, unless that variable names the
flag already (:data:`SCHEDULER_FLAG`; why: the comment there; docs/library.md).
"""

from __future__ import annotations

import importlib
import os
from importlib import metadata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
  from vaells_jax.api import TrainedBaseline, TrainedVAELLS, load
  from vaells_jax.config import Config
  from vaells_jax.core.expm import expm_small
  from vaells_jax.core.inference import (
    InferenceResult,
    infer_coefficients,
    inference_objective,
  )
  from vaells_jax.core.laplace import laplace_log_prob, sample_laplace
  from vaells_jax.core.transport import transport, transport_path
  from vaells_jax.runs.fit import fit

_PUBLIC = {
  "Config": "vaells_jax.config",
  "TrainedBaseline": "vaells_jax.api",
  "TrainedVAELLS": "vaells_jax.api",
  "load": "vaells_jax.api",
  "expm_small": "vaells_jax.core.expm",
  "fit": "vaells_jax.runs.fit",
  "InferenceResult": "vaells_jax.core.inference",
  "inference_objective": "vaells_jax.core.inference",
  "infer_coefficients": "vaells_jax.core.inference",
  "laplace_log_prob": "vaells_jax.core.laplace",
  "sample_laplace": "vaells_jax.core.laplace",
  "transport": "vaells_jax.core.transport",
  "transport_path": "vaells_jax.core.transport",
}
__all__ = [  # the keys of _PUBLIC, spelled out for type checkers and linters
  "Config",
  "InferenceResult",
  "TrainedBaseline",
  "TrainedVAELLS",
  "expm_small",
  "fit",
  "infer_coefficients",
  "inference_objective",
  "laplace_log_prob",
  "load",
  "sample_laplace",
  "transport",
  "transport_path",
]

__version__ = "0.1.0"

# XLA's CPU runtime can hang for good (0 % CPU) in this package's larger
# programs that mix convolutions with solver loops: a rotated-MNIST
# likelihood chunk hung in 1 of 3 runs with jaxlib 0.10.2, never with its
# concurrency-optimised scheduler off (tests/test_likelihood.py). XLA reads
# XLA_FLAGS when the first computation starts, so the flag is added on import
# unless XLA_FLAGS names it already; only for the jaxlib versions checked to
# know it (0.4.30 to 0.12), since XLA aborts on a flag it does not know.
# The way out: name the flag yourself before importing vaells_jax, e.g.
# XLA_FLAGS=--xla_cpu_enable_concurrency_optimized_scheduler=true.
SCHEDULER_FLAG = "xla_cpu_enable_concurrency_optimized_scheduler"


def _turn_off_concurrent_cpu_scheduler() -> None:
  flags = os.environ.get("XLA_FLAGS", "")
  if SCHEDULER_FLAG in flags:
    return
  try:
    version = tuple(int(p) for p in metadata.version("jaxlib").split(".")[:2])
  except (metadata.PackageNotFoundError, ValueError):
    return
  if (0, 4) <= version <= (0, 12):
    os.environ["XLA_FLAGS"] = f"{flags} --{SCHEDULER_FLAG}=false".strip()


_turn_off_concurrent_cpu_scheduler()


def __getattr__(name: str) -> Any:
  if name in _PUBLIC:
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value
  raise AttributeError(f"module 'vaells_jax' has no attribute {name!r}")


def __dir__() -> list[str]:
  return sorted([*globals(), *_PUBLIC])
