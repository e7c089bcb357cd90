"""An evaluation's runs of its stages: one, reported whatever it raised, and a second where the first met its GPU's
memory exhausted outside the candidate.

The host's evaluations share the device's memory (candidates' workers, the references' workers, the spare workers,
the trusted process), so a burst of them can exhaust it in the trusted side's staging or a reference's timed call,
which is not the candidate's to answer for. Such a run is dropped: the spare workers are closed and this process's
cached blocks given back, memory is waited for (at most MEMORY_WAIT_S), and the stages run once more. A candidate's
own run that runs out of memory is its failure, as any other error of its code, and is not run again; nor is a run
that raised an integrity flag before the device ran out. The second run is given the first's seed (the Evaluator
draws it before either), so it checks on the same inputs: a candidate that filled the device to end a check it was
failing meets that check again, not a new draw of it.
"""

from __future__ import annotations

import time

from kbench_env.machine import device_memory
from kbench_env.pipeline.result import EvalResult

#: How long a dropped run waits, at most, for the spare pool's reserve of the device's memory to be free again (the
#: evaluations in flight give theirs back as they end).
MEMORY_WAIT_S = 30.0


def run_stages(new_result, stages, device: str, shed=None) -> EvalResult:
    """``stages(result)`` run into ``new_result()``; once more into another where the first run raised an error of
    the device's memory (the module's docstring), with ``shed()`` (the spare pool's) called before the wait. An
    exception the stages raise is an evaluator's fault: reported in the result as an internal error."""
    result, exc = _run(new_result, stages)
    if exc is None or result.integrity_flags or not device_memory.is_out_of_memory(exc):
        return result
    t0 = time.perf_counter()
    if shed is not None:
        shed()
    device_memory.give_back_cached(device)
    device_memory.wait_for_free(device, MEMORY_WAIT_S)
    waited = time.perf_counter() - t0
    result, _ = _run(new_result, stages)
    result.phase_seconds["device_memory_wait"] = round(waited, 4)
    return result


def _run(new_result, stages) -> tuple[EvalResult, Exception | None]:
    result = new_result()
    try:
        stages(result)
    except Exception as exc:  # an evaluator bug must not take the caller down; it is reported, not hidden
        result.error = f"internal evaluator error: {type(exc).__name__}: {exc}"
        result.error_stage = result.error_stage or "internal"
        result.correct = False
        return result, exc
    return result, None
