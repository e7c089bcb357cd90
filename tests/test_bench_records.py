"""bench/ holds suites and their latest records, indexed by bench/RESULTS.md; raw logs and superseded records live
in git history only (bench/RESULTS.md, "History")."""

from __future__ import annotations

import re

from conftest import ROOT

BENCH = ROOT / "bench"
RESULTS = BENCH / "RESULTS.md"
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_every_link_of_the_results_index_resolves():
    text = RESULTS.read_text()
    targets = LINK.findall(text)
    assert len(targets) > 20, "bench/RESULTS.md links almost nothing"
    missing = sorted({t for t in targets if "://" not in t and not (BENCH / t).exists()})
    assert not missing, f"bench/RESULTS.md links files that do not exist: {missing}"


def test_every_record_is_in_the_results_index():
    """A record under bench/results/ is named in bench/RESULTS.md, or sits beside one that is (x.jsonl beside x.md):
    a new record gets a row there (figure, machine, date, commit, command)."""
    text = RESULTS.read_text()
    named = set(re.findall(r"results/([\w.-]+)", text)) | set(re.findall(r"`([\w.-]+\.(?:md|jsonl))`", text))
    stems = {n.rsplit(".", 1)[0] for n in named}
    records = sorted(p for p in (BENCH / "results").rglob("*") if p.is_file())
    assert records, "no records under bench/results"
    unindexed = [str(p.relative_to(BENCH)) for p in records if p.name not in named and p.stem not in stems]
    assert not unindexed, f"records bench/RESULTS.md does not name (add a row for each): {unindexed}"


def test_raw_logs_stay_out_of_the_tree():
    """Raw device output goes to git history, not bench/results/ (a record keeps what it shows)."""
    assert not (BENCH / "results" / "device_logs").exists()
    dated = [p.name for p in (BENCH / "results").rglob("*") if re.match(r"20\d\d-\d\d-\d\d", p.name)]
    assert not dated, f"dated raw logs under bench/results: {dated}"
