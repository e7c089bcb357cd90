"""A correctness run's large GPU output read from the worker's memory (pipeline/check._shared_output,
worker/loop._exported, issue #36) rather than sent through the pipe. What a worker may describe is bounded: a
description that cannot be read fails the configuration as a wrong output would; the worker shares only plain,
non-empty CUDA tensors of at least the size asked, anything else goes through the pipe as before. The GPU path
itself (a shipped solution read this way and judged correct, a wrong one judged wrong): tests/test_gpu.py."""

from __future__ import annotations

import pytest
import torch

from kbench_env.pipeline.check import _shared_output
from kbench_env.protocol import messages as msg
from kbench_env.worker.loop import _exported

GOOD_HANDLE = "00" * 64


@pytest.mark.parametrize("described, why", [
    (None, "no memory handles"),
    ({"layout": [{"dtype": "float32", "ndim": 1}], "row": [[0, 0, 4, 1]], "handles": []}, "handle 0 of 0"),
    ({"layout": [{"dtype": "float32", "ndim": 1}], "row": [[0, 0, 4, 1]], "handles": [7]}, "no memory handles"),
    ({"layout": [{"dtype": "float32", "ndim": 2}], "row": [[0, 0, 4, 1]], "handles": [GOOD_HANDLE]},
     "no readable layout"),
    ({"layout": [{"dtype": "no-such-type", "ndim": 1}], "row": [[0, 0, 4, 1]], "handles": [GOOD_HANDLE]},
     "no readable layout"),
    ({"layout": [{"dtype": "float32", "ndim": 1}], "row": None, "handles": [GOOD_HANDLE]}, "described no output"),
    ({"layout": [{"dtype": "float32", "ndim": 1}], "row": [[0, 0, 4, 1]], "handles": ["zz"]},
     "malformed memory handle"),
])
def test_an_output_description_that_cannot_be_read_fails_the_configuration(described, why):
    header = {"type": msg.OUTPUT, "config": "gpu", "audit": {}, "ipc": described or {"handles": None}}
    got, payload = _shared_output((header, None), "cuda:0")
    assert got["type"] == msg.ERROR and payload is None, got
    assert "could not be read from its memory" in got["message"] and why in got["message"], got["message"]
    assert got["audit"] == {} and got["config"] == "gpu"  # the run's reports are still judged


def test_a_reply_through_the_pipe_is_left_as_it_is():
    reply = ({"type": msg.OUTPUT, "config": "small", "ipc": None}, {"out": torch.ones(3)})
    assert _shared_output(reply, "cuda:0") is reply
    error = ({"type": msg.ERROR, "message": "boom"}, None)
    assert _shared_output(error, "cuda:0") is error


class _Sub(torch.Tensor):
    pass


@pytest.mark.parametrize("out, ipc_min", [
    (torch.ones(1 << 20), 1),  # on the CPU
    (torch.ones(4), None),  # not asked (a CPU evaluator, a reference's worker)
    ((torch.ones(4), 3), 1),  # a Python number among the leaves
    (torch.ones(4).as_subclass(_Sub), 1),  # a subclass may compute its values when read
    ([], 1),
])
def test_the_worker_shares_only_plain_cuda_tensors_of_the_size_asked(out, ipc_min):
    assert _exported(out, ipc_min) is None


class _FakeWorker:
    def __init__(self, replies):
        self.replies, self.sent, self.killed = list(replies), [], False

    def recv(self, timeout, what, expect_bytes=None):
        return self.replies.pop(0)

    def send(self, header, payload=None, timeout=None):
        self.sent.append(header)

    def kill(self):
        self.killed = True


def test_a_reply_that_comes_instead_of_the_input_slots_is_the_runs_reply():
    from kbench_env.pipeline.check import _write_inputs

    error = ({"type": msg.ERROR, "stage": "run", "message": "ModelNew() failed"}, None)
    worker = _FakeWorker([error])
    assert _write_inputs(worker, [torch.ones(2)], 1.0, "gpu") == error
    assert worker.sent == [] and not worker.killed  # no GO: the worker is not waiting for one


@pytest.mark.parametrize("ready", [
    {"type": msg.READY, "slots": [], "handles": []},  # fewer slots than inputs
    {"type": msg.READY, "slots": None, "handles": []},
    {"type": msg.READY, "slots": [[0, 0, 8]], "handles": None},
])
def test_input_slots_that_do_not_match_the_inputs_stop_the_worker(ready):
    from kbench_env.pipeline.check import _write_inputs
    from kbench_env.sandbox.diagnosis import WorkerError

    worker = _FakeWorker([(ready, None)])
    with pytest.raises(WorkerError, match="could not be written"):
        _write_inputs(worker, [torch.ones(2)], 1.0, "gpu")
    assert worker.killed and worker.sent == []


class _FakeMaps:
    def __init__(self):
        self.asked = []

    def bytes_at(self, handle, offset, nbytes):
        self.asked.append((handle, offset, nbytes))
        return torch.empty(nbytes, dtype=torch.uint8)


def test_input_views_map_each_inputs_buffer_and_refuse_ones_that_do_not_fit():
    """The one reading of a worker's buffer entries, for a check's inputs (one call) and a timed block's (``calls``
    copies of each): nothing for a non-tensor or an empty one; a wrong size, a handle it did not name or a count
    that does not match the inputs refused."""
    from kbench_env.pipeline.gpu_run import input_views
    from kbench_env.protocol.cuda_ipc import IpcError
    from kbench_env.sandbox.diagnosis import WorkerError

    inputs, maps = [torch.ones(4), 3, torch.ones(0)], _FakeMaps()
    views = input_views(maps, ["h0", "h1"], inputs, [[1, 64, 16], None, None])
    assert [v is None for v in views] == [False, True, True] and maps.asked == [("h1", 64, 16)]
    assert input_views(_FakeMaps(), ["h0"], inputs, [[0, 0, 160], None, None], calls=10)[0].numel() == 160
    with pytest.raises(WorkerError, match="do not match"):
        input_views(_FakeMaps(), ["h0"], inputs, [[0, 0, 16]])
    with pytest.raises(WorkerError, match="16 bytes"):
        input_views(_FakeMaps(), ["h0"], inputs, [[0, 0, 8], None, None])
    with pytest.raises(IpcError, match="handle 2 of 1"):
        input_views(_FakeMaps(), ["h0"], inputs, [[2, 0, 16], None, None])


def test_buffer_entries_say_where_each_buffer_is():
    from kbench_env.worker.gpu_executor import buffer_entries

    class Exporter:
        def locate(self, t):
            return 0, 128

    assert buffer_entries([torch.ones(3), None, torch.ones(0)], Exporter()) == [[0, 128, 12], None, None]
