#!/usr/bin/env bash
# The GPU runs recorded under bench/results/, as device calls of at most 10 minutes each, made back to back on one
# warm machine (the build cache in $KBENCH_CACHE carries over between them). From the repo root on the GPU machine,
# carrying .carry/wheels (bash bench/fetch_wheels.sh here first):
#
#   bash bench/gpu_session.sh probe   # one evaluation traced; which sandbox layers CUDA workers survive; every
#                                     # CUDA and Triton solution (as many as finish in the call)
#   bash bench/gpu_session.sh faults  # the GPU fault tests
#   bash bench/gpu_session.sh tests   # the GPU fault tests; tests/test_gpu.py (solutions and adversarial CUDA
#                                     # candidates; checks side by side, timings alone), then bench/gpu_tests_verdict.py on its record
#   bash bench/gpu_session.sh suite   # tests/test_gpu.py alone (K=<pytest -k expression>: a part of it, when the
#                                     # whole does not fit one call)
#   bash bench/gpu_session.sh validate  # after a timing change: timing fidelity, then tests/test_gpu.py
#   bash bench/gpu_session.sh agent   # the evolutionary agent on three CUDA tasks
#   bash bench/gpu_session.sh fidelity  # bench/timing_fidelity.py: kbench's time against the profiler's
#   bash bench/gpu_session.sh speed   # one evaluation traced (eval_cost.py); bench/throughput.py: naive vs kbench,
#                                     # 64 distinct CUDA candidates
#   bash bench/gpu_session.sh batch   # bench/throughput.py alone, cut to end by $DEADLINE seconds
#   bash bench/gpu_session.sh train   # bench/train_gpu.sh: GRPO with the CUDA backend
#   bash bench/gpu_session.sh falsepos  # bench/false_positives.py (every CUDA and Triton solution and variant x
#                                     # $SEEDS seeds) cut by $DEADLINE seconds, then the CUDA case of test_escapes.py;
#                                     # FP_FROM=<an earlier call's JSONL, in the tree>: resumed from it
#   bash bench/gpu_session.sh recheck # after a timing change: fidelity, one cached evaluation traced (TRACE=0:
#                                     # not), then tests/test_gpu.py (solutions and adversarial candidates)
#   bash bench/gpu_session.sh trust1  # #21 on the merged code: tests/test_gpu.py without the rules tests (cold builds)
#   bash bench/gpu_session.sh trust2  # the rest of tests/test_gpu.py; gpu_trust.py; timing_fidelity_trusted.py
#   bash bench/gpu_session.sh scale   # #25: rl_batch.py --gpus $NGPUS (default: every GPU of the host), the
#                                     # report written even when the call's limit cuts it; every device hold
#                                     # logged and checked for overlaps (bench/hold_overlap.py)
#   bash bench/gpu_session.sh scales  # #25: scale for each N in $NS (e.g. "4 2"), one after another
#   bash bench/gpu_session.sh grpo    # #25: GRPO under accelerate launch on $NGPUS GPUs (bench/train_multi_gpu.py)
#   bash bench/gpu_session.sh mainjob # #22: `kbench run` with its defaults (the README's main job), then the
#                                     # fast CUDA solutions and rms_norm in tests/test_gpu.py
#   bash bench/gpu_session.sh trust   # tests/test_gpu.py whole, gpu_trust.py, timing_fidelity_trusted.py
#   bash bench/gpu_session.sh integrations  # #39: verl's reward on a batch, the Inspect task (tiny model, shipped
#                                     # solutions); carry .carry/wheels-inspect (bench/fetch_wheels.sh ... inspect)
#   bash bench/gpu_session.sh edge    # #34: the event clock divided by $EDGE (under the flag ratio) at tolerances
#                                     # $TOLS: what a forgery gains at the edge of the bound
#   bash bench/gpu_session.sh trust3  # false_positives.py cut by $DEADLINE; eval_cost.py task on this tree and on
#                                     # the tree before #21 (.carry/before: git archive 4ee33f8), same GPU
#   bash bench/gpu_session.sh survive # #36: 5 consecutive processes on one cache folder (rl_batch --consecutive):
#                                     # reference re-timings per process (target 0 after the first), the stored
#                                     # calibration's rounds; every device hold logged and checked
#   bash bench/gpu_session.sh steady  # #36: rl_batch cold then steady (empty build cache, the cold pass's
#                                     # references) on $TASKS x $PER (default 24 x 2), FORMAT (default
#                                     # kernelbench), cut to end by $END (default 590) seconds: rate, exclusive
#                                     # hold per candidate, GPU idle while candidates wait (hold log), re-timings;
#                                     # PASSES=cold in one call then PASSES=steady in the next: the same cache
#                                     # folder ($KBENCH_CACHE-steady-$FORMAT), the references from another process;
#                                     # PASSES=cold,train STEPS=3 GAP=20: a trainer's steps through one executor;
#                                     # CAP=N: N checks on the device at once; BUILDS=N: N builds at once;
#                                     # INFLIGHT=16,24: the train steps' candidates in flight, in turn;
#                                     # NO_TIME_AHEAD=1: a reference
#                                     # run ahead is not timed there; AHEAD / DEFER: the memory shares of
#                                     # set-ups ahead and kept checks; PROFILE=idle|gil: the trusted
#                                     # process sampled (py-spy); TIMINGS=1: every candidate timing's
#                                     # figures against its bound in $OUT/timings.jsonl (bench/timing_log.py)
#   bash bench/gpu_session.sh trainer # #36: the cold pass (or REFS=<refs.tgz>), then a trainer's steps once per word of $VARIANTS
#                                     # (base, gil, idle, spares<N>, cap<N>, builds<N>, spinsync, ahead<share>, defer<share>, both
#                                     # joined by +; default "base gil spares26"), all in
#                                     # $OUT/trainer.tgz
#
# Everything a part writes lands in $OUT (at most 8 files come back from a device call).
set -uo pipefail
export PYTHONUNBUFFERED=1 KBENCH_CACHE=${KBENCH_CACHE:-/tmp/kbench-cache}
OUT=${OUT:-/tmp/kbench-out}; mkdir -p "$OUT"
START=${START:-$(date +%s)}  # (an exported START: parts run one after another share one deadline)
stamp() { echo "[$(( $(date +%s) - START )) s] $*"; }
left() { local n=$(( ${1:-580} - ($(date +%s) - START) )); echo $(( n > 1 ? n : 1 )); }  # seconds until $1 (default 580)

if ! python3 -c "import gymnasium, trl" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .carry/wheels/*.whl 2>&1 | tail -2
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD
export KBENCH_GPU_ONLY="level1/relu,level1/gelu,level1/softmax_rows,level1/layer_norm,level1/sum_dim1,level1/matmul_square,level2/linear_relu,level2/linear_gelu_scale,level2/conv2d_relu_bias,robust/layernorm_forward,robust/rmsnorm_forward,robust/softmax_cross_entropy_forward"
AGENT_TASKS=robust/layernorm_forward,robust/rmsnorm_forward,robust/softmax_cross_entropy_forward
gpu_tests() {  # tests/test_gpu.py (checks side by side, each timing with the GPU alone), ending by $1 seconds from the start
  stamp "GPU test suite (checks side by side, each timing alone)"
  host_sched
  KBENCH_COMPILE_BASELINE=0 KBENCH_GPU_WORKERS=${KBENCH_GPU_WORKERS:-8} \
    KBENCH_GPU_RECORD="$OUT/gpu_tests.jsonl" timeout $(left $1) python3 -m pytest -q -m gpu tests/test_gpu.py ${K:+-k "$K"} \
    -p no:cacheprovider -rA 2>&1 | tee "$OUT/gpu_tests.txt" | tail -25
  python3 bench/gpu_tests_verdict.py "$OUT/gpu_tests.jsonl" | tee "$OUT/gpu_tests_verdict.txt" | tail -8
}

host_sched() {  # what may decide the host's CPU shares between the builder, the trusted side and the workers: the
  # autogroups (a session each: the builder and every worker call setsid; they apply in the root cgroup only), the
  # shell's cgroup and the cgroup v2 controllers at the root (the workers go into kbench's pids cgroups under it)
  { echo "sched_autogroup_enabled: $(cat /proc/sys/kernel/sched_autogroup_enabled 2>&1)"
    echo "this shell's cgroup: $(cat /proc/self/cgroup 2>&1 | tr '\n' ' ')"
    echo "cgroup2 root controllers: $(cat /sys/fs/cgroup/cgroup.controllers 2>&1)"
    echo "cgroup2 root subtree_control: $(cat /sys/fs/cgroup/cgroup.subtree_control 2>&1)"
    echo "kbench cgroup subtree_control: $(cat /sys/fs/cgroup/kbench/cgroup.subtree_control 2>&1)"
  } | tee "$OUT/host_sched.txt"
}

fidelity() {  # bench/timing_fidelity.py, at most $1 seconds
  stamp "timing fidelity"
  timeout $1 python3 bench/timing_fidelity.py --out "$OUT/timing_fidelity_h100.md" 2>&1 | tail -14
}
traced_eval() {  # eval_cost.py: a cold and two cached evaluations of level1/relu's CUDA solution, every message traced
  stamp "one evaluation traced (level1/relu, CUDA): where a cached step's time goes"
  timeout 180 python3 bench/eval_cost.py task 2 --device cuda --profile --trace "$OUT/trace.jsonl" \
    > "$OUT/eval_cost_cuda.txt" 2>&1; grep '^{' "$OUT/eval_cost_cuda.txt"
}

case "${1:-probe}" in
probe)
  nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  stamp "one evaluation traced (level1/relu, CUDA), beside the sandbox probe"
  timeout 200 python3 bench/eval_cost.py task 1 --device cuda --profile --trace "$OUT/trace.jsonl" \
    > "$OUT/eval_cost_cuda.txt" 2>&1 &
  COST=$!
  timeout 200 python3 bench/gpu_sandbox_probe.py --out "$OUT/sandbox_probe.jsonl" 2>&1 | tee "$OUT/sandbox_probe.txt" \
    | grep -v "PROBE open"
  wait $COST; grep '^{' "$OUT/eval_cost_cuda.txt"
  stamp "solutions"
  timeout $(( 580 - ($(date +%s) - START) )) python3 bench/gpu_validate.py --backends cuda,triton --compile none \
    --workers 16 --deadline $(( 560 - ($(date +%s) - START) )) --out "$OUT/gpu_solutions" 2>&1 | tail -45
  ;;
faults)
  timeout 300 python3 -m pytest -q -m gpu tests/test_gpu_faults.py -p no:cacheprovider -rA 2>&1 \
    | tee "$OUT/gpu_faults.txt" | tail -25
  ;;
tests)
  stamp "GPU fault tests (and the GPU worker's network)"
  timeout 200 python3 -m pytest -q -m gpu tests/test_gpu_faults.py -p no:cacheprovider -rA 2>&1 \
    | tee "$OUT/gpu_faults.txt" | tail -12
  gpu_tests 580
  ;;
suite)  # tests/test_gpu.py alone
  gpu_tests 580
  ;;
fidelity)
  fidelity 400
  ;;
agent)
  stamp "evolutionary agent on CUDA tasks"
  KBENCH_COMPILE_BASELINE=0 timeout 570 python3 -m kbench_apps.cli run --suite "$AGENT_TASKS" \
    --agent evolutionary --device cuda --budget 3 --workers 6 --out "$OUT/evolutionary_cuda.jsonl" 2>&1 | tail -16
  ;;
speed)
  traced_eval  # the forward audit on kineto/CUPTI, then on operators only:
  KBENCH_GPU_AUDIT=ops timeout 100 python3 bench/eval_cost.py task 2 --device cuda --trace "$OUT/trace_ops.jsonl" \
    2>&1 | grep '^{' | tee "$OUT/eval_cost_cuda_ops.txt"
  stamp "throughput"
  timeout $(left 585) python3 bench/throughput.py --device cuda --n 64 --naive 1 --cold 1 --workers 16 \
    --step-gap 8 --deadline $(left 575) --env-steps 3 --out "$OUT/throughput_h100.md" 2>&1 \
    | grep -v "correct=True$" | tail -40
  ;;
batch)  # bench/throughput.py alone, ending by DEADLINE seconds (default 360): the batch's rate so far if cut short
  stamp "throughput"
  timeout $(left $(( ${DEADLINE:-360} + 15 ))) python3 bench/throughput.py --device cuda --n 64 --naive 1 --cold 1 \
    --workers 16 --step-gap 8 --deadline $(left ${DEADLINE:-360}) --env-steps 3 --out "$OUT/throughput_h100.md" 2>&1 \
    | grep -v "correct=True$" | tail -40
  ;;
resume)  # the GPU test suite, then the agent resumed from an earlier call's results (RESUME=file)
  stamp "GPU test suite (checks side by side, each timing alone)"
  KBENCH_COMPILE_BASELINE=0 KBENCH_GPU_WORKERS=${KBENCH_GPU_WORKERS:-8} KBENCH_GPU_RECORD="$OUT/gpu_tests.jsonl" \
    timeout $(left 230) python3 -m pytest -q -m gpu tests/test_gpu.py -p no:cacheprovider 2>&1 \
    | tee "$OUT/gpu_tests.txt" | tail -25
  stamp "evolutionary agent on CUDA tasks, resumed"
  [ -n "${RESUME:-}" ] && cp "$RESUME" "$OUT/evolutionary_cuda.jsonl"
  KBENCH_COMPILE_BASELINE=0 timeout $(left ${AGENT_END:-505}) python3 -m kbench_apps.cli run --suite "$AGENT_TASKS" \
    --agent evolutionary --device cuda --budget 2 --workers 6 --out "$OUT/evolutionary_cuda.jsonl" 2>&1 | tail -16
  ;;
final)  # what one last short device session can hold: the GPU tests, GRPO, the agent
  export KBENCH_COMPILE_BASELINE=0
  stamp "GPU test suite (checks side by side, each timing alone)"
  KBENCH_GPU_WORKERS=${KBENCH_GPU_WORKERS:-8} KBENCH_GPU_RECORD="$OUT/gpu_tests.jsonl" timeout 250 \
    python3 -m pytest -q -m gpu tests/test_gpu.py -p no:cacheprovider 2>&1 | tee "$OUT/gpu_tests.txt" | tail -25
  stamp "GRPO"
  STEPS=2 OUT=$OUT/train timeout 110 bash bench/train_gpu.sh 2>&1 | tail -12
  stamp "evolutionary agent on CUDA tasks"
  timeout 140 python3 -m kbench_apps.cli run --suite "$AGENT_TASKS" --agent evolutionary --device cuda --budget 2 \
    --workers 6 --out "$OUT/evolutionary_cuda.jsonl" --fresh 2>&1 | tail -14
  ;;
recheck|validate)  # validate: recheck without the traced evaluation
  fidelity 260
  [ "$1" = recheck ] && [ "${TRACE:-1}" = 1 ] && traced_eval
  gpu_tests 585
  ;;
falsepos)
  stamp "false-positive campaign (cuda, triton)"
  # FP_FROM: an earlier call's JSONL carried in the tree: this call resumes it (the same kbench_env sources only)
  [ -n "${FP_FROM:-}" ] && cp "$FP_FROM" "$OUT/false_positives_cuda.jsonl"
  KBENCH_COMPILE_BASELINE=0 timeout $(left ${DEADLINE:-420}) python3 bench/false_positives.py --device cuda \
    --seeds ${SEEDS:-3} --seed-base ${SEED_BASE:-0} --workers ${FP_WORKERS:-16} --jsonl "$OUT/false_positives_cuda.jsonl" \
    --record "$OUT/false_positives_cuda.md" \
    2>&1 | tr '\r' '\n' | grep -v "^ *$" | tail -40
  [ "${ESCAPES:-1}" = 1 ] || exit 0
  stamp "test_escapes (cuda)"
  timeout $(left 540) python3 -m pytest -q tests/test_escapes.py -k cuda -p no:cacheprovider -rA 2>&1 | tail -6
  ;;
integrations)
  stamp "verl: a batch scored through verl_reward.compute_score (bench/integrations_verl.py)"
  timeout $(left ${VERL_END:-250}) python3 bench/integrations_gpu.py verl --device cuda --limit ${VERL_LIMIT:-4} --out "$OUT/verl_reward_gpu.md" \
    2>&1 | tail -30
  stamp "Inspect: the task with a tiny local model and with the shipped solutions (carries .carry/wheels-inspect)"
  timeout $(left ${END:-580}) python3 bench/integrations_gpu.py inspect --device cuda --out "$OUT/inspect" 2>&1 | tail -30
  ;;
edge)
  stamp "forged device times under the flag ratio (gpu_trust.py --edge), at the library's tolerance and tighter"
  timeout $(left ${DEADLINE:-580}) python3 bench/gpu_trust.py --out "$OUT/trust_edge.jsonl" --only honest,divided_by_1,divided_by_2 \
    --edge ${EDGE:-1.15,1.5,2.5} --tolerance ${TOLS:-0.2,0.05} 2>&1 | tail -40
  ;;
trust1)
  stamp "tests/test_gpu.py without the rules tests"
  KBENCH_GPU_RECORD="$OUT/test_gpu_part1.jsonl" timeout $(left 590) python3 -m pytest -q tests/test_gpu.py \
    -k "not (kernelbench_rule or strict_rules)" -p no:cacheprovider -rfE 2>&1 | tee "$OUT/test_gpu_part1.txt" | tail -30
  ;;
trust2)
  stamp "tests/test_gpu.py: the rules tests and the Triton solutions"
  KBENCH_GPU_RECORD="$OUT/test_gpu_part2.jsonl" timeout $(left 240) python3 -m pytest -q tests/test_gpu.py \
    -k "kernelbench_rule or strict_rules or triton" -p no:cacheprovider -rfE 2>&1 | tee "$OUT/test_gpu_part2.txt" | tail -12
  stamp "forgeries (gpu_trust.py)"
  timeout $(left 380) python3 bench/gpu_trust.py --out "$OUT/trust_gpu.jsonl" 2>&1 | tail -30
  stamp "timing fidelity through the trusted path"
  timeout $(left 590) python3 bench/timing_fidelity_trusted.py --out "$OUT/timing_fidelity_trusted.md" 2>&1 | tail -16
  ;;
trust3)
  stamp "false-positive campaign (cuda, triton)"
  KBENCH_COMPILE_BASELINE=0 timeout $(left ${DEADLINE:-330}) python3 bench/false_positives.py --device cuda \
    --seeds ${SEEDS:-2} --workers 16 --jsonl "$OUT/false_positives_cuda.jsonl" --record "$OUT/false_positives_cuda.md" \
    2>&1 | tr '\r' '\n' | grep -v "^ *$" | tail -30
  for tree in before after; do
    root=$PWD; [ $tree = before ] && root=$PWD/.carry/before
    for t in level1/relu level1/softmax_rows; do
      stamp "cost per evaluation, $tree #21, $t (default timing settings)"
      (cd "$root" && PYTHONPATH=/tmp/site:$root KBENCH_CACHE=/tmp/kbench-cache-$tree KBENCH_COMPILE_BASELINE=0 \
        timeout 60 python3 bench/eval_cost.py task 3 --task $t --device cuda --default-timing 2>&1 | grep '^{' \
        | sed "s/^{/{\"tree\": \"$tree\", /" | tee -a "$OUT/eval_cost_gpu.jsonl")
    done
  done
  ;;
scale|scales)  # issue #25: the 24-candidate batch on N GPUs of this host (default: all); one N a call (~5-8 min)
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  all=$(nvidia-smi -L | wc -l)
  for n in ${NS:-${NGPUS:-$all}}; do
    extra=""; [ "$n" -gt 1 ] && extra="--cross ${CROSS:-4}"
    stamp "rl_batch on $n GPU(s), every device hold logged"
    KBENCH_DEVICE_HOLD_LOG="$OUT/holds_${n}gpu.jsonl" timeout -k 20 $(left ${END:-590}) python3 bench/rl_batch.py \
      --device cuda --gpus $n --tasks 8 --per-task 3 --passes cold,warm $extra ${PROCESSES:+--processes} \
      --out "$OUT/rl_batch_${n}gpu${PROCESSES:+_processes}.md" 2>&1 \
      | tee "$OUT/rl_batch_${n}gpu.log" | grep -v "^  \[" | tail -24  # the log keeps the cache's warnings
    python3 bench/hold_overlap.py "$OUT/holds_${n}gpu.jsonl" | tee "$OUT/holds_${n}gpu.txt"
  done
  ;;
survive)  # issue #36: does the reference cache survive 5 consecutive processes on one machine?
  stamp "5 consecutive processes, one cache folder ($KBENCH_CACHE-survive), every device hold logged"
  KBENCH_DEVICE_HOLD_LOG="$OUT/holds_survive.jsonl" timeout -k 20 $(left ${END:-590}) python3 bench/rl_batch.py \
    --device cuda --format ${FORMAT:-kernelbench} --tasks ${TASKS:-8} --per-task ${PER:-1} --consecutive 5 \
    --cache-dir "${KBENCH_CACHE}-survive" --out "$OUT/rl_batch_survive.md" 2>&1 \
    | tee "$OUT/rl_batch_survive.log" | grep -v "^  \[" | grep -v "^|" | tail -30
  cat "$OUT/rl_batch_survive.md" 2>/dev/null
  python3 bench/hold_overlap.py "$OUT/holds_survive.jsonl" | tee "$OUT/holds_survive.txt"
  ;;
steady)  # issue #36: cold, then the steady state of a training run (references timed, every source new)
  # PROCS=N: the process executor, N trusted processes sharing the GPU (its lock: checks side by side, timing alone)
  tag=${CAP:+_cap$CAP}${PROCS:+_p$PROCS}${BUILDS:+_b$BUILDS}
  host_sched
  stamp "rl_batch ${PASSES:-cold,steady}: ${TASKS:-24} tasks x ${PER:-2}, ${FORMAT:-kernelbench} format, ${PROCS:-1} process(es), holds logged"
  # PROFILE=idle (every thread, waiting or not) or gil (the thread holding the interpreter): the trusted process
  # sampled by py-spy at $RATE a second (default 20), its stacks folded into $OUT/profile$tag.txt
  # (bench/probes/profile_summary.py reads it)
  spy=${PROFILE:+/tmp/site/bin/py-spy record -r ${RATE:-20} --threads --$PROFILE -f raw -o $OUT/profile$tag.txt --}
  # the device's memory in use, twice a second (the shares of set-ups ahead and kept checks are shares of it), and
  # its utilisation (the share of the sample time a kernel ran: the hold log counts a held lock as busy, whatever
  # its holder runs)
  nvidia-smi --query-gpu=index,memory.used,memory.total,utilization.gpu --format=csv,noheader,nounits -lms 500 \
    > "$OUT/gpu_memory$tag.csv" 2>/dev/null &
  SMI=$!
  # the host's CPU each second (run queue, user / system / idle %): whether a step's builds had the cores they could use
  (command -v vmstat >/dev/null && vmstat -n -t 1 > "$OUT/vmstat$tag.txt" 2>/dev/null) &
  VMSTAT=$!
  # which processes had the cores: top's ten busiest each second (compilers, workers starting, the trusted process)
  lscpu | grep -E "^(CPU\(s\)|Thread|Core|Socket|Model name)" > "$OUT/top$tag.txt" 2>/dev/null
  (command -v top >/dev/null && top -b -d 1 -w 160 -o %CPU | awk '/^top -/ {n=0; print; next} /^ *PID/ {n=1; next} n && n++ <= 10' \
    >> "$OUT/top$tag.txt" 2>/dev/null) &
  TOP=$!
  # SAMPLE=1: every thread of the host swept 5 times a second (bench/probes/thread_sampler.py): who burns system
  # time and what sleeping threads wait on, cut by the hold log's steps into $OUT/threads$tag.txt
  SAMPLER=
  if [ -n "${SAMPLE:-}" ]; then
    python3 bench/probes/thread_sampler.py record "$OUT/threads$tag.jsonl" --interval 0.2 & SAMPLER=$!
  fi
  KBENCH_DEVICE_HOLD_LOG="$OUT/holds_steady$tag.jsonl" timeout -k 20 $(left ${END:-590}) $spy python3 bench/rl_batch.py \
    --device cuda --format ${FORMAT:-kernelbench} --tasks ${TASKS:-24} --per-task ${PER:-2} \
    --passes ${PASSES:-cold,steady} ${SHARED:+--shared-checks $SHARED} ${CAP:+--shared-cap $CAP} \
    ${PROCS:+--processes --per-gpu $PROCS} --steps ${STEPS:-3} --gap ${GAP:-20} \
    ${AHEAD:+--ahead-share $AHEAD} ${DEFER:+--defer-share $DEFER} ${NO_TIME_AHEAD:+--no-time-ahead} \
    ${BUILDS:+--build-workers $BUILDS} ${INFLIGHT:+--in-flight $INFLIGHT} \
    ${TIMINGS:+--timings-log "$OUT/timings$tag.jsonl"} \
    --cache-dir "${KBENCH_CACHE}-steady-${FORMAT:-kernelbench}" \
    --out "$OUT/rl_batch_${FORMAT:-kernelbench}_$(P=${PASSES:-cold,steady}; echo ${P//,/_})$tag.md" 2>&1 | tee "$OUT/rl_batch_steady$tag.log" \
    | grep -v "^  \[" | tail -40
  if [ -n "$SAMPLER" ]; then
    kill $SAMPLER 2>/dev/null; wait $SAMPLER 2>/dev/null
    python3 bench/probes/thread_sampler.py summary "$OUT/threads$tag.jsonl" --holds "$OUT/holds_steady$tag.jsonl" \
      --top 15 > "$OUT/threads$tag.txt" 2>&1
    gzip -f "$OUT/threads$tag.jsonl"
  fi
  kill $SMI 2>/dev/null; pkill -P $VMSTAT 2>/dev/null; kill $VMSTAT 2>/dev/null; pkill -P $TOP 2>/dev/null; kill $TOP 2>/dev/null
  awk 'NR > 3 && $15 ~ /^[0-9]+$/ {n++; r+=$1; id+=$15} END {if (n) printf "host CPU: idle %.1f %% of %d s, run queue %.1f (means)\n", id/n, n, r/n}' \
    "$OUT/vmstat$tag.txt" 2>/dev/null
  awk '$1 ~ /^[0-9]+$/ && NF >= 12 {c[$12] += $9} END {for (k in c) printf "%.0f %s\n", c[k] / 100, k}' "$OUT/top$tag.txt" \
    | sort -rn | head -8 | tr '\n' ';' | sed 's/^/host CPU-s by command (top, busiest ten each second): /; s/;$/\n/'
  python3 bench/hold_overlap.py "$OUT/holds_steady$tag.jsonl" | tee "$OUT/holds_steady$tag.txt"
  sort -t, -k2 -n "$OUT/gpu_memory$tag.csv" | tail -1 | awk -F', *' '{printf "device memory in use at most: %d of %d MiB\n", $2, $3}'
  awk -F', *' '{n++; u+=$4; if ($4 == 0) z++} END {if (n) printf "device utilisation: mean %.1f %%, 0 %% in %d of %d samples\n", u/n, z, n}' \
    "$OUT/gpu_memory$tag.csv"
  ;;
trainer)  # issue #36: a trainer's steps under several settings in one call, after one cold pass
  # The cold pass ($FORMAT, $TASKS x ${COLD_PER:-2}: the references timed into the cache folder; 2 a task puts 32 in
  # flight, the burst that ran the device out of memory before machine/device_memory.py), then per word of $VARIANTS a
  # process of PASSES=train STEPS=${STEPS:-2} GAP=${GAP:-5} on $TASKS x ${PER:-3} with that setting: base (as
  # shipped), gil / idle (PROFILE: the trusted process sampled), spares<N> (KBENCH_SPARE_WORKERS=N), cap<N> (CAP=N),
  # builds<N> (BUILDS=N: builds at once), spinsync (KBENCH_WORKER_BLOCKING_SYNC=0: workers wait spinning, as
  # torch's own synchronize does), spareflight (KBENCH_GPU_SPARES_IN_FLIGHT=1: spares replaced at the takes, a batch
  # in flight), spareidle0 (KBENCH_SPARE_IDLE_START=0: spares start at the default scheduling
  # policy, with bench/wip/spare_idle_start.patch applied), switch<us> (KBENCH_TIMING_SWITCH_US: the trusted process's
  # interpreter switch interval while it holds the device alone; switch0: Python's own 5 ms).
  # Each part writes under $OUT/<part>/; all of it comes back as $OUT/trainer.tgz (a device call returns 8 files).
  # Another host's references: REFS=<a refs.tgz carried from an earlier call> unpacks its reference timings into the
  # cache folder and skips the cold pass (they hold only on the same card: the cache is keyed by the GPU's uuid, so
  # on another card the first step times every reference again, the "re-timings" row); KEEP_REFS=1 writes the
  # cold pass's as $OUT/refs.tgz;
  # COLD_COMPILE=0: the cold pass without the torch.compile baseline (KBENCH_COMPILE_BASELINE=0), what the compiles
  # cost a fresh machine (its references are then not the steps' when those compile: they time them again);
  # COLD_LATER=0: the cold pass with the compiled reference timed beside the eager one (KBENCH_COMPILE_LATER=0, as
  # before pipeline/compile_later.py); later0, a variant: the same for a trainer's steps.
  # before: the base settings on another tree carried in .carry/before (an A/B of two trees on one machine and one
  # cache folder): git archive REV kbench_env tasks bench ':(exclude)bench/results' | tar x -C .carry/before.
  root=$OUT variants=${VARIANTS:-base gil spares26}
  parts="cold $variants"
  cache="${KBENCH_CACHE}-steady-${FORMAT:-kernelbench}"
  [ "${COLD:-1}" = 0 ] && parts=$variants  # COLD=0: no cold pass (a warm machine whose cache folder has them)
  if [ -n "${REFS:-}" ]; then
    mkdir -p "$cache" && tar xzf "$REFS" -C "$cache" && parts=$variants && stamp "references from $REFS: $(find "$cache/reference" -type f | wc -l) files, no cold pass"
  fi
  export START  # (one deadline for every part: each ends by $END, default 570 s from the call's start)
  train() {  # one variant's process: a trainer's steps with the settings given as NAME=value
    env OUT="$root/$part" END=${END:-570} STEPS=${STEPS:-2} GAP=${GAP:-5} PASSES=train PER=${PER:-3} "$@" bash "$0" steady
  }
  for part in $parts; do
    case $part in
      cold) env OUT=$root/cold PASSES=cold PER=${COLD_PER:-2} END=${COLD_END:-260} \
          ${COLD_COMPILE:+KBENCH_COMPILE_BASELINE=$COLD_COMPILE} ${COLD_LATER:+KBENCH_COMPILE_LATER=$COLD_LATER} \
          bash "$0" steady
        [ -n "${KEEP_REFS:-}" ] && (cd "$cache" && tar czf "$root/refs.tgz" reference) ;;
      base) train ;;
      before) (cd .carry/before && PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" train) ;;  # another tree, same cache (its bench/rl_batch.py puts its own root first)
      none) ;;  # (VARIANTS=none: the cold pass alone)
      gil|idle) train PROFILE=$part ;;
      spares*) train KBENCH_SPARE_WORKERS=${part#spares} ;;
      cap*) train CAP=${part#cap} ;;
      builds*) train BUILDS=${part#builds} ;;
      spinsync) train KBENCH_WORKER_BLOCKING_SYNC=0 ;;
      spareidle0) train KBENCH_SPARE_IDLE_START=0 ;;
      spareflight) train KBENCH_GPU_SPARES_IN_FLIGHT=1 ;;  # spares start while a batch is in flight (as before)
      later0) train KBENCH_COMPILE_LATER=0 ;;
      switch*) train KBENCH_TIMING_SWITCH_US=${part#switch} ;;
      ahead*|defer*)  # AHEAD / DEFER shares, one or both: ahead0.4, defer0.16, ahead0.4+defer0.16
        a=$(tr '+' '\n' <<< "$part" | sed -n 's/^ahead//p'); d=$(tr '+' '\n' <<< "$part" | sed -n 's/^defer//p')
        train AHEAD=$a DEFER=$d ;;
      *) echo "trainer: unknown part $part" ;;
    esac 2>&1 | grep -E "candidates per minute|batch wall|exclusive device holds, sum|timings after|correct \||flagged \||torch.compile \||compiled references|CPU-seconds per candidate|CPU-seconds by role|run ahead: when|Cut|Samples|overlaps|memory in use" | sed "s/^/[$part] /"
  done
  (cd "$root" && tar czf trainer.tgz $parts 2>/dev/null && rm -rf $parts)
  ;;
grpo)  # issue #25: TRL GRPO under accelerate launch, one process per GPU, each evaluating on its own
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 TRL_EXPERIMENTAL_SILENCE=1
  n=${NGPUS:-$(nvidia-smi -L | wc -l)}
  stamp "tiny model"
  python3 -m kbench_training.tiny --out /tmp/kbench-tiny --hidden 256 --layers 4 --heads 4 --kv-heads 2 2>&1 | tail -2
  stamp "GRPO on $n GPUs (accelerate launch)"
  nvidia-smi --query-compute-apps=timestamp,pid,gpu_uuid,used_memory --format=csv -l 5 > "$OUT/grpo_gpu_apps.csv" &
  SMI=$!
  timeout -k 20 $(left ${END:-590}) accelerate launch --multi_gpu --num_processes $n --num_machines 1 \
    --mixed_precision no --dynamo_backend no bench/train_multi_gpu.py --out "$OUT/grpo" -- --model /tmp/kbench-tiny \
    --device cuda --max-steps ${STEPS:-3} --num-generations 4 --per-device-batch-size 4 \
    --max-completion-length 64 --no-save 2>&1 | grep -v "it/s\]$\|s/it\]$" | grep -v Warning | tail -30
  kill $SMI 2>/dev/null
  cat "$OUT/grpo/ranks.jsonl"
  ;;
mainjob)  # issue #22: the README's main job on the GPU, with its defaults, cut at 330 s (the target is 300 s)
  python3 bench/register_entry_points.py /tmp/site >/dev/null
  stamp "kbench run (its defaults) on the GPU"
  ( time timeout -k 10 ${MAINJOB_S:-330} python3 -m kbench_apps.cli run --out "$OUT/mainjob.jsonl" ) 2>&1 \
    | tee "$OUT/mainjob.txt" | tail -30
  stamp "the fast CUDA solutions and rms_norm (tests/test_gpu.py)"
  KBENCH_GPU_ONLY="level1/" KBENCH_GPU_RECORD="$OUT/test_gpu_fast.jsonl" timeout $(left 590) python3 -m pytest -q \
    tests/test_gpu.py -k "fast_cuda or rms_norm" -p no:cacheprovider -rfE 2>&1 | tee "$OUT/test_gpu_fast.txt" | tail -20
  ;;
trust)  # after a change to evaluation: tests/test_gpu.py whole, the forgeries, the trusted-path fidelity
  stamp "tests/test_gpu.py"
  KBENCH_GPU_RECORD="$OUT/test_gpu.jsonl" timeout $(left 420) python3 -m pytest -q tests/test_gpu.py \
    -p no:cacheprovider -rfE 2>&1 | tee "$OUT/test_gpu.txt" | tail -30
  stamp "forgeries (gpu_trust.py)"
  timeout $(left 500) python3 bench/gpu_trust.py --out "$OUT/trust_gpu.jsonl" 2>&1 | tail -20
  stamp "timing fidelity through the trusted path"
  timeout $(left 590) python3 bench/timing_fidelity_trusted.py --out "$OUT/timing_fidelity_trusted.md" 2>&1 | tail -16
  ;;
train)
  stamp "GRPO"
  OUT=$OUT/train timeout 400 bash bench/train_gpu.sh 2>&1 | tail -30
  ;;
esac
stamp "done"
ls -R "$OUT"
