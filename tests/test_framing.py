"""The worker's message framing (worker.pack / worker.unpack): what travels between the trusted parent and the
candidate's worker arrives unchanged, and a malformed message from a hostile worker is refused, never trusted."""

import struct

import pytest
import torch

from kbench_env.worker import pack, unpack


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
