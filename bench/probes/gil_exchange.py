"""How much a timed block's wall time on the trusted side grows when other threads of the trusted process keep
the interpreter busy, at Python's default switch interval and a shorter one (issue #36: an honest GPU candidate
flagged ``device_time_outside_trusted_bound`` in a loaded steady step, its blocks' walls ~21 ms over its device time).

A block is modelled as the trusted side drives one (pipeline/gpu_blocks.py): ``--trips`` round trips to a worker
process over a pipe (the request, the reply; each a blocking call that lets the interpreter go and must take it
back) around a wait for the device (``--device-ms``, a sleep: the interpreter let go). ``--busy`` other threads run
pure-Python loops meanwhile (other evaluations' checks, judging, packing). Reports the median and p90 of each
block's wall time less its device wait, per (busy threads, switch interval).

    python bench/probes/gil_exchange.py --blocks 200 --busy 0 1 2 4 --intervals 0.005 0.0005
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import threading
import time


def _echo(conn) -> None:
    while True:
        msg = conn.recv()
        if msg is None:
            return
        conn.send(msg)


def _spin(stop: threading.Event) -> None:
    x = 0
    while not stop.is_set():
        for i in range(1000):
            x += i * i  # pure Python: holds the interpreter until the switch interval asks it to let go


def measure(conn, blocks: int, trips: int, device_s: float, busy: int, interval: float) -> dict:
    old = sys.getswitchinterval()
    sys.setswitchinterval(interval)
    stop = threading.Event()
    spinners = [threading.Thread(target=_spin, args=(stop,), daemon=True) for _ in range(busy)]
    for t in spinners:
        t.start()
    try:
        over = []
        for _ in range(blocks):
            t0 = time.perf_counter()
            for k in range(trips):
                conn.send(k)
                conn.recv()
                if k == 0:
                    time.sleep(device_s)  # the device runs the block
            over.append((time.perf_counter() - t0 - device_s) * 1e3)
    finally:
        stop.set()
        for t in spinners:
            t.join(10)
        sys.setswitchinterval(old)
    over.sort()
    return {"busy": busy, "interval_ms": interval * 1e3, "blocks": blocks, "trips": trips,
            "over_ms_median": round(statistics.median(over), 3), "over_ms_p90": round(over[int(0.9 * len(over))], 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, default=200)
    ap.add_argument("--trips", type=int, default=3)
    ap.add_argument("--device-ms", type=float, default=5.0)
    ap.add_argument("--busy", type=int, nargs="+", default=[0, 1, 2, 4])
    ap.add_argument("--intervals", type=float, nargs="+", default=[0.005, 0.0005])
    ap.add_argument("--out", help="append each row as a JSON line to this file")
    a = ap.parse_args()
    parent, child = mp.Pipe()
    p = mp.get_context("spawn").Process(target=_echo, args=(child,), daemon=True)
    p.start()
    try:
        for busy in a.busy:
            for interval in a.intervals:
                row = measure(parent, a.blocks, a.trips, a.device_ms / 1e3, busy, interval)
                print(json.dumps(row), flush=True)
                if a.out:
                    with open(a.out, "a") as f:
                        f.write(json.dumps(row) + "\n")
    finally:
        parent.send(None)
        p.join(10)
        if p.is_alive():
            p.kill()


if __name__ == "__main__":
    main()
