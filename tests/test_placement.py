"""Where a CPU timing's threads run (sandbox/placement.py): the workers on the timing cores, and the trusted
thread that runs the clock on the same cores while the blocks run."""

from __future__ import annotations

import os
import threading

from kbench_env.sandbox.placement import Placement, timing_cores


def test_the_clock_thread_runs_on_the_timing_cores_while_the_blocks_run_and_goes_back_after():
    seen = {}

    def clock():
        tid = threading.get_native_id()
        os.sched_setaffinity(tid, os.sched_getaffinity(0))  # as a fresh thread of the evaluator would be
        seen["before"] = os.sched_getaffinity(tid)
        placement = Placement(timing_cores(1), boost=False)
        with placement.boosted_here():
            seen["during"] = os.sched_getaffinity(tid)
        seen["after"] = os.sched_getaffinity(tid)

    t = threading.Thread(target=clock)
    t.start()
    t.join(30)
    assert seen["during"] == timing_cores(1)
    assert seen["after"] == seen["before"] == os.sched_getaffinity(0)
    if len(os.sched_getaffinity(0)) > 1:  # (on one core, being there and anywhere are the same)
        assert seen["during"] != seen["before"]
