#!/usr/bin/env bash
# The recorded GPU runs, in two parts that each fit one 10-minute device call. From the repo root on the GPU
# machine: `bash bench/gpu_full.sh A` then `bash bench/gpu_full.sh B`. Outputs go to $OUT (and are copied into
# bench/results/ by the session that ran them).
#   A: GPU tests (solutions, adversarial candidates, GPU faults), validation of every CUDA/Triton sample solution,
#      the throughput benchmark.
#   B: the evolutionary agent (offline proposer) on 3 CUDA tasks, a short GRPO training run with the CUDA backend.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD KBENCH_CACHE=/tmp/kbench-cache
OUT=${OUT:-/tmp/kbench-out}; mkdir -p "$OUT"
python -m pip install -q --no-deps --no-index .carry/wheels/*.whl 2>&1 | grep -v "already satisfied" | tail -3
python -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())"
part=${1:-A}
if [ "$part" = A ]; then
  timeout 250 python bench/gpu_validate.py --workers 16 --out "$OUT/gpu_solutions" 2>&1 | tail -30
  timeout 150 python -m pytest -q -m gpu $(ls tests/test_gpu*.py) -p no:cacheprovider 2>&1 | tee "$OUT/gpu_tests.txt" | tail -25
  timeout 185 python bench/throughput.py --device cuda --n 16 --naive 1 --cold 1 --workers 16 --out "$OUT/throughput_h100.md" 2>&1 | tail -14
else
  timeout 330 python -m kbench_apps.cli run --suite robust/layernorm_forward,robust/rmsnorm_forward,robust/softmax_cross_entropy_forward \
    --agent evolutionary --device cuda --budget 4 --out "$OUT/evolutionary_cuda.jsonl" --fresh 2>&1 | tail -20
  timeout 230 bash bench/train_gpu.sh "$OUT/train_gpu.log" 2>&1 | tail -25
fi
ls -la "$OUT"
