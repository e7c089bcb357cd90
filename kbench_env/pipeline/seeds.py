"""The seeds one evaluation derives from its seed: per configuration, the inputs' and the init's seeds of the
correctness run, and the seeds of the timed calls' input sets and fingerprints. Derived the same way for the
candidate and the reference, so both are timed on the same inputs."""

from __future__ import annotations

import hashlib


def stream_seeds(seed: int, index: int) -> tuple[int, int]:
    """(input seed, init seed) of stream ``index`` for an evaluation seed."""
    h = hashlib.sha256(f"{seed}:{index}".encode()).digest()
    return int.from_bytes(h[:4], "little"), int.from_bytes(h[4:8], "little")


def base_seed(seed: int, i: int) -> int:
    """Seed of configuration ``i``'s timing input sets: the same for the candidate and the reference."""
    return stream_seeds(seed, 1000 + 100 * i)[0]


def timed_seed(seed: int, i: int) -> int:
    """Seed of configuration ``i``'s per-call perturbation of the timed inputs."""
    return stream_seeds(seed, 5000 + i)[0]


def fingerprint_seed(seed: int, i: int) -> int:
    """Seed of configuration ``i``'s timed-output fingerprints (and of the reference's timing request)."""
    return stream_seeds(seed, 7000 + i)[0]
