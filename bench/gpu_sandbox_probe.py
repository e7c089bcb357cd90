"""Which sandbox layers a CUDA worker survives: evaluate one shipped CUDA solution under each variant of the
sandbox and print the outcome (and the worker's own log where it failed).

    python bench/gpu_sandbox_probe.py [--task level1/relu] [--out results.jsonl]

Variants: no isolation; the GPU default (namespaces, Landlock and seccomp off); the full sandbox
(``Limits.gpu_isolation``); the full sandbox less one layer at a time; and one layer at a time on its own, which
together name the layers that break CUDA when the full sandbox fails; then the finer variants that could keep the
network out of GPU workers (a network namespace without the mount namespace, seccomp allowing AF_UNIX sockets).
The first two variants evaluate the task in full; the others start a diagnostic worker and, where CUDA starts in it,
check the task's first configuration without timing (a few seconds each). Results go to stdout and, with ``--out``, to a JSONL file (one record per variant).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TIMING = {"warmup": 1, "min_reps": 3, "max_reps": 10, "min_seconds": 0.01}


# Loaded as a candidate under each variant: says from inside the sandbox what CUDA's start-up meets (the device
# nodes opened through libc, as the driver opens them; a socket; a thread; torch's own CUDA initialisation).
DIAGNOSE = r'''
import ctypes, ctypes.util, errno, glob, os, socket, threading
import torch
libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
for path in sorted(glob.glob("/dev/nvidia*")):
    fd = libc.open(path.encode(), os.O_RDWR | os.O_CLOEXEC)
    print("PROBE open", path, "ok" if fd >= 0 else os.strerror(ctypes.get_errno()), flush=True)
    if fd >= 0:
        libc.close(fd)
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
    print("PROBE unix socket ok", flush=True)
except Exception as exc:
    print("PROBE unix socket", type(exc).__name__, exc, flush=True)
t = threading.Thread(target=lambda: None)
t.start(); t.join()
print("PROBE thread ok", flush=True)
try:
    torch.cuda.init()
    print("PROBE torch.cuda.init ok:", torch.cuda.get_device_name(), flush=True)
except Exception as exc:
    print("PROBE torch.cuda.init", type(exc).__name__, str(exc)[:600], flush=True)


class ModelNew(torch.nn.Module):
    pass
'''


def variants() -> list[tuple[str, dict]]:
    out = [("no isolation", {"isolation": False}),
           ("GPU default", {}),
           ("full sandbox (gpu_isolation)", {"gpu_isolation": True})]
    layers = ("namespaces", "landlock", "seccomp", "audit", "cgroup")
    for layer in layers:
        out.append((f"full sandbox less {layer}", {"gpu_isolation": True, "isolation_off": (layer,)}))
    for layer in layers:  # one layer at a time on top of the GPU default: which ones CUDA survives
        out.append((f"only {layer}", {"gpu_isolation": True,
                                      "isolation_off": tuple(x for x in layers if x != layer)}))
    # the finer variants that could keep the network out of GPU workers
    out += [("only network namespace", {"gpu_isolation": True, "netns_only": True,
                                         "isolation_off": ("landlock", "seccomp")}),
            ("only seccomp allowing AF_UNIX", {"gpu_isolation": True, "unix_sockets": True,
                                               "isolation_off": ("namespaces", "landlock")}),
            ("network namespace + seccomp allowing AF_UNIX", {"gpu_isolation": True, "netns_only": True,
                                                              "unix_sockets": True,
                                                              "isolation_off": ("landlock",)}),
            ("network namespace + seccomp allowing AF_UNIX + landlock",
             {"gpu_isolation": True, "netns_only": True, "unix_sockets": True}),
            ("network namespace + seccomp allowing AF_UNIX + landlock reading everything",
             {"gpu_isolation": True, "netns_only": True, "unix_sockets": True,
              "extra_read_paths": ("/",)}),
            ("full sandbox with seccomp allowing AF_UNIX", {"gpu_isolation": True, "unix_sockets": True})]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default="level1/relu")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--variants", default="", help="comma-separated substrings of variant names (default: all)")
    args = ap.parse_args(argv)

    import torch

    from kbench_env.pipeline.evaluator import Evaluator
    from kbench_env.pipeline.result import EvalResult
    from kbench_env.sandbox.confine.policy import Limits
    from kbench_env.sandbox.worker_process import Worker
    from kbench_env.tasks.suite import resolve_task, solution_path

    task = resolve_task(args.task)
    backend = "cuda" if args.device.startswith("cuda") else "cpu"
    source = solution_path(task, backend).read_text()
    gpu = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    records = []
    for n, (name, extra) in enumerate(variants()):
        if args.variants and not any(v in name for v in args.variants.split(",")):
            continue
        limits = Limits(build_timeout=600, run_timeout=60, time_timeout=60, **extra)
        # past the first two variants, no timing: see below
        ev = Evaluator(device=args.device, backend=backend, compile_baseline=False, timing=dict(TIMING),
                       limits=limits, time_candidates=n < 2)
        t0 = time.perf_counter()
        try:
            with Worker(DIAGNOSE if backend == "cuda" else "class ModelNew:\n    pass\n", backend, args.device,
                        ev.build_root, limits) as w:
                w.recv(60, "load")
                w._drain_reports()  # noqa: SLF001 - the status report of confine.apply
                prot = w.protections
                diag = [line for line in w.log_tail(8000).splitlines() if line.startswith("PROBE")]
        except Exception as exc:  # noqa: BLE001 - a probe reports, it does not stop
            prot, diag = {"error": f"{type(exc).__name__}: {exc}"}, []
        # Past the first two, a variant whose worker cannot start CUDA needs no evaluation; one that can gets a
        # correctness check on the task's first configuration (no timing: this is about the sandbox).
        init_ok = any(line.startswith("PROBE torch.cuda.init ok") for line in diag) or backend != "cuda"
        if n >= 2:
            probe_task = dataclasses.replace(task, configs=[task.configs_for(args.device)[0]])
        else:
            probe_task = task
        if n >= 2 and not init_ok:
            r = EvalResult(task=task.name, backend=backend, device=args.device,
                           error="torch.cuda.init failed in the worker (see the PROBE lines)")
        else:
            r = ev.evaluate(probe_task, source)
        rec = {"variant": name, "limits": {k: list(v) if isinstance(v, tuple) else v for k, v in extra.items()},
               "correct": r.correct, "flags": list(r.integrity_flags), "error": r.error, "speedup": r.speedup,
               "seconds": round(time.perf_counter() - t0, 2), "protections": prot, "gpu": gpu,
               "date": dt.datetime.now().isoformat(timespec="seconds"), "task": args.task,
               "log_tail": None if r.correct else (r.log_tail or "")[-1500:], "inside": diag,
               "phases": r.phase_seconds}
        records.append(rec)
        active = sorted((prot.get("active") or {}) if isinstance(prot, dict) else [])
        print(f"{name:52s} correct={r.correct!s:5s} {rec['seconds']:6.1f} s  active={','.join(active)}", flush=True)
        print("    phases: " + ", ".join(f"{k} {v:.2f}s" for k, v in (r.phase_seconds or {}).items()), flush=True)
        for line in diag:
            print("    " + line, flush=True)
        if not r.correct:
            print(f"    error: {(r.error or '')[:400]}\n    flags: {r.integrity_flags}\n    --- worker log ---\n"
                  + "\n".join("    " + line for line in (rec["log_tail"] or "").splitlines()[-6:]), flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(rec, default=str) + "\n")
    return 0 if all(r["correct"] for r in records[:2]) else 1


if __name__ == "__main__":
    sys.exit(main())
