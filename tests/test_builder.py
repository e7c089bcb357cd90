"""The trusted builder (kbench_env/builder, issue #21): a candidate's load_inline and fast-path kernels are compiled
in the builder process, never in the worker, which cannot run the compiler and sees the build cache read-only;
refused flags give a readable build error; builds are keyed by content, found again, bounded and checked."""

from __future__ import annotations

import os
import re
import signal
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from candidates import _forward
from kbench_env.builder import flags, requests
from kbench_env.builder.compiler import CompileError
from kbench_env.builder.errors import BuildRefused
from kbench_env.builder.store import Store
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.sandbox.confine.policy import Limits
from kbench_env.sandbox.reaper import flush_cleanups
from kbench_env.tasks.suite import resolve_task

RELU = resolve_task("level1/relu")

_PLANT = '''
_libc = ctypes.CDLL(None, use_errno=True)

def plant(path, data=b"x"):
    """Write ``path`` (making its directory) natively, as a C++ kernel could: no audit hook sees it."""
    _libc.mkdir(os.path.dirname(path).encode(), 0o755)
    fd = _libc.open(path.encode(), 0o1 | 0o100 | 0o1000, 0o755)  # O_WRONLY | O_CREAT | O_TRUNC
    if fd < 0:
        return False
    _libc.write(fd, data, len(data))
    _libc.close(fd)
    return True
'''


@pytest.fixture(scope="module")
def ev(evaluator):
    return Evaluator(device="cpu", cache_dir=evaluator.cache_dir, time_candidates=False, spare_worker=False,
                     limits=Limits(build_timeout=300, run_timeout=20, memory_bytes=2 << 30))


def _inline(tag: str, options: str = "", before: str = "", after: str = "") -> str:
    """A candidate whose import builds a tiny library (no torch headers: a second's build) with load_inline, the
    build's path in ``path``; forward is PyTorch's ReLU."""
    return _forward("        return torch.relu(x)", at_import=textwrap.dedent(before) + textwrap.dedent(f'''
    path = load_inline(name="kb_b_{tag}", cpp_sources='extern "C" int kb_b_{tag}() {{ return 1; }}',
                       is_python_module=False, no_implicit_headers=True{options})
    ''') + textwrap.dedent(after))


def _units(root: str, text: str) -> list:
    """The build units whose sources hold ``text``."""
    found = []
    for unit in Path(root).iterdir():
        for name in ("main.cpp", "kernel.cpp"):
            f = unit / name
            if f.is_file() and text in f.read_text():
                found.append(unit)
    return found


def test_load_inline_is_built_by_the_builder_and_the_worker_cannot_compile(ev):
    tag = uuid.uuid4().hex[:10]
    src = _inline(tag, before='''
    import subprocess
    own = subprocess.run(["c++", "-x", "c++", "-c", "-", "-o", "own.o"], input="int own;", capture_output=True,
                         text=True)
    assert own.returncode != 0, "the worker ran the compiler itself"
    ''', after='''
    assert os.path.basename(os.path.dirname(path)).startswith("kb_b_"), path  # a unit of the shared cache
    ''')
    r = ev.evaluate(RELU, src)
    assert r.compiled and r.cached_build is False, r.feedback()
    built = [h for h in ev.builder.history if (h["unit"] or "").startswith(f"kb_b_{tag}-")]
    assert len(built) == 1 and built[0]["cached"] is False, list(ev.builder.history)[-5:]
    unit = Path(ev.build_root) / built[0]["unit"]
    assert (unit / "build.ninja").is_file() and (unit / f"kb_b_{tag}.so").is_file()  # the builder's ninja build
    # the builder's own seconds on it, a part of the build phase (which also waits for a place and the worker)
    assert r.phase_seconds["builder"] == pytest.approx(built[0]["seconds"], abs=1e-3), r.phase_seconds
    assert 0 < r.phase_seconds["builder"] <= r.phase_seconds["build"], r.phase_seconds
    again = ev.evaluate(RELU, src)
    assert again.compiled and again.cached_build is True, again.feedback()
    assert "builder" not in again.phase_seconds, again.phase_seconds  # nothing was built for it


@pytest.mark.parametrize("option, words", [
    (', extra_cflags=["-O2", "-fplugin=/tmp/kb_evil.so"]', "loads a plugin into the compiler"),
    (', extra_ldflags=["-Wl,-T,/tmp/kb_script.ld"]', "names a linker script"),
    (', extra_include_paths=["/root/.ssh"]', "outside the directories a build may read"),
    (', extra_cflags=["-DX=$(touch /tmp/kb_pwned)"]', "cannot carry safely"),
])
def test_a_refused_flag_is_a_readable_build_error(ev, option, words):
    r = ev.evaluate(RELU, _inline(uuid.uuid4().hex[:10], options=option))
    assert r.error_stage == "build" and not r.compiled, r.feedback()
    assert "the builder refused these build flags" in r.error and words in r.error, r.error
    assert not os.path.exists("/tmp/kb_pwned")


def test_the_worker_cannot_write_into_the_cache(ev):
    """Its own build's library, a new file in its unit, a new unit: natively and from Python, all refused; the build
    is left as the builder made it."""
    tag = uuid.uuid4().hex[:10]
    r = ev.evaluate(RELU, _inline(tag, before=_PLANT, after='''
    unit = os.path.dirname(path)
    got = [p for p in (path, unit + "/planted.so", os.path.dirname(unit) + "/kb_planted/x.so") if plant(p)]
    try:
        open(path, "ab").close()
        got.append("python")
    except PermissionError:
        pass
    raise RuntimeError("PLANTED[" + ",".join(got) + "]")
    '''))
    assert "PLANTED[]" in r.error, r.error
    assert any("write into the build cache" in f for f in r.integrity_flags), r.feedback()
    unit = _units(ev.build_root, f"kb_b_{tag}")[0]
    assert Store(ev.build_root).lookup(unit.name) is not None  # its library still has the builder's digest
    assert not (unit / "planted.so").exists() and not (Path(ev.build_root) / "kb_planted").exists()


_PADDED = '''
import torch
import torch.nn as nn
from kbench_env.fastpath import cpp_kernel

relu = cpp_kernel(r"""
// {tag}
extern "C" const char kb_pad[{pad}] = {{1}};
extern "C" void relu(const float* x, float* y, long n) {{ for (long i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f; }}
""", "relu")

class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        relu(x, y, x.numel())
        return y
'''


def test_a_build_over_the_quota_is_not_kept(evaluator):
    ev = Evaluator(device="cpu", cache_dir=evaluator.cache_dir, time_candidates=False, spare_worker=False,
                   limits=Limits(build_bytes=1 << 20, build_timeout=120, run_timeout=20))
    tag = uuid.uuid4().hex
    r = ev.evaluate(RELU, _PADDED.format(tag=tag, pad=2 << 20))
    assert r.error_stage == "build" and "MiB this candidate's builds may still add" in r.error, r.feedback()
    assert not _units(ev.build_root, tag)
    r = ev.evaluate(RELU, _PADDED.format(tag=tag, pad=1 << 10))  # a small one fits
    assert r.correct, r.feedback()
    ev.close()


def test_a_dead_builder_is_started_again(evaluator):
    ev = Evaluator(device="cpu", cache_dir=evaluator.cache_dir, time_candidates=False, spare_worker=False)
    assert ev.evaluate(RELU, _PADDED.format(tag=uuid.uuid4().hex, pad=16)).correct
    first = ev.builder.pid
    os.kill(first, signal.SIGKILL)
    r = ev.evaluate(RELU, _PADDED.format(tag=uuid.uuid4().hex, pad=16))
    assert r.correct and ev.builder.pid != first, r.feedback()
    ev.close()
    flush_cleanups()


def _nice(stat_path: str) -> int:
    """A task's nice value from its /proc stat line (field 19; the command name may hold spaces)."""
    with open(stat_path) as f:
        return int(f.read().rsplit(")", 1)[1].split()[16])


def test_the_builder_and_its_threads_run_below_the_trusted_sides_priority(evaluator):
    """Compilers on every core must not delay the trusted side's exchanges around a timed block: the builder
    lowers its own priority before any thread starts, so every build thread (and the compilers they start) runs
    BUILD_NICE below this process."""
    from kbench_env.builder.server import BUILD_NICE

    ev = Evaluator(device="cpu", cache_dir=evaluator.cache_dir, time_candidates=False, spare_worker=False)
    try:
        assert ev.evaluate(RELU, _PADDED.format(tag=uuid.uuid4().hex, pad=16)).correct
        pid, own = ev.builder.pid, os.getpriority(os.PRIO_PROCESS, 0)
        assert ev.builder.protections["active"].get("build_nice") == min(19, own + BUILD_NICE)
        tasks = [t for t in os.listdir(f"/proc/{pid}/task")]
        assert len(tasks) >= 2, tasks  # the serving thread at least beside the main one
        assert {_nice(f"/proc/{pid}/task/{t}/stat") for t in tasks} == {min(19, own + BUILD_NICE)}
    finally:
        ev.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_an_idle_builder_stops_and_starts_again(evaluator, monkeypatch):
    from kbench_env.builder import client

    monkeypatch.setattr(client, "IDLE_S", 0.3)
    ev = Evaluator(device="cpu", cache_dir=evaluator.cache_dir, time_candidates=False, spare_worker=False)
    assert ev.evaluate(RELU, _PADDED.format(tag=uuid.uuid4().hex, pad=16)).correct
    first = ev.builder.pid
    deadline = time.monotonic() + 30
    while ev.builder._proc is not None:  # noqa: SLF001 - the process it holds
        assert time.monotonic() < deadline, "the idle builder was not stopped"
        time.sleep(0.1)
    # the client lets go of the process before it kills and reaps it: wait for that too (a loaded machine
    # stretches the gap; a process that is never reaped fails at the deadline)
    while _alive(first):
        assert time.monotonic() < deadline, "the idle builder's process is still there"
        time.sleep(0.1)
    r = ev.evaluate(RELU, _PADDED.format(tag=uuid.uuid4().hex, pad=16))
    assert r.correct and ev.builder.pid != first, r.feedback()
    ev.close()


def test_a_changed_library_is_built_again(tmp_path):
    store = Store(str(tmp_path))
    made = []

    def make(directory):
        made.append(directory)
        Path(directory, "lib.so").write_bytes(b"honest")
        return "lib.so", None

    first, cached = store.get_or_build("u-1", make, 1 << 20)
    assert not cached and store.get_or_build("u-1", make, 1 << 20)[1]
    Path(first["path"]).write_bytes(b"poison")  # what a GPU worker's native code could do
    again, cached = store.get_or_build("u-1", make, 1 << 20)
    assert not cached and len(made) == 2 and Path(again["path"]).read_bytes() == b"honest"

    def fails(directory):
        raise CompileError(f"Error building extension 'x': {directory}/main.cpp:1:1: error: boom")

    with pytest.raises(CompileError, match=r"<build>/main.cpp:1:1: error: boom"):
        store.get_or_build("u-2", fails, 1 << 20)
    assert not (tmp_path / "u-2").exists() and not list(tmp_path.glob(".staging-*"))


@pytest.mark.parametrize("flag", [
    "-fplugin=x.so", "-wrapper", "-B/usr/bin", "-specs=/usr/lib/x", "--sysroot=/usr", "-o", "-save-temps",
    "-fprofile-use=/usr/x", "-Xclang", "/etc/shadow", "-I/root", "-include/etc/passwd", "-L/home", "-I../up",
    "-Wl,-T,x.ld", "-Wl,--script=/usr/x", "-Wl,@opts", "-Xlinker", "-fuse-ld=/tmp/ld", "-l/etc/x", "a b", "-D'x'",
])
def test_flags_that_reach_beyond_the_sources_are_refused(flag):
    tokens = [flag, "--script=/tmp/x"] if flag == "-Xlinker" else [flag]
    with pytest.raises(BuildRefused) as exc:
        flags.check_request({"extra_cflags": tokens})
    assert "is not allowed" in str(exc.value) or "outside the directories" in str(exc.value) or \
        "relative path" in str(exc.value) or "cannot carry safely" in str(exc.value), str(exc.value)


def test_the_flags_solutions_use_are_accepted():
    flags.check_request({
        "extra_cflags": ["-O3", "-fopenmp", "-march=native", "-ffast-math", "-std=c++17", "-DBLOCK=256", "-w",
                         "-funroll-loops", "-I/usr/include"],
        "extra_ldflags": ["-fopenmp", "-lgomp", "-Wl,--as-needed", "-Wl,-rpath,/usr/lib"],
        "extra_cuda_cflags": ["-O3", "--use_fast_math", "-gencode", "arch=compute_90,code=sm_90", "-arch=sm_90",
                              "-Xptxas", "-v", "-Xcompiler", "-fopenmp", "--expt-relaxed-constexpr", "-lineinfo",
                              "-std=c++17", "-DX=/a"]})
    for bad in (["-ccbin", "/tmp/gcc"], ["-Xcompiler", "-fplugin=/x.so"], ["--options-file", "/x"], ["-run"]):
        with pytest.raises(BuildRefused):
            flags.check_request({"extra_cuda_cflags": bad})
    assert requests.normalise({"kind": "inline", "name": "m", "cpp_sources": "", "options": {
        "extra_cflags": [""], "extra_ldflags": [" -O3 "]}})["options"] == {"extra_cflags": [], "extra_ldflags": ["-O3"]}


@pytest.mark.parametrize("request_, words", [
    ({"kind": "inline", "name": "../x", "cpp_sources": ""}, "Python identifier"),
    ({"kind": "inline", "name": "m", "cpp_sources": [1]}, "list of strings"),
    ({"kind": "inline", "name": "m", "cpp_sources": "", "options": {"build_directory": "/tmp"}}, "not supported"),
    ({"kind": "load", "name": "m", "files": [{"name": "../x.cpp", "text": ""}]}, "distinct C++ or CUDA files"),
    ({"kind": "fast", "language": "cuda", "source": "", "arch": "sm_90; rm"}, "sm_XY"),
    ({"kind": "shell"}, "unknown build kind"),
])
def test_malformed_requests_are_refused_with_a_reason(request_, words):
    with pytest.raises(BuildRefused, match=re.escape(words)):
        requests.normalise(request_)


def test_a_connection_closed_under_the_reader_fails_the_requests_in_flight():
    """The replies' reader thread ends on a connection another thread closed while it read (the closed
    connection's read raises TypeError, not EOFError) and fails the requests still waiting, rather than dying with
    them unanswered until their timeouts."""
    from concurrent.futures import Future
    from types import SimpleNamespace

    from kbench_env.builder.client import Builder

    b = Builder("cpu", "cpu", ".")
    proc = SimpleNamespace(join=lambda timeout=None: None, exitcode=None)
    b._proc, fut = proc, Future()  # noqa: SLF001
    b._pending[1] = fut  # noqa: SLF001

    class Closed:
        def recv_bytes(self):
            raise TypeError("'NoneType' object cannot be interpreted as an integer")

    b._read(Closed(), proc)  # noqa: SLF001
    assert fut.done() and "builder process exited" in str(fut.exception() or fut.result())
