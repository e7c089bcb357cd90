"""Inputs made from inputs: a perturbed copy (fresh storage and content for each call), the standard deviations
that scale its noise, and the copy of a call's inputs into a timed graph's static buffers.

Both sides use them: the trusted side scales the noise of the inputs it reveals by ``input_stds``
(pipeline/revealed_inputs.py, pipeline/gpu_blocks.py); a worker makes its wall-clock re-timing's inputs and its own
inputs for a GPU block's warm-up and capture with ``perturb`` and the block's buffers with ``fill_perturbed``
(worker/loop.py, worker/gpu_executor.py), and a backend fills a graph's inputs with ``copy_into``
(backends/cuda.py). It imports neither side.
"""

from __future__ import annotations

import threading

import torch


_GENERATORS = threading.local()


def _generator(device) -> torch.Generator:
    """This thread's generator for ``device``, made once: a new CUDA generator per call costs more host time than a
    small call's kernel. One per thread, so a seed set in one thread is never drawn from in another."""
    cache = getattr(_GENERATORS, "by_device", None)
    if cache is None:
        cache = _GENERATORS.by_device = {}
    key = str(device)
    if key not in cache:
        cache[key] = torch.Generator(device=device)
    return cache[key]


def perturb(inputs: list, seed: int, scale: float = 1e-2, stds: list | None = None) -> list:
    """A fresh copy of ``inputs`` with dense noise of ``scale`` times each floating tensor's std added.

    Every call of a wall-clock re-timing gets its own perturbed copy (new storage, new content), so neither
    pointer- nor content-keyed caching can return a stored result; a GPU worker makes its warm-up and capture
    calls' inputs this way too (worker/gpu_executor.py). ``stds`` (from ``input_stds(inputs)``) saves recomputing the standard deviations, and a device
    synchronisation, on every call: the result is the same.
    """
    stds = stds if stds is not None else input_stds(inputs)
    out = []
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 0:
            noise = _noise(seed, i, torch.empty(x.shape, device=x.device, dtype=torch.float32))
            out.append(noise.mul_(scale * stds[i]).add_(x).to(x.dtype))
        elif isinstance(x, torch.Tensor):
            out.append(x.clone())
        else:
            out.append(x)
    return out


def _noise(seed: int, i: int, out: torch.Tensor) -> torch.Tensor:
    """``out`` (float32) filled with input ``i``'s standard normal draw for ``seed`` (``perturb``'s noise)."""
    g = _generator(out.device)
    g.manual_seed((seed * 1000003 + i) % (2**63))
    return torch.randn(out.shape, generator=g, out=out)


#: The float32 noise drawn at once while filling a block's rows (``fill_perturbed``): bounds its transient memory.
FILL_CHUNK_BYTES = 64 << 20


def fill_perturbed(big: list, originals: list, seed: int, scale: float = 1e-2, stds: list | None = None) -> None:
    """Fill every row of each ``[block, *shape]`` tensor of ``big`` with a perturbed copy of the input at the same
    place of ``originals``, as ``perturb`` would for each row (its own dense noise of ``scale`` times the input's
    std; an input that is not perturbed, copied): a few launches per input for the whole block instead of a few per
    call, the noise drawn a chunk of rows at a time (FILL_CHUNK_BYTES). ``seed`` makes the draw; what a row holds
    differs from every other row and from ``perturb``'s copies."""
    stds = stds if stds is not None else input_stds(originals)
    with torch.no_grad():
        for i, (t, x) in enumerate(zip(big, originals)):
            if not isinstance(t, torch.Tensor) or t.numel() == 0:
                continue
            if not (x.is_floating_point() and stds[i] is not None):
                t.copy_(x.unsqueeze(0).expand_as(t))
                continue
            rows = max(1, FILL_CHUNK_BYTES // max(1, 4 * x.numel()))
            for k, r0 in enumerate(range(0, t.shape[0], rows)):
                part = t[r0:r0 + rows]
                noise = _noise((seed * 1000003 + i) * 65537 + k, -1, torch.empty(part.shape, device=t.device,
                                                                                  dtype=torch.float32))
                # the input copied first and the noise added in its place: a float64 input keeps its precision
                part.copy_(x.unsqueeze(0).expand_as(part)).add_(noise.mul_(scale * stds[i]))


def copy_into(dst: list, src: list) -> None:
    """Each tensor of ``src`` copied into the tensor at the same place in ``dst`` (a timed graph's static inputs)."""
    for d, s in zip(dst, src):
        if isinstance(d, torch.Tensor):
            d.copy_(s)


def input_stds(inputs: list) -> list:
    """Per input: the standard deviation ``perturb`` scales its noise by (None for what it does not perturb)."""
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 0:
            out.append(x.float().std().item() if x.numel() > 1 else abs(x.float().item()))
        else:
            out.append(None)
    return out
