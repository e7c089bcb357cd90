"""Reference timings kept on disk: reused across evaluators, processes and runs, kept honest by a drift check.

Layout, under ``<cache dir>/reference/`` (``kbench_env.machine.cache_dir``)::

    <machine id>/machine.json        what the id stands for (device model, versions, backend, timing method)
    <machine id>/calibration.json    {"epoch": n, "calibration": {...}}: the device calibration the entries were
                                     timed beside
    <machine id>/calibration.lock    serialises the drift check of concurrent processes
    <machine id>/entries/<key>.json  one configuration's reference timing dict, with the epoch it was timed in

The machine id hashes everything about the machine and the software that changes a timing: the device (a GPU's name,
SMs, memory, rated clocks and its own UUID: each card of a host has its own entries; a CPU's model, the cores this
process may use and their vector extensions), the NVIDIA driver (read from /proc, no nvidia-smi), CUDA, torch,
triton and Python versions, the backend, and a hash of the source of kbench's timing code (a changed timing method
re-times everything). An entry's key adds the task (name and source hash), the configuration (name, sizes, dtype,
input shapes, forward or backward) and the timing settings. The timing dict itself is stored and returned as it came
(opaque).

The drift check: each process measures the device calibration (the trusted side's ``calibrate`` request: copy
bandwidth, matrix-product rates, on a GPU the graph-node gap; on a GPU by device events over several rounds,
backends/gpu_calibration.py) before it trusts an entry, and compares it with the stored one. A figure off by
more than ``tolerance`` (as a ratio) is measured again before anything is dropped: up to RECHECKS more
measurements, and their best (each rate the highest measured: other work on the device only lowers a rate;
``best_calibration``) is what is compared, so a measurement disturbed by other work on the device (a worker
starting beside it) does not throw the cache away, while a real change (a clock cap, another card) moves every
measurement and still does. A stored calibration is such a best of RECHECKS + 1 too. When the best still
drifts, the machine's entries are invalidated: the epoch goes up, the best is stored, and
entries of an older epoch are misses (re-timed, overwritten). A process pins the epoch it checked, so it never
reads an entry timed under a calibration it did not match.

Writes are one small file each, written to a temporary name and renamed (atomic on one filesystem): a reader
sees a whole old file or a whole new one, never a torn one; two processes timing the same key both write and
the last complete one stays. An unreadable file is a miss, never an error.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import platform
import statistics
import tempfile
from functools import lru_cache
from importlib import metadata
from pathlib import Path

import torch

from kbench_env.config import environ
from kbench_env.machine.device import Device
from kbench_env.machine.device_lock import gpu_identity
from kbench_env.machine.hardware import cpu_description

log = logging.getLogger("kbench.reference_cache")

#: Disagreement (larger over smaller figure, minus one) between a fresh and the stored calibration that invalidates
#: the cache: a clock cap, another tenant or a different card of the model should move a GPU's copy bandwidth or
#: matrix-product rate by more than this (a GPU's idle recalibrations should stay well inside it; a GPU run
#: checks that). On a CPU, load moves them by more than
#: this: the check then re-times (the cautious direction); see resolve_root.
DEFAULT_TOLERANCE = 0.05

#: Below this a graph-node gap (ms) is compared absolutely: microsecond gaps jitter by more than 5 % relative.
GAP_ABS_MS = 0.001
#: More calibrations a drift check measures, at most, before it invalidates (and before it stores a calibration).
RECHECKS = 4

_PKG = Path(__file__).resolve().parents[1]
#: The code that produces a reference timing: the reference side, the timing loops on both sides, the backends.
_METHOD_SOURCES = ("pipeline/baseline.py", "pipeline/timing.py", "pipeline/blocks.py", "pipeline/gpu_blocks.py",
                   "pipeline/gpu_run.py", "pipeline/revealed_inputs.py", "pipeline/seeds.py", "tasks/input_draws.py",
                   "backends/*.py", "worker/*.py", "measure/*.py")


def digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=repr).encode()).hexdigest()


@lru_cache(maxsize=1)
def method_hash() -> str:
    """A hash of the source of kbench's timing code: entries timed by other code are not reused."""
    h = hashlib.sha256()
    for pattern in _METHOD_SOURCES:
        for p in sorted(_PKG.glob(pattern)):
            h.update(p.relative_to(_PKG).as_posix().encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def nvidia_driver() -> str | None:
    """The NVIDIA kernel module's version line (from /proc: no nvidia-smi, no CUDA context)."""
    try:
        with open("/proc/driver/nvidia/version") as f:
            return f.readline().strip() or None
    except OSError:
        return None


def gpu_model(device: str) -> dict:
    """The GPU's model figures and the card itself (``devicelock.gpu_identity``). Two GPUs of one model are not one
    timing machine: their calibrations can differ by more than DEFAULT_TOLERANCE (multi-GPU in bench/RESULTS.md),
    and one cache shared by both would be invalidated at every switch between them; keyed by the card,
    each GPU keeps its own references, timed where its candidates are."""
    idx = torch.device(device).index or 0
    p = torch.cuda.get_device_properties(idx)
    fields = ("name", "major", "minor", "multi_processor_count", "total_memory", "clock_rate", "memory_clock_rate",
              "memory_bus_width", "L2_cache_size")
    return {**{f: getattr(p, f, None) for f in fields}, "uuid": gpu_identity(f"cuda:{idx}")}


def machine_fingerprint(device: str, backend: str) -> dict:
    """Everything about this machine and its software that changes a reference timing (see the module doc)."""
    d = Device.parse(device)
    model = gpu_model(device) if d.is_cuda else {"cpu": cpu_description()}
    return {"device_kind": d.kind, "model": model, "driver": nvidia_driver() if d.is_cuda else None,
            "cuda": torch.version.cuda, "torch": torch.__version__, "triton": _version("triton"),
            "python": platform.python_version(), "backend": backend, "method": method_hash()}


def drifted(old: dict, new: dict, tolerance: float) -> list[str]:
    """The calibration figures of ``new`` that disagree with ``old`` by more than ``tolerance`` (the larger over the
    smaller, minus one), as readable lines; figures only one of them has are not compared. Compared:
    ``bandwidth``, every ``flops`` entry, ``graph_gap_ms`` (with an absolute floor of GAP_ABS_MS)."""
    pairs = [("bandwidth", old.get("bandwidth"), new.get("bandwidth"), 0.0),
             ("graph_gap_ms", old.get("graph_gap_ms"), new.get("graph_gap_ms"), GAP_ABS_MS)]
    for k, v in (old.get("flops") or {}).items():
        pairs.append((f"flops[{k}]", v, (new.get("flops") or {}).get(k), 0.0))
    out = []
    for name, a, b, floor in pairs:
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or a <= 0 or b <= 0:
            continue
        if max(a, b) / min(a, b) - 1 > tolerance and abs(b - a) > floor:  # symmetric: 2x up and 2x down alike
            out.append(f"{name}: stored {a:.4g}, measured {b:.4g} ({(b - a) / a:+.1%})")
    return out


def best_calibration(measured: list[dict]) -> dict:
    """One calibration from several: the rates (``bandwidth``, every ``flops`` entry they all have) the highest
    measured, since other work on the device only lowers a measured rate (the highest is the closest to the
    device's); ``graph_gap_ms`` the median; anything else as in the first."""
    out = dict(measured[0])
    if len(measured) == 1:
        return out
    vals = [m.get("bandwidth") for m in measured]
    if all(isinstance(v, (int, float)) for v in vals):
        out["bandwidth"] = max(vals)
    gaps = [m.get("graph_gap_ms") for m in measured]
    if all(isinstance(v, (int, float)) for v in gaps):
        out["graph_gap_ms"] = statistics.median(gaps)
    flops = [m.get("flops") or {} for m in measured]
    out["flops"] = {k: max(f[k] for f in flops) for k in flops[0] if all(k in f for f in flops)}
    out["measurements"] = len(measured)
    return out


def normal(obj):
    """``obj`` as it reads back from JSON (tuples become lists), so that stored and asked-for keys compare equal."""
    return json.loads(json.dumps(obj, sort_keys=True, default=repr))


def resolve_root(setting, device: str, cache_dir: Path) -> Path | None:
    """Where an Evaluator keeps reference timings, or None for nowhere (memory only).

    ``setting``: True (``<cache_dir>/reference``), False, a folder, or None: on for GPUs and off on the CPU
    (``KBENCH_REFERENCE_CACHE``, ``0``, ``1`` or a folder, is the setting of an EvaluatorConfig made without one).

    Why off on the CPU: a CPU's timings move with whatever else the machine runs (other jobs, frequency scaling,
    thread placement), and a short calibration does not reliably catch that: on a shared 2-core machine two
    calibrations differed by 12-44 % (by 470 % with builds running beside one), so with the default tolerance
    the cache would be invalidated on most starts, and with a loose one it would hand out timings made under
    other load. A CPU reference costs 1.5-7 s per task to time there (default timing), once per evaluator; a
    GPU's first candidate per task pays 3-7 s of reference timing and 12-20 s of torch.compile baseline, and a
    GPU's calibration does not depend on the host's load. ``kbench baseline --device cpu`` and
    ``KBENCH_REFERENCE_CACHE=1`` turn it on where the machine is known to be quiet."""
    if setting is None:
        setting = not Device.parse(device).is_cpu
    if setting is True:
        return Path(cache_dir) / "reference"
    if not setting:
        return None
    return Path(setting)


def write_atomic(path: Path, obj) -> None:
    """Write ``obj`` as JSON to ``path`` through a temporary file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, sort_keys=True, default=repr)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_json(path: Path):
    """The JSON in ``path``, or None when it is missing or unreadable (a miss, not an error)."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


class ReferenceCache:
    """One machine's reference timings on disk (see the module doc). ``check(calibration)`` must come first:
    until a calibration has been compared with the stored one, ``get`` finds nothing and ``put`` writes nothing."""

    def __init__(self, root: str | Path, machine: dict, tolerance: float = DEFAULT_TOLERANCE):
        self.machine, self.tolerance = machine, tolerance
        self.machine_id = digest(machine)[:16]
        self.dir = Path(root) / self.machine_id
        self.epoch: int | None = None
        self.drift: list[str] = []  # what the last check found drifted (empty: none, or first calibration)
        self.measurements: list[dict] = []  # the calibrations the last check measured

    @classmethod
    def for_device(cls, root: str | Path, device: str, backend: str, tolerance: float | None = None):
        """This machine's cache under ``root``; ``tolerance`` defaults to ``KBENCH_REFERENCE_TOLERANCE`` (a
        fraction), else DEFAULT_TOLERANCE."""
        if tolerance is None:
            given = environ.get("KBENCH_REFERENCE_TOLERANCE")
            tolerance = DEFAULT_TOLERANCE if given is None else given
        return cls(root, machine_fingerprint(device, backend), tolerance)

    def check(self, calibration: dict, remeasure=None) -> bool:
        """Compare a fresh ``calibration`` with the stored one; on drift (or none stored) store it, in a new epoch
        when entries existed. ``remeasure()``, when given, measures the calibration again: a drift is re-checked
        on the best of up to RECHECKS more measurements before it invalidates anything, and a calibration is
        stored as such a best (the module doc). Pins the epoch for ``get``/``put``. True when the cache was
        invalidated. A folder that cannot be written leaves the cache off (a warning), never fails the
        evaluation."""
        self.measurements = [calibration]
        try:
            return self._check(remeasure)
        except OSError as exc:
            self.epoch = None
            log.warning("reference cache %s is unusable (%s): reference timings stay in memory", self.dir, exc)
            return False

    def _more(self, remeasure) -> bool:
        """One more measurement into ``measurements``; False when there is none to take (no ``remeasure``, RECHECKS
        taken, or it failed)."""
        if remeasure is None or len(self.measurements) > RECHECKS:
            return False
        try:
            self.measurements.append(remeasure())
        except Exception as exc:  # noqa: BLE001 - a failed re-measurement: judge on what was measured
            log.warning("reference cache %s: a re-measurement of the calibration failed (%s)", self.dir, exc)
            return False
        return True

    def _check(self, remeasure) -> bool:
        self.dir.mkdir(parents=True, exist_ok=True)
        if not (self.dir / "machine.json").exists():
            write_atomic(self.dir / "machine.json", self.machine)
        with open(self.dir / "calibration.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # read-compare-write of calibration.json, one process at a time
            stored = read_json(self.dir / "calibration.json")
            if isinstance(stored, dict) and isinstance(stored.get("calibration"), dict):
                while True:
                    self.drift = drifted(stored["calibration"], best_calibration(self.measurements),
                                         self.tolerance)
                    if not self.drift or not self._more(remeasure):
                        break
                if not self.drift:
                    self.epoch = int(stored.get("epoch", 0))
                    return False
                epoch = int(stored.get("epoch", 0)) + 1
                log.warning("reference cache %s invalidated: the device calibration drifted (%s, the best of %d "
                            "measurements); references are re-timed", self.dir, "; ".join(self.drift),
                            len(self.measurements))
            else:
                self.drift, epoch = [], 0
            while self._more(remeasure):  # what later processes compare with: a best of several too
                pass
            write_atomic(self.dir / "calibration.json",
                         {"epoch": epoch, "calibration": best_calibration(self.measurements)})
            self.epoch = epoch
            return bool(self.drift)

    def _path(self, fields: dict) -> Path:
        return self.dir / "entries" / f"{digest(fields)[:32]}.json"

    def get(self, fields: dict) -> dict | None:
        """The timing dict stored for ``fields`` in the pinned epoch, else None."""
        if self.epoch is None:
            return None
        fields = normal(fields)
        entry = read_json(self._path(fields))
        if not isinstance(entry, dict) or entry.get("epoch") != self.epoch or entry.get("fields") != fields:
            return None
        times = entry.get("times")
        return times if isinstance(times, dict) else None

    def stored(self, fields_list: list) -> bool:
        """Whether an entry for each of ``fields_list`` is on disk in the stored calibration's epoch, before any
        ``check``: what ``get`` will find if the check finds no drift (a guess, for starting work ahead; never a
        timing)."""
        stored = read_json(self.dir / "calibration.json")
        if not isinstance(stored, dict) or "epoch" not in stored:
            return False
        for fields in map(normal, fields_list):
            entry = read_json(self._path(fields))
            if not isinstance(entry, dict) or entry.get("epoch") != stored["epoch"] or entry.get("fields") != fields:
                return False
        return True

    def put(self, fields: dict, times: dict) -> None:
        """Store ``times`` (as it is) for ``fields`` in the pinned epoch."""
        if self.epoch is None:
            return
        fields = normal(fields)
        try:
            write_atomic(self._path(fields), {"epoch": self.epoch, "fields": fields, "times": times})
        except OSError as exc:  # a full or read-only disk costs the reuse, not the evaluation
            log.warning("reference cache %s: could not store a timing (%s)", self.dir, exc)

    def entries(self) -> int:
        """How many entry files this machine has (any epoch)."""
        return len(list((self.dir / "entries").glob("*.json")))
