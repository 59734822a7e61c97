"""Training-step time of each experiment, against the original method of inference.

For every experiment config, times one jitted VAELLS training step (after
warm-up, so the step infers coefficients) twice, in one run and on the same
state, batch and key:

* ``vaells_jax``: the library's step, one batched proximal-gradient solve;
* ``scipy_cg``: the same step with the original research code's inference
  swapped in: per pair and per restart ``scipy.optimize.minimize(method="CG",
  maxiter=50)`` with the analytic gradient (:mod:`vaells_jax.core.reference`),
  called from the step through ``jax.pure_callback``, from the same starts.

Compile time is reported apart from the steady-state time (minimum and median
over repeats, after ``block_until_ready``). For configs with a warm-up (the
MNIST experiments), a warm-up step (reconstruction only, no inference) is
timed too, and the training time of the whole budget is estimated as
``warmup x warm-up step + (steps - warmup) x step`` for both methods
(training only: compilation and evaluation come on top).

Usage::

    python benchmarks/train_step.py            # 5 repeats
    python benchmarks/train_step.py --quick    # CI smoke mode (1 repeat)
    python benchmarks/train_step.py --experiments=concentric \
      --inference-method=pgd --skip-cg         # the step with the pgd solver
    python benchmarks/train_step.py --budget=cpu   # MNIST steps as configured
                                                   # for the CPU budget
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import pathlib
import sys
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import vaells_jax  # noqa: E402
from experiments.run import make_data  # noqa: E402
from vaells_jax.core.inference import InferenceResult, solver_starts  # noqa: E402
from vaells_jax.core.reference import infer_pairs_cg  # noqa: E402
from vaells_jax.models import vaells as model_lib  # noqa: E402
from vaells_jax.training import step as train  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from inference_speed import timed  # noqa: E402

EXPERIMENTS = ("concentric", "swiss_roll", "rot_mnist", "nat_mnist")
DEFAULT_MNIST = ROOT.parent / "shared" / "data" / "mnist"
CG_ITERATIONS = 50  # the original code's setting


def cg_infer_coefficients(
  psi,
  z0,
  z1,
  *,
  l1_weight,
  key,
  num_restarts=1,
  init_range=(0.0, 1.0),
  max_iter=None,
  tol=None,
  method=None,
):
  """``infer_coefficients`` with the original per-pair scipy CG inside.

  Same signature, same starts (:func:`vaells_jax.core.inference.solver_starts`)
  and same result type; ``max_iter``, ``tol`` and ``method`` are ignored for
  the original method's 50 CG iterations.
  """
  del max_iter, tol, method
  num_ops = psi.shape[0]
  batch = jnp.broadcast_shapes(
    z0.shape[:-1],
    z1.shape[:-1],
    jnp.shape(l1_weight),
    jnp.shape(init_range[0]),
    jnp.shape(init_range[1]),
  )
  flat = lambda a, tail=(): jnp.broadcast_to(a, batch + tail).reshape(  # noqa: E731
    (-1,) + tail
  )
  z0, z1 = flat(z0, z0.shape[-1:]), flat(z1, z1.shape[-1:])
  l1, lo, hi = flat(l1_weight), flat(init_range[0]), flat(init_range[1])
  init = solver_starts(key, num_restarts, num_ops, lo, hi)

  def host(psi, z0, z1, l1, init):
    coeffs, objective = infer_pairs_cg(psi, z0, z1, l1, init, CG_ITERATIONS)
    return coeffs.astype(np.float32), objective.astype(np.float32)

  shapes = (
    jax.ShapeDtypeStruct(init.shape[1:], jnp.float32),
    jax.ShapeDtypeStruct(init.shape[1:2], jnp.float32),
  )
  coeffs, objective = jax.pure_callback(host, shapes, psi, z0, z1, l1, init)
  return InferenceResult(
    coeffs.reshape(batch + (num_ops,)),
    objective.reshape(batch),
    jnp.full(batch, CG_ITERATIONS, jnp.int32),
    jnp.ones(batch, bool),
  )


def _times(fn, repeats):
  first, best, median, _ = timed(fn, repeats)
  return {"first_s": first, "min_s": best, "median_s": median}


def run_experiment(
  name: str,
  repeats: int,
  budget: str = "paper",
  mnist_dir=DEFAULT_MNIST,
  inference_method: str | None = None,
  skip_cg: bool = False,
) -> dict:
  module = importlib.import_module(f"experiments.configs.{name}")
  config = module.get_config(budget if name.endswith("mnist") else "paper")
  if inference_method:
    config = dataclasses.replace(config, inference_method=inference_method)
  data = make_data(name, config, mnist_dir)
  model = model_lib.Model.create(config, data.data_dim)
  state = train.init_state(jax.random.PRNGKey(0), config, data.anchors, data.data_dim)
  # A step past warm-up, so that it infers coefficients.
  state = state.replace(step=jnp.asarray(config.warmup_steps, jnp.int32))
  batch = {
    "x": jnp.asarray(data.x_train[: config.batch_size], jnp.float32),
    "label": jnp.asarray(data.labels_train[: config.batch_size]),
  }
  key = jax.random.PRNGKey(1)
  ours = train.make_train_step(model)
  original_time = dict.fromkeys(("first_s", "min_s", "median_s"), float("nan"))
  if not skip_cg:
    with mock.patch.object(model_lib, "infer_coefficients", cg_infer_coefficients):
      original = train.make_train_step(model)
      original_time = _times(lambda: original(state, batch, key), repeats)
  our_time = _times(lambda: ours(state, batch, key), repeats)
  warmup_s = 0.0
  if config.warmup_steps:  # The same for both methods: no inference.
    warm = state.replace(step=jnp.asarray(0, jnp.int32))
    warmup_s = _times(lambda: ours(warm, batch, key), repeats)["min_s"]
  anchors = config.rotation_anchors or data.anchors.shape[1]
  pairs = config.batch_size * config.num_samples * (1 + anchors)
  rest = config.num_steps - config.warmup_steps
  return {
    "experiment": name,
    "pair_solves_per_step": pairs * config.num_restarts,
    "vaells_jax": our_time,
    "scipy_cg": original_time,
    "speedup": original_time["min_s"] / our_time["min_s"],
    "warmup_step_s": warmup_s,
    "estimated_training_s": {
      method: config.warmup_steps * warmup_s + rest * times["min_s"]
      for method, times in (("vaells_jax", our_time), ("scipy_cg", original_time))
    },
  }


def main(argv=None) -> list[dict]:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="1 repeat (CI)")
  parser.add_argument("--repeats", type=int, default=None)
  parser.add_argument("--experiments", default=",".join(EXPERIMENTS))
  parser.add_argument(
    "--budget",
    default="paper",
    choices=("paper", "cpu"),
    help="config of the MNIST experiments",
  )
  parser.add_argument("--mnist-dir", default=str(DEFAULT_MNIST))
  parser.add_argument(
    "--inference-method",
    default=None,
    help="override config.inference_method (fista, lm, pgd) of the vaells_jax step",
  )
  parser.add_argument(
    "--skip-cg", action="store_true", help="time the vaells_jax step only"
  )
  args = parser.parse_args(argv)
  repeats = args.repeats or (1 if args.quick else 5)
  print(
    f"device={jax.devices()[0]} jax={jax.__version__} "
    f"vaells_jax={vaells_jax.__version__} repeats={repeats} "
    f"mnist budget={args.budget}"
  )
  rows = [
    run_experiment(
      name,
      repeats,
      args.budget,
      args.mnist_dir,
      args.inference_method,
      args.skip_cg,
    )
    for name in args.experiments.split(",")
  ]
  print(
    "| experiment | pair-solves/step | vaells_jax step ms (min / median) "
    "| compile s | scipy CG step ms (min / median) | speedup |"
  )
  print("|---|---|---|---|---|---|")
  for r in rows:
    ours, cg = r["vaells_jax"], r["scipy_cg"]
    print(
      f"| {r['experiment']} | {r['pair_solves_per_step']} "
      f"| {1e3 * ours['min_s']:.1f} / {1e3 * ours['median_s']:.1f} "
      f"| {ours['first_s'] - ours['median_s']:.1f} "
      f"| {1e3 * cg['min_s']:.0f} / {1e3 * cg['median_s']:.0f} "
      f"| {r['speedup']:.0f}x |"
    )
  print()
  print(
    "| experiment | warm-up step ms | estimated training, vaells_jax "
    "| estimated training, scipy CG |"
  )
  print("|---|---|---|---|")
  for r in rows:
    est = r["estimated_training_s"]
    print(
      f"| {r['experiment']} | {1e3 * r['warmup_step_s']:.1f} "
      f"| {est['vaells_jax'] / 3600:.2f} h | {est['scipy_cg'] / 3600:.2f} h |"
    )
  return rows


if __name__ == "__main__":
  main()
