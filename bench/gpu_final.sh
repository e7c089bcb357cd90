#!/usr/bin/env bash
# The GPU runs recorded under bench/results/ (two device calls of at most 10 minutes; see bench/gpu_full.sh for the
# unrestricted version). From the repo root on the GPU machine:  bash bench/gpu_final.sh 1   then   ... 2
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD KBENCH_CACHE=/tmp/kbench-cache
OUT=${OUT:-/tmp/kbench-out}; mkdir -p "$OUT"
python -m pip install -q --no-deps --no-index .carry/wheels/*.whl 2>&1 | grep -v "already satisfied" | tail -3
export KBENCH_GPU_ONLY="level1/relu,level1/gelu,level1/softmax_rows,level1/layer_norm,level1/sum_dim1,level1/matmul_square,level2/linear_relu,level2/linear_gelu_scale,level2/conv2d_relu_bias,robust/layernorm_forward,robust/rmsnorm_forward,robust/softmax_cross_entropy_forward"
if [ "${1:-1}" = 1 ]; then
  timeout 210 python bench/gpu_validate.py --backends cuda --only "$KBENCH_GPU_ONLY" --compile none --workers 16 \
    --out "$OUT/gpu_solutions" 2>&1 | tail -16
  timeout 200 python bench/throughput.py --device cuda --n 8 --naive 1 --cold 1 --workers 16 \
    --out "$OUT/throughput_h100.md" 2>&1 | tail -12
  timeout 160 python -m pytest -q -m gpu tests/test_gpu.py -p no:cacheprovider -k "not triton" 2>&1 | tee "$OUT/gpu_tests.txt" | tail -15
elif [ "${1:-1}" = 3 ]; then  # what one last device call could hold: solutions, GPU tests, agent, training
  timeout 170 python bench/gpu_validate.py --backends cuda --only "$KBENCH_GPU_ONLY" --compile none --workers 16 \
    --out "$OUT/gpu_solutions" 2>&1 | tail -16
  timeout 130 python -m pytest -q -m gpu tests/test_gpu.py -p no:cacheprovider -k "not triton" 2>&1 | tee "$OUT/gpu_tests.txt" | tail -8
  timeout 230 python -m kbench_apps.cli run --suite robust/layernorm_forward,robust/rmsnorm_forward,robust/softmax_cross_entropy_forward \
    --agent evolutionary --device cuda --budget 2 --out "$OUT/evolutionary_cuda.jsonl" --fresh 2>&1 | tail -12
  OUT=$OUT/train timeout 55 bash bench/train_gpu.sh 2>&1 | tail -8
else
  timeout 150 python -m kbench_apps.cli run --suite robust/layernorm_forward,robust/rmsnorm_forward,robust/softmax_cross_entropy_forward \
    --agent evolutionary --device cuda --budget 3 --out "$OUT/evolutionary_cuda.jsonl" --fresh 2>&1 | tail -14
  timeout 140 bash bench/train_gpu.sh "$OUT/train_gpu.log" 2>&1 | tail -12
fi
ls "$OUT"
