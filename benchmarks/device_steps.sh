#!/bin/bash
# Every experiment's training step on an accelerator machine, in one script
# run: first on the machine's CPU through JAX's CPU backend (cores 4-15), with
# the original method's step (one thread) for the synthetic experiments,
# then on the accelerator alone. MNIST_DIR: the IDX files; OUT: where the
# logs and JSON rows go.
#
#   OUT=/tmp/steps MNIST_DIR=../shared/data/mnist bash benchmarks/device_steps.sh
set -e
OUT=${OUT:-.}
MNIST_DIR=${MNIST_DIR:-../shared/data/mnist}
cd "$(dirname "$0")/.."
JAX_PLATFORMS=cpu taskset -c 4-15 python3 benchmarks/train_step.py --repeats 2 \
  --original-for=concentric,swiss_roll --mnist-dir "$MNIST_DIR" \
  --json "$OUT/step_cpu.json" | tee "$OUT/step_cpu.log"
python3 benchmarks/train_step.py --repeats 3 --original-for=none \
  --mnist-dir "$MNIST_DIR" --json "$OUT/step_gpu.json" | tee "$OUT/step_gpu.log"
