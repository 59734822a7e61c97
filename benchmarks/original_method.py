"""The original method inside a training step, and a training step's own pairs.

Import this module before NumPy is imported (the benchmark scripts do, first
thing): it pins BLAS and OpenMP to one thread (``OMP_NUM_THREADS``,
``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS`` = 1), as a single-threaded
baseline needs. :data:`BLAS_PINNED` says whether that took effect (False when
NumPy was loaded first, e.g. in a test process, and the variables were not
already 1).

* :func:`original_step_coefficients`: a drop-in for
  :func:`vaells_jax.models.vaells.infer_step_coefficients` that runs the
  original method (:func:`scipy_reference.original_step_inference`:
  per pair, anchor and restart, scipy CG with ``tol=10^-7``, 50 iterations,
  the original's start ranges and gradient) on the host through
  ``jax.pure_callback``;
* :func:`trained_state`: an experiment's training state after ``steps`` steps
  of the library's own training step (batches and keys as the training loop
  draws them);
* :func:`capture_step_pairs`: the exact ``(Psi, mu, anchors, z, key)`` one
  training step hands to its inference, taken from inside the jitted step.
"""

from __future__ import annotations

import os
import sys

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
_NUMPY_FIRST = "numpy" in sys.modules
BLAS_PINNED = all(os.environ.get(v) == "1" for v in THREAD_VARIABLES) or (
  not _NUMPY_FIRST
)
for _variable in THREAD_VARIABLES:
  os.environ[_variable] = "1"

import dataclasses  # noqa: E402
import importlib  # noqa: E402
import pathlib  # noqa: E402
from unittest import mock  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # tests/: scipy_reference

from scipy_reference import (  # noqa: E402
  ORIGINAL_MAX_ITER,
  original_step_inference,
)

from vaells_jax.api import DATA_NAME  # noqa: E402
from vaells_jax.config import CONFIG_NAME, config_from_json  # noqa: E402
from vaells_jax.core.inference import InferenceResult  # noqa: E402
from vaells_jax.data.dataset import load_dataset  # noqa: E402
from vaells_jax.experiments import make_data  # noqa: E402
from vaells_jax.models import vaells as model_lib  # noqa: E402
from vaells_jax.training import step as train  # noqa: E402
from vaells_jax.training.checkpoint import restore_checkpoint  # noqa: E402
from vaells_jax.training.guards import batch_indices, run_identity  # noqa: E402

DEFAULT_MNIST = ROOT.parent / "shared" / "data" / "mnist"
PAIR_KEYS = ("psi", "mu", "anchors", "z")


def original_pair_solves(config, num_anchors: int) -> int:
  """CG solves of one step by the original: ``B S (1 + A R)`` (one posterior
  start)."""
  samples = config.batch_size * config.num_samples
  return samples * (1 + num_anchors * config.num_restarts)


def our_pair_solves(config, num_anchors: int) -> int:
  """Pair-solves of one library step: ``B S (P + A R)``, ``P`` posterior
  starts (``config.posterior_restarts``; ``R`` when the two solves are shared
  because ``P = R``)."""
  samples = config.batch_size * config.num_samples
  return samples * (config.posterior_restarts + num_anchors * config.num_restarts)


def original_step_coefficients(model, psi, mu, anchors, z, key):
  """:func:`~vaells_jax.models.vaells.infer_step_coefficients` by the original method.

  Same arguments and result type; the starts are the original's ranges
  (drawn by NumPy from a seed taken from ``key``), not the config's.
  """
  cfg = model.config
  batch, samples, _ = z.shape
  num_anchors, num_ops = anchors.shape[1], psi.shape[0]
  seed = jax.random.bits(key, (2,), jnp.uint32)

  def host(psi, mu, anchors, z, seed):
    step = original_step_inference(
      psi,
      mu,
      anchors,
      z,
      cfg.zeta_q,
      cfg.zeta_p,
      cfg.num_restarts,
      np.random.default_rng(np.asarray(seed)),
    )
    nit = step.iterations
    return (
      step.posterior_coeffs.astype(np.float32),
      step.posterior_objective.astype(np.float32),
      nit[..., 0].astype(np.int32),
      step.prior_coeffs.astype(np.float32),
      step.prior_objective.astype(np.float32),
      nit[..., 1:].reshape(batch, samples, num_anchors, -1).max(-1).astype(np.int32),
    )

  post, prior = (batch, samples), (batch, samples, num_anchors)
  shapes = (
    jax.ShapeDtypeStruct(post + (num_ops,), jnp.float32),
    jax.ShapeDtypeStruct(post, jnp.float32),
    jax.ShapeDtypeStruct(post, jnp.int32),
    jax.ShapeDtypeStruct(prior + (num_ops,), jnp.float32),
    jax.ShapeDtypeStruct(prior, jnp.float32),
    jax.ShapeDtypeStruct(prior, jnp.int32),
  )
  out = jax.pure_callback(host, shapes, psi, mu, anchors, z, seed)

  def result(coeffs, objective, nit):
    return InferenceResult(coeffs, objective, nit, nit < ORIGINAL_MAX_ITER)

  return model_lib.StepInference(result(*out[:3]), result(*out[3:]))


def original_train_step(model):
  """The jitted training step with :func:`original_step_coefficients` inside."""
  step = train.make_train_step(model)

  def run(state, batch, key):
    swap = original_step_coefficients
    with mock.patch.object(train, "infer_step_coefficients", swap):
      return step(state, batch, key)  # traced on the first call, under the patch

  return run


def add_solver_flags(parser) -> None:
  """``--inference-method`` and ``--max-iter``: the solver of the library's
  step, overriding the experiment config's (:func:`solver_overrides`)."""
  parser.add_argument(
    "--inference-method",
    default=None,
    help="config.inference_method of the vaells_jax step (fista, lm, pgd, "
    "gauss_newton, exact)",
  )
  parser.add_argument(
    "--max-iter", type=int, default=None, help="config.inference_max_iter of ours"
  )


def solver_overrides(args) -> dict:
  """The config overrides that :func:`add_solver_flags`' flags ask for."""
  overrides = {}
  if args.inference_method:
    overrides["inference_method"] = args.inference_method
  if args.max_iter:
    overrides["inference_max_iter"] = args.max_iter
  return overrides


def experiment(name: str, budget: str = "paper", mnist_dir=DEFAULT_MNIST, **overrides):
  """``(config, data, model)`` of an experiment; a population runs as one member."""
  module = importlib.import_module(f"vaells_jax.experiments.{name}")
  config = module.get_config(budget if name.endswith("mnist") else "paper")
  config = dataclasses.replace(config, population=1, **overrides)
  data = make_data(name, config, mnist_dir)
  return config, data, model_lib.Model.create(config, data.data_dim)


def step_batch(config, data, step: int):
  """The batch and key the training loop uses at ``step``."""
  idx = batch_indices(config.seed, step, data.x_train.shape[0], config.batch_size)
  batch = {
    "x": jnp.asarray(data.x_train[idx], jnp.float32),
    "label": jnp.asarray(data.labels_train[idx], jnp.int32),
  }
  return batch, jax.random.fold_in(jax.random.PRNGKey(config.seed + 1), step)


def seed_state(config, data, step: int = 0):
  """The state a run's seed initialises, its step counter set to ``step``
  (``config.warmup_steps``: the first step that infers coefficients)."""
  state = train.init_state(
    jax.random.PRNGKey(config.seed), config, data.anchors, data.data_dim
  )
  return state.replace(step=jnp.asarray(step, jnp.int32))


def restore_run(run_dir):
  """``(config, data, start, state)`` of a run's workdir: its config and data,
  the state its seed initialises, and its latest checkpoint (verified against
  both; a population's kept member)."""
  run_dir = pathlib.Path(run_dir)
  config = config_from_json(run_dir / CONFIG_NAME)
  data = load_dataset(run_dir / DATA_NAME)
  start = seed_state(config, data)
  state = restore_checkpoint(run_dir, start, identity=run_identity(config, data))
  return config, data, start, state


def trained_state(config, data, model, steps: int):
  """The state after ``steps`` steps of the library's training step.

  Trained on the CPU backend whatever the default device (a GPU's launch-bound
  synthetic steps would make this the longest part of a benchmark, and every
  device then times the same state), then placed on the default device.
  """
  with jax.default_device(jax.devices("cpu")[0]):
    state = seed_state(config, data)
    step_fn = train.make_train_step(model)
    for step in range(steps):
      state, _ = step_fn(state, *step_batch(config, data, step))
  return jax.device_put(jax.block_until_ready(state), jax.devices()[0])


def capture_step_pairs(model, state, batch, key) -> dict:
  """What the training step at ``state`` hands to its inference.

  Runs the jitted step once with
  :func:`~vaells_jax.models.vaells.infer_step_coefficients` wrapped so that
  its arguments and result come back to the host.

  Returns:
    ``{"psi" [M, d, d], "mu" [B, d], "anchors" [B, A, d], "z" [B, S, d],
    "key", "ours": StepInference}`` (NumPy arrays, the step's float32).

  Raises:
    ValueError: if the step at ``state`` infers no coefficients (warm-up).
  """
  captured = {}
  real = train.infer_step_coefficients

  def record(model, psi, mu, anchors, z, key):
    result = real(model, psi, mu, anchors, z, key)

    def keep(*arrays):
      names = (*PAIR_KEYS, "key", "ours")
      captured.update(zip(names, arrays, strict=True))

    jax.debug.callback(keep, psi, mu, anchors, z, _raw(key), result)
    return result

  step = jax.jit(train.train_step_fn(model))
  with mock.patch.object(train, "infer_step_coefficients", record):
    jax.block_until_ready(step(state, batch, key))
  if not captured:
    raise ValueError(f"the step at {int(state.step)} infers nothing (warm-up).")
  return jax.tree_util.tree_map(np.asarray, captured)


def _raw(key):
  """A key as its raw ``uint32`` data (typed keys are unwrapped)."""
  if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
    return jax.random.key_data(key)
  return key
