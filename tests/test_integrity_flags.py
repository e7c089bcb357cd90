"""The registry of integrity flags (kbench_env/protocol/integrity_flags.py): every kind has a meaning and a cost,
a flag renders to the "kind: detail" string results carry and parses back, an unknown kind is refused, the rewards
and the rules read their costs from it, the README's table is the registry's, and no library module makes or reads
a flag's text by hand."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from kbench_env.pipeline import reward as reward_mod
from kbench_env.pipeline import rules
from kbench_env.pipeline.result import EvalResult
from kbench_env.protocol import integrity_flags as registry
from kbench_env.protocol.integrity_flags import KINDS, Flag, UnknownFlagKind, kinds, make, parse

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = ROOT / "kbench_env" / "protocol" / "integrity_flags.py"
#: Where flags are made and read: the library, the apps, the agents and the training code.
LIBRARY = ("kbench_env", "kbench_apps", "agents", "training")


def test_every_kind_has_a_one_line_meaning_and_a_cost_below_every_other_outcome():
    assert len(KINDS) >= 12
    for name, kind in KINDS.items():
        assert kind.name == name and re.fullmatch(r"[a-z]+(_[a-z]+)*", name), name
        assert kind.meaning.strip() and "\n" not in kind.meaning and len(kind.meaning) < 200, name
        assert isinstance(kind.reward, float), name
        assert kind.reward < min(reward_mod.INVALID, reward_mod.NO_BUILD, reward_mod.WRONG), name
        assert set(kind.dropped_under) <= set(rules.RULES), name


@pytest.mark.parametrize("detail", ["on configuration 'n=7': forward wrote into x", "", "a: b: c", "two\nlines"])
def test_a_flag_renders_as_results_carry_it_and_parses_back(detail):
    for kind in KINDS:
        f = make(kind, detail)
        assert f == Flag(kind, detail) and str(f) == f"{kind}: {detail}"
        assert parse(str(f)) == f
    assert kinds([str(make("lazy_output", detail)), str(make("inputs_modified", "x"))]) == ["lazy_output",
                                                                                             "inputs_modified"]


def test_an_unknown_kind_is_refused_made_or_parsed():
    with pytest.raises(UnknownFlagKind, match="harness_patched"):
        make("harness_patched", "x")
    with pytest.raises(UnknownFlagKind):
        parse("exploit: x")
    with pytest.raises(UnknownFlagKind):
        parse("lazy_output : x")  # the kind is the text before ": ", exactly
    with pytest.raises(ValueError, match="not an integrity flag"):
        parse("lazy_output")
    assert issubclass(UnknownFlagKind, ValueError)


def _fast(flags: list[str]) -> EvalResult:
    return EvalResult(task="t", backend="cpu", device="cpu", stage="timed", compiled=True, correct=True,
                      speedup=50.0, integrity_flags=flags)


@pytest.mark.parametrize("preset", sorted(reward_mod.PRESETS))
def test_every_preset_pays_a_flagged_result_its_kinds_reward(preset, monkeypatch):
    fn = reward_mod.get_reward_fn(preset)
    for kind in KINDS:
        assert fn(_fast([str(make(kind, "x"))])) == KINDS[kind].reward == reward_mod.EXPLOIT
    assert fn(_fast([])) > 0
    # the cost is the registry's: a kind made cheaper there is paid so (the lowest of a result's kinds counts)
    monkeypatch.setitem(KINDS, "inputs_modified", registry.Kind("inputs_modified", "m", reward=-0.5))
    assert fn(_fast([str(make("inputs_modified", "x"))])) == -0.5
    assert fn(_fast([str(make("inputs_modified", "x")), str(make("lazy_output", "y"))])) == -1.0


def test_the_rules_drop_the_kinds_the_registry_says():
    assert registry.dropped_under("strict") == frozenset()
    assert registry.dropped_under("kernelbench") == {"pytorch_compute_in_forward", "pytorch_compute_linked"}
    report = {"forbidden_ops": {"aten::mm": 1}, "own_ops": ["mine"]}
    assert [f.kind for f in rules.audit_flags("strict", report, "c")] == ["pytorch_compute_in_forward"]
    assert rules.audit_flags("kernelbench", report, "c") == []


def test_the_readme_table_is_the_registrys():
    text = (ROOT / "README.md").read_text()
    table = re.search(r"<!-- integrity flags:[^\n]*-->\n(.*?)\n<!-- end of integrity flags -->", text, re.S)
    assert table, "README.md has lost its table of integrity flags"
    assert table.group(1) == registry.markdown_table(), "regenerate it: integrity_flags.markdown_table()"
    named = set(re.findall(r"flagged\s+`([a-z_]+)`", text))
    assert named and named <= set(KINDS), named - set(KINDS)


def test_the_registry_imports_nothing_of_kbench():
    tree = ast.parse(REGISTRY.read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not any(m.startswith("kbench") for m in imported), imported


_KIND_TEXT = re.compile(r"(?:%s):" % "|".join(map(re.escape, KINDS)))
_READ_BY_HAND = re.compile(r"\.(?:split|partition)\(\s*['\"]:\s?['\"](?:\s*,\s*1)?\s*\)\[0\]"
                           r"|\.startswith\(\s*['\"](?:%s)['\"]" % "|".join(map(re.escape, KINDS)))


def hand_made_flags(source: str) -> list[int]:
    """Lines of ``source`` that make a flag's text by hand (a string that starts with a registered kind and a
    colon, f-strings included) or read one by hand (split at its colon, or tested with startswith a kind)."""
    lines = {n.lineno for n in ast.walk(ast.parse(source))
             if isinstance(n, ast.Constant) and isinstance(n.value, str) and _KIND_TEXT.match(n.value)}
    lines |= {source.count("\n", 0, m.start()) + 1 for m in _READ_BY_HAND.finditer(source)}
    return sorted(lines)


def test_the_checker_finds_flags_made_and_read_by_hand():
    made = 'x = 1\nflags.append(f"lazy_output: forward returned {what}")\ny = "inputs_modified: " + z\n'
    read = 'k = [f.split(":", 1)[0] for f in flags]\nif f.startswith("sandbox_violation"):\n    pass\n'
    assert hand_made_flags(made) == [2, 3]
    assert hand_made_flags(read) == [1, 2]
    clean = 'f = make("lazy_output", f"forward returned {what}")\nhost, _, port = a.partition(":")\n'
    assert hand_made_flags(clean) == []


def test_no_library_module_makes_or_reads_a_flag_by_hand():
    found = []
    for package in LIBRARY:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path != REGISTRY:
                found += [f"{path.relative_to(ROOT)}:{line}" for line in hand_made_flags(path.read_text())]
    assert found == [], "use kbench_env.protocol.integrity_flags (make, parse, kinds): " + ", ".join(found)
