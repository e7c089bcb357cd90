"""Whether the page kind under a CPU block's input buffers moves the speedup (issue #37): one process times
level1/relu's shipped CPU kernel and torch.relu in interleaved blocks of 64 calls on the `wide` configuration's
inputs (64 sets of 1 MiB, rewritten before every block, outputs kept as a worker keeps them), the inputs either on a
memfd (4 KiB shared pages, as the worker's buffers are) or on private anonymous memory advised for transparent huge
pages; run it several times per kind (each run a new process, the workers' GLIBC_TUNABLES given):

    for i in 1 2 3 4 5 6 7 8 9 10; do for m in memfd thp; do
      GLIBC_TUNABLES=glibc.malloc.hugetlb=1 python bench/probes/input_pages.py $m; done; done > /tmp/pages.jsonl

Prints per run the two per-call medians (us), the median ratio of the paired blocks and the input mapping's page
figures from /proc/self/smaps.
"""
import sys, os, mmap, time, statistics as st, importlib.util, json
from pathlib import Path

import torch
torch.set_num_threads(2)
mode = sys.argv[1]
spec = importlib.util.spec_from_file_location("cand", str(Path(__file__).resolve().parents[2] / "tasks/solutions/cpu/level1/relu.py"))
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
cand = m.ModelNew()
n = 2 * 131071; nbytes = n * 4; stride = -(-nbytes // 64) * 64; sets = 64; size = stride * sets
if mode == "memfd":
    fd = os.memfd_create("x"); os.ftruncate(fd, size)
    mm = mmap.mmap(fd, size)
    whole = torch.frombuffer(mm, dtype=torch.uint8)
else:
    mm = mmap.mmap(-1, size + (2 << 20), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    whole = torch.frombuffer(mm, dtype=torch.uint8)
    off = (-whole.data_ptr()) % (2 << 20)
    whole = whole[off:off + size]
    import ctypes
    libc = ctypes.CDLL(None)
    libc.madvise(ctypes.c_void_p(whole.data_ptr()), ctypes.c_size_t(size), 14)  # MADV_HUGEPAGE
whole.zero_()
xs = [whole[k * stride:k * stride + nbytes].view(torch.float32).view(2, 131071) for k in range(sets)]
for x in xs: x.normal_()
def block(f):
    for x in xs: x.mul_(-1.0)  # rewrite, as the trusted side writes each block's inputs
    kept = []
    t = time.perf_counter()
    for x in xs: kept.append(f(x))
    return (time.perf_counter() - t) / sets * 1e6
for _ in range(5): block(cand); block(torch.relu)
c, r = [], []
for _ in range(40):
    c.append(block(cand)); r.append(block(torch.relu))
base = whole.data_ptr()
ah = []
cur = None
for l in open("/proc/self/smaps"):
    p = l.split()
    if "-" in p[0] and len(p) >= 5 and not p[0].endswith(":"):
        lo, hi = (int(v, 16) for v in p[0].split("-"))
        cur = lo <= base < hi
    elif cur and p[0] in ("AnonHugePages:", "ShmemPmdMapped:", "Rss:"):
        ah.append(p[0] + p[1])
print(json.dumps({"mode": mode, "c": st.median(c), "r": st.median(r), "ratio": st.median([a / b for a, b in zip(r, c)]), "huge": ah}))
