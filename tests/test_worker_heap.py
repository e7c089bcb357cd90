"""The workers' heap on transparent huge pages (sandbox/confine/environment.MALLOC_TUNABLES): the fork server, whose
environment every worker starts from, carries glibc's malloc tunable, merged with any the user gave; a worker's own
environment (what a build's compilers see) does not add it."""

from __future__ import annotations

import multiprocessing.forkserver as mp_forkserver
import os

from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.sandbox.confine import environment
from kbench_env.tasks.suite import resolve_task, solution_path


def test_the_fork_servers_environment_asks_for_huge_pages_for_the_heap():
    assert environment.scrubbed_environment({})["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=1"
    given = environment.scrubbed_environment({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"})
    assert given["GLIBC_TUNABLES"] == "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"
    same = environment.scrubbed_environment({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"})
    assert same["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=1"
    off = environment.scrubbed_environment({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0:glibc.malloc.arena_max=2"})
    assert off["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=0:glibc.malloc.arena_max=2"  # the user's choice stands
    assert "GLIBC_TUNABLES" not in environment.scrubbed_environment({"GLIBC_TUNABLES": "x=1"}, worker=True)


def test_the_fork_server_the_workers_come_from_runs_with_the_tunable(tmp_path):
    task = resolve_task("level1/relu")
    r = Evaluator(device="cpu", cache_dir=tmp_path).evaluate(task, open(solution_path(task, "cpu")).read())
    assert r.correct, r.error
    pid = mp_forkserver._forkserver._forkserver_pid  # started for the evaluation's workers
    assert pid is not None
    with open(f"/proc/{pid}/environ", "rb") as f:
        env = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
    assert b"glibc.malloc.hugetlb=1" in env[b"GLIBC_TUNABLES"].split(b":")
    assert os.environ.get("GLIBC_TUNABLES") is None or b"glibc.malloc.hugetlb=1" not in os.environ.get(
        "GLIBC_TUNABLES", "").encode()  # this process's own is left as it was
