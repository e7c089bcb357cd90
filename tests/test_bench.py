"""The throughput benchmark runs end to end on the CPU (small): naive and kbench side by side."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT


@pytest.mark.slow
def test_throughput_benchmark_small(tmp_path):
    out = tmp_path / "tp.md"
    p = subprocess.run([sys.executable, str(ROOT / "bench/throughput.py"), "--device", "cpu", "--n", "2",
                        "--naive", "1", "--cold", "1", "--out", str(out)], capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    text = out.read_text()
    assert "throughput ratio" in text and "cold step latency" in text and "env overhead" in text
    assert (tmp_path / "tp.jsonl").exists()


def test_rl_batch_reads_the_workers_cpu_from_a_v2_cgroup_only(tmp_path, monkeypatch):
    """The workers' CPU-seconds are cgroup v2's cpu.stat of kbench's worker cgroups; v1's pids hierarchy has none."""
    from bench.rl_batch import workers_cpu_seconds
    from kbench_env.sandbox.confine.cgroup import PidsCgroup

    usage_usec = 2_500_000  # (a fixture's figure: the test reads it back, it times nothing)
    (tmp_path / "cpu.stat").write_text(f"usage_usec {usage_usec}\nuser_usec 2000000\nsystem_usec 500000\n")
    monkeypatch.setattr(PidsCgroup, "base", classmethod(lambda cls: (str(tmp_path), 2)))
    assert workers_cpu_seconds() == usage_usec / 1e6
    monkeypatch.setattr(PidsCgroup, "base", classmethod(lambda cls: (str(tmp_path), 1)))
    assert workers_cpu_seconds() is None
    monkeypatch.setattr(PidsCgroup, "base", classmethod(lambda cls: None))
    assert workers_cpu_seconds() is None


@pytest.mark.slow
def test_rl_batch_benchmark_small(tmp_path):
    """A GRPO-like batch, tiny: distinct candidates evaluated cold then warm, with the figures an RL user reads."""
    import json

    out = tmp_path / "rl.md"
    p = subprocess.run([sys.executable, str(ROOT / "bench/rl_batch.py"), "--device", "cpu", "--tasks", "1",
                        "--per-task", "2", "--timing", "quick", "--reference-cache", "on", "--cache-dir",
                        str(tmp_path / "cache"), "--serve", "--naive", "1", "--out", str(out)], capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    text = out.read_text()
    for figure in ("candidates per minute", "step latency p95", "build CPU-seconds per candidate",
                   "device hold per candidate"):
        assert figure in text
    lines = [json.loads(x) for x in (tmp_path / "rl.jsonl").read_text().splitlines()]
    assert lines[0]["run"]["tasks"] == 1 and lines[0]["candidates"] == 2  # the run's header comes first
    rows = [r for r in lines if "pass" in r]
    summary = {r["summary"]["pass"]: r["summary"] for r in lines if "summary" in r}
    assert [r["pass"] for r in rows] == ["cold"] * 2 + ["warm"] * 2
    assert all(r["correct"] and not r["flags"] for r in rows), rows
    assert len({r["candidate"] for r in rows}) == 2 and len({r["task"] for r in rows}) == 1  # two distinct kernels
    assert summary["cold"]["build_cpu_s"] > summary["warm"]["build_cpu_s"]  # the warm pass finds its builds cached
    # the host's busy seconds hold the builder's and this process's (the split's "other" is what is left)
    cold = summary["cold"]
    assert cold["host_cpu_s"] >= cold["build_cpu_s"] + cold["trusted_cpu_s"] > 0, cold
    per = dict(part.rsplit(" ", 1) for part in cold["cpu_per_candidate"].split(", "))
    assert list(per) == ["host", "builds", "workers", "trusted"] + (["other"] if per["workers"] != "-" else []), per
    assert abs(float(per["host"]) - cold["host_cpu_s"] / 2) < 0.01 and float(per["builds"]) > 0, per
    # the builder's replies carry its caches' counters: the cold pass's two builds share one binding head
    assert "heads made" in summary["cold"]["builder_caches"] and "the builder's caches" in text
    assert list((tmp_path / "cache" / "reference").glob("*/entries/*.json"))  # references kept for the warm pass
    assert {r["device"] for r in rows} == {"cpu"}
    served = summary["warm, served"]  # the same batch through kbench serve's /batch, same caches
    assert served["candidates"] == 2 and served["correct"] == 2
    assert "Through HTTP (`kbench serve`" in text
    naive = summary["naive (1, serial)"]  # the naive way beside the passes: a fresh process, plain load_inline
    assert naive["naive"] and naive["candidates"] == 1 and naive["correct"] == 1, naive
    assert "naive (1, serial)" in text.splitlines()[4]  # a column of the report's table


@pytest.mark.slow
def test_rl_batch_fast_format_draws_fast_candidates_and_holds_them_to_the_format(tmp_path):
    """--format fast: the candidates come from the fast format's folders (tasks/solutions/fast_cpu and
    bench/data/rl_batch/fast_cpu), the Evaluator holds them to format="fast", and the report names the format."""
    import json

    out = tmp_path / "rl.md"
    p = subprocess.run([sys.executable, str(ROOT / "bench/rl_batch.py"), "--device", "cpu", "--format", "fast",
                        "--tasks", "1", "--per-task", "2", "--timing", "quick", "--passes", "cold", "--cache-dir",
                        str(tmp_path / "cache"), "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    rows = [r for r in map(json.loads, (tmp_path / "rl.jsonl").read_text().splitlines()) if "pass" in r]
    assert sorted(r["candidate"] for r in rows) == ["bench/data/rl_batch/fast_cpu/level1/relu__serial_simd.py",
                                                    "tasks/solutions/fast_cpu/level1/relu.py"]
    assert all(r["format"] == "fast" and r["correct"] and not r["flags"] for r in rows), rows
    text = out.read_text()
    assert "fast-format candidates" in text.splitlines()[0] and "--format fast" in text


def test_rl_batch_refuses_a_format_the_device_cannot_run_in_one_line():
    """--format triton on the CPU: no batch is started; exit status 2 and the format's own one-line reason."""
    p = subprocess.run([sys.executable, str(ROOT / "bench/rl_batch.py"), "--device", "cpu", "--format", "triton"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "needs a CUDA device" in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_rl_batch_catalogue_per_format_finds_each_formats_folder():
    """The catalogue of a format draws only from that format's folders: fast_cpu for the fast format on the CPU,
    the KernelBench-format cpu folder otherwise (a fast-format source never enters a KernelBench batch)."""
    from bench.rl_batch import catalogue

    fast = catalogue("cpu", "fast")
    assert [label for label, _ in fast["level1/relu"]] == ["tasks/solutions/fast_cpu/level1/relu.py",
                                                          "bench/data/rl_batch/fast_cpu/level1/relu__serial_simd.py"]
    kb = catalogue("cpu")
    assert all("fast_" not in label for cands in kb.values() for label, _ in cands)
    assert all("cpp_kernel" in src for cands in fast.values() for _, src in cands)


def test_rl_batch_build_waves_tell_the_builds_that_waited_for_a_place_from_those_that_did_not():
    """A build phase longer than the builder's own seconds and the worker's start by more than a second waited for a
    place in the builder; its end is its start in the pass plus its build phase. Rows without the builder's seconds
    (a builder that does not send them, or cached builds) give no figure."""
    from bench.rl_batch import build_waves

    # made-up rows of a pass (its phases' seconds as a report's rows carry them): a pure function, nothing is timed
    def row(build, builder, done, step, warmup=0.0):
        return {"done_s": done, "step_s": step, "phases": {"build": build, "builder": builder,
                                                            "worker_warmup": warmup}}

    rows = [row(30.0, 29.5, 32.0, 32.0), row(28.0, 12.0, 40.0, 40.0, warmup=4.0), row(45.0, 15.0, 50.0, 49.0)]
    assert build_waves(rows) == "3 end 28.0-46.0; 2 waited for a place 12.0-30.0 s, ended 28.0-46.0"
    assert build_waves([row(30.0, 29.5, 32.0, 32.0)]) == "1 end 30.0-30.0; 0 waited for a place - s, ended -"
    assert build_waves([{"done_s": 5.0, "step_s": 5.0, "phases": {"build": 3.0}}]) is None


@pytest.mark.slow
def test_rl_batch_cut_by_a_time_limit_keeps_its_rows_and_writes_its_report(tmp_path):
    """A device call's limit ends a run with SIGTERM: every evaluation finished by then is in the JSONL already,
    and the report is written with the cut pass's figures over those evaluations."""
    import json
    import signal
    import time

    out = tmp_path / "rl.md"
    p = subprocess.Popen([sys.executable, str(ROOT / "bench/rl_batch.py"), "--device", "cpu", "--tasks", "1",
                          "--per-task", "2", "--timing", "quick", "--cache-dir", str(tmp_path / "cache"),
                          "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    rows_file = tmp_path / "rl.jsonl"
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and p.poll() is None:
            if rows_file.exists() and any('"pass"' in x for x in rows_file.read_text().splitlines()):
                break
            time.sleep(0.1)
        assert p.poll() is None, "the run ended before its first evaluation could be cut"
        p.send_signal(signal.SIGTERM)
        output, _ = p.communicate(timeout=600)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, output[-3000:]
    rows = [json.loads(x) for x in rows_file.read_text().splitlines()]
    done = [r for r in rows if "pass" in r]
    assert rows[0]["run"]["per_task"] == 2 and 1 <= len(done) < 4
    text = out.read_text()
    assert "(cut)" in text and "Cut by signal 15 (SIGTERM)" in text
    cut_pass = done[-1]["pass"]
    cell = text.split("| candidates per minute |")[0].splitlines()[-2]  # the header row: the passes' names
    assert f"{cut_pass} (cut)" in cell, text


def test_rl_batch_cuda_catalogue_offers_eight_distinct_kernels_for_eight_tasks():
    """The CUDA batch (issue #22's 8 tasks x 8 distinct kernels) is there to draw: at least 8 tasks from at least 2
    levels offer at least 8 distinct KernelBench-format candidates each (shipped solution, honest variants and
    bench/data/rl_batch/cuda together)."""
    from bench.rl_batch import catalogue, pick

    cat = catalogue("cuda")
    full = sorted(t for t, cands in cat.items() if len(cands) >= 8)
    assert len(full) >= 8, {t: len(c) for t, c in cat.items()}
    assert len({t.split("/")[0] for t in full}) >= 2, full
    for t in full:
        assert len({src for _, src in cat[t]}) == len(cat[t])  # distinct sources only
    batch = pick(cat, 8, 8)
    assert [len(c) for _, c in batch] == [8] * 8 and len({t.split("/")[0] for t, _ in batch}) >= 2


def test_rl_batch_cuda_candidates_are_wellformed():
    """Every file under bench/data/rl_batch/cuda is <level>/<task>__<variant>.py for a task with a shipped CUDA
    solution (so catalogue() draws it), parses, defines ModelNew and builds its kernels through load_inline with
    CUDA sources and a docstring saying what it is. Nothing is built here (bench/cuda_compile_check.py does that)."""
    import ast

    files = sorted((ROOT / "bench/data/rl_batch/cuda").glob("*/*.py"))
    assert files
    for f in files:
        rel = f.relative_to(ROOT)
        task, sep, variant = f.stem.partition("__")
        assert sep and variant, f"{rel}: expected <task>__<variant>.py"
        assert (ROOT / "tasks" / f.parent.name / f"{task}.py").is_file(), f"{rel}: no task {f.parent.name}/{task}"
        assert (ROOT / "tasks/solutions/cuda" / f.parent.name / f"{task}.py").is_file(), f"{rel}: no shipped solution"
        tree = ast.parse(f.read_text(), str(f))
        assert ast.get_docstring(tree), f"{rel}: no docstring"
        assert any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body), f"{rel}: no ModelNew"
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "load_inline"]
        assert calls and all({"cuda_sources", "functions"} <= {k.arg for k in c.keywords} for c in calls), rel


def test_rl_batch_fast_cuda_catalogue_offers_six_distinct_kernels_for_eight_tasks():
    """The fast-format CUDA batch (bench/data/rl_batch/fast_cuda) offers at least 6 distinct candidates for each of
    8 tasks over at least 2 levels, and rl_batch --format fast on CUDA draws them."""
    from bench.rl_batch import catalogue, pick

    cat = catalogue("cuda", "fast")
    full = sorted(t for t, cands in cat.items() if len(cands) >= 6)
    assert len(full) >= 8 and len({t.split("/")[0] for t in full}) >= 2, {t: len(c) for t, c in cat.items()}
    batch = pick(cat, 8, 6)
    assert [len(c) for _, c in batch] == [6] * 8
    # the batch's own files and, where a task has one, its shipped fast solution (tasks/solutions/fast_cuda)
    assert all(label.startswith(("bench/data/rl_batch/fast_cuda/", "tasks/solutions/fast_cuda/"))
               for _, c in batch for label, _ in c)
    assert sum(label.startswith("bench/data/rl_batch/fast_cuda/") for _, c in batch for label, _ in c) >= 6 * 8 - 8


def test_rl_batch_fast_cuda_candidates_pass_the_screen_and_launch_checks():
    """Every file under bench/data/rl_batch/fast_cuda is <level>/<task>__<variant>.py for a task, passes the fast
    format's screen for the cuda backend, and its ModelNew (the task's parameters, seeded alike) launches only
    kernels whose extern "C" signatures take the arguments given, on the task's small configurations
    (bench/fast_cuda_check.py, kernels recorded, not run; the script itself covers every CUDA configuration)."""
    from bench.fast_cuda_check import check_file
    from kbench_env.backends import get_backend
    from kbench_env.pipeline import formats

    backend = get_backend("cuda")
    files = sorted((ROOT / "bench/data/rl_batch/fast_cuda").glob("*/*.py"))
    assert len(files) >= 48
    for f in files:
        rel = f.relative_to(ROOT)
        task, sep, variant = f.stem.partition("__")
        assert sep and variant and (ROOT / "tasks" / f.parent.name / f"{task}.py").is_file(), rel
        formats.screen_action(f.read_text(), backend, "fast")
        sources, problems = check_file(f, device="cpu")
        assert sources and not problems, f"{rel}: {problems}"


def test_cuda_emulate_runs_a_fast_cuda_candidate_on_the_cpu_and_catches_wrong_indexing(tmp_path):
    """bench/cuda_emulate.py runs a fast-format CUDA candidate's kernels on the CPU (a thread per CUDA thread) on
    its task's held-out odd configuration, float32 and bfloat16, and compares with the reference: the candidate
    passes; the same candidate writing each element to the mirrored index fails, in both dtypes."""
    import shutil

    from bench.cuda_emulate import emulate

    if shutil.which("g++") is None:
        pytest.skip("no g++ to build the emulated kernels")
    good = ROOT / "bench/data/rl_batch/fast_cuda/level1/relu__thread_per_element.py"
    assert emulate(good, cache=tmp_path / "cache") == [("odd", None), ("odd (bfloat16)", None)]
    (tmp_path / "level1").mkdir()
    bad = tmp_path / "level1" / "relu__mirrored.py"
    bad.write_text(good.read_text().replace("if (i < n) y[i]", "if (i < n) y[n - 1 - i]"))
    got = dict(emulate(bad, cache=tmp_path / "cache"))
    assert all(got[c] and "error" in got[c] for c in ("odd", "odd (bfloat16)")), got


def test_cuda_compile_check_matches_a_variant_file_to_its_task():
    """bench/cuda_compile_check.py compares a <task>__<variant>.py candidate's parameters with <task>'s Model (the
    module is run with load_inline recorded, nothing built): the same parameters pass, a different creation fails."""
    from bench.cuda_compile_check import check_parameters, extract

    path = ROOT / "bench/data/rl_batch/cuda/robust/layernorm_forward__welford_block.py"
    mods: list = []
    calls = extract(path, mods)
    assert calls and calls[0]["cuda_sources"] and check_parameters(path, mods[0]) is None
    torch = pytest.importorskip("torch")

    class Swapped(torch.nn.Module):  # bias created before weight: other seeded values
        def __init__(self, hidden, eps=1e-5):
            super().__init__()
            bias = torch.nn.Parameter(0.5 * torch.randn(hidden))
            self.weight = torch.nn.Parameter(1.0 + 0.5 * torch.randn(hidden))
            self.bias = bias

    mods[0].ModelNew = Swapped
    assert "different initial values" in (check_parameters(path, mods[0]) or "")


def test_rl_batch_train_pass_keeps_one_executor_and_makes_every_steps_sources_new(tmp_path):
    """--passes cold,train: the train pass's steps run through one executor, each step's sources new (their builds
    are not found cached), each step a pass of the report with the spare workers that served it."""
    import json

    out = tmp_path / "rl.md"
    p = subprocess.run([sys.executable, str(ROOT / "bench/rl_batch.py"), "--device", "cpu", "--format", "fast",
                        "--tasks", "1", "--per-task", "1", "--timing", "quick", "--passes", "cold,warm,train",
                        "--steps", "2", "--gap", "1", "--cache-dir",
                        str(tmp_path / "cache"), "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    lines = [json.loads(x) for x in (tmp_path / "rl.jsonl").read_text().splitlines()]
    rows = [r for r in lines if "pass" in r]
    summary = {r["summary"]["pass"]: r["summary"] for r in lines if "summary" in r}
    assert [r["pass"] for r in rows] == ["cold", "warm", "train 1", "train 2"]
    assert all(r["correct"] and not r["flags"] for r in rows), rows
    # the warm pass finds its builds cached; a step's sources are new, so none of its builds is found cached
    assert [r["cached_build"] for r in rows] == [False, True, False, False], rows
    assert all(summary[step]["spares_served"] is not None for step in ("train 1", "train 2"))
    assert "train 2" in out.read_text().splitlines()[4]


def test_a_training_steps_source_differs_in_its_kernel_text():
    sys.path.insert(0, str(ROOT / "bench"))
    from rl_batch import step_source

    cuda = 'src = r"""\n#include <cuda.h>\n__global__ void k() {}\n"""\n'
    one, two = step_source(cuda, 1), step_source(cuda, 2)
    assert one != two and "step 1 */ #include" in one and one.count("__global__") == 1
    assert step_source("def f():\n    return 1\n", 3).endswith("# kbench rl_batch step 3\n")


def test_rl_batch_counts_a_long_lived_builders_cpu_from_the_pass_start():
    """A training run's builder lives from step to step: a pass's build CPU-seconds are what it spent during the
    pass, not since it started (step 2 read twice step 1's before)."""
    import os
    import time

    from bench.rl_batch import BuilderCPU, proc_cpu_seconds

    class Builder:  # this process stands in for the builder
        pid = os.getpid()

    end = time.process_time() + 0.5
    while time.process_time() < end:  # spent before the pass
        pass
    spent_before = proc_cpu_seconds(os.getpid())
    cpu = BuilderCPU(Builder())
    end = time.process_time() + 0.2
    while time.process_time() < end:  # spent during it
        pass
    counted = cpu.stop()
    assert spent_before >= 0.5
    assert 0.1 <= counted < 0.45, counted


def test_profile_summary_counts_a_function_once_per_stack_and_filters_by_a_frame(tmp_path, capsys):
    from bench.probes.profile_summary import main

    folded = tmp_path / "profile.txt"
    folded.write_text("thread (11): ThreadPoolExecutor-0_1;run (a.py:3);f (a.py:10);f (a.py:12);g (b.py:1) 5\n"
                      "thread (12): ThreadPoolExecutor-0_2;run (a.py:3);h (c.py:2) 3\n"
                      "thread (13): MainThread;main (m.py:1) 2\n")
    assert main([str(folded), "--top", "10"]) == 0
    table = {line.split("`")[1]: line.split("|")[1:4] for line in capsys.readouterr().out.splitlines()
             if line.startswith("| ") and "`" in line}
    assert [x.strip() for x in table["f (a.py)"]] == ["5", "50.0", "0"]  # two frames of f in one stack: once
    assert [x.strip() for x in table["g (b.py)"]] == ["5", "50.0", "5"]
    assert [x.strip() for x in table["run (a.py)"]] == ["8", "80.0", "0"]
    assert main([str(folded), "--under", "h (c.py"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("3 samples through") and "`f (a.py)`" not in out


def test_rl_batch_counts_the_builders_caches_per_pass_and_across_a_restart():
    """A pass's cache figures are the counters' change over it; a builder restarted after idling counts from 0
    again, and its count is then the pass's own."""
    from bench.rl_batch import _served

    before = {"made": 1, "reused": 3, "objects_reused": 0, "host_made": 1, "host_reused": 2}
    after = {"made": 1, "reused": 9, "objects_reused": 4, "host_made": 0, "host_reused": 5}
    line = _served(before, after)
    assert line == ("heads made 0, heads reused 6, binding objects reused 4, host starts made 0, "
                    "host starts reused 3")
    assert _served(before, {}) is None


def test_rl_batch_reports_the_compiled_references_and_where_the_longest_hold_went():
    from types import SimpleNamespace

    from bench.rl_batch import compile_later_figures

    log = [{"task": "robust/rmsnorm_forward", "config": "small", "hold_s": 31.88, "at": 9.0, "set_up_s": 31.69,
            "steps_ms": {"capture": 31482.3}, "steps_usage": {"capture": [900.0, 950.0, 2400, 30, 3]},
            "block": 2461, "method": "cuda-graph", "blocks": 5},
           {"task": "level1/relu", "config": "odd", "hold_s": 0.5, "at": 2.0}]
    later = SimpleNamespace(timed=6, left=1, failed=0, gave_way=2, log=log)
    evaluators = [SimpleNamespace(baselines=SimpleNamespace(later=later))]
    line = compile_later_figures(evaluators)
    assert line.startswith("timed 6, left 1, failed 0, gave way 2; exclusive hold a configuration median 16.19 s, "
                           "longest 31.88 s (robust/rmsnorm_forward small: set-up 31.69 s"), line
    assert "{'capture': [900.0, 950.0, 2400, 30, 3]}" in line and "5 blocks of 2461, cuda-graph)" in line
    assert "given way" not in line  # (not given way: no look at its threads)
    log[0]["gave_way_threads"] = {"threads": 41, "states": {"D": 1, "S": 40}, "waits": {"uvm_wait": 1}}
    assert "cuda-graph; given way, its threads then: {'threads': 41, 'states': {'D': 1, 'S': 40}" in (
        compile_later_figures(evaluators))
    assert "median 31.88 s" in compile_later_figures(evaluators, since=5.0)  # those timed before ``since`` left out
    del later.gave_way  # (an evaluator without the give-way: counted as none)
    assert "failed 0, gave way 0;" in compile_later_figures(evaluators)
    assert compile_later_figures([SimpleNamespace(baselines=SimpleNamespace(later=None))]) is None


def test_thread_sampler_sees_a_busy_thread_and_names_the_drivers_waits_per_step(tmp_path, capsys):
    """bench/probes/thread_sampler.py: a sweep after this thread burned CPU lists it with its ticks; the summary cuts
    a record by the hold log's steps and names an NVIDIA ioctl's wait by its request (RM_ALLOC), counted in the
    step it fell in only."""
    import io
    import json
    import os
    import time

    from bench.probes import thread_sampler as ts

    seen: set = set()
    last, _ = ts.sweep({}, seen, io.StringIO())
    t0 = time.process_time()
    while time.process_time() - t0 < 0.3:
        sum(range(1000))
    _, rows = ts.sweep(last, seen, io.StringIO())
    mine = [r for r in rows if r[0] == os.getpid()]
    assert mine and sum(r[4] + r[5] for r in mine) > 0

    s = 1_000_000_000
    holds = tmp_path / "holds.jsonl"
    holds.write_text("".join(json.dumps({"lock": "g", "mode": m, "pid": 1, "thread": 1, "start_ns": a, "end_ns": b})
                             + "\n" for m, a, b in [("exclusive", 100 * s, 110 * s), ("shared", 200 * s, 230 * s)]))
    d_row = [7, 7, "python3", "D", 0, 0, "os_acquire_rwlock_write", {"nr": 16, "fd": "/dev/nvidiactl",
                                                                      "req": hex(0xC020462B)}]
    busy = [7, 7, "python3", "R", 3, 9]
    record = tmp_path / "threads.jsonl"
    lines = [{"proc": 7, "ppid": 1, "comm": "python3", "cmd": "python3 -c from kbench"}]
    lines += [{"t_ns": 101 * s + k, "cpu": [1, 1, 1, 0], "cost_ms": 5.0, "threads": [busy]} for k in range(3)]
    lines += [{"t_ns": 201 * s + k, "cpu": [1, 1, 1, 0], "cost_ms": 5.0, "threads": [d_row, busy]} for k in range(4)]
    record.write_text("".join(json.dumps(x) + "\n" for x in lines))
    ts.main(["summary", str(record), "--holds", str(holds), "--window", "5"])
    out = capsys.readouterr().out
    first, second = out.split("stretch 2 at 100.0 s, its first 5 s")
    assert "D os_acquire_rwlock_write" not in first, first
    assert "     4  D os_acquire_rwlock_write sys16 nvidiactl RM_ALLOC\n" in second.split("stretch 2, the rest")[0]
    assert "python3 from kbench" in first  # (options left out of a command's label)
