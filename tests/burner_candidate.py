"""A burner: a candidate whose native threads burn the CPU and thrash the caches from the moment its module loads,
whatever is being timed. Before paired timing such a candidate ran while the reference was timed in another worker
and was paid for the reference's slowdown (1.77x against 0.78x for the same kernel without the burner); with paired
timing its worker is stopped while the reference's blocks run, so it slows only its own blocks.

The threads spend their time in libc's memset through ctypes, which releases the GIL: native code, no build."""

#: Appended to a candidate's source: ``BURNER_THREADS`` threads, each clearing a buffer of its own larger than a
#: core's L2 cache, over and over.
BURNER_THREADS = 4
BURNER_BYTES = 64 << 20

_TAIL = f'''

import ctypes as _kb_ctypes
import threading as _kb_threading

_KB_BURNER_PASSES = _kb_ctypes.c_long(0)  # passes over the buffers: the work the threads did


def _kb_burn():
    buf = _kb_ctypes.create_string_buffer({BURNER_BYTES})
    n = 0
    while True:
        _kb_ctypes.memset(buf, n & 0xFF, {BURNER_BYTES})
        n += 1
        _KB_BURNER_PASSES.value += 1


for _ in range({BURNER_THREADS}):
    _kb_threading.Thread(target=_kb_burn, daemon=True).start()
'''


def burning(source: str) -> str:
    """``source`` (a candidate) with the burner's threads started when its module loads."""
    return source + _TAIL
