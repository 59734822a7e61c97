"""Why the warm start's pretraining calls its step from a Python loop and not
from ``jax.lax.scan``: the same Adam step of fit's image networks (28 x 28,
batch 32), timed both ways in one process.

``python studies/images/pretrain_loop.py --steps=200
--out=docs/results/image_pretrain_loop.json``
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

import jax
import jax.numpy as jnp
import optax

from vaells_jax.models.networks import ImageDecoder, ImageEncoder
from vaells_jax.runs.fit import IMAGE_CHANNELS, IMAGE_LATENT_DIM


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--steps", type=int, default=200)
  parser.add_argument("--out", default="image_pretrain_loop.json")
  args = parser.parse_args(argv)
  shape, batch = (28, 28, 1), 32
  x = jax.random.normal(jax.random.PRNGKey(0), (450, 784))
  encoder = ImageEncoder(IMAGE_LATENT_DIM, shape, IMAGE_CHANNELS)
  decoder = ImageDecoder(shape, IMAGE_CHANNELS)
  params = {
    "encoder": encoder.init(jax.random.PRNGKey(1), x[:1]),
    "decoder": decoder.init(jax.random.PRNGKey(2), jnp.ones((1, IMAGE_LATENT_DIM))),
  }
  optimizer = optax.adam(1e-3)

  def loss(p, idx):
    z = encoder.apply(p["encoder"], x[idx])
    return jnp.mean((x[idx] - decoder.apply(p["decoder"], z)) ** 2)

  def step(carry, key):
    p, state = carry
    idx = jax.random.randint(key, (batch,), 0, x.shape[0])
    updates, state = optimizer.update(jax.grad(loss)(p, idx), state, p)
    return (optax.apply_updates(p, updates), state), None

  keys = jax.random.split(jax.random.PRNGKey(3), args.steps)
  one = jax.jit(step)
  scanned = jax.jit(lambda carry, keys: jax.lax.scan(step, carry, keys)[0])
  start = (params, optimizer.init(params))
  jax.block_until_ready(one(start, keys[0]))  # compile both first
  jax.block_until_ready(scanned(start, keys))
  began = time.perf_counter()
  carry = start
  for key in keys:
    carry = one(carry, key)[0]
  jax.block_until_ready(carry)
  loop = args.steps / (time.perf_counter() - began)
  began = time.perf_counter()
  jax.block_until_ready(scanned(start, keys))
  scan = args.steps / (time.perf_counter() - began)
  print(f"steps a second: Python loop {loop:.1f}, lax.scan {scan:.1f}")
  result = {"loop_steps_per_s": loop, "scan_steps_per_s": scan, "steps": args.steps}
  pathlib.Path(args.out).write_text(json.dumps(result, indent=2))
  return result


if __name__ == "__main__":
  main()
