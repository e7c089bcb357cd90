"""A candidate that writes on its worker's connection (half a message, a message that would swell the parent, a
frame longer than any reply, a report cut short) or stops reading it costs only itself: its evaluation ends with a
clear error within the stage's timeout, and the next evaluation on the same evaluator, or the next step of the same
env, succeeds. ``no_hang`` turns a parent that would wait for ever into a failure."""

from __future__ import annotations

import textwrap

import pytest

from candidates import _forward
from conftest import ROOT, no_hang, read
from kbench_env.env.env import KBenchEnv
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.sandbox.confine.policy import Limits
from kbench_env.tasks.suite import resolve_task

RELU = resolve_task("level1/relu")
RELU_SOLUTION = read(ROOT / "tasks/solutions/cpu/level1/relu.py")
GUARD_S = 180  # far above any stage timeout below: only a parent that never returns reaches it

# Candidate code that finds its worker's ends of the connections (locals of worker.main, up the stack).
_FIND = '''
import json, struct

def _worker_local(name):
    f = sys._getframe()
    while f is not None and name not in f.f_locals:
        f = f.f_back
    return f.f_locals[name]

def _frame(header, body=b""):
    h = json.dumps(header).encode()
    return struct.pack("<I", len(h)) + h + body
'''


def _hostile(forward: str = "", at_import: str = "") -> str:
    return _forward(textwrap.indent(textwrap.dedent(forward), "        ") or "        return x",
                    at_import=_FIND + textwrap.dedent(at_import))


# Half a message (its length says 1000 bytes, 7 come), then silence: in the build, and in forward.
TRUNCATED_AT_LOAD = _hostile(at_import='''
    os.write(_worker_local("conn").fileno(), struct.pack("!i", 1000) + b'{"type"')
    time.sleep(3600)
''')
TRUNCATED_IN_FORWARD = _hostile('''
    os.write(_worker_local("conn").fileno(), struct.pack("!i", 1000) + b'{"type"')
    time.sleep(3600)
''')
# 200 tensors over the same 1 MiB (the parent would hold 200 MiB, and more once it compares them).
SHARED_BYTES = _hostile('''
    n = 1 << 18
    meta = json.dumps({"tree": {"d": {"out": {"l": [{"t": [0, "float32", [n]]}] * 200}}},
                       "blobs": [[0, 4 * n]]}).encode()
    body = b"R" + struct.pack("<I", len(meta)) + meta + bytes(4 * n)
    _worker_local("conn").send_bytes(_frame({"type": "output", "config": "small"}, body))
    time.sleep(3600)
''')
# An honest reply, through the worker's own framing, of 32 MiB where 256 KiB are expected.
OVERSIZE_OUTPUT = _forward("        return torch.zeros(8 << 20)")
# Two forged error replies, then no more reading: the parent's next request (1 MiB of inputs) fills the socket.
STOPS_READING = _hostile('''
    conn = _worker_local("conn")
    conn.send_bytes(_frame({"type": "error", "stage": "run", "message": "forged"}))
    conn.send_bytes(_frame({"type": "error", "stage": "run", "message": "forged"}))
    time.sleep(3600)
''')
# Half a sandbox report on the report channel, then an ordinary candidate.
TRUNCATED_REPORT = _hostile("return torch.relu(x)", at_import='''
    os.write(_worker_local("job")["sandbox"]["report"].fileno(), struct.pack("!i", 100) + b"{")
''')


@pytest.fixture(scope="module")
def ev(evaluator):
    """Short timeouts, with the honest ReLU's build already in the shared cache (the session evaluator makes it),
    so that the build timeout needs to cover loading only."""
    assert evaluator.evaluate(RELU, RELU_SOLUTION).correct
    e = Evaluator(device="cpu", cache_dir=evaluator.cache_dir, timing=evaluator.timing,
                  limits=Limits(build_timeout=8, run_timeout=4, time_timeout=20, memory_bytes=2 << 30))
    yield e
    e.close()


def _then_ok(ev):
    with no_hang(GUARD_S):
        r = ev.evaluate(RELU, RELU_SOLUTION)
    assert r.correct and r.reward > 0, r.feedback()


@pytest.mark.parametrize("source, stage, words", [
    (TRUNCATED_AT_LOAD, "build", ["timed out after 8 s during build and load", "7 of the 1,000 bytes"]),
    (TRUNCATED_IN_FORWARD, "run", ["timed out after 4 s during forward", "7 of the 1,000 bytes"]),
    (SHARED_BYTES, "run", ["unreadable message", "same bytes"]),
    (STOPS_READING, "run", ["timed out after 4 s sending the worker its 'run' request", "stopped reading"]),
], ids=["truncated-at-load", "truncated-in-forward", "shared-bytes", "stops-reading"])
def test_hostile_wire_costs_only_the_candidate(ev, source, stage, words):
    with no_hang(GUARD_S):
        r = ev.evaluate(RELU, source)
    assert not r.correct and r.error_stage == stage, r.feedback()
    for w in words:
        assert w in r.error, r.error
    _then_ok(ev)


def test_an_oversize_reply_is_refused_unread(own_evaluator):
    # Its own run limit, far above what the 32 MiB take to make and send: the workers' heap is on transparent huge
    # pages (sandbox/confine/environment.py), which some virtual machines fault in slowly where the memory is fresh
    # (bench/results/hugepage_cost_cpu_20261204.md): in a full suite on the development VM it timed out at 4 s.
    roomy = own_evaluator(Limits(build_timeout=60, run_timeout=120, time_timeout=120, memory_bytes=2 << 30))
    with no_hang(GUARD_S):
        r = roomy.evaluate(RELU, OVERSIZE_OUTPUT)
    assert not r.correct and r.error_stage == "run", r.feedback()
    for w in ("refused unread", "33,554,", "at most"):
        assert w in r.error, r.error
    _then_ok(roomy)


def test_truncated_report_does_not_stop_the_parent(ev):
    with no_hang(GUARD_S):
        r = ev.evaluate(RELU, TRUNCATED_REPORT)
    assert r.stage in ("ran", "correct", "timed"), r.feedback()  # the evaluation went on past the report
    _then_ok(ev)


def test_env_steps_on_after_a_hostile_step(ev):
    env = KBenchEnv(task="level1/relu", evaluator=ev, max_turns=3)
    env.reset(seed=0)
    with no_hang(GUARD_S):
        _, reward, _, _, info = env.step(TRUNCATED_IN_FORWARD)
        assert reward < 0 and "timed out" in info["eval"]["error"]
        _, reward, _, _, info = env.step(RELU_SOLUTION)
    assert reward > 0, info["eval"]
    env.close()
