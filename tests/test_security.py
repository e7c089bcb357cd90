"""Hostile candidates are stopped, and the attempt is reported as a ``sandbox_violation`` integrity flag (reward
-1): files outside the scratch directory (the repo's tasks, another candidate's build, $HOME, a results file, a
planted secret, ~/.ssh), sockets (loopback included), the parent's environment, shells, signals to the parent,
and escapes through namespaces or mounts. Each test also checks that the attack had no effect."""

from __future__ import annotations

import os
import shutil
import socket
import textwrap
from pathlib import Path

import pytest

from candidates import _forward
from conftest import ROOT
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.sandbox.confine.policy import Limits
from kbench_env.tasks.suite import resolve_task

# Set before any fork server starts (collection time): it must never reach a worker.
SECRET = "sk-test-kbench-7f3a9c"
os.environ["OPENAI_API_KEY"] = SECRET
os.environ["KBENCH_TEST_SECRET_TOKEN"] = SECRET

RELU = resolve_task("level1/relu")


@pytest.fixture(scope="module")
def ev(evaluator):
    return Evaluator(device="cpu", cache_dir=evaluator.cache_dir, timing=evaluator.timing,
                     limits=Limits(build_timeout=120, run_timeout=20, time_timeout=30, memory_bytes=2 << 30))


def _at_import(code: str) -> str:
    """A candidate that runs ``code`` when it loads (and would then be a plain, correct ReLU)."""
    return _forward("        return torch.relu(x)", at_import=textwrap.dedent(code) + "\n")


def _violation(r) -> str:
    flags = [f for f in r.integrity_flags if f.startswith("sandbox_violation")]
    assert flags, f"no sandbox_violation flag:\n{r.feedback()}"
    assert r.reward == -1.0
    return flags[0]


def test_write_into_the_repo_tasks_is_stopped(ev):
    target = ROOT / "tasks" / "level1" / "pwned_by_candidate.py"
    r = ev.evaluate(RELU, _at_import(f"open({str(target)!r}, 'w').write('pwned')"))
    assert "write" in _violation(r) and "pwned_by_candidate" in _violation(r)
    assert not target.exists()


def test_write_into_home_is_stopped(ev):
    home = os.path.expanduser("~")
    target = os.path.join(home, "kbench_pwned.txt")
    r = ev.evaluate(RELU, _at_import(f"open({target!r}, 'w').write('pwned')"))
    assert "kbench_pwned" in _violation(r)
    assert not os.path.exists(target)


def test_results_file_cannot_be_tampered_with(ev, tmp_path):
    results = tmp_path / "results.jsonl"
    results.write_text('{"task": "level1/relu", "reward": 0.1}\n')
    r = ev.evaluate(RELU, _at_import(f"open({str(results)!r}, 'a').write('{{\"reward\": 99}}\\n')"))
    assert "results.jsonl" in _violation(r)
    assert results.read_text() == '{"task": "level1/relu", "reward": 0.1}\n'


def test_planted_secret_and_ssh_keys_are_unreadable(ev, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    ssh = os.path.expanduser("~/.ssh")
    code = f"""
    for p in [{str(secret)!r}, {ssh + "/id_rsa"!r}, {ssh + "/authorized_keys"!r}, "/etc/shadow"]:
        try:
            data = open(p).read()
        except FileNotFoundError:
            continue
        except PermissionError:
            continue
        raise RuntimeError("LEAKED " + p + ": " + data[:40])
    open({str(secret)!r}).read()
    """
    r = ev.evaluate(RELU, _at_import(code))
    assert "LEAKED" not in (r.error or "") and SECRET not in (r.error or "") + (r.log_tail or "")
    assert "secret.txt" in _violation(r)


def test_other_builds_in_the_cache_cannot_be_changed(ev):
    # A build the parent made: the candidate tries to overwrite and delete files in it.
    build_root = ev.build_root
    victim = os.path.join(build_root, "victim_build-0000")
    os.makedirs(victim, exist_ok=True)
    with open(os.path.join(victim, "victim.so"), "w") as f:
        f.write("original")
    code = f"""
    import shutil, glob
    errors = []
    for attempt in (lambda: open({victim + "/victim.so"!r}, "w").write("poisoned"),
                    lambda: os.remove({victim + "/victim.so"!r}),
                    lambda: shutil.rmtree({victim!r})):
        try:
            attempt()
        except OSError as exc:
            errors.append(str(exc))
    # native code (no audit hook): through libc
    libc = ctypes.CDLL(None)
    fd = libc.open({(victim + "/victim.so").encode()!r}, 0o1 | 0o1000)  # O_WRONLY | O_TRUNC
    if fd >= 0:
        libc.write(fd, b"native-poison", 13)
    """
    try:
        r = ev.evaluate(RELU, _at_import(code))
        assert "build cache" in _violation(r)
        with open(os.path.join(victim, "victim.so")) as f:
            assert f.read() == "original"
    finally:
        shutil.rmtree(victim, ignore_errors=True)


def test_network_is_unreachable_even_on_loopback(ev):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    code = f"""
    import socket
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=2).sendall(b"exfiltrated")
    except OSError:
        pass
    # native code: the socket system call itself
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.socket(2, 1, 0)
    if fd >= 0:
        raise RuntimeError("native socket() succeeded")
    socket.socket()
    """
    try:
        r = ev.evaluate(RELU, _at_import(code))
        with pytest.raises(socket.timeout):
            server.accept()
    finally:
        server.close()
    assert "native socket() succeeded" not in (r.error or "")
    assert "network" in _violation(r)


def test_environment_holds_no_secrets(ev):
    code = f"""
    found = [k for k, v in os.environ.items() if {SECRET!r} in v]
    for p in ["/proc/self/environ", "/proc/%d/environ" % os.getppid(), "/proc/{os.getpid()}/environ"]:
        try:
            if {SECRET!r}.encode() in open(p, "rb").read():
                found.append(p)
        except OSError:
            pass
    if found:
        raise RuntimeError("LEAKED " + ", ".join(found))
    raise RuntimeError("env: " + ", ".join(sorted(os.environ)))
    """
    r = ev.evaluate(RELU, _at_import(code))
    assert "LEAKED" not in r.error, r.error
    assert "env:" in r.error and "OPENAI_API_KEY" not in r.error
    assert "environ" in _violation(r)  # reading the parent's /proc entry is refused and reported


def test_shell_is_refused(ev):
    code = """
    import subprocess
    for attempt in (lambda: os.system("id > /tmp/kbench_shell_ran"),
                    lambda: subprocess.run(["/bin/sh", "-c", "id"]),
                    lambda: subprocess.run("id", shell=True)):
        try:
            attempt()
        except PermissionError:
            pass
    """
    r = ev.evaluate(RELU, _at_import(code))
    assert "shell" in _violation(r)
    assert not os.path.exists("/tmp/kbench_shell_ran")


def test_signalling_the_parent_is_refused(ev):
    code = f"""
    import signal
    for pid in ({os.getpid()}, os.getppid(), 1):
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    libc = ctypes.CDLL(None)
    if libc.kill({os.getpid()}, 0) == 0:
        raise RuntimeError("native kill reached the parent")
    """
    r = ev.evaluate(RELU, _at_import(code))
    assert "native kill reached" not in (r.error or ""), r.error
    assert "signal" in _violation(r)


def test_escapes_through_namespaces_and_mounts_fail():
    """Native code gets no privilege back: unshare, mount, setuid, ptrace and a capability raise all fail."""
    from kbench_env.sandbox.worker_process import Worker

    code = _at_import("""
    libc = ctypes.CDLL(None, use_errno=True)
    got = []
    if libc.unshare(0x10000000) == 0: got.append("unshare(user)")
    if libc.unshare(0x00020000) == 0: got.append("unshare(mount)")
    if libc.mount(b"none", b"/mnt", b"tmpfs", 0, None) == 0: got.append("mount")
    if libc.setuid(1234) == 0 and os.getuid() == 1234: got.append("setuid")
    if libc.ptrace(16, os.getppid(), 0, 0) == 0: got.append("ptrace attach")
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        got.append("raised RLIMIT_AS")
    except (ValueError, OSError):
        pass
    if got:
        raise RuntimeError("ESCAPED " + ", ".join(got))
    raise RuntimeError("contained")
    """)
    root = os.path.join(str(ROOT), ".kbench-cache", "builds", "cpu")
    os.makedirs(root, exist_ok=True)
    with Worker(code, "cpu", "cpu", root) as w:
        header, _ = w.recv(60, "load")
    assert header["type"] == "error" and "contained" in header["message"], header


def test_protections_are_reported():
    from kbench_env.sandbox.doctor import doctor, format_doctor

    report = doctor()
    text = format_doctor(report)
    assert "session" in report["active"] and "environment" in report["active"]
    assert "active:" in text and "not active:" in text
    if os.geteuid() == 0 and os.path.exists("/proc/self/ns/net"):
        assert "network_namespace" in report["active"] or "network_namespace" in report["missing"]


def test_closing_the_report_channel_is_flagged(ev, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    code = f"""
    import fcntl, stat
    for fd in range(3, 256):  # the sandbox's report channel is the write end of a pipe: close it, then misbehave
        try:
            if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY and stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.close(fd)
        except OSError:
            pass
    try:
        open({str(secret)!r}).read()
    except OSError:
        pass
    """
    r = ev.evaluate(RELU, _at_import(code))
    assert "report channel" in _violation(r)


@pytest.mark.parametrize("off", [("landlock",), ("namespaces",), ("seccomp",), ("cgroup",), ("userns",)],
                         ids=lambda off: "without-" + off[0] if off[0] != "userns" else "in-a-user-namespace")
def test_python_attempts_are_stopped_with_a_layer_missing(evaluator, tmp_path, monkeypatch, off):
    """Each layer is missing on some machine: what the candidate's Python code tries is still refused and flagged.
    "userns": the namespaces made in a user namespace, as for a parent that is not root."""
    if off == ("userns",):
        monkeypatch.setenv("KBENCH_SANDBOX_USERNS", "1")
        off = ()
    ev = Evaluator(device="cpu", cache_dir=evaluator.cache_dir, time_candidates=False,
                   limits=Limits(run_timeout=20, memory_bytes=2 << 30, isolation_off=off))
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    target = ROOT / "tasks" / "pwned_by_candidate.txt"
    code = f"""
    import socket, subprocess
    got = []
    for name, attempt in [("read", lambda: open({str(secret)!r}).read()),
                          ("write", lambda: open({str(target)!r}, "w").write("x")),
                          ("socket", lambda: socket.socket().connect(("127.0.0.1", 9))),
                          ("shell", lambda: subprocess.run(["sh", "-c", "true"], check=True))]:
        try:
            attempt()
            got.append(name)
        except Exception:
            pass
    raise RuntimeError("GOT[" + ",".join(got) + "]")
    """
    r = ev.evaluate(RELU, _at_import(code))
    assert "GOT[]" in r.error, r.error
    assert not target.exists()
    assert "secret.txt" in _violation(r)


def test_builds_are_made_once_and_shared(ev):
    """Two workers given the same new source at once: the builder compiles it once (the second request waits for
    the first's build and finds it), in one unit of the cache with its manifest; a third evaluation finds it too."""
    import uuid

    src = (ROOT / "tasks/solutions/cpu/level1/relu.py").read_text()
    tag = uuid.uuid4().hex[:12]
    src = src.replace("#include", f"// fresh build {tag}\n#include", 1)
    r1, r2 = ev.evaluate_many([(RELU, src), (RELU, src)], max_workers=2)
    assert r1.correct and r2.correct, (r1.feedback(), r2.feedback())
    assert sorted([r1.cached_build, r2.cached_build]) == [False, True]
    root = Path(ev.build_root)
    built = [d for d in root.iterdir() if (d / "main.cpp").is_file() and tag in (d / "main.cpp").read_text()]
    assert len(built) == 1 and (built[0] / ".kbench-build.json").is_file()
    # (the two requests run at once: which of them the history lists first is not fixed)
    assert sorted(h["cached"] for h in ev.builder.history if h["unit"] == built[0].name) == [False, True]
    r3 = ev.evaluate(RELU, src)
    assert r3.cached_build, r3.feedback()
    shutil.rmtree(built[0], ignore_errors=True)


def test_kbench_doctor_command(capsys):
    from kbench_apps.cli import main

    assert main(["doctor", "--json"]) == 0
    import json

    report = json.loads(capsys.readouterr().out)
    assert {"machine", "active", "missing", "limitations", "worker_start_ms"} <= set(report)


def test_network_namespace_only_with_unix_sockets_still_blocks_the_network():
    """The confinement GPU workers can get (a network namespace without the mount namespace, seccomp allowing
    AF_UNIX sockets for the driver): native AF_UNIX sockets work, native AF_INET and AF_INET6 sockets are
    refused, and the protections report says so."""
    from kbench_env.sandbox.worker_process import Worker

    code = _at_import("""
    libc = ctypes.CDLL(None, use_errno=True)
    got = []
    fd = libc.socket(1, 1, 0)
    if fd < 0: got.append("AF_UNIX refused")
    else: libc.close(fd)
    if libc.socket(2, 1, 0) >= 0: got.append("AF_INET allowed")
    if libc.socket(10, 2, 0) >= 0: got.append("AF_INET6 allowed")
    raise RuntimeError("RESULT " + (", ".join(got) or "as expected"))
    """)
    root = os.path.join(str(ROOT), ".kbench-cache", "builds", "cpu")
    os.makedirs(root, exist_ok=True)
    limits = Limits(netns_only=True, unix_sockets=True, isolation_off=("landlock",))
    with Worker(code, "cpu", "cpu", root, limits) as w:
        header, _ = w.recv(60, "load")
        w._drain_reports()  # noqa: SLF001 - the confinement's status report
        prot = w.protections
    assert header["type"] == "error" and "RESULT as expected" in header["message"], header
    if os.geteuid() == 0 and os.path.exists("/proc/self/ns/net"):
        assert "network_namespace" in prot["active"], prot
        assert "mount_namespace" in prot["missing"], prot
    assert "AF_UNIX" in prot["active"].get("seccomp", "AF_UNIX"), prot
