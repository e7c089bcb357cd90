"""The reference's compile with the device's hold let go (worker/compile_gate.py; Baselines._run_reference with a
run ahead's TrustedHold): the worker's two messages around inductor's compile, and the trusted side's locks let go
and taken again between them."""

from __future__ import annotations

import threading

import torch

from kbench_env.machine.shared_device_lock import SharedDeviceLock
from kbench_env.pipeline.baseline import Baselines
from kbench_env.pipeline.trusted_hold import TrustedHold
from kbench_env.protocol import messages as msg
from kbench_env.protocol.wire import pack, unpack
from kbench_env.worker import compile_gate


class _Conn:
    """The worker's end of the pipe: GO is waiting for it."""

    def __init__(self):
        self.read = 0

    def recv_bytes(self):
        self.read += 1
        return pack({"type": msg.GO})


def test_the_worker_says_when_it_compiles_and_waits_for_go_before_the_compiled_graph_runs():
    sent, syncs, conn = [], [], _Conn()

    def send(header, payload=None):
        sent.append((header["phase"], conn.read, len(syncs)))

    model = compile_gate.compile_model(torch.nn.ReLU(), True, conn, send, lambda: syncs.append(1))
    x = torch.randn(64, 33)
    torch.testing.assert_close(model(x), torch.relu(x))
    # synchronised before "compiling"; "compiled" sent, then GO read, before the graph ran (its output above)
    assert sent == [(msg.COMPILING, 0, 1), (msg.COMPILED, 0, 1)], sent
    assert conn.read == 1
    torch.testing.assert_close(model(x + 1), torch.relu(x + 1))  # the compiled graph again: no second compile
    assert len(sent) == 2 and conn.read == 1


def test_a_torch_whose_compile_benchmarks_cannot_be_gated_compiles_under_the_hold(monkeypatch):
    # no ``benchmark_gpu`` to wait for GO: the device is never let go (no READY), and the compile still serves
    from torch._inductor.runtime import benchmarking

    monkeypatch.setattr(benchmarking, "benchmarker", object())
    sent, conn = [], _Conn()
    model = compile_gate.compile_model(torch.nn.Sigmoid(), True, conn, lambda h, p=None: sent.append(h),
                                       lambda: None)
    x = torch.randn(16, 7)
    torch.testing.assert_close(model(x), torch.sigmoid(x))
    assert not sent and conn.read == 0


def test_each_configuration_is_compiled_for_its_own_shapes():
    # a reference worker compiles a task's configurations one after another in one process: the third shape must get
    # a graph of its own, not the dynamic-shape graph that dynamo's automatic dynamic shapes make at the second, and
    # the ninth too, not an eager run past dynamo's recompile limit
    import torch._dynamo

    torch._dynamo.reset()
    frames = torch._dynamo.utils.counters["frames"]
    shapes = [(16, 40), (7, 31), (2, 131)] + [(3, 50 + k) for k in range(7)]  # past dynamo's default limit of 8
    for gate in (False, True):
        for shape in shapes:
            before = frames["ok"]
            model = compile_gate.compile_model(torch.nn.ReLU(), gate, _Conn(), lambda h, p=None: None, lambda: None)
            x = torch.randn(*shape)
            torch.testing.assert_close(model(x), torch.relu(x))
            assert frames["ok"] == before + 1, (gate, shape)  # compiled anew, for this shape


def test_without_the_gate_the_compile_sends_nothing():
    sent = []
    model = compile_gate.compile_model(torch.nn.Tanh(), False, _Conn(), lambda h, p=None: sent.append(h), lambda: None)
    x = torch.randn(8, 5)
    torch.testing.assert_close(model(x), torch.tanh(x))
    assert not sent


class _Worker:
    """A reference worker's replies to a gated compiled RUN, checking what the trusted side holds at each."""

    def __init__(self, replies, on_reply):
        self.replies, self.on_reply, self.sent = list(replies), on_reply, []

    def send(self, header, payload=None):
        self.sent.append(header)

    def recv(self, timeout, what):
        header = self.replies.pop(0)
        self.on_reply(header)
        return header, None


def test_the_trusted_side_lets_the_device_and_the_tasks_lock_go_while_the_worker_compiles(tmp_path):
    """Between READY compiling and READY compiled nothing of the run ahead's is held: a timing's exclusive hold and
    the task's lock can both be taken then; GO goes only once both are held again, and OUTPUT ends the run held."""
    device, task_lock = SharedDeviceLock(str(tmp_path / "gpu-test.lock")), threading.Lock()
    hold = TrustedHold(device, 5.0, task_lock=task_lock)
    hold.acquire()
    seen = []

    def on_reply(header):  # what another thread could take when each reply comes
        free = device.acquire(blocking=False)
        if free:
            device.release()
        lock_free = task_lock.acquire(blocking=False)
        if lock_free:
            task_lock.release()
        seen.append((header.get("phase", header["type"]), free, lock_free, hold.held))

    w = _Worker([{"type": msg.READY, "phase": msg.COMPILING}, {"type": msg.READY, "phase": msg.COMPILED},
                 {"type": msg.OUTPUT}], on_reply)

    class _Cfg:
        name, dtype = "small", "float32"

    class _Prepared:
        init_seed, init_inputs, inputs = 1, [], []

    class _Task:
        name, backward = "level1/relu", False

    class _Limits:
        run_timeout = 5

    b = Baselines.__new__(Baselines)
    b.limits = _Limits()
    Baselines._run_reference(b, w, _Task(), _Cfg(), {"small": _Prepared()}, "compile", True, hold)
    assert w.sent[0]["type"] == msg.RUN and w.sent[0]["gate"] is True
    assert [h["type"] for h in w.sent[1:]] == [msg.GO]
    # the first reply comes while held (the RUN was sent under the hold); after "compiling" both are free; the
    # GO is sent held again; the output comes held
    assert seen == [(msg.COMPILING, False, False, True), (msg.COMPILED, True, True, False),
                    (msg.OUTPUT, False, False, True)], seen
    hold.release()
    assert device.acquire(blocking=False)
    device.release()
