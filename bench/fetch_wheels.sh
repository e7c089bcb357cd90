#!/usr/bin/env bash
# Download the wheels a GPU run needs on the GPU image, for an offline install there. Run here, where PyPI is
# reachable:
#
#   bash bench/fetch_wheels.sh                 # GRPO training's (bench/train_gpu.sh installs them) into .carry/wheels
#   bash bench/fetch_wheels.sh /tmp/wheels     # elsewhere
#   EXTRA="peft==0.21.2" bash bench/fetch_wheels.sh   # more, e.g. for an image without them
#   bash bench/fetch_wheels.sh .carry/wheels-inspect inspect   # the Inspect task's (bench/integrations_gpu.py inspect)
#
# The second argument names the set: "train" (the default) or "inspect".
#
# The GPU image (Python 3.12.3; torch 2.11, transformers 5.17.0, accelerate 1.15, huggingface_hub 1.33, tokenizers
# 0.23.2, and pandas, pyarrow, xxhash, fsspec, peft, cloudpickle, jinja2, pyyaml, psutil, rich: see the device
# library's KINDS.md) lacks trl, datasets (and datasets' dill, multiprocess), gymnasium and farama-notifications: those
# are fetched here, pinned to the versions the CPU tests pass with, each with --no-deps (2.3 MB in all). pyarrow and
# pandas would be ~70 MB together, over the 64 MiB a device call carries: rely on the image's. The serve extra's
# packages (starlette, uvicorn, websockets; httpx and its own needs pinned to what the CPU tests use) come too, for
# `kbench serve` on the GPU (bench/rl_batch.py --serve). py-spy (3 MB): the trusted process sampled in a GPU run
# (bench/gpu_session.sh steady with PROFILE).
#
# "inspect": inspect-ai 0.3.285 and what it needs that the image lacks (pydantic and fastapi among them; the image's
# list is in the device library's KINDS.md), gymnasium for the env, and, as version floors, anyio, typing-extensions,
# rich, markdown-it-py and click at the versions inspect-ai needs and the CPU tests pass with (bench/integrations_gpu.py
# installs a carried wheel only where the image lacks the distribution or has an older version). Left out, as a
# local run never imports them: debugpy (5 MB), s3fs, aiobotocore and aioitertools (S3 log folders). About 60 MB
# (inspect-ai 34 MB with its log viewer and sandbox binaries, which are taken out below; botocore 16 MB, which
# inspect-ai imports at start; zstandard 5 MB): carry this folder alone, within the 64 MiB a device call carries.
set -euo pipefail
DEST=${1:-.carry/wheels}
SET=${2:-train}
mkdir -p "$DEST"
PIP=${PIP:-python3 -m pip}
PLATFORM_ARGS=(--python-version 3.12 --implementation cp
               --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
               --platform manylinux_2_5_x86_64
               --only-binary=:all: --no-deps)
case "$SET" in
  train)
    PKGS=(trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 gymnasium==1.4.0 farama-notifications==0.0.6
          starlette==1.10.0 uvicorn==0.54.0 websockets==17.4 httpx==0.28.1 httpcore==1.0.9 h11==0.16.0
          anyio==4.16.0 sniffio==1.3.1 click==8.5.1 py-spy==0.4.3) ;;
  inspect)
    PKGS=(inspect-ai==0.3.285 gymnasium==1.4.0 farama-notifications==0.0.6
          agent-client-protocol==0.12.1 annotated-types==0.8.0 beautifulsoup4==4.15.0 boto3==1.43.117
          botocore==1.43.117 docstring-parser==0.18.0 fastapi==0.165.0 ijson==3.6.0 jmespath==1.1.0 jsonlines==4.0.0
          jsonpatch==1.48 jsonpath-ng==1.16.0 jsonpointer==3.12 jsonref==1.1.0 jsonschema==4.26.0
          jsonschema-specifications==2025.9.1 linkify-it-py==2.2.0 mdit-py-plugins==0.7.0 mmh3==5.3.1
          nest-asyncio2==1.7.4 opentelemetry-api==1.45.2 pathlib-abc==0.5.2 platformdirs==4.14.8 pydantic==2.14.4
          pydantic-core==2.50.5 python-dotenv==1.2.4 referencing==0.37.0 rpds-py==2026.9.1 s3transfer==0.19.3
          semver==3.1.2 shortuuid==1.0.13 sniffio==1.3.1 soupsieve==4.1.3 starlette==1.10.0 tenacity==9.2.1
          textual==8.2.8 typing-inspection==0.4.5 universal-pathlib==0.3.10 uvicorn==0.54.0 zipfile-zstd==0.0.4
          zstandard==0.25.0 anyio==4.16.0 typing-extensions==4.16.0 rich==15.0.0 markdown-it-py==4.3.0
          click==8.5.1) ;;
  *) echo "fetch_wheels: unknown set '$SET' (train, inspect)" >&2; exit 2 ;;
esac
PKGS+=(${EXTRA:-})
for pkg in "${PKGS[@]}"; do
  $PIP download -q -d "$DEST" "${PLATFORM_ARGS[@]}" "$pkg" 2>&1 | grep -v "^WARNING: Location" || true
  name=${pkg%%=*}
  ls "$DEST" | grep -qi "^${name//-/_}-" || { echo "fetch_wheels: no wheel for $pkg in $DEST" >&2; exit 1; }
done
if [ "$SET" = inspect ]; then
  # inspect-ai's wheel bundles sandbox-tool binaries for Docker sandboxes (28 MB) and its log viewer (11 MB); a local
  # run uses neither, and without them the set fits a device call's 64 MiB beside the tree.
  python3 - "$DEST"/inspect_ai-*.whl <<'PY'
import csv, io, sys, zipfile
path = sys.argv[1]
drop = ("inspect_ai/binaries/", "inspect_ai/_view/dist/")
with zipfile.ZipFile(path) as src:
    items = [(i, src.read(i.filename)) for i in src.infolist() if not i.filename.startswith(drop)]
kept = {i.filename for i, _ in items}
with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
    for info, data in items:
        if info.filename.endswith(".dist-info/RECORD"):
            rows = [r for r in csv.reader(io.StringIO(data.decode())) if r and r[0] in kept]
            buf = io.StringIO()
            csv.writer(buf, lineterminator="\n").writerows(rows)
            data = buf.getvalue().encode()
        out.writestr(info, data)
PY
fi
du -sh "$DEST"
ls "$DEST"
