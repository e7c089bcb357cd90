#!/usr/bin/env bash
# What torch's headers cost a build: one small KernelBench-style file (a ReLU kernel and a bound function) compiled
# with <torch/extension.h>, <torch/all.h> and <torch/types.h>, by nvcc (device code, as load_inline builds a .cu:
# one architecture, torch's nvcc flags, -O3) and by g++ (the C++ file with the pybind11 binding, as load_inline
# builds main.cpp). This is why the backends build KernelBench-format sources with <torch/types.h> (+ <torch/python.h>
# for the binding) in place of <torch/extension.h> (kbench_env/backends/extension.py, cuda.py).
#
#   bash bench/header_cost.sh [out.md]        # ~4 minutes on 2 cores; needs nvcc for the CUDA rows
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
OUT=${1:-bench/results/header_cost_cpu.md}
W=$(mktemp -d)
INC=$($PY - <<'EOF'
import sysconfig, torch.utils.cpp_extension as c
print(" ".join("-isystem " + p for p in c.include_paths() + [sysconfig.get_paths()["include"]]))
EOF
)
COMMON="-DTORCH_API_INCLUDE_EXTENSION_H -DTORCH_EXTENSION_NAME=kb_cost $INC -std=c++17"
KERNEL='__global__ void k(float* y, const float* x, long n) { long i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i] > 0 ? x[i] : 0; }
torch::Tensor relu(torch::Tensor x) { auto y = torch::empty_like(x); k<<<(x.numel() + 255) / 256, 256>>>(y.data_ptr<float>(), x.data_ptr<float>(), x.numel()); return y; }'
BIND='torch::Tensor relu(torch::Tensor x) { return x; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("relu", &relu); }'
secs() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1 || { echo "FAILED: $*" >&2; return 1; }; t1=$(date +%s.%N); \
         python3 -c "print(f'{$t1 - $t0:.1f}')"; }
rows=()
if command -v nvcc >/dev/null; then
  NV="$COMMON -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__ -D__CUDA_NO_BFLOAT16_CONVERSIONS__ \
      -D__CUDA_NO_HALF2_OPERATORS__ --expt-relaxed-constexpr -gencode=arch=compute_90,code=sm_90 -Xcompiler -fPIC -O3"
  for h in torch/extension.h torch/all.h torch/types.h; do
    printf '#include <%s>\n%s\n' "$h" "$KERNEL" > "$W/k.cu"
    rm -f "$W/phases.csv"  # nvcc --time appends: the last header's build, <torch/types.h>, is the one kept
    rows+=("| nvcc, device code (.cu) | \`<$h>\` | $(secs nvcc $NV -c "$W/k.cu" -o "$W/k.o" --time "$W/phases.csv") |")
  done
fi
PHASES=()
if [ -f "$W/phases.csv" ]; then  # where the <torch/types.h> build's time went, phase by phase
  while IFS=, read -r _ phase _ _ _ _ ms _; do
    phase=$(echo "$phase" | xargs); ms=$(echo "$ms" | xargs)
    [ -n "$ms" ] && [ "$phase" != "phase name" ] && PHASES+=("| $phase | $(python3 -c "print(f'{$ms / 1000:.1f}')") |")
  done < "$W/phases.csv"
fi
for h in "torch/extension.h" "torch/types.h torch/python.h"; do
  { for one in $h; do echo "#include <$one>"; done; echo "$BIND"; } > "$W/m.cpp"
  label=$(for one in $h; do printf '`<%s>` ' "$one"; done)
  rows+=("| g++, binding file (main.cpp) | $label| $(secs c++ $COMMON -fPIC -O3 -c "$W/m.cpp" -o "$W/m.o") |")
done
{
  echo "# Build cost of torch's headers ($(uname -m), $(nproc) cores, $(date -u +%Y-%m-%d))"
  echo
  echo "\`bash bench/header_cost.sh\`: one file compiled once per header choice, torch $($PY -c 'import torch; print(torch.__version__)'),"
  echo "$(command -v nvcc >/dev/null && nvcc --version | tail -2 | head -1), $(c++ --version | head -1)."
  echo
  echo "| compiler, file | header | seconds |"
  echo "| --- | --- | --- |"
  printf '%s\n' "${rows[@]}"
  if [ ${#PHASES[@]} -gt 0 ]; then
    echo
    echo "The \`<torch/types.h>\` device-code build, phase by phase (\`nvcc --time\`; phases run one after another):"
    echo
    echo "| nvcc phase | seconds |"
    echo "| --- | --- |"
    printf '%s\n' "${PHASES[@]}"
  fi
} | tee "$OUT"
rm -rf "$W"
