#!/usr/bin/env bash
# GRPO on the GPU, end to end, with no download: a tokenizer trained on the suite's text and a randomly initialised
# Qwen2 (hidden 256, 4 layers) train a few steps against KBench-v0 with the CUDA backend, single turn and then two
# turns; the reward path for a correct CUDA kernel is checked first on the shipped ReLU solution.
#
# Before (here, with PyPI):  bash bench/fetch_wheels.sh        # trl, datasets, gymnasium, ... into .carry/wheels
# On the GPU machine, from the repo root, carrying .carry/wheels:
#                            bash bench/train_gpu.sh           # logs to $OUT (or runs/train_gpu)
#
# Writes (at most 8 files, 2 folders deep, so a device call brings them all back):
#   $LOG_DIR/reward_check.log         the CUDA ReLU solution through the training reward function
#   $LOG_DIR/single.log, single/log.jsonl    single-turn run: stdout, and one JSON line per logged step
#   $LOG_DIR/multi.log,  multi/log.jsonl     two-turn run
# Knobs: STEPS (3), GENERATIONS (4), BATCH (8), COMPLETION (128 tokens per turn), SUITE_MULTI (level1).
set -uo pipefail
export PYTHONUNBUFFERED=1 TRL_EXPERIMENTAL_SILENCE=1 TOKENIZERS_PARALLELISM=false
LOG_DIR=${OUT:-runs/train_gpu}
mkdir -p "$LOG_DIR"
STEPS=${STEPS:-3} GENERATIONS=${GENERATIONS:-4} BATCH=${BATCH:-8} COMPLETION=${COMPLETION:-128}
SUITE_MULTI=${SUITE_MULTI:-level1}

# 1. what the image lacks, installed offline from the carried wheels (only the packages that do not import)
missing=$(python3 - <<'PY'
import importlib.util
wanted = {"trl": "trl", "datasets": "datasets", "dill": "dill", "multiprocess": "multiprocess",
          "gymnasium": "gymnasium", "farama_notifications": "farama_notifications"}
print(" ".join(dist for dist, mod in wanted.items() if importlib.util.find_spec(mod) is None))
PY
)
if [[ -n "$missing" ]]; then
  files=()
  for dist in $missing; do
    f=$(ls .carry/wheels 2>/dev/null | grep -i "^${dist}-" | sort -V | tail -1)
    [[ -n "$f" ]] || { echo "train_gpu: no wheel for $dist in .carry/wheels (run bench/fetch_wheels.sh here)"; exit 1; }
    files+=(".carry/wheels/$f")
  done
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "${files[@]}" || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD
python3 - <<'PY' || exit 1
import sys, torch, transformers, trl, datasets, gymnasium
from packaging.version import Version
print(f"python {sys.version.split()[0]} torch {torch.__version__} transformers {transformers.__version__} "
      f"trl {trl.__version__} datasets {datasets.__version__} gymnasium {gymnasium.__version__}")
print("GPU:", torch.cuda.get_device_name() if torch.cuda.is_available() else "none")
if Version(transformers.__version__) < Version("4.56.2"):
    sys.exit("trl 1.16 needs transformers >= 4.56.2")
if not torch.cuda.is_available():
    sys.exit("no CUDA device")
PY

# 2. the reward path for a correct kernel: the shipped CUDA ReLU through KBenchReward, against Evaluator.evaluate
python3 - <<'PY' 2>&1 | tee "$LOG_DIR/reward_check.log"
import time
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.tasks.suite import resolve_task, solution_path
from kbench_training.rewards import KBenchReward
task = resolve_task("level1/relu")
path = solution_path(task, "cuda")
if path is None:
    raise SystemExit("no shipped CUDA ReLU solution (tasks/solutions/cuda/level1/relu.py): reward check skipped")
src = path.read_text()
ev = Evaluator(device="cuda", backend="cuda", timing={"warmup": 1, "min_reps": 5, "max_reps": 30, "min_seconds": 0.02})
fn = KBenchReward(ev, [task], keep_history=True)
t0 = time.time()
rewards = fn(prompts=[None] * 2, completions=[src, "not a kernel"], task=[task.name] * 2,
             log_metric=lambda k, v: print(f"  metric {k} = {v:.4g}"))
r = fn.history[0][2]
print(f"reward function: {rewards} in {time.time() - t0:.1f}s; ReLU correct={r.correct} speedup={r.speedup} "
      f"flags={r.integrity_flags} error={r.error}")
print(f"the environment's reward for that evaluation: {r.reward:.3f}")
print("OK" if rewards[0] > 0 and rewards[0] == r.reward and rewards[1] == -0.6 else "MISMATCH")
PY

# 3. a tiny random Qwen2 with a tokenizer trained here
python3 -m kbench_training.tiny --out /tmp/kbench-tiny --hidden 256 --layers 4 --heads 4 --kv-heads 2 || exit 1

# 4. GRPO, single turn, then two turns over a whole level
common=(--model /tmp/kbench-tiny --device cuda --backend cuda --max-steps "$STEPS" --num-generations "$GENERATIONS"
        --per-device-batch-size "$BATCH" --max-completion-length "$COMPLETION" --learning-rate 1e-5 --no-save)
python3 -m kbench_training.grpo "${common[@]}" --suite default --output-dir "$LOG_DIR/single" 2>&1 \
  | grep -v "it/s]$" | tee "$LOG_DIR/single.log"
single=${PIPESTATUS[0]}
python3 -m kbench_training.grpo "${common[@]}" --suite "$SUITE_MULTI" --turns 2 --output-dir "$LOG_DIR/multi" 2>&1 \
  | grep -v "it/s]$" | tee "$LOG_DIR/multi.log"
multi=${PIPESTATUS[0]}
echo "single-turn exit $single, multi-turn exit $multi; logs in $LOG_DIR"
[[ $single == 0 && $multi == 0 ]]
