"""Plain KernelBench files (no KBENCH block), on our own fixtures in KernelBench's format: size expressions, a
shape constraint that breaks naive scaling, a level-4-style file that needs the Hugging Face hub, an einops
import, tiny sizes. Derived configurations (shown and distinct held-out ones for the CPU and a GPU), lazy
derivation with its disk cache, the dtype option, and a task with no configuration for the device."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import warnings

import pytest
import torch

from conftest import ROOT
from kbench_env.config import EvaluatorConfig
from kbench_env.tasks.loaders import kernelbench
from kbench_env.tasks import shapecheck
from kbench_env.tasks import task as task_mod
from kbench_env.measure.compare import DEFAULT_TOLERANCES, tolerance_for
from kbench_env.env.env import KBenchEnv
from kbench_env.tasks.sizes import size_constants
from kbench_env.tasks.suite import SkippedTaskWarning, load_suite
from kbench_env.tasks.loading import load_task
from kbench_env.tasks.task import DTYPES, TaskError, build_module

DATA = ROOT / "tests/data/kernelbench_format"
DERIVED = ["size_expressions", "group_constraint", "einops_heads", "tiny_sizes"]
RELU_SOLUTION = ROOT / "tasks/solutions/cpu/level1/relu.py"


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    """Each test derives anew, into its own cache."""
    monkeypatch.setenv("KBENCH_CACHE", str(tmp_path / "cache"))


def _load(name: str, **kw):
    return load_task(DATA / f"{name}.py", **kw)


# ---------------------------------------------------------------------- sizes


def test_size_expressions_are_evaluated():
    consts = size_constants((DATA / "size_expressions.py").read_text())
    # N = M + 512 follows M (not overridden); scale is a float, not a size
    assert consts == {"M": 2048, "K": 2048, "input_shape": (2048,)}


def test_hostile_size_expressions_are_not_evaluated():
    src = "A = 10 ** 10 ** 10\nB = [0] * 10 ** 9\nC = 2 ** 20\nD = C // 0\nE = 'x' * 3\nF = True\n"
    assert size_constants(src) == {"C": 1 << 20}


def test_overrides_reach_unpacked_and_tuple_sizes():
    src = ("import torch\nD, H, W = (16, 32, 32)\nshape = (64,)\nclass Model(torch.nn.Module): pass\n"
           "def get_inputs(): return []\ndef get_init_inputs(): return []\n")
    mod = build_module(src, {"H": 5, "shape": [7]}, "<t>")
    assert (mod.D, mod.H, mod.W) == (16, 5, 32)
    assert mod.shape == (7,)  # a list from JSON stays the tuple the file wrote


# ---------------------------------------------------------------------- derived configurations


def _shapes(task, cfg):
    return tuple(task.input_shapes(cfg))


@pytest.mark.parametrize("name", DERIVED)
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_shown_and_distinct_held_out_per_device(name, device):
    t = _load(name)
    shown = t.shown_configs(device)
    held = [c for c in t.configs_for(device) if c.held_out]
    assert shown and held, f"{name} on {device}: {[c.to_dict() for c in t.configs]}"
    shown_shapes = {_shapes(t, c) for c in shown}
    assert any(_shapes(t, c) not in shown_shapes for c in held), f"{name}: held-out shapes repeat a shown one"


@pytest.mark.parametrize("name", DERIVED)
def test_cpu_configurations_run(name):
    t = _load(name)
    for cfg in t.configs_for("cpu"):
        inputs, out = t.reference(cfg, seed=0, init_seed=0)
        assert isinstance(out, torch.Tensor) and out.numel() > 0
        assert sum(x.numel() for x in inputs) <= kernelbench.CPU_ELEMENT_BUDGET * 4


def test_expressions_are_scaled_and_dependents_follow():
    t = _load("size_expressions")
    small = t.config("small")
    assert small.sizes["M"] < 2048 and small.sizes["K"] < 2048
    mod = t.module(small)
    assert mod.N == mod.M + 512  # N = M + 512 follows the override


def test_shape_constraint_is_respected():
    t = _load("group_constraint")
    cpu = t.configs_for("cpu")
    assert any(not c.held_out for c in cpu) and any(c.held_out for c in cpu)
    for cfg in cpu:
        mod = t.module(cfg)
        assert mod.channels % mod.num_groups == 0, cfg


def test_tiny_sizes_keep_the_original_and_hold_out_other_shapes():
    t = _load("tiny_sizes")
    original = t.config("original")
    assert not original.held_out and original.devices == ("cpu", "cuda")
    held = [c for c in t.configs if c.held_out]
    assert held and _shapes(t, held[0]) != _shapes(t, original)


def test_einops_file_loads_and_runs():
    t = _load("einops_heads")
    _, out = t.reference(t.shown_configs("cpu")[0], seed=0, init_seed=0)
    assert out.shape[-1] == t.module(t.shown_configs("cpu")[0]).n_heads * t.module(t.shown_configs("cpu")[0]).head_dim


# ---------------------------------------------------------------------- the Hugging Face hub


def test_hub_file_is_refused_without_running(monkeypatch):
    def must_not_run(*a, **k):
        raise AssertionError("the hub file was run")

    monkeypatch.setattr(task_mod, "build_module", must_not_run)
    monkeypatch.setattr(kernelbench, "build_module", must_not_run)
    monkeypatch.setattr(socket.socket, "connect", must_not_run)
    with pytest.raises(TaskError) as exc:
        _load("hub_model")
    msg = str(exc.value)
    assert "needs the Hugging Face hub" in msg and "from_pretrained" in msg and "\n" not in msg


def test_suite_skips_unloadable_files_and_loads_the_rest(tmp_path):
    folder = tmp_path / "level4"
    folder.mkdir()
    for name in ("hub_model", "tiny_sizes"):
        shutil.copy(DATA / f"{name}.py", folder / f"{name}.py")
    (folder / "broken.py").write_text("def (\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tasks = load_suite(str(folder))
    assert [t.name for t in tasks] == ["level4/tiny_sizes"]
    notes = [str(w.message) for w in caught if issubclass(w.category, SkippedTaskWarning)]
    assert len(notes) == 2
    assert any("hub_model.py" in n and "needs the Hugging Face hub" in n for n in notes), notes
    assert any("broken.py" in n and "not valid Python" in n for n in notes), notes


# ---------------------------------------------------------------------- lazy, cached derivation


def test_loading_derives_nothing_until_asked_and_caches_on_disk(monkeypatch, tmp_path):
    calls = []
    real = kernelbench.derive

    def counting(*a, **k):
        calls.append(a[1])
        return real(*a, **k)

    monkeypatch.setattr(kernelbench, "derive", counting)
    t = _load("group_constraint")
    assert calls == []  # load_task runs no forward pass
    first = [c.to_dict() for c in t.configs]
    assert len(calls) == 1
    assert list((tmp_path / "cache" / "derived").glob("*.json"))
    again = _load("group_constraint")
    assert [c.to_dict() for c in again.configs] == first and len(calls) == 1  # from the disk cache


def test_a_derivation_error_is_one_task_s_row(tmp_path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    shutil.copy(DATA / "tiny_sizes.py", folder / "tiny_sizes.py")
    (folder / "bad_inputs.py").write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x): return x\n"
        "def get_inputs(): raise ValueError('no inputs today')\ndef get_init_inputs(): return []\n")
    env = dict(os.environ, KBENCH_CACHE=str(tmp_path / "cache"))
    p = subprocess.run([sys.executable, "-m", "kbench_apps.cli", "tasks", "--suite", str(folder), "--json"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    rows = {r["name"]: r for r in map(json.loads, p.stdout.splitlines())}  # JSON Lines
    assert "no inputs today" in rows["mixed/bad_inputs"]["error"]
    assert rows["mixed/tiny_sizes"]["configs"]


# ---------------------------------------------------------------------- no configuration for the device


def test_no_configuration_for_the_device_is_the_task_s_error_at_reset():
    env = KBenchEnv(task=str(DATA / "cuda_only.py"), device="cpu", config=EvaluatorConfig.from_options(spare_worker=False))
    try:
        with pytest.raises(TaskError, match="no input configuration for cpu"):
            env.reset(seed=0)
    finally:
        env.close()


def test_no_configuration_for_the_device_is_not_charged_to_the_candidate(evaluator):
    with pytest.raises(TaskError, match="no input configuration for cpu"):
        evaluator.evaluate(_load("cuda_only"), RELU_SOLUTION.read_text())


def test_no_configuration_for_the_device_exits_2():
    p = subprocess.run([sys.executable, "-m", "kbench_apps.cli", "eval", "--task", str(DATA / "cuda_only.py"),
                        "--solution", str(RELU_SOLUTION), "--device", "cpu"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "no input configuration for cpu" in lines[0] and "cuda" in lines[0]


# ---------------------------------------------------------------------- dtype


def test_dtype_option_applies_to_derived_configurations():
    t = _load("tiny_sizes", dtype="bfloat16")
    assert {c.dtype for c in t.configs} == {"bfloat16"}
    assert all(c.name.endswith("-bfloat16") for c in t.configs)  # reference timings are keyed by name
    cfg = t.shown_configs("cpu")[0]
    inputs, out = t.reference(cfg, seed=0, init_seed=0)
    assert inputs[0].dtype == torch.bfloat16
    assert tolerance_for(DTYPES[cfg.dtype]) == DEFAULT_TOLERANCES["bfloat16"]


def test_dtype_option_leaves_kbench_blocks_and_rejects_unknown_dtypes():
    assert {c.dtype for c in _load("cuda_only", dtype="float16").configs} == {"float32"}
    with pytest.raises(TaskError, match="float8"):
        _load("tiny_sizes", dtype="float8")


def test_dtype_option_of_suites_and_cli(tmp_path):
    folder = tmp_path / "f16"
    folder.mkdir()
    shutil.copy(DATA / "tiny_sizes.py", folder / "tiny_sizes.py")
    assert {c.dtype for t in load_suite(str(folder), dtype="float16") for c in t.configs} == {"float16"}
    env = dict(os.environ, KBENCH_CACHE=str(tmp_path / "cache"))
    p = subprocess.run([sys.executable, "-m", "kbench_apps.cli", "tasks", "--suite", str(folder), "--dtype",
                        "float16", "--json"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert {c["dtype"] for c in json.loads(p.stdout.splitlines()[0])["configs"]} == {"float16"}


# ---------------------------------------------------------------------- shape-only stand-ins


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("batch_first,bidirectional,batched,with_hx",
                         [(False, False, True, False), (True, True, True, True), (False, True, False, True)])
def test_recurrent_stand_in_matches_the_real_layer(kind, batch_first, bidirectional, batched, with_hx):
    torch.manual_seed(0)
    layer = getattr(torch.nn, kind)(5, 7, num_layers=2, batch_first=batch_first, bidirectional=bidirectional)
    d = 2 if bidirectional else 1
    x = torch.rand((3, 4, 5) if batched else (4, 5))
    hx = None
    if with_hx:
        h = torch.rand((2 * d, 3, 7) if batched else (2 * d, 7))
        hx = (h, h.clone()) if kind == "LSTM" else h
    real = layer(x, hx) if hx is not None else layer(x)
    stand_in = shapecheck._rnn_shapes(layer, x, hx)
    flat = lambda o: [t.shape for t in (o[0], *(o[1] if isinstance(o[1], tuple) else (o[1],)))]  # noqa: E731
    assert flat(stand_in) == flat(real)
    with pytest.raises(RuntimeError):  # the layer's own checks: a wrong input size
        shapecheck._rnn_shapes(layer, torch.rand(3, 4, 6))


# ---------------------------------------------------------------------- bench/compat.py


def test_compat_reports_loads_held_out_configurations_and_skips(tmp_path):
    levels = tmp_path / "KernelBench" / "KernelBench"
    for level, names in (("level1", ["tiny_sizes", "size_expressions"]), ("level4", ["hub_model"])):
        (levels / level).mkdir(parents=True)
        for n in names:
            shutil.copy(DATA / f"{n}.py", levels / level / f"{n}.py")
    out = tmp_path / "compat"
    p = subprocess.run([sys.executable, str(ROOT / "bench/compat.py"), "--kernelbench", str(tmp_path / "KernelBench"),
                        "--no-eval", "--out", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=600,
                       env=dict(os.environ, KBENCH_CACHE=str(tmp_path / "cache")))
    assert p.returncode == 0, p.stderr[-2000:]
    rows = {r["row"]: r for r in map(json.loads, out.with_suffix(".jsonl").read_text().splitlines())}
    l1, l4 = rows["KernelBench/level1"], rows["KernelBench/level4"]
    assert (l1["items"], l1["loaded"], l1["cpu_distinct"], l1["cuda_distinct"]) == (2, 2, 2, 2)
    assert l1["kbench_tasks_rc"] == [0, 0]
    assert l4["loaded"] == 0 and "needs the Hugging Face hub" in l4["skipped"][0]["why"]
    assert "needs the Hugging Face hub" in out.with_suffix(".md").read_text()
