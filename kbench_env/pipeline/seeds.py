"""The seeds one evaluation derives from its seed: per configuration, the inputs' and the init's seeds of the
correctness run, derived the same way for the candidate and the reference. (The timed calls' inputs come from
secrets the trusted side draws per block: revealed_inputs.py, gpu_blocks.py.)"""

from __future__ import annotations

import hashlib


def stream_seeds(seed: int, index: int) -> tuple[int, int]:
    """(input seed, init seed) of stream ``index`` for an evaluation seed."""
    h = hashlib.sha256(f"{seed}:{index}".encode()).digest()
    return int.from_bytes(h[:4], "little"), int.from_bytes(h[4:8], "little")
