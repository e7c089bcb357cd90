"""``kbench serve``'s structured log: a real server process (one for the module) is sent refused requests, a
garbage step, an honest CPU step and a batch, then SIGTERM; every line it wrote to stderr must be a JSON object
with the events and fields the log promises, and neither the token nor any candidate's source may appear in it."""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import datetime

import httpx
import pytest

from kbench_env.serving import logs
from kbench_env.serving.admission import Admission, Refused, ServerLimits
from tests.conftest import ROOT
from tests.serving_server import TOKEN, ServerProcess

AUTH = {"Authorization": f"Bearer {TOKEN}"}
WRONG_TOKEN = "wrong-token-5e1f0c2a9b"
# markers that would show a source in the log; the honest one is a comment, so it changes nothing in the run
HONEST = (ROOT / "tasks/solutions/cpu/level1/relu.py").read_text() + "\n# marker-honest-7d3e\n"
GARBAGE = "marker-garbage-91ab = (not python"
OVERSIZED = "# marker-oversized-c4f2\n" + "x = 1\n" * 2000


def _sha(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


@pytest.fixture(scope="module")
def run():
    """Drive one server through the requests below and return (events, answers, raw log, stdout)."""
    srv = ServerProcess("--suite", "default", "--workers", "1", "--max-source-chars", "5000", stderr_apart=True)
    answers = {}
    try:
        url = srv.url
        answers["missing"] = httpx.post(url + "/reset", json={"task": "level1/relu"})
        answers["wrong"] = httpx.post(url + "/step", json={"session_id": "x", "action": {"source": GARBAGE}},
                                      headers={"Authorization": f"Bearer {WRONG_TOKEN}"})
        reset = httpx.post(url + "/reset", json={"task": "level1/relu", "seed": 0}, headers=AUTH).json()
        sid = reset["observation"]["session_id"]
        answers["session"] = sid
        answers["oversized"] = httpx.post(url + "/step", headers=AUTH,
                                          json={"session_id": sid, "action": {"source": OVERSIZED}})
        answers["garbage"] = httpx.post(url + "/step", headers=AUTH, timeout=300,
                                        json={"session_id": sid, "action": {"source": GARBAGE}})
        answers["honest"] = httpx.post(url + "/step", headers=AUTH, timeout=300,
                                       json={"session_id": sid, "action": {"source": HONEST}})
        answers["batch"] = httpx.post(url + "/batch", headers=AUTH, timeout=300,
                                      json={"items": [{"task": "level1/relu", "source": GARBAGE}]})
    finally:
        code = srv.stop()  # SIGTERM
    assert code == 0
    raw = "".join(srv.err_lines)
    events = [json.loads(line) for line in srv.err_lines]  # every line of the log is one JSON object
    return events, answers, raw, "".join(srv.lines)


def _of(events, name):
    return [e for e in events if e["event"] == name]


def test_every_line_is_json_with_ts_level_and_event(run):
    events, answers, _, stdout = run
    assert answers["honest"].status_code == 200 and answers["honest"].json()["reward"] > 0
    for e in events:
        assert set(e) >= {"ts", "level", "event"}, e
        assert e["ts"].endswith("Z") and datetime.fromisoformat(e["ts"][:-1])  # ISO-8601, UTC
        assert e["level"] in ("debug", "info", "warning", "error")
    assert "listening on http://" in stdout and "{" not in stdout  # the human lines stay on stdout


def test_start_request_and_shutdown_events(run):
    events, answers, _, _ = run
    (start,) = _of(events, "server_start")
    assert start["host"] == "127.0.0.1" and start["port"] > 0 and start["executor"] == "local"
    assert start["workers"] == 1 and start["device"] == "cpu" and start["limits"]["max_source_chars"] == 5000
    requests = _of(events, "request")
    assert [(r["method"], r["path"], r["status"]) for r in requests] == [
        ("POST", "/reset", 401), ("POST", "/step", 401), ("POST", "/reset", 200), ("POST", "/step", 413),
        ("POST", "/step", 200), ("POST", "/step", 200), ("POST", "/batch", 200)]
    assert all(r["client"] == "127.0.0.1" and r["duration_ms"] >= 0 for r in requests)
    begin, done = _of(events, "shutdown")
    assert begin["stage"] == "begin" and begin["signal"] == "SIGTERM" and begin["in_flight"] == 0
    assert done["stage"] == "done" and done["finished"] == 0 and done["handed_back"] == 0
    assert events[0]["event"] == "server_start" and events[-1] is done


def test_refusals_say_why(run):
    events, _, _, _ = run
    refused = _of(events, "refused")
    assert [(r["status"], r["reason"]) for r in refused] == [(401, "token_missing"), (401, "token_wrong"),
                                                            (413, "source_too_large")]
    request_ids = {r["request_id"]: r for r in _of(events, "request")}
    for r in refused:
        assert request_ids[r["request_id"]]["status"] == r["status"] and r["level"] == "warning"
    assert "--max-source-chars" in refused[2]["message"]


def test_evaluations_are_logged_with_their_origin(run):
    events, answers, _, _ = run
    garbage, honest, batch = _of(events, "evaluation")
    assert garbage["session"] == honest["session"] == answers["session"][:8]
    assert garbage["correct"] is False and garbage["error_stage"] == "screen" and garbage["task"] == "level1/relu"
    assert honest["correct"] is True and honest["error_stage"] is None and honest["integrity_flags"] == []
    assert honest["speedup"] is None  # --timing off
    assert honest["eval_seconds"] > 0 and honest["phase_seconds"] and honest["reward"] > 0
    assert honest["source_chars"] == len(HONEST) and honest["source_sha256"] == _sha(HONEST)
    assert batch["index"] == 0 and batch["batch"] and "session" not in batch
    (batch_request,) = [r for r in _of(events, "request") if r["path"] == "/batch"]
    assert batch["request_id"] == batch_request["request_id"]  # the request id names the batch
    steps = [r["request_id"] for r in _of(events, "request") if r["path"] == "/step" and r["status"] == 200]
    assert [garbage["request_id"], honest["request_id"]] == steps


def test_neither_the_token_nor_a_source_is_logged(run):
    _, answers, raw, _ = run
    assert answers["wrong"].status_code == 401 and answers["oversized"].status_code == 413
    assert TOKEN not in raw and WRONG_TOKEN not in raw
    for marker in ("marker-honest-7d3e", "marker-garbage-91ab", "marker-oversized-c4f2", "relu_forward(Tensor x)"):
        assert marker not in raw
    assert "marker-garbage-91ab" in answers["garbage"].text  # the caller does see its own source quoted


def test_admission_refusals_name_their_reason():
    adm = Admission(ServerLimits(workers=1, queue=0, per_client=1))
    adm.enter_client("a")
    with pytest.raises(Refused) as exc:
        adm.enter_client("a")
    assert (exc.value.status, exc.value.reason) == (429, "client_limit")
    adm.take(1)
    with pytest.raises(Refused) as exc:
        adm.take(1)
    assert (exc.value.status, exc.value.reason) == (429, "queue_full")


@pytest.fixture
def root_logging():
    root = logging.getLogger()
    saved = (list(root.handlers), root.level, logs.LOGGER.level)
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    for handler in saved[0]:
        root.addHandler(handler)
    root.setLevel(saved[1])
    logs.LOGGER.setLevel(saved[2])
    logging.captureWarnings(False)


def test_log_file_level_and_text_format(tmp_path, root_logging):
    path = tmp_path / "serve.log"
    logs.configure("warning", "text", str(path))
    logs.event("request", status=200, path="/step")  # below the level
    logs.event("refused", logging.WARNING, reason="queue_full", message="the queue is full", speedup=float("inf"))
    logging.getLogger("uvicorn.error").warning("a library's %s", "warning")
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    assert lines[0].split()[1:4] == ["WARNING", "refused", "reason=queue_full"]
    assert 'message="the queue is full"' in lines[0] and "speedup=inf" in lines[0]
    assert "logger=uvicorn.error" in lines[1] and "\"a library's warning\"" in lines[1]
    logs.configure("info", "json", str(path))
    logs.event("evaluation", speedup=float("nan"))
    last = json.loads(path.read_text().splitlines()[-1])
    assert last["event"] == "evaluation" and last["speedup"] == "nan" and last["level"] == "info"
