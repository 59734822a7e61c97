#!/bin/bash
# The device machine's run, one call end to end: benchmarks/device_steps.py
# on the accelerator (every experiment's step on the initial and trained
# states, the population step, the likelihood protocol), then its steps with
# XLA's command buffers taking loops and conditionals too, then with the
# CPU's solver paths (the chunked solves and conditionals a CPU gets), then
# the synthetic steps on 2 of the host's cores. Each part writes its JSON and
# log under OUT as it ends, so a part cut short loses only itself.
#
#   OUT=/tmp/steps MNIST_DIR=../shared/data/mnist STATES=DIR \
#     bash benchmarks/device_steps.sh
#
# STATES: the trained states (device_steps.py --make-states on a CPU). Where
# jaxopt is missing, WHEELS names a folder of wheels to install first.
set -e
cd "$(dirname "$0")/.."
OUT=${OUT:-.}
MNIST_DIR=${MNIST_DIR:-../shared/data/mnist}
STATES=${STATES:-}
PY=${PYTHON:-python3}
if [ -n "$WHEELS" ]; then
  $PY -m pip install -q --no-index --no-deps --target /tmp/site "$WHEELS"/*.whl
  export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
run() { # NAME COMMAND-PREFIX... -- ARGS...
  local name=$1; shift
  local prefix=(); while [ "$1" != "--" ]; do prefix+=("$1"); shift; done; shift
  "${prefix[@]}" $PY benchmarks/device_steps.py --states "$STATES" \
    --mnist-dir "$MNIST_DIR" --json "$OUT/$name.json" "$@" 2>&1 | tee "$OUT/$name.log"
}
run device env -- --ll-seconds "${LL_SECONDS:-60}"
GRAPHS="--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,CONDITIONAL,WHILE"
run device_graphs env "XLA_FLAGS=$GRAPHS --xla_gpu_graph_min_graph_size=1" -- \
  --population= --ll-points=0
run device_cpu_paths env VAELLS_CPU_PATHS=1 -- --population= --ll-points=0
run host_cpu env JAX_PLATFORMS=cpu taskset -c 0,1 -- \
  --experiments=concentric,swiss_roll --population= --ll-points=0 --repeats=5
