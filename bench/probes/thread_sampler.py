"""Where the host's threads are, several times a second, machine-wide: which processes burn system (kernel) time and
what sleeping threads wait on, to say what a trainer step's slow start waits for (issue #36: its first captures
take 5-7 s of wall for 0.3-0.7 s of CPU while the GPU is idle and a sixth of the host's CPU is in the kernel).

    python bench/probes/thread_sampler.py record out.jsonl [--interval 0.2]   # until killed (SIGTERM / SIGINT)
    python bench/probes/thread_sampler.py summary out.jsonl --holds holds.jsonl [--window 12]

``record`` writes a line a sweep: its CLOCK_MONOTONIC time (the device-lock log's clock, so the two line up), the
host's CPU ticks (user, system, idle, iowait) since the last sweep, and every thread that ran since then or sleeps
uninterruptibly (D): its process, thread name, state, user and system ticks since the last sweep, the kernel
function it waits in (``wchan``), and for one in a system call, its number, the call's first arguments and what its
file descriptor names (an NVIDIA device, a shared-memory file). A process is described once, when first seen: its
parent and command line. Root reads every process's ``syscall`` file; elsewhere that field is missing.

``summary`` cuts the record by the hold log's stretches (bench/phase_sums.py: a trainer's steps) and prints, for
each stretch's first ``--window`` seconds and for its rest: the host's user and system shares, the processes'
ticks by command (user / system), the threads' names with the most system ticks, and what sleeping threads waited
on (wchan and system call, NVIDIA ioctls by their request), counted in samples.

A diagnosis only: sweeps cost the host a little CPU (about 20-60 ms each on a loaded 16-core host) and no figure of
it is a reward or a test's expectation.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from phase_sums import read_holds, stretches  # noqa: E402 - bench/'s own module

# the NVIDIA driver's ioctl requests carry their escape number in the low byte ('F' type, nv-ioctl-numbers.h)
NV_ESC = {0x27: "RM_ALLOC_MEMORY", 0x29: "RM_FREE", 0x2A: "RM_CONTROL", 0x2B: "RM_ALLOC", 0x34: "RM_DUP_OBJECT",
          0x35: "RM_SHARE", 0x4A: "RM_VID_HEAP_CONTROL", 0x4E: "RM_MAP_MEMORY", 0x4F: "RM_UNMAP_MEMORY",
          0x57: "RM_MAP_MEMORY_DMA", 0x58: "RM_UNMAP_MEMORY_DMA", 0xC8: "CARD_INFO", 0xC9: "REGISTER_FD",
          0xCA: "ALLOC_OS_EVENT", 0xCB: "FREE_OS_EVENT", 0xCE: "STATUS_CODE", 0xD6: "SYS_PARAMS"}


# where a thread that has nothing to do sleeps: not written unless it ran since the last sweep
IDLE_WAITS = {"futex_do_wait", "futex_wait_queue", "do_epoll_wait", "do_sys_poll", "do_select", "core_sys_select",
              "hrtimer_nanosleep", "do_nanosleep", "pipe_read", "pipe_write", "unix_stream_read_generic",
              "unix_stream_data_wait", "do_wait", "kernel_wait4", "wait_woken", "sk_wait_data", "inet_csk_accept",
              "kdamond_fn", "worker_thread", "rescuer_thread", "smpboot_thread_fn", "rcu_gp_kthread",
              "kthreadd", "schedule_timeout", "do_sigtimedwait", "sigsuspend", "ep_poll", "n_tty_read",
              "wait_for_completion", "kthread_worker_fn", "anon_pipe_read", "poll_schedule_timeout.constprop.0",
              "poll_schedule_timeout", "0"}


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _stat(path: str) -> tuple[str, str, int, int, int] | None:
    """(thread name, state, utime, stime, ppid) from a stat file."""
    text = _read(path)
    if text is None:
        return None
    try:
        name = text[text.index("(") + 1 : text.rindex(")")]
        f = text[text.rindex(")") + 2 :].split()
        return name, f[0], int(f[11]), int(f[12]), int(f[1])
    except (ValueError, IndexError):
        return None


def _cpu_ticks() -> list[int]:
    line = (_read("/proc/stat") or "cpu 0 0 0 0 0").splitlines()[0].split()
    user, nice, system, idle, iowait = (int(x) for x in line[1:6])
    return [user + nice, system, idle, iowait]


def _syscall(pid: int, tid: int) -> dict | None:
    text = _read(f"/proc/{pid}/task/{tid}/syscall")
    if not text:
        return None
    parts = text.split()
    if parts[0] in ("running", "-1"):
        return {"nr": parts[0]}
    out: dict = {"nr": int(parts[0])}
    try:
        fd, arg = int(parts[1], 16), int(parts[2], 16)
    except (IndexError, ValueError):
        return out
    if out["nr"] in (16, 9, 0, 1, 7, 232):  # ioctl, mmap, read, write, poll, epoll_wait: what the fd names
        try:
            out["fd"] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            pass
    if out["nr"] == 16:
        out["req"] = hex(arg)
    return out


def sweep(last: dict, seen: set, out) -> dict:
    """One pass over /proc: write the threads that ran since ``last`` or sleep in D; return the new tick table."""
    now, rows, user = {}, [], {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for t in tids:
            tid = int(t)
            st = _stat(f"/proc/{pid}/task/{tid}/stat")
            if st is None:
                continue
            comm, state, ut, stime, _ = st
            now[tid] = (ut, stime)
            du, ds = (ut - last[tid][0], stime - last[tid][1]) if tid in last else (0, 0)
            wchan = None
            if not (du or ds or state in "DR"):
                if pid not in user:  # (kernel threads that did not run: none of ours)
                    user[pid] = bool(_read(f"/proc/{pid}/cmdline"))
                if not user[pid]:
                    continue
                # a thread that did not run: kept when it waits somewhere other than an idle wait (a driver's lock,
                # an NVIDIA ioctl that sleeps, a page's lock)
                wchan = (_read(f"/proc/{pid}/task/{tid}/wchan") or "").strip() or None
                if wchan is None or wchan in IDLE_WAITS:
                    continue
            if pid not in seen:
                seen.add(pid)
                pst = _stat(f"/proc/{pid}/stat")
                cmd = (_read(f"/proc/{pid}/cmdline") or "").replace("\0", " ").strip()[:160]
                out.write(json.dumps({"proc": pid, "ppid": pst[4] if pst else None, "comm": pst[0] if pst else None,
                                      "cmd": cmd}) + "\n")
            row = [pid, tid, comm, state, du, ds]
            if state != "R":
                row.append(wchan or (_read(f"/proc/{pid}/task/{tid}/wchan") or "").strip() or None)
                row.append(_syscall(pid, tid))
            rows.append(row)
    return now, rows


def record(path: str, interval: float) -> None:
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    seen: set = set()
    last, cpu = {}, _cpu_ticks()
    with open(path, "a", buffering=1) as out:
        while not stop:
            t0 = time.monotonic()
            last, rows = sweep(last, seen, out)
            c = _cpu_ticks()
            out.write(json.dumps({"t_ns": time.monotonic_ns(), "cpu": [a - b for a, b in zip(c, cpu)],
                                  "cost_ms": round((time.monotonic() - t0) * 1e3, 1), "threads": rows}) + "\n")
            cpu = c
            time.sleep(max(0.0, interval - (time.monotonic() - t0)))


def _label(p: dict) -> str:
    cmd = p.get("cmd") or ""
    if not cmd:
        return f"[{p.get('comm')}]"
    words = cmd.split()
    keep = [w for w in words[:4] if not w.startswith("-")]
    return " ".join(os.path.basename(w) if "/" in w and i == 0 else w for i, w in enumerate(keep))[:70]


def _wait(row: list) -> str:
    wchan, sc = (row[6] if len(row) > 6 else None), (row[7] if len(row) > 7 else None)
    what = f"{row[3]} {wchan or '-'}"
    if sc and isinstance(sc.get("nr"), int):
        what += f" sys{sc['nr']}"
        fd = sc.get("fd", "")
        if fd:
            what += f" {fd.split('/')[-1] if fd.startswith('/dev/') else fd.split(':')[0]}"
        if sc.get("req"):
            req = int(sc["req"], 16)
            what += f" {NV_ESC.get(req & 0xFF, hex(req)) if 'nvidia' in fd and 'uvm' not in fd else hex(req)}"
    return what


def summarize(samples: list, procs: dict, lo: int, hi: int, top: int) -> list[str]:
    inside = [s for s in samples if lo <= s["t_ns"] < hi]
    if not inside:
        return ["  (no samples)"]
    cpu = [sum(s["cpu"][i] for s in inside) for i in range(4)]
    total = max(1, sum(cpu))
    lines = [f"  {len(inside)} sweeps ({(hi - lo) / 1e9:.1f} s), sweep cost median "
             f"{sorted(s['cost_ms'] for s in inside)[len(inside) // 2]} ms; host CPU user {100 * cpu[0] / total:.1f} %, "
             f"system {100 * cpu[1] / total:.1f} %, idle {100 * cpu[2] / total:.1f} %, iowait {100 * cpu[3] / total:.1f} %"]
    by_proc, by_thread, waits, waits_cmd = defaultdict(lambda: [0, 0, set()]), Counter(), Counter(), Counter()
    for s in inside:
        for row in s["threads"]:
            label = _label(procs.get(row[0], {}))
            e = by_proc[label]
            e[0] += row[4]
            e[1] += row[5]
            e[2].add(row[0])
            by_thread[(label, row[2])] += row[5]
            if row[3] != "R":
                waits[_wait(row)] += 1
                waits_cmd[(label, _wait(row))] += 1
    tick = os.sysconf("SC_CLK_TCK")
    lines.append("  CPU-s by command (user / system, processes):")
    for label, (u, sy, pids) in sorted(by_proc.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))[:top]:
        lines.append(f"    {u / tick:7.2f} / {sy / tick:7.2f}  {len(pids):3d}  {label}")
    lines.append("  system CPU-s by thread name:")
    for (label, comm), sy in by_thread.most_common(top):
        if sy:
            lines.append(f"    {sy / tick:7.2f}  {comm:18s} {label}")
    lines.append("  sleeping threads that ran or sit in D, by what they waited on (samples):")
    for what, n in waits.most_common(top):
        lines.append(f"    {n:6d}  {what}")
    lines.append("  the same by command:")
    for (label, what), n in waits_cmd.most_common(top):
        lines.append(f"    {n:6d}  {what}  <- {label}")
    return lines


def summary(path: str, holds: str | None, window: float, top: int) -> None:
    procs, samples = {}, []
    for line in Path(path).read_text().splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue  # (a line cut by the kill)
        if "proc" in r:
            procs[r["proc"]] = r
        elif "t_ns" in r:
            samples.append(r)
    if not samples:
        print("no samples")
        return
    cuts = []
    if holds:
        hs = read_holds(holds)
        t0 = min(h["start_ns"] for h in hs if h.get("mode") in ("exclusive", "shared"))
        for i, s in enumerate(stretches(hs), 1):
            lo = t0 + int(s["start_s"] * 1e9)
            hi = lo + int(s["span_s"] * 1e9)
            mid = min(hi, lo + int(window * 1e9))
            cuts.append((f"stretch {i} at {s['start_s']:.1f} s, its first {window:g} s", lo, mid))
            cuts.append((f"stretch {i}, the rest ({(hi - mid) / 1e9:.1f} s)", mid, hi))
    else:
        cuts.append(("the whole record", samples[0]["t_ns"], samples[-1]["t_ns"] + 1))
    for title, lo, hi in cuts:
        print(title)
        print("\n".join(summarize(samples, procs, lo, hi, top)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("out")
    r.add_argument("--interval", type=float, default=0.2)
    s = sub.add_parser("summary")
    s.add_argument("path")
    s.add_argument("--holds")
    s.add_argument("--window", type=float, default=12.0)
    s.add_argument("--top", type=int, default=12)
    a = ap.parse_args(argv)
    if a.cmd == "record":
        record(a.out, a.interval)
    else:
        summary(a.path, a.holds, a.window, a.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
