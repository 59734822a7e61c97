#!/bin/bash
# A whole experiment run on the device machine, continued from one call to
# the next: by default nat_mnist at the paper's budget with M = 8 operators
# (N_a = 8 anchors per class), on the paper's split of the MNIST files in
# MNIST_DIR. The run gets RUN_SECONDS of the call (default 540); then
# SIGTERM stops it after a step, with a checkpoint. Either way OUT receives
#   run.tgz    the run's folder without its copy of the data (config, the
#              latest checkpoint, metrics; once evaluated, summary.json and
#              .md and the figures)
#   run.log    the run's output
#   call.json  this call: device, jax and CUDA versions, flags, the step it
#              started from and the one it reached, its seconds, exit status
# A run cut short continues in the next call given RUN_TGZ=<that run.tgz>
# (carried) and the same flags; a run whose training ended but whose
# evaluation was cut evaluates then.
#
#   OUT=$OUT MNIST_DIR=.device/mnist-full WHEELS=.device/whl \
#     [RUN_TGZ=.device/run.tgz] [RUN_SECONDS=540] \
#     bash studies/device/device_run.sh [experiments/run.py flags]
#
# Flags, where given, replace the default --exp=nat_mnist --config.num_ops=8.
# Where jaxopt is missing, WHEELS names a folder of wheels to install first.
set -e -o pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.}
PY=${PYTHON:-python3}
WORK=${WORK:-/tmp/device_run}
if [ -n "$WHEELS" ]; then
  $PY -m pip install -q --no-index --no-deps --target /tmp/site "$WHEELS"/*.whl
  export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null || true
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(--exp=nat_mnist --config.num_ops=8)
[ -z "$MNIST_DIR" ] || flags+=("--data-dir=$MNIST_DIR")
rm -rf "$WORK" && mkdir -p "$WORK"
if [ -n "$RUN_TGZ" ]; then
  tar -xzf "$RUN_TGZ" -C "$WORK"
  flags+=(--resume)
fi
# A run's checkpoints: one folder per step, in checkpoints/ (one member) or
# population/checkpoints/ (a population).
steps() { ls "$WORK/checkpoints" "$WORK/population/checkpoints" 2>/dev/null | grep -E '^[0-9]+$' || true; }
latest() { steps | sort -n | tail -1; }
from=$(latest)
began=$(date +%s.%N)
set +e
timeout --preserve-status -s TERM -k 60 "${RUN_SECONDS:-540}" \
  $PY experiments/run.py "${flags[@]}" "--workdir=$WORK" 2>&1 | tee "$OUT/run.log"
rc=$?
set -e
ended=$(date +%s.%N)
reached=$(latest)
# Only the latest checkpoint travels back; the run needs no other to resume.
excludes=(--exclude=./dataset.npz --exclude=./.lock)
for step in $(steps); do
  [ "$step" = "$reached" ] || excludes+=("--exclude=./checkpoints/$step" \
    "--exclude=./population/checkpoints/$step")
done
tar -czf "$OUT/run.tgz" -C "$WORK" "${excludes[@]}" .
$PY - "$OUT/call.json" "$rc" "${from:-0}" "${reached:-0}" "$began" "$ended" \
  "$WORK" "${flags[@]}" <<'EOF'
import json, pathlib, sys

import jax

out, rc, start, reached, began, ended, work, *flags = sys.argv[1:]
device = jax.devices()[0]
call = {
  "device": getattr(device, "device_kind", str(device)),
  "platform": device.platform,
  "environment": jax.print_environment_info(return_string=True),
  "flags": flags,
  "from_step": int(start),
  "reached_step": int(reached),
  "seconds": float(ended) - float(began),
  "exit_status": int(rc),
  "evaluated": pathlib.Path(work, "summary.json").exists(),
}
pathlib.Path(out).write_text(json.dumps(call, indent=2))
print(json.dumps(call, indent=2))
EOF
exit $rc
