#!/bin/bash
# The device machine's run, one call end to end: benchmarks/device_steps.py
# on the accelerator (every experiment's step on the initial and trained
# states, the population step, the likelihood protocol), then the synthetic
# steps with the fused solver (gauss_newton_fused, after its tests; then
# also in CUDA graphs), then every step with XLA's command buffers taking
# loops and conditionals too, then with the CPU's solver paths (the chunked
# solves and conditionals a CPU gets), then the synthetic steps on 2 of the
# host's cores. Each part writes its JSON and log under OUT as it ends, so
# a part cut short loses only itself.
#
#   OUT=/tmp/steps MNIST_DIR=../shared/data/mnist STATES=DIR \
#     bash studies/device/device_steps.sh
#
# STATES: the trained states (device_steps.py --make-states on a CPU). Where
# jaxopt is missing, WHEELS names a folder of wheels to install first.
set -e
cd "$(dirname "$0")/../.."
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
# The synthetic steps with the solve as one Pallas (Triton) kernel; first
# its tests on this GPU (where pytest is installed).
if $PY -c "import pytest" 2>/dev/null; then
  $PY -m pytest -q -p no:cacheprovider -o addopts= tests/test_gauss_newton_fused.py \
    2>&1 | tee "$OUT/fused_tests.log" || true
fi
FUSED="--experiments=concentric,swiss_roll --method=gauss_newton_fused --ll-points=0"
run device_fused env -- $FUSED
GRAPHS="--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,CONDITIONAL,WHILE"
GRAPHS="$GRAPHS --xla_gpu_graph_min_graph_size=1"
# Without loops the fused steps are long straight lines for one CUDA graph.
run device_fused_graphs env "XLA_FLAGS=$GRAPHS" -- $FUSED --population=
run device_graphs env "XLA_FLAGS=$GRAPHS" -- --population= --ll-points=0
run device_cpu_paths env VAELLS_CPU_PATHS=1 -- --population= --ll-points=0
run host_cpu env JAX_PLATFORMS=cpu taskset -c 0,1 -- \
  --experiments=concentric,swiss_roll --population= --ll-points=0 --repeats=5
