"""Whether glibc's malloc state makes one process's speedup differ from another's (issue #37): one process times
level1/rms_norm's shipped CPU kernel and the task's eager reference (torch ops with temporaries) in interleaved
blocks over 64 input sets of `small`'s size on a memfd (as a worker's buffers are), outputs freed per call; prints
the two per-call medians (us), the median ratio of the paired blocks, and where the last output sat. Run it in
several processes, with the workers' tunables and with others, e.g.:

    for i in 1 2 3 4 5 6 7 8; do
      GLIBC_TUNABLES=glibc.malloc.hugetlb=1 python bench/probes/allocator_state.py
      GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.trim_threshold=1073741824:glibc.malloc.mmap_threshold=33554432 \
        python bench/probes/allocator_state.py
    done
"""
import importlib.util
import json
import mmap
import os
import statistics as st
import time
from pathlib import Path

import torch

torch.set_num_threads(1)
spec = importlib.util.spec_from_file_location(
    "cand", str(Path(__file__).resolve().parents[2] / "tasks/solutions/cpu/level1/rms_norm.py"))
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
cand = m.ModelNew(512)


class Ref(torch.nn.Module):
    def __init__(self, w):
        super().__init__()
        self.weight, self.eps = w, 1e-6

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


ref = Ref(cand.weight.detach().clone())
n = 4 * 64 * 512
nbytes, sets = n * 4, 64
fd = os.memfd_create("x")
os.ftruncate(fd, nbytes * sets)
whole = torch.frombuffer(mmap.mmap(fd, nbytes * sets), dtype=torch.uint8)
xs = [whole[k * nbytes:(k + 1) * nbytes].view(torch.float32).view(4, 64, 512) for k in range(sets)]
for x in xs:
    x.normal_()


def where(addr: int) -> str:
    for line in open("/proc/self/maps"):
        lo, hi = (int(v, 16) for v in line.split()[0].split("-"))
        if lo <= addr < hi:
            return "heap" if "[heap]" in line else "mapping"
    return "?"


def block(f):
    t = time.perf_counter()
    for x in xs:
        y = f(x)
    return (time.perf_counter() - t) / sets * 1e6, y


with torch.no_grad():
    for _ in range(10):
        block(cand)
        block(ref)
    c, r = [], []
    for _ in range(40):
        a, y = block(cand)
        b, _ = block(ref)
        c.append(a)
        r.append(b)
print(json.dumps({"tunables": os.environ.get("GLIBC_TUNABLES"), "candidate_us": round(st.median(c), 1),
                  "reference_us": round(st.median(r), 1), "ratio": round(st.median([b / a for a, b in zip(c, r)]), 3),
                  "output_in": where(y.data_ptr())}))
