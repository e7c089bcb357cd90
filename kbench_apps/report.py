"""``kbench report``: the Markdown report (``report.md``), ``summary.json`` and the console tables from the JSONL
results of ``kbench run``. The metrics and what they mean are ``kbench_apps.results``'s; the PNG plots are
``kbench_apps.plots``'s. This module lays them out; it never evaluates anything.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from kbench_apps.cli_output import console as make_console
from kbench_apps.results import P_VALUES, p_key, load_records, summarize


def _f(v, fmt=".2f", suffix="") -> str:
    return "-" if v is None else format(v, fmt) + suffix


def metric_columns(p_values=P_VALUES) -> list[tuple[str, callable]]:
    cols = [("tasks", lambda m: str(m["tasks"]) + (f" ({m['unfinished']} unfinished)" if m["unfinished"] else "")),
            ("attempts", lambda m: str(m["attempts"]) + (f" (+{m['filtered']} filtered)" if m["filtered"] else "")),
            ("correct", lambda m: _f(m["correct_rate"]))]
    cols += [(f"fast_{p_key(p)}", (lambda k: lambda m: _f(m["fast_p"][k]))(p_key(p))) for p in p_values]
    cols += [("geomean speedup", lambda m: _f(m["geomean_speedup"], ".3f", "x")),
             ("max", lambda m: _f(m["max_speedup"], ".2f", "x")),
             ("kernel coverage", lambda m: _f(m.get("mean_coverage"), ".0%"))]
    return cols


def _usage_text(u: dict | None) -> str:
    if not u:
        return "-"
    return (f"{int(u.get('calls', 0))} calls, {int(u.get('prompt_tokens', 0)):,} in / "
            f"{int(u.get('completion_tokens', 0)):,} out tokens, ${u.get('cost_usd', 0):.4f}")


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def markdown(summary: dict, sources: list[str], plots: dict | None, out_dir: Path) -> str:
    cols = metric_columns(summary["p_values"])
    parts = ["# kbench report", "", "Results: " + ", ".join(f"`{s}`" for s in sources), "",
             "fast_p: fraction of all tasks an agent ran that are correct with speedup > p over the baseline "
             "(KernelBench's definition; fast_0 = correctness rate). Geometric mean over correct tasks. A task's "
             "result is its best valid attempt.", "", "## Summary", ""]
    agents = list(summary["agents"])
    parts.append(_md_table(["agent"] + [c for c, _ in cols],
                           [[a] + [fn(summary["agents"][a]) for _, fn in cols] for a in agents]))
    if any(summary["agents"][a]["llm_usage"] for a in agents):
        parts += ["", _md_table(["agent", "LLM usage"], [[a, _usage_text(summary["agents"][a]["llm_usage"])]
                                                         for a in agents])]
    parts += ["", "## Per level", ""]
    for lv, per in summary["levels"].items():
        parts += [f"### level {lv}", "", _md_table(["agent"] + [c for c, _ in cols],
                                                   [[a] + [fn(m) for _, fn in cols] for a, m in per.items()]), ""]
    parts += ["## Per task (best speedup, with its kernel coverage where recorded; `fail`: no correct attempt)", ""]
    rows = []
    for t, per in summary["tasks"].items():
        row = [t]
        for a in agents:
            x = per.get(a)
            row.append("not run" if x is None else (_f(x["best_speedup"], ".3f", "x") if x["correct"] else "fail")
                       + ("" if x is None or x.get("coverage") is None else f" (cov {x['coverage']:.0%})")
                       + ("" if x is None or x["finished"] else " (unfinished)"))
        rows.append(row)
    parts += [_md_table(["task"] + agents, rows), ""]
    if summary["verifier"]:
        parts += ["## Soft verifiers", "", "Predictions against real outcomes of evaluated candidates (filtered "
                  "candidates that were not audited have no outcome). `any`: the filter as a whole (a failure "
                  "predicted vs. the candidate not correct). `unparsed`: replies no verdict could be read from; they "
                  "predicted nothing and are not scored.", ""]
        vrows = []
        for a, acc in summary["verifier"].items():
            for check, m in acc.items():
                vrows.append([a, check, str(m["n"]), str(m.get("unparsed", 0)),
                              f"{m['tp']}/{m['fp']}/{m['fn']}/{m['tn']}", _f(m["precision"]), _f(m["recall"]),
                              _f(m["accuracy"])])
        parts += [_md_table(["agent", "check", "scored", "unparsed", "tp/fp/fn/tn", "precision", "recall",
                             "accuracy"], vrows), ""]
    if plots:
        parts += ["## Plots", ""]
        titles = {"fast_p": "fast_p curves", "speedup_distribution": "Speedup distribution",
                  "best_over_evaluations": "Best speedup over evaluations"}
        for name, path in plots.items():
            rel = Path(path).resolve().relative_to(out_dir.resolve()) if Path(path).resolve().is_relative_to(
                out_dir.resolve()) else Path(path)
            parts += [f"### {titles.get(name, name)}", "", f"![{name}]({rel.as_posix()})", ""]
    return "\n".join(parts).rstrip() + "\n"


def print_summary(summary: dict, console=None) -> None:
    console = console or make_console()
    cols = metric_columns(summary["p_values"])

    def table(title, per):  # metrics as rows, agents side by side as columns
        t = Table(title=title)
        t.add_column("metric")
        for a in per:
            t.add_column(escape(a), justify="right", overflow="fold")
        for c, fn in cols:
            t.add_row(c, *[fn(m) for m in per.values()])
        console.print(t)

    table("kbench report: all tasks", summary["agents"])
    if len(summary["levels"]) > 1:
        for lv, per in summary["levels"].items():
            table(f"level {lv}", per)
    for a, acc in summary["verifier"].items():
        t = Table(title=f"soft verifiers: {escape(a)}")
        for c in ("check", "scored", "unparsed", "precision", "recall", "accuracy"):
            t.add_column(c, justify="right")
        for check, m in acc.items():
            t.add_row(check, str(m["n"]), str(m.get("unparsed", 0)), _f(m["precision"]), _f(m["recall"]),
                      _f(m["accuracy"]))
        console.print(t)


def write_report(paths, out_dir, plots: bool = True, p_values=P_VALUES) -> tuple[dict, Path]:
    """Summary, plots and ``report.md`` in ``out_dir``; returns ``(summary, report path)``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sources = [str(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths)]
    records = load_records(sources)
    if not records:
        raise ValueError(f"no run records in {', '.join(sources)}")
    summary = summarize(records, p_values)
    figs = None
    if plots:
        from kbench_apps.plots import make_plots  # matplotlib: the [plot] extra, needed only here

        figs = make_plots(records, out_dir, p_values)
    if figs:
        summary["plots"] = {k: str(v) for k, v in figs.items()}
    report = out_dir / "report.md"
    report.write_text(markdown(summary, sources, figs, out_dir), encoding="utf-8")
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1, default=str), encoding="utf-8")
    return summary, report


def main(args) -> int:
    for p in args.results:
        if not Path(p).is_file():
            raise FileNotFoundError(f"no results file {p}")
    summary, report = write_report(args.results, args.out_dir, plots=not args.no_plots)
    if args.json:
        print(json.dumps(summary, default=str))
        return 0
    print_summary(summary)
    plots = "" if args.no_plots else f" (plots: {', '.join(Path(p).name for p in summary['plots'].values())})"
    print(f"report: {report}{plots}")
    return 0
