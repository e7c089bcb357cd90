"""What the report's figures and soft-verifier table say: speedup axes labelled where the good results are (above
1x), each task's line named, and unparsed verifier replies counted as unparsed rather than as a prediction."""

from __future__ import annotations

import pytest

from kbench_apps.results import P_VALUES, outcomes, summarize
from kbench_apps.verifier_metrics import verifier_accuracy
from test_report import attempt, done, pred

plots = pytest.importorskip("kbench_apps.plots")  # matplotlib: the [plot] extra


def modest_run():
    """Bests between 1.05x and 1.4x: the range where a decade-only log axis has no label above 1x."""
    records = []
    for i, (task, speedups) in enumerate((("level1/a", [0.8, 1.2]), ("level1/b", [1.05]), ("level1/c", [0.9, 1.4]))):
        records += [attempt("A", task, s, level=1, t=10 * i + k) for k, s in enumerate(speedups)]
        records.append(done("A", task, 1, max(speedups), t=10 * i + 9))
    return records


def _draw(draw, records):
    outs = outcomes(records)
    agents = list(summarize(records, P_VALUES)["agents"])
    mine = {a: [o for (ag, _), o in outs.items() if ag == a] for a in agents}
    fig = draw(mine, {a: "C0" for a in agents}, P_VALUES)
    fig.canvas.draw()
    return fig


def _labels_above_one(axis) -> list[float]:
    lo, hi = sorted(axis.get_view_interval())
    return [t for t, label in zip(axis.get_majorticklocs(), axis.get_ticklabels()) if label.get_text()
            and 1 < t <= hi and t >= lo]


@pytest.mark.parametrize("name", ["speedup_distribution", "best_over_evaluations"])
def test_speedup_axes_are_labelled_above_one(name):
    fig = _draw(getattr(plots, f"_{name}"), modest_run())
    ax = fig.axes[0]
    axis = ax.xaxis if name == "speedup_distribution" else ax.yaxis
    above = _labels_above_one(axis)
    assert len(above) >= 2, [t.get_text() for t in axis.get_ticklabels()]
    texts = [t.get_text() for t in axis.get_ticklabels()]
    assert "1x" in texts


def test_speedup_ticks_are_round_and_bounded():
    assert plots.speedup_ticks(0.5, 3.0)[:1] == [0.5] and 1.0 in plots.speedup_ticks(0.5, 3.0)
    assert [t for t in plots.speedup_ticks(0.9, 1.4) if t > 1] == [1.1, 1.2, 1.3, 1.4]
    wide = plots.speedup_ticks(0.01, 500)
    assert len(wide) <= 12 and 1.0 in wide and 100 in wide


def test_each_task_line_is_named_in_the_legend():
    fig = _draw(plots._best_over_evaluations, modest_run())
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert {"A: level1/a", "A: level1/b", "A: level1/c", "A: geomean"} <= set(legend)


def test_unparsed_verdicts_are_not_scored_as_no_failure():
    unparsed = {"compile_error": False, "memory_error": False, "numerics_error": False, "parsed": False}
    records = [attempt("B", "level1/a", correct=False, level=1, verifier=unparsed),
               attempt("B", "level1/b", correct=False, level=1, verifier=unparsed),
               attempt("B", "level1/c", correct=False, level=1, verifier=pred(numerics_error=True))]
    acc = verifier_accuracy(records)
    assert acc["any"]["unparsed"] == 2 and acc["any"]["n"] == 1
    assert acc["numerics_error"]["tp"] == 1 and acc["numerics_error"]["fn"] == 0
    assert acc["numerics_error"]["accuracy"] == 1.0
    only_unparsed = verifier_accuracy(records[:2])
    assert only_unparsed["any"]["accuracy"] is None and only_unparsed["any"]["unparsed"] == 2
