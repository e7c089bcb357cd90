"""Escapes from the worker through what it inherits or leaves behind (issue #18): descriptors of the parent's
(the resource tracker's pipe), the fork server's environment, and the shared build cache (a build planted where
another candidate's build is, ballast). Each candidate attacks the way a real one did and the test checks the attack
had no effect."""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import uuid

import pytest

from candidates import _forward
from conftest import ROOT
from kbench_env.builder import cache
from kbench_env.sandbox.worker_process import Worker
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.sandbox.confine import policy
from kbench_env.sandbox.confine.policy import Limits
from kbench_env.sandbox.reaper import flush_cleanups
from kbench_env.tasks.suite import resolve_task

RELU = resolve_task("level1/relu")


@pytest.fixture(scope="module")
def ev(evaluator):
    return Evaluator(device="cpu", cache_dir=evaluator.cache_dir, timing=evaluator.timing, time_candidates=False,
                     limits=Limits(build_timeout=120, run_timeout=20, time_timeout=30, memory_bytes=2 << 30))


def _at_import(code: str) -> str:
    """A candidate that runs ``code`` when it loads (and would then be a plain ReLU in PyTorch)."""
    return _forward("        return torch.relu(x)", at_import=textwrap.dedent(code) + "\n")


def _attack(code: str) -> str:
    """``_at_import`` with ``plant`` (native file writes) at hand."""
    return _at_import(_PLANT + textwrap.dedent(code))


def _script(code: str, env: dict | None = None) -> dict:
    """Run ``code`` in a fresh Python process (its own fork server and resource tracker) and return the JSON it
    prints last. The process's output pipes close only when every process holding them (the resource tracker
    included) has exited, so what the tracker does at its exit has happened when this returns."""
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}", **(env or {})})
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


# Native file writes, which no audit hook sees: what a candidate's C++ kernel could do as well.
_PLANT = '''
import ctypes
_libc = ctypes.CDLL(None, use_errno=True)

def plant(path, data=b"", size=None):
    """Write ``path`` (making its directories) through libc; ``size``: a sparse file of that many bytes."""
    parts = path.strip("/").split("/")
    for i in range(1, len(parts)):
        _libc.mkdir(("/" + "/".join(parts[:i])).encode(), 0o755)
    _libc.unlink(path.encode())
    fd = _libc.open(path.encode(), 0o1 | 0o100 | 0o1000, 0o755)  # O_WRONLY | O_CREAT | O_TRUNC
    if fd < 0:
        return False
    if data:
        _libc.write(fd, data, len(data))
    if size:
        _libc.ftruncate(fd, ctypes.c_long(size))
    _libc.close(fd)
    return True
'''


# ---------------------------------------------------------------------- descriptors


def test_worker_holds_no_descriptor_but_its_channels(ev):
    """A worker had the resource tracker's pipe, the fork server's liveness pipe, the parent's sentinel and whatever
    the evaluator had inherited without close-on-exec; it holds stdio and its two channels only."""
    code = """
    import stat, fcntl
    extra = []
    for fd in sorted(int(n) for n in os.listdir("/proc/self/fd")):
        if fd < 3:
            continue
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            continue  # the listing's own descriptor, closed by now
        kind = "socket" if stat.S_ISSOCK(mode) else "pipe" if stat.S_ISFIFO(mode) else "file"
        access = {os.O_RDONLY: "r", os.O_WRONLY: "w", os.O_RDWR: "rw"}[fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE]
        extra.append(f"{kind}-{access}={os.readlink('/proc/self/fd/%d' % fd)}")
    raise RuntimeError("FDS{" + "|".join(extra) + "}FDS")
    """
    r = ev.evaluate(RELU, _at_import(code))
    listed = r.error.rsplit("FDS{", 1)[1].split("}FDS", 1)[0].split("|")
    # the protocol channel (a socket pair) and the report channel (the write end of a pipe)
    assert sorted(f.split("=")[0] for f in listed) == ["pipe-w", "socket-rw"], listed


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_no_worker_holds_the_resource_trackers_or_the_fork_servers_pipe(device):
    """Seen from this side, on every device: none of a worker's descriptors is this process's resource tracker pipe
    or the fork server's liveness pipe (a CUDA worker has the driver's descriptors besides its channels)."""
    import multiprocessing.forkserver as fs
    import multiprocessing.resource_tracker as rt

    root = os.path.join(str(ROOT), ".kbench-cache", "builds", device)
    os.makedirs(root, exist_ok=True)
    with Worker("class ModelNew:\n    pass\n", device, device, root) as w:
        w.recv(120, "load")
        held = set()
        for n in os.listdir(f"/proc/{w.proc.pid}/fd"):
            with contextlib.suppress(OSError):
                held.add(os.readlink(f"/proc/{w.proc.pid}/fd/{n}"))
    ours = {os.readlink(f"/proc/self/fd/{fd}") for fd in (rt._resource_tracker._fd, fs._forkserver._forkserver_alive_fd)}
    assert len(ours) == 2 and not held & ours, (held, ours)


def test_the_resource_tracker_cannot_be_reached():
    """A candidate wrote a REGISTER line for a file of someone else's to the tracker's pipe: the unconfined tracker
    deleted it when the evaluator exited. Here the candidate writes one to every pipe it can write to."""
    victim = f"kbench-victim-{uuid.uuid4().hex[:12]}"
    path = f"/dev/shm/{victim}"
    with open(path, "w") as f:
        f.write("someone else's")
    try:
        out = _script(f"""
        import json, os, sys, tempfile
        from candidates import _forward
        from kbench_env.sandbox.diagnosis import WorkerError
        from kbench_env.sandbox.worker_process import Worker
        from kbench_env.sandbox.reaper import flush_cleanups
        code = _forward("        return x", at_import='''
        import stat, fcntl
        wrote = []
        for fd in sorted(int(n) for n in os.listdir("/proc/self/fd")):
            try:
                if stat.S_ISFIFO(os.fstat(fd).st_mode) and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:
                    os.write(fd, b"REGISTER:/{victim}:shared_memory\\\\n")
                    wrote.append(fd)
            except OSError:
                pass
        raise RuntimeError("WROTE%s" % wrote)
        ''')
        with tempfile.TemporaryDirectory() as root, Worker(code, "cpu", "cpu", root) as w:
            try:
                message = w.recv(60, "load")[0].get("message")
            except WorkerError as exc:  # (the fork server's liveness pipe is among those written to)
                message = str(exc)
        flush_cleanups()
        print(json.dumps({{"message": message}}))
        """)
        assert os.path.exists(path), "the resource tracker deleted a file a candidate registered: " + out["message"]
        assert "WROTE" in out["message"], out
    finally:
        if os.path.exists(path):
            os.unlink(path)


# ---------------------------------------------------------------------- environment


def test_no_secret_in_any_environment_a_worker_can_read():
    """/proc/self/environ of a worker showed the fork server's environment as it started, with a credential in
    KBENCH_LLM_BASE_URL. Neither a worker nor the fork server (first started, or restarted after it died) holds a
    secret; a worker's os.environ is set from what is allowed now, so a variable changed after the fork server
    started reaches the next worker, and a secret set then does not."""
    secret = "s3cr3t-" + uuid.uuid4().hex[:8]
    out = _script(f"""
    import json, os, tempfile
    import multiprocessing.forkserver as fs
    import multiprocessing.resource_tracker as rt
    from candidates import _forward
    from kbench_env.sandbox.worker_process import Worker
    from kbench_env.sandbox.reaper import flush_cleanups
    code = _forward("        return x", at_import='''
    leaks = [p for p in ("/proc/self/environ",) if b"{secret}" in open(p, "rb").read()]
    leaks += [k for k, v in os.environ.items() if "{secret}" in v]
    raise RuntimeError("LEAKS[" + ",".join(leaks) + "] LIGHT=" + os.environ.get("KBENCH_LIGHT_HEADERS", "-"))
    ''')
    messages = []
    with tempfile.TemporaryDirectory() as root:
        for _ in range(2):
            with Worker(code, "cpu", "cpu", root) as w:
                messages.append(w.recv(60, "load")[0]["message"])
            # the fork server is running now: a secret set from here on, and a changed build variable
            os.environ["KBENCH_LLM_API_BASE"] = "https://bot:{secret}-late@llm.example/v1"
            os.environ["KBENCH_LIGHT_HEADERS"] = "0"
            if len(messages) == 1:  # and the fork server dies: the next worker's start starts another one
                pid = fs._forkserver._forkserver_pid
                os.kill(pid, 9)
                while open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
                    pass
    servers = [open(f"/proc/{{pid}}/environ", "rb").read() for pid in (fs._forkserver._forkserver_pid,
                                                                      rt._resource_tracker._pid)]
    flush_cleanups()
    print(json.dumps({{"messages": messages, "servers": [b"{secret}" in s for s in servers]}}))
    """, env={"KBENCH_LLM_BASE_URL": f"https://user:{secret}@llm.example/v1", "OPENAI_API_KEY": secret,
              "HF_TOKEN": secret, "KBENCH_LIGHT_HEADERS": "1"})
    first, second = out["messages"]
    assert "LEAKS[]" in first and "LEAKS[]" in second, out
    assert out["servers"] == [False, False], "the fork server or the resource tracker holds the secret"
    assert "LIGHT=1" in first and "LIGHT=0" in second, out


# ---------------------------------------------------------------------- the build cache


def test_a_build_planted_where_another_candidates_build_is_is_never_loaded(ev):
    """The issue's attack: candidate X builds the victim's extension, so its build lands where the victim's will be
    looked up, replaces the library with one whose constructor aborts, and every later evaluation of the victim
    crashed. The builder made the build and the worker sees the cache read-only: every plant fails, and the
    victim's evaluation afterwards loads its own honest build."""
    tag = uuid.uuid4().hex[:10]
    name = f"kb_poison_{tag}"
    victim_cpp = f'#include <stdlib.h>\n__attribute__((constructor)) static void mark() {{ setenv("KB_{tag}", "honest", 1); }}\n'
    victim = _forward("        return torch.relu(x)", at_import=textwrap.dedent(f"""
    load_inline(name={name!r}, cpp_sources={victim_cpp!r}, is_python_module=False, no_implicit_headers=True)
    _get = ctypes.CDLL(None).getenv
    _get.restype = ctypes.c_char_p
    assert _get(b"KB_{tag}") == b"honest", "the library loaded is not the victim's own"
    """))
    root = ev.build_root
    attacker = _attack(f"""
    import subprocess
    built = load_inline(name={name!r}, cpp_sources={victim_cpp!r}, is_python_module=False, no_implicit_headers=True)
    subprocess.run(["c++", "-shared", "-fPIC", "-x", "c++", "-", "-o", "poison.so"], text=True,
                   input="#include <stdlib.h>\\n__attribute__((constructor)) static void boom() {{ abort(); }}\\n")
    poison = open("poison.so", "rb").read() if os.path.exists("poison.so") else b"\\x7fELF poison"
    unit = os.path.basename(os.path.dirname(built))
    planted = [p for p in (built, {root!r} + "/" + unit + "-copy/{name}.so", {root!r} + "/{name}.so")
               if plant(p, poison)]
    raise RuntimeError("PLANTED" + repr(planted))
    """)
    r = ev.evaluate(RELU, attacker)
    assert "PLANTED[]" in r.error and "SIGABRT" not in r.error, r.feedback()
    r = ev.evaluate(RELU, victim)
    # (flagged for computing in PyTorch, as it does: what matters is that it loaded its own library and ran)
    assert r.compiled and r.stage == "ran" and all(c.correct for c in r.configs), r.feedback()


def test_a_fast_path_kernel_planted_where_another_candidates_is_is_never_loaded(ev):
    """The same through the fast path: X compiles the victim's kernel to learn its path and tries to put a kernel
    that writes 42s in its place."""
    tag = uuid.uuid4().hex[:10]
    kernel = (f"// {tag}\nextern \"C\" void relu(const float* x, float* y, long n) "
              "{ for (long i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f; }\n")
    poison = "extern \"C\" void relu(const float* x, float* y, long n) { for (long i = 0; i < n; ++i) y[i] = 42.f; }\n"
    victim = textwrap.dedent(f"""
    import torch
    import torch.nn as nn
    from kbench_env.fastpath import cpp_kernel

    relu = cpp_kernel({kernel!r}, "relu", flags=["-O2"])

    class ModelNew(nn.Module):
        def forward(self, x):
            x = x.contiguous()
            y = torch.empty_like(x)
            relu(x, y, x.numel())
            return y
    """)
    attacker = _attack(f"""
    from kbench_env import fastpath
    paths = [fastpath._artifact("cpp", src, ["-O2"]) for src in ({kernel!r}, {poison!r})]
    planted = [p for p in (paths[0], os.path.dirname(paths[0]) + "/kernel2.so") if plant(p, open(paths[1], "rb").read())]
    raise RuntimeError("PLANTED" + repr(planted))
    """)
    r = ev.evaluate(RELU, attacker)
    assert "PLANTED[]" in r.error, r.feedback()
    r = ev.evaluate(RELU, victim)
    assert r.compiled and r.correct, r.feedback()


def _named(root: str, word: str, depth: int = 3) -> list:
    found = []
    for here, dirs, files in os.walk(root):
        if here[len(root):].count(os.sep) >= depth:
            dirs[:] = []
        found += [os.path.join(here, n) for n in dirs + files if word in n]
    return found


def test_ballast_cannot_be_put_into_the_cache(ev):
    """A candidate published 1.8 GB of ballast into the shared cache, where it stayed. The worker cannot write
    there at all now (what its builds may add is bounded by the builder: tests/test_builder.py)."""
    tag = f"ballast-{uuid.uuid4().hex[:10]}"
    r = ev.evaluate(RELU, _attack(f"""
    planted = [p for p in ({ev.build_root!r} + "/{tag}/{tag}.so", {ev.build_root!r} + "/{tag}.so")
               if plant(p, size={policy.BUILD_BYTES})]
    raise RuntimeError("PLANTED" + repr(planted))
    """))
    assert "PLANTED[]" in r.error, r.feedback()
    flush_cleanups()
    planted = _named(ev.build_root, tag)
    for p in sorted(planted, key=len, reverse=True):  # (so that a failure here leaves no ballast behind)
        if os.path.isdir(p):
            shutil.rmtree(p, ignore_errors=True)
        elif os.path.lexists(p):
            os.unlink(p)
    assert not planted, planted


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


def test_the_cache_is_kept_within_its_bound(tmp_path, monkeypatch):
    """Builds of new sources push the least recently used ones out once the cache is over its bound
    ($KBENCH_CACHE_MAX_BYTES); the newest stays, and a repeated source is still found."""
    pad = 600_000
    monkeypatch.setenv("KBENCH_CACHE_MAX_BYTES", str(int(2.5 * pad)))  # about two of these builds
    ev = Evaluator(device="cpu", cache_dir=tmp_path, time_candidates=False, spare_worker=False,
                   limits=Limits(build_timeout=60, run_timeout=20, memory_bytes=2 << 30))
    sources = [_PADDED.format(tag=uuid.uuid4().hex, pad=pad) for _ in range(4)]
    for src in sources:
        r = ev.evaluate(RELU, src)
        assert r.correct, r.feedback()
        flush_cleanups()  # eviction runs in the background
        assert cache.disk_usage(ev.build_root)[0] <= 2.5 * pad
    def built(src):  # a unit of the cache holds its kernel's source
        return any(src.split("// ")[1].split("\n")[0] in open(k).read()
                   for k in glob.glob(os.path.join(ev.build_root, "fast-*", "kernel.cpp")))

    kept = [s for s in sources if built(s)]
    assert kept and kept[-1] == sources[-1] and sources[0] not in kept, [sources.index(s) for s in kept]
    ev.close()


def test_eviction_passes_over_what_a_live_worker_holds_and_goes_by_last_use(tmp_path):
    root = str(tmp_path)

    def build(i: int) -> cache.Claim:
        claim = cache.Claim(root, hashlib.sha256(b"%d" % i).hexdigest())
        os.makedirs(os.path.join(claim.path, "kb-0"))
        with open(os.path.join(claim.path, "kb-0", "kb.so"), "wb") as f:
            f.write(b"\1" * (256 << 10))
        os.utime(claim.path, (1000 + i, 1000 + i))  # built in this order
        return claim

    claims = [build(i) for i in range(4)]
    for c in claims[1:]:
        c.release()
    os.utime(claims[2].path, (5000, 5000))  # used again since: the most recent
    evicted = cache.enforce_bound(root, 600 << 10)  # room for two
    # the oldest is held by a live worker: passed over; of the rest only the most recently used stays
    assert sorted(evicted) == sorted(os.path.basename(c.path) for c in (claims[1], claims[3]))
    assert os.path.isdir(claims[0].path) and os.path.isdir(claims[2].path)
    claims[0].release()
    assert cache.enforce_bound(root, 300 << 10) == [os.path.basename(claims[0].path)]
    assert sorted(os.listdir(root)) == sorted([".evict.lock", os.path.basename(claims[2].path)])


def test_a_claim_that_raced_an_eviction_holds_the_directory_there_now(tmp_path, monkeypatch):
    """A worker's claim opened its directory, and an eviction renamed it away before the claim got its lock: the
    claim holds a new directory under the name, which no eviction can then take."""
    import fcntl

    root = str(tmp_path)
    key = hashlib.sha256(b"raced").hexdigest()
    real, raced = fcntl.flock, []

    def flock(fd, op):
        if op == fcntl.LOCK_SH and not raced:
            raced.append(cache.enforce_bound(root, 0))  # between the claim's open and its lock
        return real(fd, op)

    monkeypatch.setattr(fcntl, "flock", flock)
    claim = cache.Claim(root, key)
    try:
        assert raced == [[key]]
        assert os.path.isdir(claim.path) and cache.enforce_bound(root, 0) == []
    finally:
        claim.release()
    assert not os.path.exists(claim.path)  # empty and unheld: removed on release
