"""The wire between the trusted parent and the candidate's worker: message framing, and what a message may be.

Owns ``pack``/``unpack`` (a JSON header, then the payload as a JSON tree followed by each tensor's raw bytes, or as
``torch.save`` where the tree cannot carry it), and reading and writing ``multiprocessing.Connection`` frames (a
4-byte big-endian length, or -1 and an 8-byte length, then the bytes) with a deadline: ``FrameReader`` and
``send_frame``. The parent uses these instead of ``Connection.recv_bytes``/``send_bytes``, which block once a frame
has begun: a worker that sends half a frame, or stops reading, would hold the parent for ever.

Both sides frame with ``pack``/``unpack``; the parent's side is the one that matters, for the worker runs the
candidate and can write any bytes on its end of the connection. So a frame is refused from its length alone when it
is longer than the parent expects (``reply_limit``: a small multiple of the outputs the reply should carry), and a
message is refused when its tensors' bytes overlap, leave gaps or run past its end, when two tensors reference the
same bytes, when it carries too many tensors or nests too deeply, and (``max_tensor_bytes``) when a torch.save
payload is compressed or holds tensors that add up to more bytes than were sent. A reply thus makes the parent hold
no more tensor bytes than the frame it sent, and the frame no more than the limit. What ``pack`` makes passes every
check, unchanged.
"""

from __future__ import annotations

import io
import json
import math
import os
import select
import struct
import time
import warnings
import zipfile

import torch

#: The JSON header of one message (a GPU block's table of where each call's outputs are is its largest honest
#: part: a few dozen bytes per call and output, up to 1,024 calls a block: worker/gpu_executor.py).
MAX_HEADER_BYTES = 16 << 20
#: The JSON tree that describes a payload's values and tensors.
MAX_META_BYTES = 4 << 20
MAX_TENSORS = 4096
MAX_DEPTH = 32  # lists, tuples and dicts inside each other
MAX_DIMS = 64  # a tensor's dimensions
#: What a message may hold besides its tensors' bytes.
HEADROOM = MAX_HEADER_BYTES + MAX_META_BYTES + 64
#: A reply may carry this many times the bytes of the outputs it should carry (a candidate's dtype may be wider
#: than the reference's, and the reference's own output, upcast for the comparison, is the measure).
REPLY_FACTOR = 4


def reply_limit(expected_bytes: int) -> int:
    """The longest frame accepted for a reply that should carry ``expected_bytes`` of tensors."""
    return REPLY_FACTOR * max(0, int(expected_bytes)) + HEADROOM


# ---------------------------------------------------------------------- pack / unpack


_WIRE_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex64, torch.complex128, torch.int64,
    torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)}
_RAW, _SAVED = b"R", b"S"  # payload encodings: raw tensor bytes under a JSON tree; torch.save (anything else)


class _NotRaw(Exception):
    """A payload value the raw encoding does not carry (torch.save does)."""


def _tree(obj, blobs: list):
    """``obj`` as JSON, its tensors replaced by references to ``blobs`` (contiguous CPU tensors)."""
    if isinstance(obj, torch.Tensor):
        if type(obj) is not torch.Tensor and not isinstance(obj, torch.nn.Parameter) or obj.layout != torch.strided:
            raise _NotRaw
        dtype = str(obj.dtype).removeprefix("torch.")
        if dtype not in _WIRE_DTYPES:
            raise _NotRaw
        blobs.append(obj.detach().contiguous())  # copied into the message from where it lies (no staging copy)
        return {"t": [len(blobs) - 1, dtype, list(obj.shape)]}
    if isinstance(obj, (list, tuple)):
        return {"l" if isinstance(obj, list) else "u": [_tree(x, blobs) for x in obj]}
    if isinstance(obj, dict) and all(isinstance(k, str) for k in obj):
        return {"d": {k: _tree(v, blobs) for k, v in obj.items()}}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"v": obj}
    raise _NotRaw


def _is_count(n) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n >= 0


def _untree(node, body: memoryview, blobs: list, used: set, depth: int = 0):
    """The value ``_tree`` encoded; each tensor is a copy of its bytes in ``body`` (``blobs``: offset, length).
    What the worker sends is untrusted: every reference, dtype, shape and length is checked, and each blob may
    become one tensor only (so the tensors made hold no more bytes than ``body``)."""
    if depth > MAX_DEPTH:
        raise ValueError(f"the payload nests deeper than {MAX_DEPTH} levels")
    if not isinstance(node, dict) or len(node) != 1:
        raise ValueError("malformed payload")
    (kind, val), = node.items()
    if kind == "t":
        if not (isinstance(val, list) and len(val) == 3):
            raise ValueError("malformed tensor reference")
        index, dtype, shape = val
        if not (_is_count(index) and index < len(blobs)):
            raise ValueError(f"a tensor references bytes {index!r}, not among the message's {len(blobs)}")
        if index in used:
            raise ValueError(f"two tensors reference the same bytes (blob {index})")
        used.add(index)
        dt = _WIRE_DTYPES.get(dtype) if isinstance(dtype, str) else None
        if dt is None:
            raise ValueError(f"a tensor has an unknown dtype {dtype!r}")
        if not (isinstance(shape, list) and len(shape) <= MAX_DIMS and all(_is_count(n) for n in shape)):
            raise ValueError("malformed tensor shape")
        off, length = blobs[index]
        if length != math.prod(shape) * dt.itemsize:
            raise ValueError("tensor bytes do not match its shape")
        if not length:
            return torch.empty(shape, dtype=dt)
        with warnings.catch_warnings():  # the received bytes may be read-only; only read here, then copied
            warnings.simplefilter("ignore")
            src = torch.frombuffer(body, dtype=torch.uint8, count=length, offset=off)
        return src.clone().view(dt).reshape(shape)
    if kind in ("l", "u") and isinstance(val, list):
        items = [_untree(x, body, blobs, used, depth + 1) for x in val]
        return items if kind == "l" else tuple(items)
    if kind == "d" and isinstance(val, dict):
        return {str(k): _untree(v, body, blobs, used, depth + 1) for k, v in val.items()}
    if kind == "v" and (val is None or isinstance(val, (bool, int, float, str))):
        return val
    raise ValueError("malformed payload")


def _blobs(meta, size: int) -> list:
    """The (offset, length) of each tensor's bytes, which must tile the ``size`` bytes after the tree in order, as
    ``pack`` lays them out: no overlap (one blob read as many tensors), no gap, nothing past the end."""
    raw = meta.get("blobs") if isinstance(meta, dict) else None
    if not isinstance(raw, list) or len(raw) > MAX_TENSORS:
        raise ValueError(f"malformed tensor list (at most {MAX_TENSORS} tensors)")
    blobs, end = [], 0
    for item in raw:
        if not (isinstance(item, list) and len(item) == 2 and all(_is_count(x) for x in item)):
            raise ValueError("malformed tensor list")
        off, length = item
        if off != end:
            raise ValueError("tensor bytes overlap or leave gaps")
        end = off + length
        blobs.append((off, length))
    if end != size:
        raise ValueError(f"the tensors' bytes ({end}) do not fill the message's {size}")
    return blobs


def _check_archive(body: memoryview) -> None:
    """A torch.save archive whose entries are stored as they are (torch.save's own way): a compressed entry could
    inflate far past what was sent."""
    try:
        with zipfile.ZipFile(io.BytesIO(body)) as z:
            entries = z.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise ValueError(f"malformed torch.save payload: {exc}") from None
    if any(e.compress_type != zipfile.ZIP_STORED or e.compress_size != e.file_size for e in entries):
        raise ValueError("torch.save payload with compressed entries")
    if sum(e.file_size for e in entries) > len(body):
        raise ValueError("torch.save payload whose entries are larger than the payload")


def _check_loaded(obj, max_tensor_bytes: int) -> None:
    """What torch.load made: tensors adding up to at most ``max_tensor_bytes`` as values (views of one storage
    count once each: the comparison reads each of them), at most MAX_TENSORS of them, nested at most MAX_DEPTH."""
    total, tensors, stack = 0, 0, [(obj, 0)]
    while stack:
        x, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError(f"the payload nests deeper than {MAX_DEPTH} levels")
        if isinstance(x, torch.Tensor):
            tensors += 1
            total += x.numel() * x.element_size()
            if tensors > MAX_TENSORS:
                raise ValueError(f"the payload holds more than {MAX_TENSORS} tensors")
            if total > max_tensor_bytes:
                raise ValueError(f"the payload's tensors hold more than the {max_tensor_bytes:,} bytes sent")
        elif isinstance(x, (list, tuple)):
            stack.extend((v, depth + 1) for v in x)
        elif isinstance(x, dict):
            stack.extend((v, depth + 1) for v in x.values())


def pack(header: dict, payload=None):
    """Frame a message: 4-byte header length, JSON header, optional payload, as one buffer for
    ``Connection.send_bytes`` (or ``send_frame``). Tensors, lists, tuples, dicts and scalars travel as a JSON tree
    followed by each tensor's raw bytes (one copy into the buffer, cheaper than ``torch.save`` for large
    inputs); anything else as ``torch.save``."""
    h = json.dumps(header).encode()
    head = struct.pack("<I", len(h)) + h
    if payload is None:
        return head
    blobs: list = []
    try:
        tree = _tree(payload, blobs)
    except _NotRaw:
        buf = io.BytesIO()
        buf.write(head + _SAVED)
        torch.save(payload, buf)
        return buf.getbuffer()
    sizes = [b.numel() * b.element_size() for b in blobs]
    offsets = [sum(sizes[:k]) for k in range(len(sizes))]
    meta = json.dumps({"tree": tree, "blobs": [[o, n] for o, n in zip(offsets, sizes)]}).encode()
    prefix = head + _RAW + struct.pack("<I", len(meta)) + meta
    out = torch.empty(len(prefix) + sum(sizes), dtype=torch.uint8)
    out[: len(prefix)] = torch.frombuffer(bytearray(prefix), dtype=torch.uint8)
    for b, o, n in zip(blobs, offsets, sizes):
        if n:  # torch's copy: several threads, and a device tensor comes straight from the device
            out[len(prefix) + o : len(prefix) + o + n].copy_(b.reshape(-1).view(torch.uint8))
    return memoryview(out.numpy())


def _bytes_view(data) -> memoryview:
    view = memoryview(data)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def _length(view: memoryview, at: int, limit: int, what: str) -> int:
    if len(view) < at + 4:
        raise ValueError(f"the message ends inside its {what} length")
    (n,) = struct.unpack("<I", view[at : at + 4])
    if n > limit or at + 4 + n > len(view):
        raise ValueError(f"the message's {what} is {n} bytes (at most {limit}, and within the message)")
    return n


def unpack(data, max_tensor_bytes: int | None = None) -> tuple[dict, object]:
    """The header and payload of a message ``pack`` made. ``max_tensor_bytes`` (the parent reading a worker's
    message) also bounds a torch.save payload: stored entries only, tensors adding up to at most that many bytes.
    Raises ValueError (or json's, torch.load's errors) for anything else."""
    view = _bytes_view(data)
    n = _length(view, 0, MAX_HEADER_BYTES, "header")
    header = json.loads(bytes(view[4 : 4 + n]).decode())
    body = view[4 + n :]
    if not len(body):
        return header, None
    kind, body = bytes(body[:1]), body[1:]
    if kind == _SAVED:
        if max_tensor_bytes is not None:
            _check_archive(body)
        payload = torch.load(io.BytesIO(body), weights_only=True)
        if max_tensor_bytes is not None:
            _check_loaded(payload, max_tensor_bytes)
        return header, payload
    if kind != _RAW:
        raise ValueError("unknown payload encoding")
    m = _length(body, 0, MAX_META_BYTES, "tensor list")
    meta = json.loads(bytes(body[4 : 4 + m]).decode())
    blobs = _blobs(meta, len(body) - 4 - m)
    return header, _untree(meta.get("tree"), body[4 + m :], blobs, set())


# ---------------------------------------------------------------------- frames with a deadline


class FrameError(ValueError):
    """A frame the reader refuses: longer than expected, or with a malformed length."""


_LONG = b"\xff\xff\xff\xff"  # Connection's prefix of a frame over 2 GiB: -1, then an 8-byte length


def _wait(poller, until: float) -> bool:
    left = until - time.monotonic()
    return left > 0 and bool(poller.poll(max(1, math.ceil(left * 1e3))))


class FrameReader:
    """Reads ``multiprocessing.Connection`` frames from a descriptor as their bytes arrive, never waiting past a
    deadline: a frame begun and not finished is kept for the next ``read``. A frame longer than ``limit`` is refused
    from its length, before anything is allocated for it. Puts the descriptor in non-blocking mode: read it only
    through this reader (and ``send_frame``) from then on."""

    def __init__(self, fd: int, limit: int):
        os.set_blocking(fd, False)
        self.fd, self.limit = fd, limit
        self._poll = select.poll()
        self._poll.register(fd, select.POLLIN)
        self._head = bytearray(12)
        self._head_got = 0
        self._body: memoryview | None = None
        self._got = 0

    def pending(self) -> tuple[int, int | None] | None:
        """(bytes received, bytes announced) of a frame begun and not finished, or None."""
        if self._body is not None:
            return self._got, len(self._body)
        return (self._head_got, None) if self._head_got else None

    def read(self, until: float) -> memoryview | None:
        """The next whole frame (a writable buffer), or None if it has not all arrived by ``until``
        (``time.monotonic()``). EOFError at the end of the stream between frames; OSError inside one."""
        while True:
            if self._body is None:
                want = 12 if self._head_got >= 4 and self._head[:4] == _LONG else 4
                if self._head_got == want:
                    self._begin(want)
                else:
                    n = self._read_into(memoryview(self._head)[self._head_got : want], until)
                    if not n:
                        return None
                    self._head_got += n
                    continue
            if self._got == len(self._body):
                frame, self._body, self._got, self._head_got = self._body, None, 0, 0
                return frame
            n = self._read_into(self._body[self._got :], until)
            if not n:
                return None
            self._got += n
            if self._got < len(self._body) and time.monotonic() >= until:
                return None  # a long frame still streaming: the caller's own checks run between the parts

    def _begin(self, prefix: int) -> None:
        (size,) = struct.unpack("!i", self._head[:4])
        if prefix == 12:
            (size,) = struct.unpack("!Q", self._head[4:12])
        elif size < 0:
            raise FrameError(f"a message announced a negative length ({size})")
        if size > self.limit:
            raise FrameError(f"a message of {size:,} bytes was announced; at most {self.limit:,} are accepted here")
        self._body = memoryview(torch.empty(size, dtype=torch.uint8).numpy())  # uninitialised: filled by the reads
        self._got = 0

    def _read_into(self, view: memoryview, until: float) -> int:
        """Bytes read into ``view``: what is there now, or what arrives by ``until``; 0 if none came."""
        while True:
            try:
                n = os.readv(self.fd, [view])
            except BlockingIOError:
                if not _wait(self._poll, until):
                    return 0
                continue
            if n == 0:
                if self.pending() is None:
                    raise EOFError
                got, size = self.pending()
                raise OSError(f"the connection closed inside a message ({got} of {size or 'its length'} bytes "
                              "received)")
            return n


def send_frame(fd: int, data, until: float) -> None:
    """Write ``data`` as one ``multiprocessing.Connection`` frame on the non-blocking descriptor ``fd``. Raises
    TimeoutError if the reader has not taken all of it by ``until`` (``time.monotonic()``): a worker that stops
    reading cannot hold the parent in a write."""
    view = _bytes_view(data)
    n = len(view)
    prefix = struct.pack("!i", n) if n <= 0x7FFFFFFF else _LONG + struct.pack("!Q", n)
    parts = [memoryview(prefix), view] if n else [memoryview(prefix)]
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    while parts:
        try:
            sent = os.writev(fd, parts)
        except BlockingIOError:
            if not _wait(poller, until):
                total = n + len(prefix)
                raise TimeoutError(f"the reader took {total - sum(map(len, parts)):,} of the message's {total:,} "
                                   "bytes and stopped reading") from None
            continue
        while sent:
            if sent >= len(parts[0]):
                sent -= len(parts.pop(0))
            else:
                parts[0], sent = parts[0][sent:], 0
