"""Issue 37 probe: where, and at what priority, the trusted thread that runs a CPU pairing's clock runs, as variants
of the library's ``Placement.boosted_here``, measured by bench/cpu_noise.py's own loop (its arguments after the
variant).

    python bench/probes/clock_variants.py nice --load idle --tasks level1/rms_norm,level1/relu --evals 8 \
        --burner-rounds 0 --out /tmp/cv_nice

Variants: ``nice`` (the thread left where the scheduler puts it, at the blocks' nice value: the library before
the real-time clock), ``pinned_nice`` (on the timing cores for the pairing at the nice value: branch
wip/clock-core), ``library`` (as shipped: on the timing cores for the pairing, real-time where allowed),
``library_naps`` (the freeze's wait napping from its first look, as shipped since; before it, 64 yields first),
``library_looks`` (as shipped, each pairing's look at the timing cores' load written to $BUSY_LOG), ``no_worker_rt``
(as shipped but the workers never real-time: the clock thread's real-time alone), ``pace<N>`` (as shipped, a pairing
timed again where its reference ran past N/100 times its recent per-call median: reference_pace.DISTURBED),
``rt_always`` (as shipped, the workers' blocks real-time whether or not the timing core carries other work).
"""

from __future__ import annotations

import contextlib
import os
import runpy
import sys
import threading
import time as _time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kbench_env.pipeline import reference_pace  # noqa: E402
from kbench_env.sandbox import memory, placement  # noqa: E402

variant = sys.argv.pop(1)


def _niced(pin: bool):
    @contextlib.contextmanager
    def boosted_here(self):
        tid = threading.get_native_id()
        had = placement._pin(tid, self.cores) if pin else None  # noqa: SLF001
        before = os.getpriority(os.PRIO_PROCESS, tid) if self.boost else None
        if before is not None:
            os.setpriority(os.PRIO_PROCESS, tid, placement.BOOST)
        try:
            yield
        finally:
            if before is not None:
                os.setpriority(os.PRIO_PROCESS, tid, before)
            if had is not None:
                placement._pin(tid, had)  # noqa: SLF001
    return boosted_here


class _NappingTime:
    """``time`` for sandbox/memory.py whose ``sleep(0)`` naps 50 us: the freeze's wait never yields only."""

    def __getattr__(self, name):
        return getattr(_time, name)

    @staticmethod
    def sleep(s):
        _time.sleep(s if s else 50e-6)


def _logged_busy(real):
    def busy(cores, seconds=0.05):
        share = real(cores, seconds)
        with open(os.environ.get("BUSY_LOG", "/tmp/busy_looks.txt"), "a") as f:
            f.write(f"{share:.3f}\n")
        return share
    return busy


if variant == "rt_always":  # as shipped, but the workers' blocks real-time whatever the look finds
    placement.LOADED_SHARE = -1.0
elif variant.startswith("pace"):  # as shipped, a pairing timed again where its reference ran past DISTURBED = pace<N>/100
    reference_pace.DISTURBED = int(variant[4:]) / 100  # times its recent per-call median (library: 2.0)
elif variant in ("library_looks", "no_worker_rt"):  # as shipped, each look's busy share written to $BUSY_LOG; or
    placement._busy = _logged_busy(placement._busy)  # noqa: SLF001 - the workers never real-time (nor a look taken)
    placement.WORKERS_REALTIME = variant == "library_looks"
elif variant == "library_naps":
    memory.time = _NappingTime()
elif variant in ("nice", "pinned_nice"):
    placement.Placement.boosted_here = _niced(variant == "pinned_nice")
elif variant not in ("library", "library_naps", "library_looks", "no_worker_rt", "rt_always") \
        and not variant.startswith("pace"):
    raise SystemExit(f"unknown variant {variant!r}")

sys.argv[0] = str(ROOT / "bench/cpu_noise.py")
runpy.run_path(sys.argv[0], run_name="__main__")
