"""VAELLS: Variational Autoencoder with Learned Latent Structure, in JAX/Flax."""

from vaells_jax.api import TrainedBaseline, TrainedVAELLS, load
from vaells_jax.expm import expm_small
from vaells_jax.fit import fit
from vaells_jax.inference import (
    InferenceResult,
    infer_coefficients,
    inference_objective,
)
from vaells_jax.laplace import laplace_log_prob, sample_laplace
from vaells_jax.transport import transport, transport_path

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
