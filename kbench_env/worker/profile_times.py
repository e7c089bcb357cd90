"""The times kernel coverage is made of, read in the worker from the forward audit's profile (worker/audit.py,
``ForwardAudit``): on the CPU the own regions' time and forward's, on a GPU every kernel's device time with who
launched it. The worker reports the times; the trusted side turns them into the fraction (pipeline/coverage.py,
whose docstring states what is the candidate's own).
"""

from __future__ import annotations

import bisect

from kbench_env.machine.device import Device
from kbench_env.measure import ownership  # looked up at each use: the audit's guard watches its functions

#: Rows of per-kernel device time the worker reports; the rest are summed into one row counted as not own.
MAX_KERNEL_ROWS = 200
_RUNTIME = ("cuda_runtime", "cuda_driver")


def _is_cuda(e) -> bool:
    return str(getattr(e, "device_type", "")).endswith("CUDA")


def is_annotation(e) -> bool:
    """A user annotation's span (record_function) mirrored on the device: not work."""
    return (getattr(e, "activity_type", None) in ("user_annotation", "gpu_user_annotation")
            or bool(getattr(e, "is_user_annotation", False)))


def _us(e) -> float:
    return max(0.0, float(e.time_range.elapsed_us()))


def profile_times(events, namespaces: set, trust_records: bool, device: str, glue: frozenset) -> dict:
    """The times coverage is made of, from the audit's profile events: ``{"cpu_us": {"own", "total"}}`` on the
    CPU, ``{"device_us": [[kernel name, "own" | "torch" | "other" | None, microseconds], ...]}`` on a GPU (none without
    device events: the legacy profiler's "ops" mode)."""
    classify = _Classifier(namespaces, trust_records, glue)
    if Device.parse(device).is_cuda:
        dev = [e for e in events if _is_cuda(e) and not is_annotation(e)]
        return {"device_us": _device_rows(events, dev, classify)} if dev else {}
    return {"cpu_us": _cpu_times(events, classify)}


class _Classifier:
    def __init__(self, namespaces: set, trust_records: bool, glue: frozenset):
        self.namespaces, self.trust, self.glue = namespaces, trust_records, glue

    def own(self, e) -> bool:
        name = e.name
        if self.trust and ownership.is_record(name):
            return True
        return "::" in name and name.split("::", 1)[0] in self.namespaces

    def kernel_record(self, e) -> bool:
        return self.trust and e.name.startswith(ownership.KERNEL_RECORD_PREFIX)

    @staticmethod
    def aten(e) -> bool:
        return e.name.startswith("aten::")

    def compute(self, e) -> bool:
        return self.aten(e) and e.name.split("::", 1)[1] not in self.glue


def _children(e) -> list:
    return list(getattr(e, "cpu_children", None) or [])


def _cpu_times(events, c: _Classifier) -> dict:
    own = total = 0.0
    roots = [e for e in events if getattr(e, "cpu_parent", None) is None and not _is_cuda(e)
             and not getattr(e, "is_async", False)]
    stack = list(roots)
    while stack:
        e = stack.pop()
        if c.own(e):
            d = _us(e)
            inside = 0.0 if c.kernel_record(e) else _torch_inside(e, c)
            own += max(0.0, d - inside)
            total += d
        elif c.aten(e):
            total += _us(e)
        else:  # someone else's record, a Python function: look inside
            stack.extend(_children(e))
    return {"own": round(own, 3), "total": round(total, 3)}


def _torch_inside(e, c: _Classifier) -> float:
    """Time of the outermost PyTorch compute operators inside own region ``e`` (not inside a trusted Triton launch,
    whose internals are the kernel's)."""
    t = 0.0
    stack = _children(e)
    while stack:
        x = stack.pop()
        if c.kernel_record(x):
            continue
        if c.compute(x):
            t += _us(x)
        else:
            stack.extend(_children(x))
    return t


def _launcher(op, c: _Classifier):
    """"torch" if the innermost classifying event from ``op`` up is a PyTorch operator, "own" if it is the
    candidate's, None if there is none."""
    e = op
    while e is not None:
        if c.aten(e):
            return "torch"
        if c.own(e):
            return "own"
        e = getattr(e, "cpu_parent", None)
    return None


def _union(spans) -> tuple[list, list]:
    """Sorted starts and ends of the union of ``(start, end)`` spans (own regions may nest)."""
    starts: list = []
    ends: list = []
    for s, t in sorted(spans):
        if starts and s <= ends[-1]:
            ends[-1] = max(ends[-1], t)
        else:
            starts.append(s)
            ends.append(t)
    return starts, ends


def _is_runtime(e) -> bool:
    """A host-side CUDA runtime or driver call (a launch, a copy): kineto gives it the correlation id of the device
    work it started, and the operator it ran under as its CPU parent."""
    return getattr(e, "activity_type", None) in _RUNTIME or e.name.startswith(("cuda", "cuLaunch", "cuMemcpy"))


def _device_rows(events, dev: list, c: _Classifier) -> list:
    host = [e for e in events if not _is_cuda(e)]
    runtime = {e.id: e for e in host if _is_runtime(e)}
    frontend = {e.id: e for e in host if not _is_runtime(e)}
    starts, ends = _union((e.time_range.start, e.time_range.end) for e in host if c.own(e))
    agg: dict = {}
    for d in dev:
        cls = None
        linked = getattr(d, "linked_correlation_id", 0) or 0
        if linked and linked in frontend:
            cls = _launcher(frontend[linked], c)
        launch = runtime.get(d.id) if cls is None else None
        if launch is not None:  # the operator the launch ran under, else the span of the candidate's code it fell in
            cls = _launcher(getattr(launch, "cpu_parent", None), c)
            if cls is None:
                # with trusted records every call into the candidate's code has a span, so a launch seen on the
                # host outside all of them is someone else's (a library launching on its own, e.g. cuDNN kernels
                # unlinked to their operator), whatever its name; without them, the name decides (own_kernel)
                i = bisect.bisect_right(starts, launch.time_range.start) - 1
                inside = i >= 0 and launch.time_range.start <= ends[i]
                cls = "own" if inside else ("other" if c.trust else None)
        key = (d.name, cls)
        agg[key] = agg.get(key, 0.0) + _us(d)
    rows = sorted(([n, k, round(us, 3)] for (n, k), us in agg.items()), key=lambda r: -r[2])
    if len(rows) > MAX_KERNEL_ROWS:
        rest = sum(r[2] for r in rows[MAX_KERNEL_ROWS - 1:])
        rows = rows[:MAX_KERNEL_ROWS - 1] + [["(other kernels)", "torch", round(rest, 3)]]
    return rows
