"""Soak test of the CPU backend: many steps through ``KBench-v0`` mixing good, wrong, crashing, hanging, hostile and
malformed candidates; checks that nothing leaks (processes, parent memory, scratch directories, cgroups, disk) and
that every step's outcome is the one its kind calls for.

    python bench/soak.py --steps 1000 --out bench/results/soak_cpu.jsonl --summary bench/results/soak_cpu.md

Every step is appended to the JSONL file as it finishes (append-only: a killed run keeps what it did). The summary
(Markdown) gives the date, the machine, the sandbox's protections, counts per kind and outcome, parent RSS at the
start and end, leaked processes, and disk figures. ``run_soak(steps=30)`` is the small version the tests run.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import glob
import json
import os
import platform
import random
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kbench_env.sandbox.confine.proc_table import processes  # noqa: E402  (os only: --help stays quick)

# ---------------------------------------------------------------------- candidates

_HEADER = '''
import os, sys, ctypes, time
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

if False:  # names the build mechanism for the screen; never runs
    load_inline(name="never", cpp_sources="")
'''


def _forward(body: str, at_import: str = "") -> str:
    return _HEADER + at_import + f'''

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
{body}
'''


def _at_import(code: str) -> str:
    return _forward("        return torch.relu(x)", at_import=code + "\n")


def candidates(secret_file: str, results_file: str, build_root: str) -> dict:
    """kind -> list of (name, action). Kinds: good, wrong, crash, hang, resource, bad_input, hostile."""
    good = (ROOT / "tasks/solutions/cpu/level1/relu.py").read_text()
    return {
        "good": [("relu_solution", good)],
        "wrong": [("wrong_shape", _forward("        return x[:, :-1].clone()")),
                  ("wrong_values", _forward("        return x.clone()")),
                  ("wrong_type", _forward("        return 'not a tensor'")),
                  ("wrong_dtype", _forward("        return (x > 0)")),
                  ("modifies_input", _forward("        x.clamp_(min=0)\n        return x.clone()"))],
        "crash": [("segfault", _forward("        ctypes.string_at(0)\n        return x")),
                  ("abort", _forward("        os.abort()")),
                  ("raises_in_forward", _forward("        raise ValueError('kernel launch failed')")),
                  ("exit_at_import", _forward("        return x", at_import="sys.exit(3)\n")),
                  ("raises_at_import", _forward("        return x", at_import="raise ImportError('no module')\n"))],
        "hang": [("infinite_loop", _forward("        while True:\n            pass"))],
        "resource": [("memory_bomb", _forward("        hoard = []\n        while True:\n"
                                              "            hoard.append(bytearray(64 << 20))")),
                     ("fork_bomb", _forward("        while True:\n            try:\n                os.fork()\n"
                                            "            except OSError:\n                pass")),
                     ("disk_fill", _forward("        i = 0\n        while True:\n"
                                            "            with open(f'fill{i}', 'wb') as f:\n"
                                            "                f.write(b'0' * (32 << 20))\n            i += 1"))],
        "bad_input": [("none", None), ("integer", 12345), ("empty", ""), ("binary", b"\x00\xff\xfe"),
                      ("huge", "x = 1\n" * 100_000), ("not_python", "def (:\n"), ("no_modelnew", "import torch\n"),
                      ("non_ascii", "ModelNew = '☃ 日本語'\nclass ModelNew(:")],
        "hostile": [
            ("write_tasks", _at_import(f"open({str(ROOT / 'tasks' / 'soak_pwned.txt')!r}, 'w').write('x')")),
            ("write_home", _at_import(f"open({os.path.expanduser('~/soak_pwned.txt')!r}, 'w').write('x')")),
            ("read_secret", _at_import(f"print(open({secret_file!r}).read())")),
            ("read_ssh", _at_import(f"print(open({os.path.expanduser('~/.ssh/id_rsa')!r}).read())")),
            ("results_tamper", _at_import(f"open({results_file!r}, 'a').write('forged\\n')")),
            ("cache_tamper", _at_import(f"import glob\nfor d in glob.glob({build_root + '/*/'!r}):\n"
                                        f"    open(d + 'pwned.txt', 'w').write('x')")),
            ("socket", _at_import("import socket\nsocket.create_connection(('127.0.0.1', 22), timeout=1)")),
            ("shell", _at_import("os.system('id')")),
            ("parent_environ", _at_import("print(open('/proc/%d/environ' % os.getppid()).read())")),
        ],
    }


#: How often each kind is drawn (a hang costs a whole run timeout, so it is rare).
WEIGHTS = {"good": 22, "wrong": 15, "crash": 15, "hang": 2, "resource": 4, "bad_input": 15, "hostile": 27}


def expected(kind: str, name: str, r: dict) -> str | None:
    """None if the result is what the kind calls for, else what is wrong with it."""
    from kbench_env.protocol.integrity_flags import parse

    flags = r.get("integrity_flags") or []
    sandbox = [f for f in flags if parse(f).kind == "sandbox_violation"]
    if kind == "good":
        return None if r["correct"] and r["reward"] > 0 and not flags else f"good candidate failed: {r['error']}"
    if kind == "bad_input":
        return None if r["error_stage"] == "screen" and r["reward"] == -0.6 else "bad input not screened"
    if kind == "hostile":
        return None if sandbox and r["reward"] == -1.0 else "hostile candidate not flagged"
    if sandbox:
        return f"unexpected sandbox flag: {sandbox[0]}"
    if r["correct"] or r["reward"] >= 0:
        return "a faulty candidate was paid"
    return None


def outcome(r: dict) -> str:
    if r.get("integrity_flags"):
        from kbench_env.protocol.integrity_flags import parse
        return "flagged:" + parse(r["integrity_flags"][0]).kind
    if r["correct"]:
        return "correct"
    err = r.get("error") or ""
    if "timed out" in err:
        return "timed_out"
    if "crashed with" in err:
        return "crashed:" + err.split("crashed with ", 1)[1].split()[0]
    if "over its limit" in err:
        return "killed_over_limit"
    return f"failed:{r.get('error_stage')}"


# ---------------------------------------------------------------------- leak probes


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def descendants(pid: int | None = None) -> list[int]:
    """Live (not zombie) descendants of this process: the fork server, the resource tracker and any worker."""
    pid = pid or os.getpid()
    children = collections.defaultdict(list)
    for proc in processes():
        children[proc.ppid].append(proc)
    out, stack = [], [pid]
    while stack:
        for c in children.get(stack.pop(), []):
            if c.live:
                out.append(c.pid)
            stack.append(c.pid)
    return out


def processes_under(root: str) -> list[int]:
    """Live processes that belong to workers whose scratch directories are under ``root``: their working directory
    is there, or (in a worker's own mount namespace, where the working directory reads as another path from
    here) their mount table names it (the scratch mount). Any such process left after the run has leaked,
    whoever its parent is now (init adopts orphans)."""
    prefix = root.rstrip("/") + "/"
    found = []
    for proc in processes():
        p = proc.pid
        if not proc.live or p == os.getpid():
            continue
        try:
            cwd = os.readlink(f"/proc/{p}/cwd")
            if cwd.startswith(prefix):
                found.append(p)
                continue
            with open(f"/proc/{p}/mountinfo") as f:  # the scratch mount
                if prefix in f.read():
                    found.append(p)
        except OSError:
            continue
    return found


def _du(path: str) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_blocks * 512
            except OSError:
                pass
    return total


def _scratch_dirs(root: str) -> list[str]:
    return [e for e in os.listdir(root) if e.startswith("kbench-worker-")]


# ---------------------------------------------------------------------- the run


def run_soak(steps: int = 1000, out: str | None = None, seed: int = 0, cache_dir: str | None = None,
             run_timeout: float = 3.0, progress: bool = False) -> dict:
    import gymnasium as gym

    import kbench_env  # noqa: F401  (registers KBench-v0)
    from kbench_env.pipeline.evaluator import Evaluator
    from kbench_env.sandbox.confine.policy import Limits
    from kbench_env.sandbox.reaper import flush_cleanups

    work = tempfile.mkdtemp(prefix="kbench-soak-")
    secret = os.path.join(work, "secret.txt")
    Path(secret).write_text("sk-soak-secret")
    results_file = out or os.path.join(work, "soak.jsonl")
    guard_file = os.path.join(work, "results_guard.jsonl")  # the file the hostile candidate tries to tamper with
    Path(guard_file).write_text('{"reward": 0.1}\n')
    scratch_root = os.path.join(work, "scratch")  # the workers' scratch directories, to count what is left
    os.makedirs(scratch_root)
    limits = Limits(build_timeout=300, run_timeout=run_timeout, time_timeout=60, memory_bytes=1 << 30,
                    disk_bytes=256 << 20, processes=64, scratch_root=scratch_root)
    ev = Evaluator(device="cpu", cache_dir=cache_dir, limits=limits, check_calls=2,
                   timing={"warmup": 1, "min_reps": 3, "max_reps": 10, "min_seconds": 0.01})
    env = gym.make("KBench-v0", task="level1/relu", evaluator=ev, max_turns=50, disable_env_checker=True)
    env.reset(seed=seed)
    pool = candidates(secret, guard_file, ev.build_root)
    rng = random.Random(seed)
    kinds = list(WEIGHTS)
    weights = [WEIGHTS[k] for k in kinds]

    # Warm up (fork server, reference timing, the good candidate's build), then take the baselines.
    env.step(pool["good"][0][1])
    flush_cleanups()
    base = {"descendants": len(descendants()), "orphans": len(processes_under(scratch_root)), "rss_mb": _rss_mb(),
            "scratch_dirs": len(_scratch_dirs(scratch_root)), "cache_bytes": _du(ev.build_root),
            "disk_free": shutil.disk_usage(tempfile.gettempdir()).free}
    rss_trace = [round(base["rss_mb"], 1)]
    counts: dict = collections.defaultdict(collections.Counter)
    rewards: dict = collections.defaultdict(list)
    unexpected: list = []
    t_start = time.time()
    with open(results_file, "a") as log:
        for step in range(steps):
            kind = rng.choices(kinds, weights)[0]
            name, action = rng.choice(pool[kind])
            t0 = time.perf_counter()
            try:
                obs, reward, terminated, truncated, info = env.step(action)
            except Exception as exc:  # step must never raise: record it as the worst finding
                unexpected.append({"step": step, "kind": kind, "name": name, "problem": f"step raised {exc!r}"})
                env.reset()
                continue
            r = info["eval"]
            problem = expected(kind, name, r)
            res = outcome(r)
            counts[kind][res] += 1
            rewards[kind].append(reward)
            rec = {"step": step, "kind": kind, "candidate": name, "outcome": res, "reward": reward,
                   "stage": r["stage"], "error_stage": r["error_stage"], "flags": r["integrity_flags"],
                   "error": (r["error"] or "")[:240], "seconds": round(time.perf_counter() - t0, 3),
                   "rss_mb": round(_rss_mb(), 1), "ok": problem is None}
            log.write(json.dumps(rec) + "\n")
            log.flush()
            if problem:
                unexpected.append({"step": step, "kind": kind, "name": name, "problem": problem})
            if terminated or truncated:
                env.reset()
            if step % 50 == 49:
                rss_trace.append(round(_rss_mb(), 1))
                if progress:
                    print(f"step {step + 1}/{steps}: rss {rss_trace[-1]} MB, unexpected {len(unexpected)}",
                          flush=True)
    elapsed = time.time() - t_start
    ev.close()  # its spare worker: kept on purpose between steps, and what close() must clean up like the rest
    flush_cleanups()
    time.sleep(1.0)  # killed processes are reaped by init shortly after
    end = {"descendants": len(descendants()), "orphans": len(processes_under(scratch_root)), "rss_mb": _rss_mb(),
           "scratch_dirs": len(_scratch_dirs(scratch_root)), "cache_bytes": _du(ev.build_root),
           "disk_free": shutil.disk_usage(tempfile.gettempdir()).free}
    tampered = {"tasks_file": (ROOT / "tasks" / "soak_pwned.txt").exists(),
                "home_file": os.path.exists(os.path.expanduser("~/soak_pwned.txt")),
                "results_file": Path(guard_file).read_text() != '{"reward": 0.1}\n',
                "cache": bool(glob.glob(os.path.join(ev.build_root, "*", "pwned.txt")))}  # <build unit>/
    env.close()
    shutil.rmtree(work, ignore_errors=True)
    return {"steps": steps, "elapsed_s": round(elapsed, 1), "counts": {k: dict(v) for k, v in counts.items()},
            "mean_reward": {k: round(sum(v) / len(v), 3) for k, v in rewards.items()}, "unexpected": unexpected,
            "start": base, "end": end, "rss_trace_mb": rss_trace, "tampered": tampered,
            "leaked_processes": max(0, end["descendants"] - base["descendants"]) + end["orphans"],
            "protections": _protections(), "results_file": results_file}


def _protections() -> dict:
    from kbench_env.sandbox.doctor import doctor

    rep = doctor()
    return {"active": sorted(rep.get("active", {})), "missing": rep.get("missing", {}),
            "worker_start_ms": rep.get("worker_start_ms"), "confine_ms": rep.get("confine_ms")}


def _commit() -> str:
    import subprocess

    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def summary_markdown(s: dict) -> str:
    import torch

    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    lines = [f"# Soak test, CPU backend ({s['steps']} steps)", "",
             f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
             f"- machine: {socket.gethostname()}, {platform.machine()}, {os.cpu_count()} cores, {mem:.0f} GiB, "
             f"Linux {platform.release()}, Python {platform.python_version()}, torch {torch.__version__}, "
             f"uid {os.geteuid()}",
             f"- sandbox layers active: {', '.join(s['protections']['active'])}",
             f"- not active: {', '.join(f'{k} ({v})' for k, v in s['protections']['missing'].items()) or 'none'}",
             f"- a sandboxed worker starts, loads and is cleaned up in {s['protections']['worker_start_ms']} ms "
             f"(confining itself: {s['protections']['confine_ms']} ms)",
             f"- code: commit {_commit()}",
             f"- elapsed: {s['elapsed_s']} s ({s['elapsed_s'] / max(1, s['steps']):.2f} s per step); every step is "
             f"in `{os.path.relpath(s['results_file'], ROOT) if s['results_file'].startswith(str(ROOT)) else s['results_file']}`",
             "", "## Outcomes per kind of candidate", "", "| kind | steps | outcomes | mean reward |",
             "| --- | ---: | --- | ---: |"]
    for kind, c in sorted(s["counts"].items()):
        outs = ", ".join(f"{k} {v}" for k, v in sorted(c.items(), key=lambda kv: -kv[1]))
        lines.append(f"| {kind} | {sum(c.values())} | {outs} | {s['mean_reward'][kind]} |")
    lines += ["", f"Steps whose outcome was not the one their kind calls for: **{len(s['unexpected'])}**"]
    for u in s["unexpected"][:20]:
        lines.append(f"- step {u['step']} ({u['kind']}/{u['name']}): {u['problem'][:200]}")
    st, en = s["start"], s["end"]
    lines += ["", "## Leaks", "", "| | start (after warm-up) | end |", "| --- | ---: | ---: |",
              f"| parent RSS (MB) | {st['rss_mb']:.1f} | {en['rss_mb']:.1f} |",
              f"| live descendant processes (fork server, resource tracker) | {st['descendants']} | {en['descendants']} |",
              f"| processes still running in the workers' scratch directories | {st['orphans']} | {en['orphans']} |",
              f"| scratch directories left | {st['scratch_dirs']} | {en['scratch_dirs']} |",
              f"| build cache (MB) | {st['cache_bytes'] / 2**20:.1f} | {en['cache_bytes'] / 2**20:.1f} |",
              f"| free disk in {tempfile.gettempdir()} (GB) | {st['disk_free'] / 1e9:.2f} | {en['disk_free'] / 1e9:.2f} |",
              "", f"Leaked processes: **{s['leaked_processes']}**. Parent RSS every 50 steps (MB): "
              + ", ".join(str(x) for x in s["rss_trace_mb"]),
              "", "Attacks with an effect outside the sandbox (files in tasks/ or $HOME, the results file, the "
              "build cache): " + (", ".join(k for k, v in s["tampered"].items() if v) or "**none**"), ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="bench/results/soak_cpu.jsonl", help="append-only JSONL, one line per step")
    p.add_argument("--summary", default="bench/results/soak_cpu.md")
    p.add_argument("--run-timeout", type=float, default=3.0, help="seconds before a hanging candidate is killed")
    args = p.parse_args(argv)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    s = run_soak(args.steps, args.out, args.seed, run_timeout=args.run_timeout, progress=True)
    text = summary_markdown(s)
    Path(args.summary).write_text(text)
    print(text)
    return 0 if not s["unexpected"] and s["leaked_processes"] <= 0 else 1


if __name__ == "__main__":
    sys.exit(main())
