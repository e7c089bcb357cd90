"""How fast the trusted side can write a CPU worker's inputs (issue #37): 64 MB through ``/proc/<pid>/mem`` (how
``sandbox/memory.py`` writes a block's inputs into a frozen worker today) against a plain copy into a shared
mapping (what a memfd shared with the worker would cost). A one-off probe, no record of its own:

    python bench/probes/proc_mem_write.py [--mb 64] [--rounds 5]
"""

from __future__ import annotations

import argparse
import mmap
import os
import subprocess
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    size = a.mb << 20
    hold = ("import ctypes, time; b = ctypes.create_string_buffer(%d); print(ctypes.addressof(b), flush=True); "
            "time.sleep(120)" % size)
    child = subprocess.Popen([sys.executable, "-c", hold], stdout=subprocess.PIPE, text=True)
    try:
        addr = int(child.stdout.readline())
        data = memoryview(os.urandom(1 << 20) * a.mb)
        fd = os.open(f"/proc/{child.pid}/mem", os.O_RDWR)
        remote = []
        for _ in range(a.rounds):
            t, done = time.perf_counter(), 0
            while done < size:
                done += os.pwrite(fd, data[done:], addr + done)
            remote.append((time.perf_counter() - t) * 1e3)
        os.close(fd)
        shared = mmap.mmap(-1, size)
        local = []
        for _ in range(a.rounds + 1):  # the first copy also maps the pages: not counted
            t = time.perf_counter()
            shared[:] = data
            local.append((time.perf_counter() - t) * 1e3)
        print(f"/proc/<pid>/mem, {a.mb} MB: ms {[round(x, 1) for x in remote]}")
        print(f"shared mapping, {a.mb} MB (after its first touch): ms {[round(x, 1) for x in local[1:]]}")
    finally:
        child.kill()
        child.wait(timeout=10)


if __name__ == "__main__":
    main()
