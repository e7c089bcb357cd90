"""GPU memory shared between a candidate's worker and the trusted side, through CUDA's inter-process handles.

A GPU worker's timed blocks (worker/gpu_executor.py) run on input buffers the trusted side fills and leave their
outputs where the trusted side reads them (pipeline/gpu_blocks.py), as the CPU's do through ``/proc/<pid>/mem``
(sandbox/memory.py). The worker exports the allocation that holds a tensor (``Exporter``: the CUDA driver's
``cuIpcGetMemHandle`` of its base, and the tensor's offset in it); the trusted side opens each handle once
(``Mappings``) and makes views of byte ranges inside it. What the worker says is only where to look: every range is checked against the size of the
allocation the driver mapped (a range outside it is refused, never touched), and a handle to the wrong memory
reads the wrong bytes, which the comparison with the reference catches.

The driver API is reached with ctypes (``libcuda.so.1``, always present where CUDA runs); torch's own IPC
(``torch.multiprocessing``) would need shared-memory reference counters in ``/dev/shm`` from the sandboxed worker.
"""

from __future__ import annotations

import ctypes

import torch


class IpcError(RuntimeError):
    """A CUDA inter-process handle could not be made, opened or used."""


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


_lib = None


def _driver():
    global _lib
    if _lib is None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise IpcError(f"the CUDA driver library could not be loaded: {exc}") from None
        lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(_Handle), ctypes.c_uint64]
        lib.cuMemGetAddressRange_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t),
                                                ctypes.c_uint64]
        lib.cuIpcOpenMemHandle_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), _Handle, ctypes.c_uint]
        lib.cuIpcCloseMemHandle.argtypes = [ctypes.c_uint64]
        lib.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        _lib = lib
    return _lib


def _check(code: int, what: str) -> None:
    if code != 0:
        text = ctypes.c_char_p()
        _driver().cuGetErrorString(code, ctypes.byref(text))
        raise IpcError(f"{what} failed: CUDA error {code} ({(text.value or b'?').decode()})")


def _current_context(device: torch.device) -> None:
    """Make torch's context of ``device`` current on this thread (the driver API acts on the current one)."""
    torch.cuda.set_device(device)
    torch.cuda.synchronize(device)  # a runtime call binds the primary context to this thread


def allocation_of(ptr: int) -> tuple[int, int]:
    """(base address, size) of the device allocation that holds address ``ptr``."""
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    _check(_driver().cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(ptr)),
           f"finding the allocation of device address {ptr:#x}")
    return base.value, size.value


class Exporter:
    """The worker's side: handles of the allocations its tensors live in, each allocation exported once."""

    def __init__(self):
        self.handles: list[str] = []
        self._by_base: dict = {}

    def locate(self, t: torch.Tensor) -> tuple[int, int]:
        """(index into ``handles``, byte offset) of tensor ``t``'s first element."""
        base, _ = allocation_of(t.data_ptr())
        if base not in self._by_base:
            handle = _Handle()
            _check(_driver().cuIpcGetMemHandle(ctypes.byref(handle), ctypes.c_uint64(base)),
                   f"exporting the allocation at {base:#x}")
            self._by_base[base] = len(self.handles)
            self.handles.append(ctypes.string_at(ctypes.addressof(handle), 64).hex())
        return self._by_base[base], t.data_ptr() - base


class _Range:
    """A device byte range as ``__cuda_array_interface__`` (how torch takes memory it did not allocate)."""

    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 2, "strides": None}


class Mappings:
    """The trusted side's side: a worker's allocations opened (each handle once) and views into them."""

    def __init__(self, device):
        d = torch.device(device)
        self.device = d if d.index is not None else torch.device("cuda", torch.cuda.current_device())
        self._open: dict = {}  # handle hex -> (base address, size)

    def _base(self, handle: str) -> tuple[int, int]:
        if handle not in self._open:
            raw = bytes.fromhex(handle) if isinstance(handle, str) and len(handle) == 128 else None
            if raw is None:
                raise IpcError("the worker named a malformed memory handle")
            _current_context(self.device)
            h = _Handle()
            ctypes.memmove(ctypes.addressof(h), raw, 64)
            ptr = ctypes.c_uint64()
            _check(_driver().cuIpcOpenMemHandle_v2(ctypes.byref(ptr), h, 1), "opening the worker's memory handle")
            _, size = allocation_of(ptr.value)
            self._open[handle] = (ptr.value, size)
        return self._open[handle]

    def bytes_at(self, handle: str, offset: int, nbytes: int) -> torch.Tensor:
        """A uint8 view of ``nbytes`` bytes at ``offset`` of the worker's allocation ``handle``; IpcError if the
        range is not inside that allocation."""
        base, size = self._base(handle)
        if not (isinstance(offset, int) and isinstance(nbytes, int)) or offset < 0 or nbytes < 0 \
                or offset + nbytes > size:
            raise IpcError(f"the worker named bytes {offset}..{offset + nbytes} of an allocation of {size} bytes")
        if nbytes == 0:
            return torch.empty(0, dtype=torch.uint8, device=self.device)
        return torch.as_tensor(_Range(base + offset, nbytes), device=self.device)

    def tensor(self, handle: str, offset: int, dtype: torch.dtype, shape: list, strides: list) -> torch.Tensor:
        """A view of the worker's tensor (``shape`` and ``strides`` in elements) at ``offset`` of ``handle``."""
        if any((not isinstance(v, int)) or v < 0 for v in list(shape) + list(strides)):
            raise IpcError(f"an output has an impossible layout (shape {shape}, strides {strides})")
        numel = 1
        for v in shape:
            numel *= v
        if numel == 0:
            return torch.empty(shape, dtype=dtype, device=self.device)
        span = 1 + sum((a - 1) * b for a, b in zip(shape, strides))
        raw = self.bytes_at(handle, offset, span * dtype.itemsize)
        return raw.view(dtype).as_strided(shape, strides)

    def close(self) -> None:
        """Unmap every allocation (the views made from them must be gone first)."""
        if not self._open:
            return
        _current_context(self.device)
        for base, _ in self._open.values():
            _driver().cuIpcCloseMemHandle(ctypes.c_uint64(base))
        self._open.clear()
