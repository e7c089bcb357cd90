"""The builder's tiers (builder/compiler.py Tiers): it serves more builds at once than it has build slots, and a
build's compilers start at a priority graded by the builds that came before it and are still building (the lowest
with ``first`` or more ahead), raised again at its next compiler as those end; a thread the build starts (cudafe++
beside the device passes, ninja's C++ objects) takes the build's tier; in the confined builder process the lowered
builds build as the others do."""

from __future__ import annotations

import contextvars
import os
import sys
import threading
import uuid

from kbench_env.builder import compiler, requests
from kbench_env.builder.client import Builder
from kbench_env.builder.compiler import LOWEST_NICE, Tiers, run

NICE = [sys.executable, "-c", "import os; print(os.nice(0))"]


def _held(tiers: Tiers, n: int):
    """``n`` builds holding their tickets until the returned event is set (and their threads)."""
    inside, release = threading.Semaphore(0), threading.Event()

    def hold():
        with tiers.ticket():
            inside.release()
            release.wait(60.0)
    threads = [threading.Thread(target=hold, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
        assert inside.acquire(timeout=60.0)  # in order: each ticket comes after the one before
    return release, threads


def test_the_priority_is_graded_by_the_builds_ahead():
    tiers = Tiers(4)
    release, threads = _held(tiers, 8)
    try:
        with tiers._lock:  # noqa: SLF001 - the tickets held, in their order
            held = sorted(tiers._active)  # noqa: SLF001
        assert [tiers.nice(held[k]) for k in (0, 1, 2, 4, 7)] == [0, 2, 4, LOWEST_NICE, LOWEST_NICE]
    finally:
        release.set()
        for t in threads:
            t.join(60.0)


def test_a_build_with_builds_ahead_compiles_lower_until_they_end(tmp_path):
    own = os.nice(0)
    tiers = Tiers(2)
    release, threads = _held(tiers, 2)
    with tiers.ticket() as seen:
        assert int(run(NICE, str(tmp_path), 60.0, "probe")) == min(19, own + LOWEST_NICE)
        assert seen["nice"] == LOWEST_NICE
        release.set()
        for t in threads:
            t.join(60.0)
        assert int(run(NICE, str(tmp_path), 60.0, "probe")) == own  # promoted at its next compiler
    with tiers.ticket() as seen:
        assert int(run(NICE, str(tmp_path), 60.0, "probe")) == own and seen["nice"] == 0
    assert int(run(NICE, str(tmp_path), 60.0, "probe")) == own  # outside any build: the builder's own


def test_a_thread_the_build_starts_takes_its_tier(tmp_path):
    own = os.nice(0)
    tiers = Tiers(1)
    release, threads = _held(tiers, 1)
    got = {}
    with tiers.ticket():
        beside = threading.Thread(target=contextvars.copy_context().run,
                                  args=(lambda: got.update(n=int(run(NICE, str(tmp_path), 60.0, "probe"))),))
        beside.start()
        beside.join(60.0)
        plain = threading.Thread(target=lambda: got.update(plain=int(run(NICE, str(tmp_path), 60.0, "probe"))))
        plain.start()
        plain.join(60.0)
    release.set()
    assert got == {"n": min(19, own + LOWEST_NICE), "plain": own}  # a thread not given the context: no tier


def _fast(source: str) -> dict:
    return requests.normalise({"kind": "fast", "language": "cpp", "source": source, "flags": [], "arch": None})


def test_the_confined_builder_builds_past_its_slots_at_a_lower_priority(tmp_path):
    """One build slot, two requests at once: the second is served beside the first (not queued behind it), its
    compiler at the lowest priority while the first builds (a compile of thousands of functions: seconds, where the second
    request is sent milliseconds after the first), and both build under the builder's confinement."""
    slow = "\n".join(f'extern "C" double f{i}(double x) {{ double y = x; for (int k = 0; k < {i % 7 + 3}; ++k) '
                     f'y = y * 1.0001 + {i}.0 / (k + 1); return y; }}' for i in range(6000))
    tag = uuid.uuid4().hex
    (tmp_path / "store").mkdir()
    builder = Builder("cpu", "cpu", str(tmp_path / "store"), workers=1)
    try:
        first = builder.submit(_fast(f"// {tag}\n{slow}\n"), 600.0)
        second = builder.submit(_fast(f'// {tag}\nextern "C" int g() {{ return 7; }}\n'), 600.0)
        a, b = first.result(timeout=660.0), second.result(timeout=660.0)
    finally:
        builder.close()
    assert a["ok"] and b["ok"], (a.get("message"), b.get("message"))
    assert (a["nice"], b["nice"]) == (0, LOWEST_NICE)
    assert b["seconds"] < a["seconds"]  # beside it, not after it
