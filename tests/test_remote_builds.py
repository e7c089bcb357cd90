"""Remote builds (``Evaluator(remote_builds="ray")``, kbench_env/builder/ray_builds.py) on a local Ray instance with 2
CPUs, CPU backend: a load_inline candidate built in a Ray task evaluates as a local build does and its unit is then a
local cache hit; a compile error comes back as the compiler wrote it; an artifact whose bytes do not match its
manifest is refused; a task that fails for kbench's reasons falls back to this host's builder, said once, with the
build's whole timeout; a request found in the store under any plan's unit, or refused, sends no task; the build
environment (a GPU's architecture) is not read in this process, and is the Evaluator's device's."""

from __future__ import annotations

import time
import uuid
import warnings
from pathlib import Path

import pytest

from conftest import ROOT, read
from kbench_env.builder.client import Builder, BuilderError
from kbench_env.builder.ray_builds import RemoteBuilder, parse_option
from kbench_env.builder.store import ExternalBuildRefused
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.sandbox.confine.policy import Limits
from kbench_env.tasks.suite import resolve_task

RELU = resolve_task("level1/relu")
GOOD = read(ROOT / "tasks/solutions/cpu/level1/relu.py")
BROKEN = GOOD.replace("return out;", "return kb_not_declared_here;")
LIMITS = Limits(build_timeout=300, run_timeout=30)
#: EvalResult fields that are timings or say where the build came from; everything else must be equal.
NOT_COMPARED = {"eval_seconds", "worker_seconds", "build_seconds", "phase_seconds", "cached_build", "log_tail"}


@pytest.fixture(scope="module")
def cluster():
    """The ``ray`` module, joined to a local instance (tests that need no Ray do not take it, so run without it)."""
    ray = pytest.importorskip("ray")
    from kbench_env.machine.ray_cluster import connect

    started = not ray.is_initialized()
    yield connect("local", num_cpus=2)
    if started:
        ray.shutdown()


def _evaluator(cache_dir, **kw) -> Evaluator:
    return Evaluator(device="cpu", cache_dir=cache_dir, time_candidates=False, spare_worker=False, limits=LIMITS,
                     **kw)


@pytest.fixture(scope="module")
def remote(cluster, tmp_path_factory):
    ev = _evaluator(tmp_path_factory.mktemp("remote-cache"), remote_builds="ray")
    yield ev
    ev.close()


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    ev = _evaluator(tmp_path_factory.mktemp("local-cache"))
    yield ev
    ev.close()


def _fields(result) -> dict:
    d = result.to_dict()
    return {k: v for k, v in d.items() if k not in NOT_COMPARED}


def _tiny(tag: str) -> dict:
    """A build request for a library without torch headers (a second's build)."""
    return {"kind": "inline", "name": f"kb_rb_{tag}", "cpp_sources": [f'extern "C" int kb_rb_{tag}() {{ return 1; }}'],
            "cuda_sources": None, "functions": None,
            "options": {"is_python_module": False, "no_implicit_headers": True}}


def test_the_option_is_parsed():
    assert parse_option(None) is None and parse_option("ray") == "auto" and parse_option("ray:host:6379") == "host:6379"
    with pytest.raises(ValueError, match="remote_builds"):
        parse_option("dask")


def test_the_cli_passes_the_option_to_the_evaluator(capsys):
    from kbench_apps.cli import main

    solution = str(ROOT / "tasks/solutions/cpu/level1/relu.py")
    assert main(["eval", "--task", "level1/relu", "--solution", solution, "--device", "cpu",
                 "--remote-builds", "dask"]) == 2
    assert "remote_builds='dask'" in capsys.readouterr().err


def test_a_candidate_built_in_a_ray_task_evaluates_as_a_local_build(remote, local):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a fallback to this host would warn
        r = remote.evaluate(RELU, GOOD, seed=3)
    assert r.correct and r.cached_build is False, r.feedback()
    builds = [h for h in remote.builder.history if (h["unit"] or "").startswith("kb_relu-")]
    assert len(builds) == 1 and builds[0]["remote"] and builds[0]["remote"]["pid"], list(remote.builder.history)
    assert remote.builder.pid is None and remote.builder.fallbacks == 0  # the local builder never started
    here = local.evaluate(RELU, GOOD, seed=3)
    assert here.correct and here.cached_build is False, here.feedback()
    assert _fields(r) == _fields(here)
    (unit,) = [h["unit"] for h in local.builder.history if (h["unit"] or "").startswith("kb_relu-")]
    assert unit == builds[0]["unit"]  # the same content-addressed unit, hence the same build
    confined = builds[0]["remote"]["protections"]  # the remote builder's confinement is this host's builder's
    assert confined["active"] and sorted(confined["active"]) == sorted(local.builder.protections["active"])


def test_the_published_unit_is_a_cache_hit_for_a_local_builder(remote):
    remote.evaluate(RELU, GOOD, seed=3)  # built remotely (or found, after the test above)
    (unit,) = {h["unit"] for h in remote.builder.history if (h["unit"] or "").startswith("kb_relu-")}
    published = Path(remote.build_root) / unit
    assert sorted(p.name for p in published.iterdir()) == [".kbench-build.json", "kb_relu.so"]
    plain = _evaluator(remote.cache_dir)
    try:
        r = plain.evaluate(RELU, GOOD, seed=3)
        assert r.correct and r.cached_build is True, r.feedback()
        assert [(h["unit"], h["cached"]) for h in plain.builder.history] == [(unit, True)]  # no rebuild
    finally:
        plain.close()


def test_a_compile_error_comes_back_as_locally(remote, local):
    r = remote.evaluate(RELU, BROKEN)
    here = local.evaluate(RELU, BROKEN)
    assert r.error_stage == "build" and not r.compiled, r.feedback()
    assert "kb_not_declared_here" in r.error and "was not declared" in r.error, r.error
    assert r.error == here.error
    assert remote.builder.history[-1]["remote"] and remote.builder.history[-1]["ok"] is False


def test_a_tampered_artifact_is_refused_and_not_published(remote, cluster):
    ray = cluster
    from kbench_env.builder import ray_task

    builder = remote.builder
    builder._connect()  # noqa: SLF001 - the task's spec, as a build would send it
    request = _tiny(uuid.uuid4().hex[:10])
    units, _ = builder._expected(request, True)  # noqa: SLF001
    task = ray.remote(ray_task.build).options(num_cpus=1)
    out = ray.get(task.remote(builder._spec, request, 60.0, 1 << 30, True))  # noqa: SLF001
    assert out["reply"]["ok"] and out["reply"]["unit"] == units[0], out["reply"]
    (name, data), = out["files"].items()
    tampered = {**out, "files": {name: data[:-1] + bytes([data[-1] ^ 1])}}
    with pytest.raises(ExternalBuildRefused, match="SHA-256"):
        builder.accept(tampered, units, 1 << 30)
    assert not (Path(builder.build_root) / units[0]).exists()
    assert builder.accept(out, units, 1 << 30)["cached"] is False  # the untampered answer is published
    assert builder.store.lookup(units[0]) is not None


def test_a_task_that_fails_falls_back_to_this_host_said_once(cluster, tmp_path):
    builder = RemoteBuilder(Builder("cpu", "cpu", str(tmp_path), LIMITS))
    try:
        builder._connect()  # noqa: SLF001
        builder._spec = {**builder._spec, "backend": "no-such-backend"}  # noqa: SLF001 - its builder cannot start
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            replies = [builder.build(_tiny(uuid.uuid4().hex[:10]), 120.0) for _ in range(2)]
        assert all(r["ok"] and "remote" not in r for r in replies), replies
        assert builder.fallbacks == 2 and builder.pid is not None  # built here
        said = [str(w.message) for w in caught if "remote builds" in str(w.message)]
        assert len(said) == 1 and "building on this host" in said[0], said
    finally:
        builder.close()


def test_a_build_that_falls_back_after_a_task_timed_out_has_its_full_timeout(cluster, tmp_path, monkeypatch):
    from kbench_env.builder import ray_builds as remote_module

    builder = RemoteBuilder(Builder("cpu", "cpu", str(tmp_path), LIMITS))
    given = []
    submit = builder.local.submit
    monkeypatch.setattr(builder.local, "submit", lambda request, timeout, *a: given.append(timeout) or
                        submit(request, timeout, *a))
    monkeypatch.setattr(remote_module, "REPLY_MARGIN_S", -29.0)  # the task's answer is awaited for 1 s
    try:
        builder._connect()  # noqa: SLF001
        builder._task = cluster.remote(lambda *args: time.sleep(120)).options(num_cpus=1)  # noqa: SLF001
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            reply = builder.build(_tiny(uuid.uuid4().hex[:10]), 30.0)
        assert reply["ok"] and builder.fallbacks == 1, reply
        assert given == [30.0]  # kbench's wait for the task is not taken from the candidate's build
    finally:
        builder.close()


class _NoTask:
    """A Ray task, or a local build, that a request answered from the store must not start."""

    def remote(self, *args):
        raise AssertionError("a Ray task was sent")

    def submit(self, *args):
        raise BuilderError("the local builder was asked")


def _answered_here(tmp_path, monkeypatch) -> RemoteBuilder:
    """A RemoteBuilder that can neither send a task nor build locally."""
    builder = RemoteBuilder(Builder("cpu", "cpu", str(tmp_path), LIMITS))
    builder._connect()  # noqa: SLF001
    builder._task = _NoTask()  # noqa: SLF001
    monkeypatch.setattr(builder.local, "submit", _NoTask().submit)
    return builder


def test_a_build_under_its_second_plan_is_found_without_a_task(cluster, tmp_path, monkeypatch):
    builder = _answered_here(tmp_path, monkeypatch)
    request = {"kind": "inline", "name": "kb_rb_plans", "cpp_sources": ["int kb_rb_plans() { return 1; }"],
               "cuda_sources": None, "functions": None, "options": {"is_python_module": False}}
    units, _ = builder._expected(request, True)  # noqa: SLF001
    assert len(units) == 2, units  # the light headers' plan, then the source as written

    def make(directory):  # the as-written build, as a fallback from the light plan leaves it
        Path(directory, "kb_rb_plans.so").write_bytes(b"not loaded here")
        return "kb_rb_plans.so", "kb_rb_plans"

    builder.store.get_or_build(units[1], make, 1 << 20)
    try:
        reply = builder.build(request, 30.0)
        assert reply["ok"] and reply["cached"] and reply["unit"] == units[1] and reply["remote"] is None, reply
        assert builder.fallbacks == 0
    finally:
        builder.close()


def test_a_refused_request_is_answered_here_without_a_task(cluster, tmp_path, monkeypatch):
    builder = _answered_here(tmp_path, monkeypatch)
    try:
        reply = builder.build({**_tiny("x"), "name": "not-an-identifier"}, 30.0)
        assert reply["ok"] is False and reply["refused"] and "Python identifier" in reply["message"], reply
        assert builder.fallbacks == 0
    finally:
        builder.close()


@pytest.mark.parametrize("backend, device", [("cpu", "cpu"), ("cuda", "cuda:1")])
def test_the_build_environment_is_not_read_in_this_process(cluster, tmp_path, monkeypatch, backend, device):
    import torch

    def no_cuda_here(*args):
        raise AssertionError("torch.cuda was asked in the trusted process")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # as on a GPU host
    monkeypatch.setattr(torch.cuda, "get_device_capability", no_cuda_here)
    builder = RemoteBuilder(Builder(backend, device, str(tmp_path), LIMITS))
    try:
        builder._connect()  # noqa: SLF001 - read in a process of its own (this machine has no GPU: none there)
        assert builder._spec["build_env"] == {} and builder.off_reason is None  # noqa: SLF001
    finally:
        builder.close()


def test_the_cuda_build_environment_is_the_devices(monkeypatch):
    import torch

    from kbench_env.backends import get_backend

    asked = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: asked.append(index) or (8, 6))
    assert get_backend("cuda").build_environment("cuda:1") == {"TORCH_CUDA_ARCH_LIST": "8.6"}
    assert get_backend("cuda").build_environment("cuda") == {"TORCH_CUDA_ARCH_LIST": "8.6"}
    assert asked == [1, None]
