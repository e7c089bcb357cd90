"""Paired, interleaved timing on the CPU: one configuration's reference and candidate timed in alternating blocks
(R C R C ... C R) in one session, by this side's clock (blocks.py's exchange for each), with the other worker
stopped while a block runs: the candidate's worker is frozen while the reference's block runs and the reverse, so
neither can slow the other's blocks, and a change of the machine's load lands on both sides of each pair.

Both sides' blocks have the same number of calls, sized from their warm-ups so that a block lasts about
``block_seconds`` at the geometric mean of the two per-call times: the same inputs' bytes pass through the caches
on both sides (blocks of different sizes timed the same code far apart), and a block's fixed cost (the thaw
and the wake-ups around it) is spread over as many calls. Both workers are placed alike before each block
(sandbox/placement.py: the same cores, the same raised priority where allowed). Pairs are added until the
speedup's interval (pair_stats.py) is no wider than ``ci_width`` (its upper over its lower end, minus one) or
``pair_seconds`` have passed since the pairing began, and never fewer than the interval needs
(``pair_stats.min_pairs``) nor than ``min_reps`` candidate calls; ``max_reps`` caps the candidate's calls once the
interval exists. The candidate's timed calls are checked as in blocks.py (a sample of each block's outputs read
here), the comparison after the pairs (``_Candidate``); the reference's are not (trusted code). Each reference
block after the first runs on the inputs of the candidate's block before it.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass

import torch

from kbench_env.pipeline import pair_stats
from kbench_env.pipeline.blocks import (BLOCK_SECONDS, BlockTiming, TimedCallFailed, _block_size, _params, _Run,
                                        _sample, sample_block_calls)
from kbench_env.pipeline.revealed_inputs import RevealedInputs
from kbench_env.sandbox.placement import Placement
from kbench_env.measure.stats import Timing, summarize

#: Width (upper over lower end, minus one) at which a configuration's interval is narrow enough to stop.
CI_WIDTH = 0.04
#: Seconds a configuration's pairing may go on for once it has the fewest pairs the interval needs. A pair's ratio
#: moves by about a tenth on a small virtual machine (a core's speed changes within tens of milliseconds, which
#: pairing cannot cancel): the speedup's spread between evaluations falls with the square root of the pairs, and
#: the pairs in this time are what it costs (bench/cpu_noise.py measures both). Most pairings of an idle machine
#: reach ``ci_width`` well before it; the ones that do not are those whose pairs scatter, and they made the spread.
PAIR_SECONDS = 6.0
#: Bytes of the candidate's checked outputs kept to judge after the pairs past which they are judged at once.
KEPT_BYTES = 64 << 20
#: A paired block's target length (blocks.py's default is longer): under load a pair's inputs cost more to make and
#: write than its blocks take to run, so shorter blocks make more pairs in the same time; but each block carries a
#: fixed cost of its hand-overs whose own variation moves a short block's time, and with the blocks real-time
#: (sandbox/placement.py) load does not stretch a longer one: blocks of this length spread the speedup less between
#: evaluations on an idle machine than shorter ones for as many seconds of pairing (bench/cpu_noise.py).
PAIRED_BLOCK_SECONDS = 0.05


@dataclass
class PairedTiming:
    """One configuration's paired timing: each side's per-call times (one per block), the speedup (exp of the
    median per-pair log ratio) and its interval; or ``wrong``: why a checked candidate output did not match."""

    candidate: Timing | None = None
    reference: Timing | None = None
    speedup: float | None = None
    ci: tuple[float, float] | None = None
    pairs: int = 0
    block_calls: tuple[int, int] = (0, 0)  # calls per block: the candidate's, the reference's
    wrong: str | None = None
    wrong_call: int | None = None
    check_seconds: float = 0.0
    samples: dict | None = None  # the candidate's CPU samples after the pairs (blocks._sample), where sampled


def paired_params(params: dict, confidence: float) -> dict:
    """The timing parameters (blocks.py's) with the pairing's: ``ci_width``, ``pair_seconds``, and ``min_blocks``
    raised to the pairs the interval needs at ``confidence``."""
    p = _params({"block_seconds": PAIRED_BLOCK_SECONDS, **params})
    p["min_blocks"] = max(p["min_blocks"], pair_stats.min_pairs(confidence))
    p["ci_width"] = float(params.get("ci_width", CI_WIDTH))
    p["pair_seconds"] = float(params.get("pair_seconds", PAIR_SECONDS))
    return p


def time_paired(candidate, reference, config: str, reference_config: str, originals: list, noise: float,
                params: dict, timeout: float, check, check_calls: int, confidence: float,
                placement: Placement | None = None, draws: list | None = None, sampler=None) -> PairedTiming:
    """Time configuration ``config`` in worker ``candidate`` against ``reference_config`` in worker ``reference``
    (both already run once on it), interleaved. ``check(out_leaves, inputs)`` says why a candidate output is wrong
    for its inputs, or None. ``placement`` puts both workers on the same cores before each of their blocks. ``draws``
    (tasks/input_draws.py) makes integer inputs fresh per call on both sides; ``sampler`` (sandbox/samples.py) samples
    the candidate's worker in untimed blocks after the pairs (blocks._sample), for its kernel coverage. Raises
    blocks.TimedCallFailed if either fails in a timed call, WorkerError if a worker breaks the exchange."""
    p = paired_params(params, confidence)
    cand = _Candidate(candidate, config, RevealedInputs(originals, noise, draws), timeout, check, max(1, check_calls))
    ref = _Run(reference, reference_config, RevealedInputs(originals, noise, draws), timeout, None, 1)
    cand.placement = ref.placement = placement
    with placement.boosted_here() if placement is not None else contextlib.nullcontext():
        return _session(cand, ref, p, confidence, placement, sampler)


def _session(cand: _Run, ref: _Run, p: dict, confidence: float, placement: Placement | None,
             sampler=None) -> PairedTiming:
    """Both workers stopped, warmed up and sized alike, then interleaved; both resumed and unplaced after."""
    try:
        cand.freezer.freeze()
        ref.freezer.freeze()
        per_call, per_call_bytes, wrong = cand.warm(p)
        if wrong is not None:
            return PairedTiming(wrong=wrong[1], wrong_call=wrong[0], check_seconds=cand.check_seconds)
        ref_per_call, ref_bytes, _ = _reference(ref.warm, p)
        k = _block_size(math.sqrt(per_call * ref_per_call), max(per_call_bytes, ref_bytes), p)
        cand.size(k)
        ref.size(k)
        pt = _interleave(cand, ref, k, k, p, confidence)
        if sampler is not None and pt.wrong is None:
            # blocks of the unpaired timing's length (blocks.BLOCK_SECONDS), whatever the pairs' size
            ks = sample_block_calls(k, per_call_bytes, pt.candidate.median_ms, BLOCK_SECONDS)
            cand.size(ks)
            sampled = BlockTiming(timing=pt.candidate)
            _sample(cand, ks, sampler, sampled)
            if sampled.wrong is not None:  # wrong in a sampled block: wrong as in a timed one
                return PairedTiming(wrong=sampled.wrong, wrong_call=sampled.wrong_call, pairs=pt.pairs,
                                    check_seconds=cand.check_seconds)
            pt.samples = sampled.samples
        return pt
    finally:
        for run in (cand, ref):
            if placement is not None:
                placement.restore(run.freezer.pids())
            if run.freezer.frozen:
                run.freezer.thaw()


def _reference(step, *args):
    """A step of the reference's worker: its failure is this side's (the reference is trusted code that ran
    before), never charged to the candidate as a failed timed call."""
    try:
        return step(*args)
    except TimedCallFailed as exc:
        raise RuntimeError(f"the reference failed while being timed: {exc}") from None


class _Candidate(_Run):
    """The candidate's side of a pairing: the checked outputs of its timed blocks are read out at once (a copy,
    out of the stopped worker, before its next block) and compared with the reference's only after the pairs
    (``judge_kept``): a comparison runs the reference's model on this side, time in which no pair is timed."""

    def __init__(self, *args):
        super().__init__(*args)
        self.kept: list = []  # (call number among the timed calls, outputs read, the call's key)
        self.kept_bytes = self.base = 0

    def check_block(self, keys: list, layout: list, table: list) -> tuple[int, str] | None:
        """Read and keep the outputs of ``check_calls`` calls of the block, chosen now; an output that cannot be
        read is wrong at once (its index in the block, why); past KEPT_BYTES kept, the kept ones are judged now."""
        base, self.base = self.base, self.base + len(keys)

        def keep(j: int, out: list) -> None:
            self.kept.append((base + j, out, keys[j]))
            self.kept_bytes += sum(x.numel() * x.element_size() for x in out if isinstance(x, torch.Tensor))

        wrong = self.each_checked(keys, layout, table, keep)
        if wrong is None and self.kept_bytes > KEPT_BYTES:
            wrong = self.judge_kept()
            wrong = None if wrong is None else (wrong[0] - base, wrong[1])
        return wrong

    def judge_kept(self) -> tuple[int, str] | None:
        """The kept outputs compared with the reference's for their calls' inputs (remade from their keys): the
        first wrong one as (its call number among the timed calls, why), or None; let go either way."""
        t0 = time.perf_counter()
        try:
            for n, out, key in self.kept:
                why = self.check(out, self.inputs.make(key))
                if why is not None:
                    return n, why
            return None
        finally:
            self.kept, self.kept_bytes = [], 0
            self.check_seconds += time.perf_counter() - t0


def _interleave(cand: _Candidate, ref: _Run, kc: int, kr: int, p: dict, confidence: float) -> PairedTiming:
    """R C R ... C R; each reference block after the first runs on the inputs of the candidate's block before it
    (the same bytes written into its own buffers: one making of inputs serves a pair, and both sides of it
    compute on the same data)."""
    ref_ms = [_reference(ref.timed, kr)[0] * 1e3 / kr]
    cand_ms: list[float] = []
    calls, start = 0, time.monotonic()
    while True:
        seconds, wrong = cand.timed(kc)
        if wrong is not None:
            return PairedTiming(wrong=wrong[1], wrong_call=calls + wrong[0], pairs=len(cand_ms),
                                check_seconds=cand.check_seconds)
        cand_ms.append(seconds * 1e3 / kc)
        ref_ms.append(_reference(ref.timed, kr, cand.made if kr == kc else None)[0] * 1e3 / kr)
        calls += kc
        logs = pair_stats.log_ratios(ref_ms, cand_ms)
        if _enough(logs, calls, time.monotonic() - start, p, confidence):
            break
    wrong = cand.judge_kept()
    if wrong is not None:
        return PairedTiming(wrong=wrong[1], wrong_call=wrong[0], pairs=len(cand_ms), check_seconds=cand.check_seconds)
    s, ci = pair_stats.speedup(logs, confidence)
    c, r = summarize(cand_ms), summarize(ref_ms)
    return PairedTiming(candidate=Timing(c.median_ms, c.iqr_ms, calls, c.times_ms),
                        reference=Timing(r.median_ms, r.iqr_ms, kr * len(ref_ms), r.times_ms),
                        speedup=s, ci=ci, pairs=len(logs), block_calls=(kc, kr), check_seconds=cand.check_seconds)


def _enough(logs: list[float], calls: int, elapsed: float, p: dict, confidence: float) -> bool:
    """The stopping rule: the interval exists, the candidate made its ``min_reps`` calls, and the interval is
    narrow enough, or the pairing's time or the candidate's ``max_reps`` calls are spent."""
    if len(logs) < p["min_blocks"] or calls < p["min_reps"]:
        return False
    ci = pair_stats.interval(logs, confidence)
    if ci is None:
        return False
    narrow = pair_stats.relative_width(ci) <= p["ci_width"]
    capped = bool(p["max_reps"]) and calls >= int(p["max_reps"])
    return narrow or capped or elapsed > p["pair_seconds"]
