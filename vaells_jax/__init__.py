"""VAELLS: Variational Autoencoder with Learned Latent Structure, in JAX/Flax.

The public names are imported on first use (PEP 562), so that importing
``vaells_jax.config`` or a command's ``--help`` does not load JAX.
"""

import importlib

_PUBLIC = {
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
__all__ = list(_PUBLIC)

__version__ = "0.1.0"


def __getattr__(name):
  if name in _PUBLIC:
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value
  raise AttributeError(f"module 'vaells_jax' has no attribute {name!r}")


def __dir__():
  return sorted([*globals(), *_PUBLIC])
