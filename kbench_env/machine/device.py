"""The device an evaluation runs on, as one value: ``Device(kind, index)`` for "cpu", "cuda" and "cuda:N".

Devices travel as strings (job dicts sent to the worker, EvalResult, run logs); code that needs to ask what a
device is parses the string once with ``Device.parse`` and asks ``is_cpu`` / ``is_cuda``, instead of testing
prefixes. ``str(device)`` gives the canonical string back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NoReturn

import torch

KINDS = ("cpu", "cuda")
_SPELLING = re.compile(r"(?P<kind>[a-z]+)(?::(?P<index>\d+))?")


@dataclass(frozen=True)
class Device:
    """One device: ``kind`` "cpu" or "cuda"; ``index`` the GPU's number ("cuda:1"), None for the current one."""

    kind: str
    index: int | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown device kind {self.kind!r}: kbench runs on {' or '.join(KINDS)}")
        if self.index is not None and (self.kind == "cpu" or self.index < 0):
            raise ValueError(f"device index {self.index!r} is not valid for {self.kind!r} (only cuda:N, N >= 0)")

    @classmethod
    def parse(cls, device: str | torch.device | Device | None = "auto") -> Device:
        """A Device from "auto" (or None: cuda when torch sees a GPU, else cpu), "cpu", "cuda", "cuda:N", a
        ``torch.device`` or a Device. Anything else is a ValueError naming what was given and what is accepted."""
        if isinstance(device, Device):
            return device
        if isinstance(device, torch.device):
            device = str(device)
        if device is None or device == "auto":
            return cls("cuda" if torch.cuda.is_available() else "cpu")
        if not isinstance(device, str):
            cls._refuse(device)
        m = _SPELLING.fullmatch(device.strip())
        if m is None or m["kind"] not in KINDS:
            cls._refuse(device)
        # torch reads "cpu:0" as the CPU; a CPU has no index worth keeping
        index = None if m["kind"] == "cpu" or m["index"] is None else int(m["index"])
        return cls(m["kind"], index)

    @staticmethod
    def _refuse(device) -> NoReturn:
        raise ValueError(f"unknown device {device!r}: use 'auto' (cuda when a GPU is present, else cpu), 'cpu', "
                         f"'cuda' or 'cuda:N'")

    @property
    def is_cpu(self) -> bool:
        return self.kind == "cpu"

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"

    def __str__(self) -> str:
        return self.kind if self.index is None else f"{self.kind}:{self.index}"


def resolve_device(device: str | torch.device | Device | None = "auto") -> str:
    """The canonical device string of ``device`` ("auto" resolved): what job dicts and results carry."""
    return str(Device.parse(device))


__all__ = ["Device", "KINDS", "resolve_device"]
