#!/usr/bin/env bash
# Several gpu_session.sh parts side by side, one GPU each, in one device call (device time counts the machine's held
# time, not its GPUs: a four-GPU host runs four parts in the time of one). Each argument is one GPU's parts, run one
# after another with their environment, e.g.
#
#   bash bench/gpu_side.sh "suite" "DEADLINE=150 edge; SEEDS=1 falsepos" "SEED_BASE=1 SEEDS=2 falsepos"
#
# GPU i's output lands in $OUT/gpu<i>/ and its log in $OUT/gpu<i>.log; the build cache is shared.
set -uo pipefail
OUT=${OUT:-/tmp/kbench-out}; mkdir -p "$OUT"
i=0; pids=()
for parts in "$@"; do
  mkdir -p "$OUT/gpu$i"
  (
    IFS=';' read -ra steps <<< "$parts"
    for step in "${steps[@]}"; do
      read -ra words <<< "$step"
      env_args=(); rest=()
      for w in "${words[@]}"; do if [[ ${#rest[@]} -eq 0 && $w == *=* ]]; then env_args+=("$w"); else rest+=("$w"); fi; done
      echo "== GPU $i: ${step}"
      env CUDA_VISIBLE_DEVICES=$i OUT="$OUT/gpu$i" "${env_args[@]}" bash bench/gpu_session.sh "${rest[@]}"
    done
  ) > "$OUT/gpu$i.log" 2>&1 &
  pids+=($!); i=$((i + 1))
done
for p in "${pids[@]}"; do wait "$p"; done
for ((j = 0; j < i; j++)); do echo "######## GPU $j"; tail -${TAIL:-30} "$OUT/gpu$j.log"; done
