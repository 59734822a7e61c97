"""VAELLS: Variational Autoencoder with Learned Latent Structure, in JAX/Flax."""

from vaells_jax.api import TrainedBaseline, TrainedVAELLS, load
from vaells_jax.core.expm import expm_small
from vaells_jax.core.inference import (
  InferenceResult,
  infer_coefficients,
  inference_objective,
)
from vaells_jax.core.laplace import laplace_log_prob, sample_laplace
from vaells_jax.core.transport import transport, transport_path
from vaells_jax.runs.fit import fit

__all__ = [
  "TrainedBaseline",
  "TrainedVAELLS",
  "load",
  "expm_small",
  "fit",
  "InferenceResult",
  "inference_objective",
  "infer_coefficients",
  "laplace_log_prob",
  "sample_laplace",
  "transport",
  "transport_path",
]

__version__ = "0.1.0"
