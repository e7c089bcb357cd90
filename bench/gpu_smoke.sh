#!/usr/bin/env bash
# First GPU check: timing fidelity, one CUDA candidate through `kbench eval`, the throughput benchmark.
# Run on the device machine from the repo root; results go to $OUT (and bench/results/).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
python -m pip install -q --no-index --find-links .carry/wheels ninja gymnasium 2>&1 | tail -1
nvidia-smi -L; python -c "import torch; print(torch.__version__, torch.cuda.get_device_name())"
mkdir -p bench/results
python bench/timing_fidelity.py --out $OUT/timing_fidelity.md 2>&1 | tail -15
python - <<'PY' > /tmp/cuda_relu.py
import re, sys
sys.path.insert(0, "bench")
import throughput
print(throughput.CUDA_TEMPLATE.format(idx=1, chunk=256))
PY
python -m kbench_apps.cli eval --task level1/relu --solution /tmp/cuda_relu.py --device cuda 2>&1 | tail -20
python bench/throughput.py --device cuda --n ${N:-16} --naive 2 --cold 1 --workers 16 --out $OUT/throughput.md 2>&1 | tail -15
