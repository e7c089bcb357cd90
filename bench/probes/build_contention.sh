#!/usr/bin/env bash
# Probe (issue #36): what a distinct candidate's KernelBench-format build costs in CPU seconds when N builds run at
# once on one host, against one alone. An RL batch builds 16 at once on a 16-core host and measured 48-52 CPU s a
# candidate where bench/build_cost.py alone measured 22.9: is it the builds' contention for the memory system, or
# something else the batch counts? For each N in $NS: N bench/build_cost.py processes side by side, each on
# another shipped CUDA solution (levels 1 and 2), each a cold build then a distinct candidate (--warm --renamed
# --wall; $SOLS: other solutions, a glob); the distinct candidates' CPU s and wall s, per process and their median.
#
#   NS="1 8 16" bash bench/probes/build_contention.sh    # on the GPU host, from the repo root; writes $OUT
set -u
OUT=${OUT:-/tmp/build_contention}
mkdir -p "$OUT"
sols=(${SOLS:-tasks/solutions/cuda/level1/*.py tasks/solutions/cuda/level2/*.py})
summary="$OUT/build_contention.txt"
echo "# $(date -u '+%F %T') $(nproc) cores, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')" | tee -a "$summary"
for n in ${NS:-1 8 16}; do
  start=$(date +%s)
  for i in $(seq 0 $((n - 1))); do
    s=${sols[$((i % ${#sols[@]}))]}
    python3 bench/build_cost.py "$s" --warm --renamed --wall --out "$OUT/bc_${n}_${i}.md" > "$OUT/bc_${n}_${i}.log" 2>&1 &
  done
  wait
  echo "## $n at once: $(( $(date +%s) - start )) s, load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$summary"
  grep -h "(2nd, new kernel) |" "$OUT"/bc_${n}_*.md | awk -F'|' '{print $2 "|" $3 "|" $5}' | tee -a "$summary"
  grep -h "(2nd, new kernel) |" "$OUT"/bc_${n}_*.md | awk -F'|' '{print $3, $5}' | sort -n | awk \
    '{c[NR]=$1; w[NR]=$2} END {m=int((NR+1)/2); print "median distinct candidate: " c[m] " CPU s, (wall of that row) " w[m] " s over " NR}' \
    | tee -a "$summary"
done
