#!/usr/bin/env bash
# Issue #36: the fresh KernelBench batch (bench/gpu_session.sh steady, PASSES=cold) on several trees, one after
# another in one device call on one machine, each with every cache empty (kbench's build and reference caches,
# inductor's and Triton's), the files every batch reads (torch's headers, CUDA's compilers) read once before the
# first so that it does not pay their first reads alone. From the repo root on the GPU machine, carrying
# .carry/wheels and the other trees (e.g. `git archive <rev> | tar -x -C .carry/before`):
#
#   bash bench/probes/fresh_ab.sh before=.carry/before after=.
#
# Each batch ends by $END seconds from its own start (default 270); everything comes back in $OUT/fresh_ab.tgz.
set -uo pipefail
OUT=${OUT:-/tmp/kbench-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .carry/wheels/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site
lscpu > "$OUT/lscpu.txt"; nproc >> "$OUT/lscpu.txt"
TORCH=$(python3 -c "import os, torch; print(os.path.dirname(torch.__file__))")
CUDA=$(dirname "$(dirname "$(command -v nvcc)")")
find "$TORCH/include" "$CUDA/bin" "$CUDA/nvvm" "$CUDA/include" -type f -print0 2>/dev/null | xargs -0 cat > /dev/null
root=$PWD
for spec in "$@"; do
  name=${spec%%=*} dir=${spec#*=}
  rm -rf /tmp/torchinductor_* ~/.triton /root/.cache/torch /tmp/kbench-cache-"$name"*
  echo "=== $name ($dir) $(date -u +%H:%M:%S)"
  (cd "$dir" && env START=$(date +%s) OUT="$OUT/$name" KBENCH_CACHE=/tmp/kbench-cache-"$name" FORMAT=kernelbench \
    TASKS=${TASKS:-24} PER=1 PASSES=cold END=${END:-270} bash "$root/bench/gpu_session.sh" steady 2>&1 | tail -30)
done
tar czf "$OUT/fresh_ab.tgz" -C "$OUT" lscpu.txt "${@%%=*}" 2>/dev/null || tar czf "$OUT/fresh_ab.tgz" -C "$OUT" .
for spec in "$@"; do rm -rf "$OUT/${spec%%=*}"; done
