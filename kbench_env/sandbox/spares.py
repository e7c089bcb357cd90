"""Spare workers: a pool of started, confined, idle workers, sized to the evaluations in flight and to their recent
peak, so that a candidate does not wait for its worker to start (on a GPU: CUDA's context and the forward audit's
profiler, seconds), even when candidates arrive in bursts (a trainer's batches) with quiet gaps between them."""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections import deque

import torch

from kbench_env.config import environ
from kbench_env.machine import device_memory
from kbench_env.machine.device import Device
from kbench_env.sandbox import idle_start
from kbench_env.sandbox.confine import policy
from kbench_env.sandbox.diagnosis import WorkerError
from kbench_env.sandbox.confine.policy import Limits
from kbench_env.sandbox.worker_process import Worker

#: Spares at most by default: a spare is an idle process (the CPU's is cheap; a GPU's holds a CUDA context, about
#: 0.5 GB of device memory, and about 1 GB of host memory with torch and CUDA loaded). On the CPU no more than the
#: cores as well: a CPU spare starts beside the timed runs of the others, and the cores are what evaluations are
#: bound by there. A GPU pool is bound by memory alone (below): a trainer's batch is larger than the host's cores, and
#: a candidate that finds no spare starts its worker (torch's import, CUDA's context) beside the batch's compilers.
MAX_SPARES = 16
MAX_GPU_SPARES = 64
#: Host memory (MemAvailable) left per spare, and device memory per GPU spare, when the pool's cap is worked out.
HOST_BYTES_PER_SPARE = 2 << 30
GPU_BYTES_PER_SPARE = 4 << 30
#: A spare this close (seconds) to leaving by itself is not handed out: it might go between being given its candidate
#: and loading it. The pool replaces it then, while it still wants it.
LEAVING_MARGIN_S = 5.0
#: The least delay of the pool's timer: its deadlines already past never make it spin.
MIN_TIMER_S = 0.5


def peak_window_s() -> float:
    """How long the pool remembers its peak of evaluations in flight: as long as a spare waits for a candidate
    (policy.SPARE_IDLE_S, longer than a trainer's generation between two batches)."""
    return policy.SPARE_IDLE_S


def default_cap(device: str) -> int:
    """How many spares a pool on ``device`` may keep: ``KBENCH_SPARE_WORKERS`` if set, else the smallest of
    MemAvailable / HOST_BYTES_PER_SPARE and, on the CPU, MAX_SPARES and the cores, on a GPU, MAX_GPU_SPARES and its
    memory / GPU_BYTES_PER_SPARE."""
    given = environ.get("KBENCH_SPARE_WORKERS")
    if given is not None:
        return given
    dev = Device.parse(device)
    cap = MAX_GPU_SPARES if dev.is_cuda else min(MAX_SPARES, os.cpu_count() or 1)
    try:
        with open("/proc/meminfo") as f:
            avail = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
        cap = min(cap, max(1, avail // HOST_BYTES_PER_SPARE))
    except (OSError, StopIteration, ValueError, IndexError):
        pass
    if dev.is_cuda:
        try:
            cap = min(cap, max(1, torch.cuda.get_device_properties(dev.index or 0).total_memory
                               // GPU_BYTES_PER_SPARE))
        except Exception:  # noqa: BLE001 - no figure: the other bounds hold
            pass
    return max(1, cap)


def _leaves_at(spare: Worker) -> float:
    """When a ready spare is taken to leave by itself (its idle deadline, less the margin a load needs)."""
    return spare._t_created + policy.SPARE_IDLE_S - LEAVING_MARGIN_S


class SpareWorkers:
    """Started, confined, idle workers kept ready for the next candidates: on the CPU, the fork, confinement and
    imports done; on a GPU, also CUDA's and the forward audit's profiler's start.

    Size. The pool wants one spare per evaluation in flight (``active``: taken and not yet over; each is likely
    followed by another candidate) or, if more, per evaluation at the recent peak: the most in flight at once over
    the last ``peak_window_s()`` (the time a spare waits before it leaves). A trainer's batch ends (none in flight),
    its policy generates, and the next batch arrives at once: the pool refilled to the last batch's peak when the
    batch ended, so the new batch's candidates find spares. At least one, at most ``cap``.

    When spares start (in the background, never on a candidate's path): on the CPU, when one is taken (while the
    taken worker builds) and when an evaluation ends, up to one per evaluation in flight; the rest, up to the peak,
    only when no evaluation is in flight (between batches). On a GPU only when no evaluation is in flight: a CUDA
    context's start takes the NVIDIA driver's lock for about a second of kernel time in all, and every evaluation
    in flight needs that lock for its allocations, mappings and graph captures: spares started at the takes keep
    the batch's workers waiting on the lock with the GPU idle, and starting fewer at once only spreads the stall.
    Started when the batch is over they start while the policy generates; a candidate that finds no spare starts
    its own worker, as it would have had to anyway.
    ``KBENCH_GPU_SPARES_IN_FLIGHT=1`` starts them on a GPU as on the CPU (except with a single evaluation in
    flight, whose timed runs a start would overlap).

    Leaving. A spare leaves by itself after ``policy.SPARE_IDLE_S`` without a candidate. The pool's timer (one
    ``threading.Timer`` at a time, armed for the next deadline only while the window holds work) replaces a spare
    about to leave while the window still wants it, and when the window has seen no work closes the spares beyond
    one; that one then leaves by itself and is not replaced until work comes.

    A spare holds no candidate code until ``take`` assigns it one, and serves one candidate only, as every worker: a
    worker that ran a candidate is never handed out again (``take`` pops it; it is closed with its evaluation).
    Memory. On a GPU a spare starts only while the device keeps ``device_memory.FREE_RESERVE_SHARE`` of its memory
    free besides it (``room``: how many more processes fit, by the driver's figure): the candidates' workers, the
    references' and the trusted side allocate from the same memory, and a batch larger than the cap would otherwise
    fill it with idle contexts. ``shed`` closes the ready spares when an evaluation found the device's memory
    exhausted.

    ``clock`` is the pool's time (``time.monotonic``, the clock of ``Worker._t_created``).
    """

    def __init__(self, backend: str, device: str, build_root: str, limits: Limits, builder=None,
                 cap: int | None = None, clock=time.monotonic, gate=None, room=None):
        self._args = (backend, device, build_root, limits)
        self._gate = gate or contextlib.nullcontext  # around a spare's start (the CPU's: not while another times)
        self._builder = builder
        self._cpu = Device.parse(device).is_cpu
        self._idle = idle_start.enabled()  # spares start at the idle scheduling class (idle_start.py)
        self._in_flight = self._cpu or environ.get("KBENCH_GPU_SPARES_IN_FLIGHT")  # (the class docstring)
        # how many more spares the device's memory takes now (None: no bound); a driver call, made outside the lock
        self._room = room or (None if self._cpu else lambda: device_memory.room_for_processes(device))
        self._cap = cap
        self._lock = threading.Lock()
        self._ready: deque[Worker] = deque()
        self._starting = 0
        self._closed = False
        self._clock = clock
        # (when, evaluations in flight until then) at each evaluation's end within the window, the counts falling
        # from the oldest: the oldest is the window's peak
        self._levels: deque[tuple[float, int]] = deque()
        self._timer: threading.Timer | None = None
        self._timer_at = math.inf
        self.active = 0  # evaluations between ``take`` and ``evaluation_over``
        self.served = 0  # candidates given a spare (the rest started a worker of their own)
        self.started = 0  # spares started

    @property
    def cap(self) -> int:
        if self._cap is None:
            self._cap = default_cap(self._args[1])  # (on a GPU this reads its memory: done once, when first needed)
        return self._cap

    @property
    def ready(self) -> int:
        with self._lock:
            return len(self._ready)

    def take(self, source: str) -> Worker:
        """A worker for ``source``: a ready spare if one is alive, else a newly started one."""
        with self._lock:
            self.active += 1
        worker = None
        while worker is None:
            spare = self._pop()
            if spare is None:
                break
            try:
                if self._idle:
                    idle_start.restore(spare.proc.pid)  # (its candidate's load and runs at the default policy)
                spare.assign(source)  # first: the spare starts loading while replacements are set going
                self.served += 1
                worker = spare
            except (WorkerError, ValueError):
                spare.close()
        self.refill()
        return worker if worker is not None else Worker(source, *self._args, builder=self._builder)

    @staticmethod
    def _leaving(spare: Worker, now: float) -> bool:
        """Whether ``spare`` has gone, or will leave by itself before it could load a candidate."""
        return now > _leaves_at(spare) or spare.proc.exitcode is not None

    def _pop(self) -> Worker | None:
        """The oldest ready spare that will not leave by itself before it loads its candidate, else None."""
        while True:
            with self._lock:
                spare = self._ready.popleft() if self._ready else None
            if spare is None:
                return None
            if not self._leaving(spare, self._clock()):
                return spare
            spare.close()  # about to leave (or gone): it might go between being given the source and loading it

    def evaluation_over(self) -> None:
        """An evaluation that ``take`` served (its timed runs included) has ended: start what the pool lacks."""
        with self._lock:
            if self.active > 0:
                self._note_level(self.active)
            self.active = max(0, self.active - 1)
        self.refill()
        self._arm()

    def _note_level(self, level: int) -> None:
        """(Lock held.) ``level`` evaluations were in flight until now: kept while in the window, unless a later
        level is as high (the window's peak is then that one's, and lasts longer)."""
        now = self._clock()
        while self._levels and self._levels[-1][1] <= level:
            self._levels.pop()
        self._levels.append((now, level))

    def _peak(self) -> int:
        """(Lock held.) The most evaluations in flight at once over the window (0: none in it)."""
        horizon = self._clock() - peak_window_s()
        while self._levels and self._levels[0][0] < horizon:
            self._levels.popleft()
        return max(self.active, self._levels[0][1] if self._levels else 0)

    def wanted(self) -> int:
        """Spares the pool wants now: one per evaluation in flight or at the window's peak, at least one, at most
        ``cap``."""
        cap = self.cap
        with self._lock:
            return min(cap, max(1, self._peak()))

    def _target(self) -> int:
        """Spares to have ready or starting now (the class docstring's rule): ``wanted`` with none in flight; with some
        in flight one per evaluation on the CPU, none on a GPU (unless ``KBENCH_GPU_SPARES_IN_FLIGHT``: then one per
        evaluation with several in flight, none with a single one)."""
        wanted = self.wanted()
        active = self.active
        if active == 0:
            return wanted
        if not self._in_flight or (active == 1 and not self._cpu):
            return 0
        return min(wanted, active)

    def refill(self) -> None:
        """Start, in the background, the spares the pool lacks (``_target`` less those ready or starting), as many
        as the device's memory takes (``room`` less those starting, which have not taken theirs yet)."""
        target = self._target()
        with self._lock:
            if self._lacking(target) <= 0:
                return
        room = self._room() if self._room is not None else None  # (the driver asked only when one would start)
        with self._lock:
            n = self._lacking(target)
            if room is not None:
                n = min(n, room - self._starting)
            if n <= 0:
                return
            self._starting += n
        for _ in range(n):
            threading.Thread(target=self._start_one, name="kbench-spare-worker", daemon=True).start()

    def _lacking(self, target: int) -> int:
        """(Lock held.) Spares to start to reach ``target``: none once closed."""
        return 0 if self._closed else target - len(self._ready) - self._starting

    def _start_one(self) -> None:
        try:
            with self._gate():
                worker = Worker(None, *self._args, builder=self._builder)
            if self._idle:
                idle_start.lower(worker.proc.pid)  # (its warm-up on the cores the builds leave)
        except Exception:  # noqa: BLE001 - no spare this time: the next take starts its own worker
            worker = None
        with self._lock:
            self._starting -= 1
            keep = worker is not None and not self._closed
            if keep:
                self._ready.append(worker)
                self.started += 1
        if worker is not None and not keep:
            worker.close()
        self._arm()

    def tend(self) -> None:
        """The pool's timer: while the window holds work, close the ready spares about to leave (or gone) and start
        their replacements; once it holds none, with none in flight, close the spares beyond ``wanted`` (one)."""
        now = self._clock()
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()  # (when called other than by the timer: it is re-armed below)
            self._timer, self._timer_at = None, math.inf
            if self._closed:
                return
            worked = self._peak() > 0
            if worked:
                going = [s for s in self._ready if self._leaving(s, now)]
            else:  # no work in the window, so none in flight: the oldest go, the youngest stays
                going = list(self._ready)[:-1]
            for spare in going:
                self._ready.remove(spare)
        for spare in going:
            spare.close()
        if worked:
            self.refill()
        self._arm()

    def _arm(self) -> None:
        """Set the timer for the next deadline (a ready spare about to leave, the window's peak ending) while the
        window holds work; none otherwise, nor more than one."""
        with self._lock:
            if self._closed or self._peak() == 0:
                return
            window = peak_window_s()
            at = min([_leaves_at(s) for s in self._ready]
                     + [when + window for when, _ in self._levels], default=math.inf)
            if at >= self._timer_at:  # (math.inf: nothing to wait for)
                return
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(max(MIN_TIMER_S, at - self._clock()), self.tend)
            self._timer.name, self._timer.daemon = "kbench-spare-timer", True
            self._timer_at = at
            self._timer.start()

    def shed(self) -> int:
        """Close the ready spares (on a GPU each gives back its context's memory); the pool starts others as it
        wants them and as the device's memory allows. How many it closed."""
        with self._lock:
            spares, self._ready = list(self._ready), deque()
        for spare in spares:
            spare.close()
        return len(spares)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
        self.shed()
