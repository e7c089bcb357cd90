#!/bin/bash
# kbench processes evaluating on the CPU at once: `kbench eval` of the shipped ReLU solution on the KernelBench
# file tests/data/kernelbench/19_ReLU.py, $N times in each of $LOOPS (default 2) loops side by side; one JSON line
# per evaluation (loop, run, exit status, seconds, whether its error was a worker that did not stop) to $OUT
# (default stdout). Usage: N=5 LOOPS=2 OUT=rows.jsonl bash bench/probes/concurrent_cpu_evals.sh
cd "$(dirname "$0")/../.."
N=${N:-5}; OUT=${OUT:-/dev/stdout}; PY=${PY:-.venv/bin/python}
tmp=$(mktemp -d)
loop() {
  for i in $(seq 1 "$N"); do
    s=$(date +%s.%N)
    timeout 300 "$PY" -m kbench_apps.cli eval --task tests/data/kernelbench/19_ReLU.py \
      --solution tasks/solutions/cpu/level1/relu.py --device cpu > "$tmp/$1_$i.txt" 2>&1
    rc=$?
    printf '{"loop": "%s", "run": %d, "rc": %d, "seconds": %.1f, "did_not_stop": %s}\n' "$1" "$i" "$rc" \
      "$(echo "$(date +%s.%N) - $s" | bc)" "$(grep -q 'did not stop' "$tmp/$1_$i.txt" && echo true || echo false)"
  done
}
{ for l in $(seq 1 "${LOOPS:-2}"); do loop "p$l" & done; wait; } >> "$OUT"
rm -rf "$tmp"
