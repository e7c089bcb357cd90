"""The worker's message framing (wire.pack / wire.unpack, re-exported by worker.py) and its frames
(wire.FrameReader, wire.send_frame): what travels between the trusted parent and the candidate's worker arrives
unchanged, and a malformed, oversize, amplifying or unfinished message from a hostile worker is refused or waited
for with a deadline, never trusted."""

import io
import json
import multiprocessing
import os
import struct
import threading
import time
import zipfile

import pytest
import torch

from kbench_env.protocol import wire
from kbench_env.worker.loop import pack, unpack


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b and type(a) is type(b)


PAYLOADS = {
    "inputs": {"init_inputs": [3, (4, 5), None, 2.5, True, "mean"],
               "inputs": [torch.randn(16, 33), torch.randn(7, 3).to(torch.bfloat16), torch.randint(0, 9, (5,))]},
    "odd tensors": [torch.tensor(2.5), torch.zeros(0, 4), torch.randn(4, 6).t(), torch.arange(6) > 2,
                    torch.randn(3, dtype=torch.float64), torch.randn(2, 2).half(), torch.randn(3, dtype=torch.complex64)],
    "nested output": {"out": [torch.randn(2, 3), (torch.ones(1), [torch.zeros(2, 2)])]},
}


@pytest.mark.parametrize("name", PAYLOADS)
def test_round_trip_is_exact(name):
    header, payload = unpack(pack({"type": "run", "n": 1}, PAYLOADS[name]))
    assert header == {"type": "run", "n": 1}
    assert _same(PAYLOADS[name], payload)


def test_received_tensors_are_writable_copies():
    x = torch.randn(8)
    _, (y,) = unpack(bytes(pack({}, [x])))  # what recv_bytes returns: read-only bytes
    y.add_(1.0)  # the worker's candidate may write into its inputs (the inputs_modified check sees it)
    assert torch.allclose(y, x + 1.0)


def test_values_raw_framing_cannot_carry_still_travel():
    _, payload = unpack(pack({}, {"dtype": torch.float32, "size": torch.Size([2, 3])}))
    assert payload == {"dtype": torch.float32, "size": torch.Size([2, 3])}


def test_header_only_message():
    assert unpack(pack({"type": "go"})) == ({"type": "go"}, None)


def _tampered(meta_edit) -> bytes:
    """A message of one float32[4] tensor whose JSON description is rewritten by ``meta_edit``."""
    data = bytes(pack({"type": "output"}, [torch.ones(4)]))
    (n,) = struct.unpack("<I", data[:4])
    head, rest = data[: 4 + n + 1], data[4 + n + 1 :]
    (m,) = struct.unpack("<I", rest[:4])
    meta, blob = rest[4 : 4 + m].decode(), rest[4 + m :]
    meta = meta_edit(meta).encode()
    return head + struct.pack("<I", len(meta)) + meta + blob


@pytest.mark.parametrize("edit", [
    lambda m: m.replace("[4]", "[1000000]"),         # a shape larger than the bytes sent
    lambda m: m.replace("[4]", "[-4]"),               # a negative size
    lambda m: m.replace('"float32"', '"object"'),     # a dtype outside the list
    lambda m: m.replace("[[0, 16]]", "[[8, 16]]"),    # bytes past the end
    lambda m: m.replace('{"t"', '{"x"'),              # an unknown node
], ids=["shape", "negative", "dtype", "offset", "node"])
def test_malformed_messages_are_refused(edit):
    with pytest.raises(Exception):
        unpack(_tampered(edit))


def test_untampered_control_message_is_read():
    _, (t,) = unpack(_tampered(lambda m: m))
    assert torch.equal(t, torch.ones(4))


# ---------------------------------------------------------------------- what a hostile worker may not send


def _raw(tree, blobs, blob_bytes: bytes, header=None) -> bytes:
    """A raw-encoded message written by hand, as a candidate could write it on its connection."""
    h = json.dumps(header or {"type": "output"}).encode()
    meta = json.dumps({"tree": tree, "blobs": blobs}).encode()
    return struct.pack("<I", len(h)) + h + b"R" + struct.pack("<I", len(meta)) + meta + blob_bytes


def _t(index, n):
    return {"t": [index, "float32", [n]]}


def test_one_blob_read_as_many_tensors_is_refused():
    """The evaluator's resident memory grew ~17x the reply's size when 200 tensors referenced the same bytes."""
    n = 1 << 16
    msg = _raw({"d": {"out": {"l": [_t(0, n)] * 200}}}, [[0, 4 * n]], bytes(4 * n))
    with pytest.raises(ValueError, match="same bytes"):
        unpack(msg)


@pytest.mark.parametrize("blobs, refs, size, why", [
    ([[0, 16], [0, 16]], [0, 1], 16, "overlap"),   # two blobs over the same bytes
    ([[0, 16], [8, 16]], [0, 1], 24, "overlap"),   # overlapping in part
    ([[0, 8], [16, 8]], [0, 1], 24, "overlap"),    # a gap
    ([[0, 16]], [-1], 16, "references"),           # a negative reference (Python would index from the end)
    ([[0, 16]], [1], 16, "references"),            # past the list
    ([[0, 8]], [0], 16, "fill"),                   # bytes left over
], ids=["same", "partial", "gap", "negative", "past", "leftover"])
def test_blob_layout_must_be_packs(blobs, refs, size, why):
    tree = {"l": [_t(i, blobs[i][1] // 4 if 0 <= i < len(blobs) else 4) for i in refs]}
    with pytest.raises(ValueError, match=why):
        unpack(_raw(tree, blobs, bytes(size)))


def test_deep_nesting_and_too_many_tensors_are_refused():
    deep = {"v": 1}
    for _ in range(wire.MAX_DEPTH + 2):
        deep = {"l": [deep]}
    with pytest.raises(ValueError, match="nests deeper"):
        unpack(_raw(deep, [], b""))
    many = wire.MAX_TENSORS + 1
    with pytest.raises(ValueError, match="at most"):
        unpack(_raw({"l": [{"t": [i, "float32", [0]]} for i in range(many)]}, [[0, 0]] * many, b""))


def test_oversize_header_is_refused():
    h = b'{"type": "output", "pad": "' + b"x" * wire.MAX_HEADER_BYTES + b'"}'
    with pytest.raises(ValueError, match="header"):
        unpack(struct.pack("<I", len(h)) + h)


def _saved(payload, compress=False) -> bytes:
    """A torch.save message; with ``compress``, its archive re-written with deflated entries."""
    data = bytes(pack({"type": "output"}, payload))
    (n,) = struct.unpack("<I", data[:4])
    head, archive = data[: 4 + n + 1], data[4 + n + 1 :]
    assert data[4 + n : 4 + n + 1] == b"S"
    if compress:
        src, out = zipfile.ZipFile(io.BytesIO(archive)), io.BytesIO()
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for name in src.namelist():
                z.writestr(name, src.read(name))
        archive = out.getvalue()
    return head + archive


def test_torch_save_payloads_are_bounded():
    # A compressed archive: 16 MiB of tensor from ~20 KB sent (torch.load inflates it).
    bomb = _saved({"dtype": torch.float32, "out": torch.zeros(1 << 22)}, compress=True)
    assert len(bomb) < 1 << 16
    with pytest.raises(ValueError, match="compressed"):
        unpack(bomb, max_tensor_bytes=len(bomb))
    # 200 views of one storage: each a full tensor to whoever reads it.
    x = torch.zeros(1 << 14)
    views = _saved({"dtype": torch.float32, "out": [x[:] for _ in range(200)]})
    with pytest.raises(ValueError, match="more than"):
        unpack(views, max_tensor_bytes=len(views))
    # What the worker honestly sends this way still arrives.
    honest = _saved({"dtype": torch.float32, "out": [torch.randn(64), torch.Size([2, 3])]})
    _, payload = unpack(honest, max_tensor_bytes=len(honest))
    assert payload["dtype"] is torch.float32 and payload["out"][1] == torch.Size([2, 3])


@pytest.mark.parametrize("name", PAYLOADS)
def test_bounded_unpack_reads_honest_messages_exactly(name):
    data = bytes(pack({"type": "run"}, PAYLOADS[name]))
    _, payload = unpack(data, max_tensor_bytes=len(data))
    assert _same(PAYLOADS[name], payload)


# ---------------------------------------------------------------------- frames read and written with a deadline


@pytest.fixture
def pipe():
    a, b = multiprocessing.Pipe(duplex=True)
    yield a, b
    a.close()
    b.close()


def test_reader_reads_what_connection_sends(pipe):
    a, b = pipe
    reader = wire.FrameReader(b.fileno(), 64 << 20)
    for data in (b"", b"x" * 3, bytes(range(256)) * 40_000):  # 10 MB: longer than the socket's buffer
        sender = threading.Thread(target=a.send_bytes, args=(data,))
        sender.start()
        frame = None
        while frame is None:
            frame = reader.read(time.monotonic() + 5)
        sender.join()
        assert bytes(frame) == data


def test_truncated_frame_is_kept_and_never_blocks(pipe):
    a, b = pipe
    reader = wire.FrameReader(b.fileno(), 1 << 20)
    os.write(a.fileno(), struct.pack("!i", 1000) + b"{\"type\"")
    assert reader.read(time.monotonic() + 0.2) is None  # returns at the deadline: the rest never came
    assert reader.pending() == (7, 1000)
    os.write(a.fileno(), b"x" * 993 + struct.pack("!i", 2) + b"ok")
    assert bytes(reader.read(time.monotonic() + 5)) == b"{\"type\"" + b"x" * 993
    assert bytes(reader.read(time.monotonic() + 5)) == b"ok"


def test_long_form_length_is_read(pipe):
    a, b = pipe
    reader = wire.FrameReader(b.fileno(), 1 << 20)
    os.write(a.fileno(), struct.pack("!i", -1) + struct.pack("!Q", 5) + b"hello")
    assert bytes(reader.read(time.monotonic() + 5)) == b"hello"


@pytest.mark.parametrize("prefix, why", [
    (struct.pack("!i", 1 << 30), "at most"),                       # longer than expected
    (struct.pack("!i", -1) + struct.pack("!Q", 1 << 60), "at most"),  # far longer, in the long form
    (struct.pack("!i", -7), "negative"),
], ids=["long", "huge", "negative"])
def test_oversize_or_negative_length_is_refused_unread(pipe, prefix, why):
    a, b = pipe
    reader = wire.FrameReader(b.fileno(), 1 << 20)
    os.write(a.fileno(), prefix)
    with pytest.raises(wire.FrameError, match=why):
        reader.read(time.monotonic() + 5)


def test_end_of_stream(pipe):
    a, b = pipe
    reader = wire.FrameReader(b.fileno(), 1 << 20)
    os.write(a.fileno(), struct.pack("!i", 1) + b"z" + struct.pack("!i", 10) + b"abc")
    assert bytes(reader.read(time.monotonic() + 5)) == b"z"
    a.close()
    with pytest.raises(OSError, match="inside a message"):
        reader.read(time.monotonic() + 5)
    c, d = multiprocessing.Pipe()
    c.close()
    with pytest.raises(EOFError):
        wire.FrameReader(d.fileno(), 10).read(time.monotonic() + 5)
    d.close()


def test_send_frame_is_read_by_connection_and_gives_up_on_a_reader_that_stopped(pipe):
    a, b = pipe
    os.set_blocking(a.fileno(), False)
    data = bytes(range(256)) * 40_000
    received = []
    reader = threading.Thread(target=lambda: received.append(b.recv_bytes()))
    reader.start()
    wire.send_frame(a.fileno(), memoryview(data), time.monotonic() + 30)
    reader.join()
    assert received == [data]
    with pytest.raises(TimeoutError, match="stopped reading"):  # nobody reads b now
        wire.send_frame(a.fileno(), data, time.monotonic() + 0.3)
