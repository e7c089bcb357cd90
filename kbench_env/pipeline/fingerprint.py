"""Timed-output fingerprints: what the worker reports of every timed call's output, and the trusted side's test of
that report against the reference output for the same inputs (recomputed for a random sample of calls).

A fingerprint holds, per output leaf, a few numbers the worker cannot fake without computing the output: its
norm and the values at ``SAMPLES`` seeded positions (the same positions on both sides, drawn from the
timing's seed). The test flags a call only where the numbers prove the output is further from the reference than
``MARGIN`` times the task's own tolerances (``compare.tolerance_for``: norm-wise and elementwise):

- **False positives: none.** An output within ``MARGIN`` times both tolerances of the reference is never flagged,
  whatever its size, mean, spread or dtype: the norms of two outputs differ by at most the norm of their
  difference, each sampled element is compared with the elementwise bound itself, and both tests are widened by a
  proven bound on the rounding of computing them (``_norm_bound``: squares summed in rows of ``ROW`` in the
  output's precision, the row norms combined in float64; no float64 copy of the output).
- **Misses.** An output that differs from the reference by more than the elementwise bound (``MARGIN`` x the
  dtype's max tolerance x the reference's rms) at a fraction ``f`` of its elements passes with probability at most
  ``(1 - f) ** SAMPLES``: the positions are drawn uniformly, independently of the output. An output of at most
  ``SAMPLES`` elements is compared whole. At float32, a stale ReLU output (computed for another timed call's
  inputs, which differ by 1% noise) has f ~ 0.35, so it passes with probability ~1e-12 per checked call (1.4e-10
  at the smallest f, 0.30, of 5,000 seeded draws of 1,024+ elements: tests/test_fingerprint.py); an output off by
  a dense 1% of its rms has f ~ 0.42: ~1e-15. A stale output that moves by less than the elementwise bound (half
  precision, whose bound is 0.2 or 0.8 of the rms; outputs with a large mean and a small spread) is within that
  tolerance of the right one, and passes.
- **Integer and boolean outputs** must match exactly: two 52-bit hashes (sums of the elements times random 64-bit
  weights, modulo 2**64) and the sampled values. A wrong output is missed with probability at most 2**(2t - 104),
  where 2**t divides every difference (t = 0 for booleans and differences of 1).

Everything the worker computes is a fixed sequence of tensor operations on the output's device, with no host
synchronisation and no data-dependent shape, so a block of calls' fingerprints can be captured as one CUDA graph
(``Fingerprint.pending_block``). It sends them as one table (``fingerprint_table``), which the trusted side reads
back call by call (``Reported``) and tests with ``fingerprint_mismatch``.
"""

from __future__ import annotations

import math

import torch

from kbench_env.pipeline.compare import flatten_outputs

#: Output elements compared per leaf and call.
SAMPLES = 64
#: Elements per row of the norm's first level, summed in the output's own precision.
ROW = 128
#: How far past the task's tolerances an output may be before its timed call is flagged: the timed calls' inputs
#: are fresh draws, so an honest kernel's error there is not the one the correctness run measured.
MARGIN = 4.0
#: Leaf kinds (a fingerprint's first number).
FLOAT, EXACT, PY_FLOAT, PY_INT, OTHER = range(5)
HEAD = 5  # kind, numel, two kind-specific numbers, the reference's finite rms (see ``Fingerprint.of``)
_HASH_MASK = (1 << 52) - 1  # a hash's low bits, exact in a float64
_TINY = 2.0 ** -149  # float32's smallest step: the absolute rounding of one square near underflow


def _gamma(k: int, u: float) -> float:
    """Higham's gamma_k: the relative error bound of k roundings of unit ``u`` in any order."""
    return k * u / (1 - k * u)


def _norm_bound(n: int, dtype: torch.dtype) -> float:
    """Relative error bound of ``Fingerprint``'s norm of ``n`` elements of ``dtype``: the squared norm of each row
    of ``ROW`` elements summed in any order in float32 (float64 for float64 outputs; 2 ROW + 8 roundings also covers
    a norm that scales its terms), then the squares of the row norms and of the elements past the last whole row
    summed in float64. This bounds the squared norm's relative error, hence the norm's. The absolute rounding of
    squares near underflow, ``n * _TINY``, is added where the bound is used."""
    u = 2.0 ** -53 if dtype == torch.float64 else 2.0 ** -24
    a, b = _gamma(2 * ROW + 8, u), _gamma(n // ROW + ROW + 4, 2.0 ** -53)
    return (1 + a) * (1 + b) - 1


class Fingerprint:
    """The fingerprints of one timing's outputs (seeded: the same positions and hash weights on the worker and on
    the trusted side, on any device). See the module docstring for what they catch."""

    def __init__(self, seed: int):
        self.seed = int(seed)
        self._cache: dict = {}  # (leaf, numel, device, dtype) -> its ``_plan``
        self._block = None  # (the block's output leaves as a key, its graph, the graph's result, leaves per call)

    def _generator(self, k: int, n: int, salt: int) -> torch.Generator:
        g = torch.Generator()  # on the CPU: the same draw on every device
        g.manual_seed((self.seed * 1000003 + 7919 * k + 104729 * salt + n) % (2**63))
        return g

    def _positions(self, k: int, x: torch.Tensor) -> torch.Tensor:
        """Leaf ``k``'s sampled positions (on the CPU): every element when there are at most ``SAMPLES``, else
        ``SAMPLES`` uniform draws (with replacement, so the misses of distinct samples are independent)."""
        n = x.numel()
        if n <= SAMPLES:
            return torch.arange(SAMPLES) % max(n, 1)
        return torch.randint(0, n, (SAMPLES,), generator=self._generator(k, n, 1))

    def _hash_weights(self, k: int, x: torch.Tensor) -> torch.Tensor:
        """Leaf ``k``'s two rows of random 64-bit weights (on the CPU) for the hashes of an integer output."""
        n, g = x.numel(), self._generator(k, x.numel(), 2)
        w = torch.empty(2, n, dtype=torch.int64).random_(generator=g)  # [0, 2**63)
        return w.mul_(2).add_(torch.empty(2, n, dtype=torch.int64).random_(0, 2, generator=g))  # every bit random

    def _plan(self, k: int, x: torch.Tensor) -> tuple:
        """What leaf ``k``'s fingerprint needs besides the output, made once per timing on the output's device
        (host-device copies: never inside a graph capture): the positions, the constant numbers around the
        computed ones, and for an integer output the hash weights."""
        key = (k, x.numel(), str(x.device), x.dtype)
        if key not in self._cache:
            n, exact = x.numel(), not x.is_floating_point()
            if exact:
                head, tail = [EXACT, n], [0.0]
            else:
                head, tail = [FLOAT, n], [_norm_bound(n, x.dtype), 0.0]
            if n == 0:
                head, tail = head + [0.0, 0.0, 0.0] + [0.0] * SAMPLES, []
            f64 = dict(dtype=torch.float64, device=x.device)
            self._cache[key] = (self._positions(k, x).to(x.device), torch.tensor(head, **f64),
                                torch.tensor(tail, **f64), self._hash_weights(k, x).to(x.device) if exact else None)
        return self._cache[key]

    def _leaf(self, k: int, leaf) -> torch.Tensor:
        if not isinstance(leaf, torch.Tensor):
            kind, v = ((PY_INT, float(leaf)) if isinstance(leaf, (bool, int)) else
                       (PY_FLOAT, leaf) if isinstance(leaf, float) else (OTHER, 0.0))
            return torch.tensor([kind, 1, v, 0, 0] + [v] * SAMPLES, dtype=torch.float64)
        x = leaf.detach()
        x = torch.view_as_real(x) if x.is_complex() else x
        flat = x.reshape(-1)  # a view where the output is contiguous
        if x.is_floating_point() and x.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            flat = flat.float()  # (float8 and the like, which the norm does not take)
        positions, head, tail, weights = self._plan(k, flat)
        n = flat.numel()
        if n == 0:
            return head
        samples = flat.take(positions)  # (cat below converts them, and the hashes, to float64)
        if weights is not None:
            h = (flat.to(torch.int64).unsqueeze(0) * weights).sum(1).bitwise_and_(_HASH_MASK)  # sum modulo 2**64
            return torch.cat([head, h, tail, samples])
        rows = n // ROW
        # the norm of each row of ROW elements in the output's precision, half precision's in float32 (one pass,
        # no copy), then the norm of those and of the elements past the last whole row in float64
        half = {} if flat.dtype in (torch.float32, torch.float64) else {"dtype": torch.float32}
        parts = flat if rows == 0 else torch.linalg.vector_norm(flat[:rows * ROW].view(rows, ROW), dim=1, **half)
        if rows and n % ROW:
            parts = torch.cat([parts, flat[rows * ROW:]])
        norm = torch.linalg.vector_norm(parts.to(torch.float64)).reshape(1)
        return torch.cat([head, norm, tail, samples])

    def pending(self, out) -> list:
        """Per output leaf: a float64 tensor of ``HEAD + SAMPLES`` numbers on the output's device, not yet read back
        (no synchronisation per timed call); ``fingerprint_values`` reads a list of them at once."""
        return [self._leaf(k, leaf) for k, leaf in enumerate(flatten_outputs(out))]

    def pending_block(self, outs: list, static: bool = False) -> list:
        """``pending`` of each output in ``outs``. With ``static`` (the same output tensors come back, rewritten,
        block after block: a replayed CUDA graph's outputs), the fingerprint ops of the whole block are captured
        once as a graph of their own and replayed: the same kernels on the same memory, so the same values, at one
        launch per block instead of ~8 per call (the per-call launches were most of a timed call's host time)."""
        leaves = [flatten_outputs(o) for o in outs]
        flat = [x for ls in leaves for x in ls]
        if not (static and flat and all(type(x) is torch.Tensor and x.is_cuda for x in flat)):
            return [self.pending(o) for o in outs]
        key = tuple((id(x), x.data_ptr(), x.shape, x.dtype) for x in flat)
        if self._block is None or self._block[0] != key:
            eager = [self.pending(o) for o in outs]  # makes the positions and constants: no host copy in the capture
            torch.cuda.synchronize()
            try:
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    buf = torch.stack([t for fps in (self.pending(o) for o in outs) for t in fps])
                torch.cuda.synchronize()
                self._block = (key, g, buf, [len(ls) for ls in leaves])
            except Exception:  # noqa: BLE001 - not capturable here: stay eager
                torch.cuda.synchronize()
            return eager
        _, g, buf, counts = self._block
        g.replay()
        rows, out, k = buf.clone(), [], 0
        for n in counts:
            out.append([rows[k + i] for i in range(n)])
            k += n
        return out

    def of(self, out) -> list:
        """Per output leaf, the numbers, read back. Where a floating output's norm is not finite (NaN or infinite
        elements, or float32 overflow), the rms of its finite elements is added (slot 4), computed in float64: the
        scale of the trusted side's elementwise bound, as ``compare.error_figures`` takes it."""
        values = fingerprint_values([self.pending(out)])[0]
        for leaf, v in zip(flatten_outputs(out), values):
            if v[0] == FLOAT and v[1] > 0 and not math.isfinite(v[2]):
                x = leaf.detach()
                x = (torch.view_as_real(x) if x.is_complex() else x).reshape(-1)
                finite = x[torch.isfinite(x)].to(torch.float64)
                v[4] = finite.norm().item() / math.sqrt(finite.numel()) if finite.numel() else 0.0
        return values


def fingerprint_values(pending: list) -> list:
    """The values of ``Fingerprint.pending`` results, one list of numbers per leaf, per call."""
    flat = [t for leaves in pending for t in leaves]
    if not flat:
        return [[] for _ in pending]
    values = iter(torch.stack([t.to(flat[0].device) for t in flat]).tolist())  # one device-host copy
    return [[next(values) for _ in leaves] for leaves in pending]


def fingerprint_table(pending: list) -> tuple[torch.Tensor, list]:
    """``pending`` results (per call, per leaf) as what the worker sends: one float64 tensor of leaf rows on the
    CPU (one device-host copy; sent as raw bytes, as a JSON list of thousands of calls' numbers is slow to write
    and read) and the number of leaves per call. ``Reported`` reads it back."""
    flat = [t for leaves in pending for t in leaves]
    rows = (torch.stack([t.to(flat[0].device) for t in flat]).cpu() if flat
            else torch.zeros(0, HEAD + SAMPLES, dtype=torch.float64))
    return rows, [len(leaves) for leaves in pending]


class Reported:
    """A worker's ``fingerprint_table`` as a sequence of calls, each read as ``fingerprint_values`` gives it, on
    demand (the trusted side checks a few calls of thousands). A malformed report reads as one call whose
    fingerprint matches nothing."""

    def __init__(self, rows, counts):
        ok = (isinstance(rows, torch.Tensor) and rows.dtype == torch.float64 and rows.dim() == 2
              and rows.shape[1] == HEAD + SAMPLES and isinstance(counts, list) and len(counts) > 0
              and all(type(c) is int and c >= 0 for c in counts) and sum(counts) == rows.shape[0])
        self._rows, self._counts = (rows, counts) if ok else (None, [1])
        self._starts = [0]
        for c in self._counts[:-1]:
            self._starts.append(self._starts[-1] + c)

    def __len__(self) -> int:
        return len(self._counts)

    def __getitem__(self, j: int) -> list:
        if self._rows is None:
            return [[]]
        j = range(len(self))[j]  # (negative indices, and an IndexError past the end)
        return self._rows[self._starts[j]:self._starts[j] + self._counts[j]].tolist()


def _norm_interval(norm: float, n: float, rel: float) -> tuple[float, float]:
    """Where the true norm lies, given one computed with relative error ``rel`` (and the absolute rounding of
    squares near underflow)."""
    slack = n * _TINY
    return (math.sqrt(max(norm * norm - slack, 0.0)) / (1 + rel),
            math.sqrt(norm * norm + slack) / max(1 - rel, 1e-300))


def fingerprint_mismatch(cand: list, ref: list, tolerance: dict) -> str | None:
    """Why a timed call's fingerprint ``cand`` proves its output wrong against the reference's fingerprint ``ref``
    for the same inputs (``tolerance``: the task's ``{"norm", "max"}`` for the configuration's dtype), or None."""
    if len(cand) != len(ref):
        return f"returned {len(cand)} output(s), expected {len(ref)}"
    for i, (c, r) in enumerate(zip(cand, ref)):
        where = f"output {i}" if len(ref) > 1 else "output"
        if len(c) != HEAD + SAMPLES or not all(type(v) in (int, float) for v in c):  # (the worker's report)
            return f"{where}: malformed fingerprint (expected {HEAD + SAMPLES} numbers)"
        why = _leaf_mismatch(c, r, tolerance)
        if why:
            return f"{where}: {why}"
    return None


def fingerprints_agree(cand: list, ref: list, tolerance: dict) -> bool:
    """Whether a timed call's fingerprint is consistent with the reference's (``fingerprint_mismatch`` is None)."""
    return fingerprint_mismatch(cand, ref, tolerance) is None


def _leaf_mismatch(c: list, r: list, tolerance: dict) -> str | None:
    kind, ckind = r[0], c[0]  # (compared with the kinds as numbers: a worker's report may hold anything)
    if kind in (PY_FLOAT, PY_INT):  # compare_outputs' rule for Python numbers; a one-element tensor may stand in
        if ckind == OTHER or c[1] != 1:
            return f"is not a number, expected {r[2]!r}"
        got, want = c[HEAD], r[2]
        if kind == PY_INT and got != want:
            return f"is {got!r}, expected {want!r}"
        if kind == PY_FLOAT and not (math.isnan(got) and math.isnan(want)) and not math.isclose(
                got, want, rel_tol=MARGIN * 1e-5, abs_tol=MARGIN * 1e-8):
            return f"is {got!r}, expected {want!r}"
        return None
    if kind == OTHER:
        return None if ckind == OTHER else "is a tensor or number where the reference's is neither"
    if ckind != kind or c[1] != r[1]:
        names = {FLOAT: "a floating-point tensor", EXACT: "an integer or boolean tensor"}
        return (f"is {names.get(ckind, 'not a tensor')} of {c[1]:.0f} elements, expected "
                f"{names[kind]} of {r[1]:.0f}")
    n = r[1]
    if kind == EXACT:
        if c[2:4] != r[2:4] or c[HEAD:] != r[HEAD:]:
            bad = next((j for j in range(SAMPLES) if c[HEAD + j] != r[HEAD + j]), None)
            return "integer elements differ" + (f" (a sampled element is {c[HEAD + bad]:.17g}, expected "
                                                f"{r[HEAD + bad]:.17g})" if bad is not None else " (hash)")
        return None
    if n == 0:
        return None
    finite = math.isfinite(r[2])
    cap = _norm_bound(int(n), torch.float32)  # a worker may report no looser a bound than float32's
    c_lo, c_hi = _norm_interval(c[2], n, c[3] if 0 <= c[3] <= cap else cap) if math.isfinite(c[2]) else (0, 0)
    r_lo, r_hi = _norm_interval(r[2], n, r[3]) if finite else (0.0, math.inf)
    if finite:
        allowed = MARGIN * tolerance["norm"]
        if not math.isfinite(c[2]) and r[2] < 1e18:  # (past that a float32 square may overflow honestly)
            return "non-finite values where the reference has none"
        if math.isfinite(c[2]) and (c_lo > r_hi * (1 + allowed) or c_hi < r_lo * (1 - allowed)):
            return (f"norm {c[2]:.9g}, expected {r[2]:.9g} (norm-wise tolerance "
                    f"{tolerance['norm']:.1g} x {MARGIN:g})")
        scale = r_hi / math.sqrt(n)
    else:
        scale = r[4]  # the finite elements' rms, from ``Fingerprint.of``
    bound = MARGIN * tolerance["max"] * scale * (1 + 1e-12)  # (the rounding of the difference itself)
    for j in range(SAMPLES):
        got, want = c[HEAD + j], r[HEAD + j]
        if not math.isfinite(want):
            if math.isfinite(got):
                return f"a sampled element is {got:.9g} where the reference's is {want}"
        elif not math.isfinite(got) or abs(got - want) > bound:
            return (f"a sampled element is {got:.9g}, expected {want:.9g} (elementwise tolerance "
                    f"{tolerance['max']:.1g} x {MARGIN:g} of the reference's rms {scale:.3g})")
    return None
