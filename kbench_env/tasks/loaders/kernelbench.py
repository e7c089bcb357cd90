"""Plain KernelBench files (no ``KBENCH`` block): what they need, and the input configurations derived for them.

This module owns three things for such a file:

- the Hugging Face hub check: KernelBench's level-4 files download a model configuration at import
  (``AutoConfig.from_pretrained``); kbench refuses them before they run, with one line saying so;
- deriving configurations from the file's own sizes (``derive``), for the CPU and for a GPU, each with a shown
  configuration and a held-out one whose input shapes differ from every shown one;
- the disk cache of derivations, keyed by the file's text (``derived_configs``), so that loading a folder of
  files takes no forward pass once each has been derived.

Candidate sizes are checked by running the reference on the meta device (shapecheck.py), which catches the shape
constraints a scaling can break, so no derivation computes a forward pass where the meta device can run it.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import tempfile
import warnings
from pathlib import Path

import torch

from kbench_env.machine.cache_dir import default_cache_dir
from kbench_env.tasks.shapecheck import Prober
from kbench_env.tasks.sizes import size_constants
from kbench_env.tasks.task import DTYPES, Config, TaskError, build_module, seeded

#: Inputs of a configuration derived for the CPU hold at most this many elements ...
CPU_ELEMENT_BUDGET = 1 << 18
#: ... its output at most this many times that (a convolution's output outgrows its input; a matmul with a short
#: K dimension makes a square output of two thin inputs) ...
CPU_OUTPUT_FACTOR = 4
#: ... and its model at most this many parameters (a 32768-wide MLP scaled by its inputs alone stays 4 GB) ...
CPU_PARAM_BUDGET = 1 << 22
#: ... except a model whose parameters do not shrink with the sizes (VGG's channel counts are written into the
#: class): it is taken for the CPU with up to this many.
CPU_PARAM_CAP = 1 << 28
#: Integer sizes at least this large are scaled (batch sizes, dimensions; not kernel sizes or strides) first.
SCALE_MIN = 16
#: Bump when the derivation changes: cached derivations of older versions are not used.
DERIVE_VERSION = 6

_HUB_CALLS = ("from_pretrained", "hf_hub_download", "snapshot_download")


def hub_need(tree: ast.Module) -> str | None:
    """Where a file would reach the Hugging Face hub (``AutoConfig.from_pretrained`` at line 15), or None."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name in _HUB_CALLS:
                return f"{ast.unparse(f)} at line {node.lineno}"
    return None


def check_runs(tree: ast.Module, source: str, filename: str) -> None:
    """Refuse a file that needs the hub (before it runs: it would reach the network), then run it once (its
    imports and definitions; no forward pass) so that a missing package or a broken file is reported at load."""
    where = hub_need(tree)
    if where:
        raise TaskError(f"{filename}: needs the Hugging Face hub ({where} downloads a model); kbench does not "
                        f"download models, so this file is not loaded")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            build_module(source, {}, filename)
    except TaskError:
        raise
    except ModuleNotFoundError as exc:
        raise TaskError(f"{filename}: imports {exc.name!r}, which is not installed (pip install {exc.name})") from None
    except Exception as exc:  # noqa: BLE001 - the file's own code may raise anything
        raise TaskError(f"{filename}: the file fails when run: {type(exc).__name__}: {exc}") from None


# ---------------------------------------------------------------------- deriving configurations

def _entries(consts: dict, lo: int) -> list[tuple[str, int | None]]:
    """``(name, index)`` of the integers at least ``lo`` among the sizes (index None for a plain integer)."""
    out = []
    for name, v in consts.items():
        if isinstance(v, (list, tuple)):
            out += [(name, i) for i, x in enumerate(v) if x >= lo]
        elif v >= lo:
            out.append((name, None))
    return out


def _get(sizes: dict, entry):
    name, i = entry
    return sizes[name] if i is None else sizes[name][i]


def _with(base: dict, changes: dict) -> dict:
    """``base`` (the file's sizes) with ``changes`` ({(name, index): value}); only the touched names are kept."""
    out: dict = {}
    for (name, i), value in changes.items():
        if i is None:
            out[name] = value
        else:
            seq = list(out.get(name, base[name]))
            seq[i] = value
            out[name] = seq
    return out


def _is_batch(entry) -> bool:
    """A batch size (``batch_size``, ``batch``): the size a model's shapes rarely constrain, tried first (each
    try that breaks a constraint costs a build and a run)."""
    return "batch" in entry[0].lower()


def odd_size(v: int) -> int:
    """A nearby size that is odd and not a power of two: 4 -> 3, 16 -> 15, 2 -> 3, 15 -> 17."""
    if v % 2 == 0:
        return v - 1 if v - 1 >= 3 else v + 1
    return v + 2


class _Deriver:
    def __init__(self, source: str, filename: str, budget: int, param_budget: int):
        self.p = Prober(source, filename)
        self.consts = size_constants(source)
        self.budget, self.param_budget = budget, param_budget
        self.out_budget = budget * CPU_OUTPUT_FACTOR

    def fits(self, sizes: dict, param_cap: int, slack: int = 1) -> bool:
        """Inputs within the CPU budget and parameters within ``param_cap`` (times ``slack``); nothing run."""
        i = self.p.inputs(sizes)
        if i is None or i[0] > self.budget * slack:
            return False
        n = self.p.params(sizes)
        return n is not None and n <= param_cap * slack

    def cpu_ok(self, sizes: dict, param_cap: int, slack: int = 1) -> bool:
        """``fits``, and the reference runs with an output within the CPU budget (times ``slack``)."""
        if not self.fits(sizes, param_cap, slack):
            return False
        out = self.p.runs(sizes, may_run_on_cpu=True)
        return out is not None and out <= self.out_budget * slack

    def small(self):
        """Sizes for the shown CPU configuration: the large sizes scaled by a common power of two until the
        inputs, parameters and output fit. A model whose parameters do not shrink with the sizes (channel counts
        written into the class) is taken at up to ``CPU_PARAM_CAP`` parameters. If no common scaling runs,
        sizes are halved one at a time instead (``_greedy``)."""
        big = _entries(self.consts, SCALE_MIN)
        relaxed, failed, last_params = None, 0, None
        for k in range(1, 40) if big else ():
            changes = {e: max(4, _get(self.consts, e) >> k) for e in big}
            sizes = _with(self.consts, changes)
            i = self.p.inputs(sizes)
            n = self.p.params(sizes) if i is not None and i[0] <= self.budget else None
            if n is not None and (n <= self.param_budget or (relaxed is None and n <= CPU_PARAM_CAP)):
                out = self.p.runs(sizes, may_run_on_cpu=True)
                failed += out is None
                if out is not None and out <= self.out_budget:
                    if n <= self.param_budget:
                        return sizes
                    relaxed = sizes
            if n is not None:
                if relaxed is not None and last_params is not None and n > last_params * 3 // 4:
                    break  # the parameters do not shrink with the sizes: the relaxed one is as good as it gets
                last_params = n
            if failed >= 3 or all(v == 4 for v in changes.values()):
                break
        return relaxed or self._greedy()

    def _greedy(self):
        """Sizes halved one at a time, the batch size first, then the largest, while that shrinks what is over the CPU budgets and
        the reference still runs (parameters up to ``CPU_PARAM_CAP``); None if that gets stuck."""
        entries = _entries(self.consts, 2)
        changes = {e: _get(self.consts, e) for e in entries}
        for _ in range(4 * len(entries) * 20):
            sizes = _with(self.consts, changes)
            i = self.p.inputs(sizes)
            if i is None:
                return None
            cost = None
            if i[0] <= self.budget:
                cost = self._cost(sizes)
                if cost is None:
                    return None
                if not any(cost):
                    return sizes
            for e in sorted(entries, key=lambda e: (not _is_batch(e), -changes[e])):
                if changes[e] < 2:
                    continue
                trial = {**changes, e: changes[e] // 2}
                t_sizes = _with(self.consts, trial)
                ti = self.p.inputs(t_sizes)
                if ti is None:
                    continue
                if cost is None:  # the inputs are over budget: shrink them, and keep the reference running
                    ok = ti[0] < i[0] and self.p.runs(t_sizes, self.fits(t_sizes, CPU_PARAM_CAP, 4)) is not None
                else:
                    c = self._cost(t_sizes) if ti[0] <= self.budget else None
                    ok = c is not None and all(x <= y for x, y in zip(c, cost)) and c != cost
                if ok:
                    changes = trial
                    break
            else:
                return None
        return None

    def _cost(self, sizes: dict):
        """(parameters over the cap, output over budget) with inputs within budget; None if it does not run."""
        n = self.p.params(sizes)
        out = self.p.runs(sizes, may_run_on_cpu=True) if n is not None else None
        if out is None:
            return None
        return max(0, n - CPU_PARAM_CAP), max(0, out - self.out_budget)

    def held_out(self, base: dict, shown: list, for_cpu: bool):
        """Sizes near ``base`` (a configuration's overrides) whose input shapes differ from every ``shown``
        signature (else, failing that, whose init inputs do): all the sizes made odd, else one at a time, else
        a common scaling by 3/4, 3/2 or 2. The sizes tried are the large ones and those ``base`` changed."""
        full = {**self.consts, **base}
        changed = [e for e in _entries(self.consts, 1) if _get(full, e) != _get(self.consts, e)]
        entries = _entries(self.consts, SCALE_MIN)
        entries += [e for e in changed if e not in entries]
        entries = entries or _entries(self.consts, 2)
        rest = [e for e in _entries(self.consts, 2) if e not in entries]
        cands = [{e: odd_size(_get(full, e)) for e in entries}]
        cands += [{e: odd_size(_get(full, e))} for e in sorted(entries + rest, key=lambda e: not _is_batch(e))]
        for num, den in ((3, 4), (3, 2), (2, 1)):
            cands.append({e: max(2, _get(full, e) * num // den) for e in entries})
        for part in (0, None):  # the input shapes, else the whole signature
            seen = {sig[part] if part is not None else sig for sig in shown}
            for changes in cands:
                sizes = {**base, **_with(full, changes)}
                i = self.p.inputs(sizes)
                if i is None or (i[1][part] if part is not None else i[1]) in seen:
                    continue
                if for_cpu:
                    if self.cpu_ok(sizes, CPU_PARAM_CAP, slack=4):
                        return sizes
                elif self.p.runs(sizes, may_run_on_cpu=self.fits(sizes, CPU_PARAM_CAP, slack=4)) is not None:
                    return sizes
        return None

    def trim(self, sizes: dict) -> dict:
        """Only the overrides that change the file's sizes."""
        return {k: v for k, v in sizes.items() if list(_as_list(v)) != list(_as_list(self.consts.get(k)))}


def _as_list(v):
    return v if isinstance(v, (list, tuple)) else [v]


def derive(source: str, filename: str, budget: int = CPU_ELEMENT_BUDGET,
           param_budget: int = CPU_PARAM_BUDGET) -> list[dict]:
    """Configurations (as ``Config.to_dict`` dicts) for a plain KernelBench file.

    - ``original`` (shown): the file's own sizes, the ones its code (which the prompt shows) spells; for both
      devices when they fit the CPU, else for the GPU only.
    - ``original-odd`` (held out, the devices of ``original``): odd, non-power-of-two sizes near the file's whose
      input shapes differ from the shown ones, so that a kernel specialised to the shown shapes fails.
    - When the file's sizes are too large for the CPU: ``small`` (shown, CPU only), the sizes scaled down until
      the inputs hold at most ``budget`` elements and the model at most ``param_budget`` parameters, checked to
      run, and ``small-odd`` (held out, CPU only), odd sizes near those, as ``original-odd`` is near the file's
      (``small-odd`` is the GPU's held-out one too where no odd sizes near the file's run).

    Each device is thus shown one configuration and holds out one of other input shapes. A file whose sizes
    cannot be scaled for the CPU gets configurations for the GPU only; the evaluator then reports that it has
    none for the CPU.
    """
    d = _Deriver(source, filename, budget, param_budget)
    s0 = d.p.inputs({})
    if s0 is None or d.p.params({}) is None:
        _raise_build_error(source, filename)
    both, gpu = ["cpu", "cuda"], ["cuda"]
    if d.cpu_ok({}, param_budget):
        configs = [{"name": "original", "sizes": {}, "held_out": False, "devices": both}]
        odd = d.held_out({}, [s0[1]], for_cpu=True)
        if odd is not None:
            configs.append({"name": "original-odd", "sizes": d.trim(odd), "held_out": True, "devices": both})
        return configs
    configs = [{"name": "original", "sizes": {}, "held_out": False, "devices": gpu}]
    gpu_odd = d.held_out({}, [s0[1]], for_cpu=False)
    if gpu_odd is not None:
        configs.append({"name": "original-odd", "sizes": d.trim(gpu_odd), "held_out": True, "devices": gpu})
    small = d.small()
    if small is None:
        return configs
    configs.append({"name": "small", "sizes": d.trim(small), "held_out": False, "devices": ["cpu"]})
    odd = d.held_out(small, [d.p.inputs(small)[1]], for_cpu=True)
    if odd is not None:  # also the GPU's held-out one where no odd sizes near the file's run (Swin's windows)
        configs.append({"name": "small-odd", "sizes": d.trim(odd), "held_out": True,
                        "devices": ["cpu"] if gpu_odd is not None else both})
    return configs


def _raise_build_error(source: str, filename: str):
    """The file's own sizes fail: raise what the file raises, as a TaskError."""
    try:
        m = build_module(source, {}, filename)
        with seeded(0):
            m.get_init_inputs()
            m.get_inputs()
            m.Model(*m.get_init_inputs())
    except Exception as exc:  # noqa: BLE001
        raise TaskError(f"{filename}: the reference cannot be built at the file's own sizes: "
                        f"{type(exc).__name__}: {exc}") from None
    raise TaskError(f"{filename}: the reference cannot be built at the file's own sizes")


# ---------------------------------------------------------------------- the disk cache

def cache_dir() -> Path:
    """Where derivations are kept: ``$KBENCH_CACHE/derived`` (default ~/.cache/kbench/derived), beside the
    evaluator's build cache."""
    return default_cache_dir() / "derived"


def _cache_key(source: str, budget: int, param_budget: int) -> str:
    h = hashlib.sha256()
    for part in (source, str(DERIVE_VERSION), str(budget), str(param_budget), torch.__version__):
        h.update(part.encode("utf-8", "replace") + b"\0")
    return h.hexdigest()[:32]


def derived_configs(source: str, filename: str, dtype: str = "float32", budget: int = CPU_ELEMENT_BUDGET,
                    param_budget: int = CPU_PARAM_BUDGET) -> list[Config]:
    """``derive``'s configurations in ``dtype``, from the disk cache when this text was derived before (a
    derivation error is cached too, and raised again as a TaskError)."""
    if dtype not in DTYPES:
        raise TaskError(f"dtype {dtype!r} is not one of {sorted(DTYPES)}")
    path = cache_dir() / f"{_cache_key(source, budget, param_budget)}.json"
    entry = None
    try:
        entry = json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    if not isinstance(entry, dict) or not ({"configs", "error"} & set(entry)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the reference's own warnings, raised at every scaled size
            try:
                entry = {"configs": derive(source, filename, budget, param_budget)}
            except TaskError as exc:  # kept without the path: the same text may be read from another file
                entry = {"error": str(exc).replace(filename, "{file}")}
        _write(path, entry)
    if "error" in entry:
        raise TaskError(str(entry["error"]).replace("{file}", filename))
    suffix = "" if dtype == "float32" else f"-{dtype}"  # the evaluator keys reference timings by name
    return [Config.from_dict({**c, "name": c["name"] + suffix, "dtype": dtype}) for c in entry["configs"]]


def _write(path: Path, entry: dict) -> None:
    """Atomically, and silently not at all where the cache cannot be written (the derivation is only slower)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(entry, f)
        os.replace(tmp, path)
    except OSError:
        pass
