"""This process's interpreter switch interval while it holds a device alone (a timing, a calibration, a
plausibility run).

The trusted side drives a timed block through calls that let the interpreter go and take it back (the request to
the worker, its reply, the synchronisations), and its clock runs across them. Each time it wants the interpreter
back while another of its threads is running Python (another evaluation's checks, judging, packing), it waits until
that thread is asked to let go, which Python does only every switch interval (5 ms by default): a block's wall time
then grows by about one interval per call that lets go, and on a GPU that wall time bounds the device time the
worker may report (pipeline/gpu_blocks.py), so an honest candidate can be taken for a forger on a busy host. While
any device is held alone the interval is ``KBENCH_TIMING_SWITCH_US`` (config/environ.py), and what it was is
restored when the last such hold ends (holds of several devices overlap: they are counted).
"""

from __future__ import annotations

import sys
import threading

from kbench_env.config import environ

_lock = threading.Lock()
_holders = 0
_saved: float | None = None


def timing_switch_s() -> float | None:
    """The switch interval (seconds) while a device is held alone; None: left as it is."""
    value = environ.get("KBENCH_TIMING_SWITCH_US")
    return None if value is None or value <= 0 else value / 1e6


def hold_started() -> None:
    """A device is held alone from now: the interval shortened (where it is longer) if it was not already."""
    global _holders, _saved
    switch = timing_switch_s()
    with _lock:
        _holders += 1
        if _holders == 1 and switch is not None:
            _saved = sys.getswitchinterval()
            sys.setswitchinterval(min(_saved, switch))


def hold_ended() -> None:
    """A hold ``hold_started`` counted has ended: the interval restored when it was the last."""
    global _holders, _saved
    with _lock:
        _holders = max(0, _holders - 1)
        if _holders == 0 and _saved is not None:
            sys.setswitchinterval(_saved)
            _saved = None
