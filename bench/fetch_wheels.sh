#!/usr/bin/env bash
# Download the wheels GRPO training needs on the GPU image into .carry/wheels, for an offline install there
# (bench/train_gpu.sh installs them). Run here, where PyPI is reachable:
#
#   bash bench/fetch_wheels.sh                 # into .carry/wheels
#   bash bench/fetch_wheels.sh /tmp/wheels     # elsewhere
#   EXTRA="peft==0.21.2" bash bench/fetch_wheels.sh   # more, e.g. for an image without them
#
# The GPU image (Python 3.12.3; torch 2.11, transformers 5.17.0, accelerate 1.15, huggingface_hub 1.33, tokenizers
# 0.23.2, and pandas, pyarrow, xxhash, fsspec, peft, cloudpickle, jinja2, pyyaml, psutil, rich: see the device
# library's KINDS.md) lacks trl, datasets (and datasets' dill, multiprocess), gymnasium and farama-notifications: those
# are fetched here, pinned to the versions the CPU tests pass with, each with --no-deps (2.3 MB in all). pyarrow and
# pandas would be ~70 MB together, over the 64 MiB a device call carries: rely on the image's. The serve extra's
# packages (starlette, uvicorn, websockets; httpx and its own needs pinned to what the CPU tests use) come too, for
# `kbench serve` on the GPU (bench/rl_batch.py --serve).
set -euo pipefail
DEST=${1:-.carry/wheels}
mkdir -p "$DEST"
PIP=${PIP:-python3 -m pip}
PLATFORM_ARGS=(--python-version 3.12 --implementation cp
               --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
               --only-binary=:all: --no-deps)
PKGS=(trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 gymnasium==1.4.0 farama-notifications==0.0.6
      starlette==1.10.0 uvicorn==0.54.0 websockets==17.4 httpx==0.28.1 httpcore==1.0.9 h11==0.16.0 anyio==4.16.0
      sniffio==1.3.1 click==8.5.1 ${EXTRA:-})
for pkg in "${PKGS[@]}"; do
  $PIP download -q -d "$DEST" "${PLATFORM_ARGS[@]}" "$pkg" 2>&1 | grep -v "^WARNING: Location" || true
  name=${pkg%%=*}
  ls "$DEST" | grep -qi "^${name//-/_}-" || { echo "fetch_wheels: no wheel for $pkg in $DEST" >&2; exit 1; }
done
du -sh "$DEST"
ls "$DEST"
