"""``kbench serve`` and its clients, against a real server process on localhost (CPU backend, timing off so
rewards are exact): the remote env is the local env over HTTP, the token and size limits hold, a bounded load
loses nothing, a full queue answers 429, and shutdown finishes in-flight work and leaves no worker behind."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import gymnasium as gym
import httpx
import pytest
from gymnasium.utils.env_checker import check_env

import kbench_env  # noqa: F401  (registers KBench-v0)
from kbench_env.config import EvaluatorConfig
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.serving.aclient import AsyncKBenchClient
from kbench_env.serving.remote_env import RemoteKBenchEnv
from tests import candidates
from tests.serving_server import TOKEN, ServerProcess, alive, cmdline
from tests.conftest import ROOT

RELU = (ROOT / "tasks/solutions/cpu/level1/relu.py").read_text()
AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: what differs between two evaluations of the same candidate with the same seed: times and the cache
VOLATILE = {"eval_seconds", "build_seconds", "cached_build", "worker_seconds", "phase_seconds", "log_tail"}


@pytest.fixture(scope="module")
def server():
    srv = ServerProcess("--workers", "2", "--queue", "30", "--per-client", "8", "--max-body-bytes", "2000000",
                        "--max-batch", "8", "--expose-info")  # the remote env compared with the local one's info
    yield srv
    srv.stop()


def _metric(url: str, name: str) -> float:
    text = httpx.get(url + "/metrics", headers=AUTH).text
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " ")
               or line.startswith(name + "{"))


def _comparable(info: dict) -> dict:
    info = dict(info)
    if "eval" in info:
        info["eval"] = {k: v for k, v in info["eval"].items() if k not in VOLATILE}
    return info


def test_health_is_open_and_everything_else_needs_the_token(server):
    assert httpx.get(server.url + "/health").json() == {"status": "healthy"}
    for method, path in (("GET", "/metrics"), ("POST", "/reset"), ("POST", "/step"), ("POST", "/batch"),
                         ("GET", "/tasks")):
        missing = httpx.request(method, server.url + path, json={})
        wrong = httpx.request(method, server.url + path, json={}, headers={"Authorization": "Bearer nope"})
        assert missing.status_code == 401 and "missing token" in missing.json()["error"]
        assert wrong.status_code == 401 and "wrong token" in wrong.json()["error"]
    with pytest.raises(PermissionError, match="token"):
        gym.make("KBench-v0", url=server.url, token="wrong", task="level1/relu")


def test_websocket_session_needs_the_token_and_speaks_openenv(server):
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    ws_url = server.url.replace("http", "ws") + "/ws"
    with pytest.raises(InvalidStatus):
        connect(ws_url).close()
    with connect(ws_url, additional_headers=AUTH) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"task": "level1/relu", "seed": 1}}))
        answer = json.loads(ws.recv())
        assert answer["type"] == "observation" and "ModelNew" in answer["data"]["observation"]["text"]
        ws.send(json.dumps({"type": "step", "data": {"action": {"source": "not python ("}}}))
        answer = json.loads(ws.recv())
        assert answer["data"]["reward"] == pytest.approx(-0.6) and answer["data"]["done"] is False
        ws.send(json.dumps({"type": "state"}))
        assert json.loads(ws.recv())["data"]["step_count"] == 1
        ws.send("{not json")
        assert json.loads(ws.recv())["data"]["code"] == "INVALID_JSON"


def _logged(srv, **fields) -> list:
    """The server's log events (its stderr, merged into ``srv.lines``) that have ``fields``."""
    events = [json.loads(ln) for ln in list(srv.lines) if ln.startswith("{")]
    return [e for e in events if all(e.get(k) == v for k, v in fields.items())]


def test_websocket_invalid_json_is_refused_counted_and_logged(server):
    """Over the WebSocket as over HTTP, a message that is not JSON is a refusal: answered 400 INVALID_JSON, counted
    in kbench_refused_total and logged as a ``refused`` event, and the episode goes on."""
    from websockets.sync.client import connect

    counted = 'kbench_refused_total{status="400"}'
    before, logged = _metric(server.url, counted), len(_logged(server, event="refused", path="/ws"))
    with connect(server.url.replace("http", "ws") + "/ws", additional_headers=AUTH) as ws:
        ws.send("{not json")
        answer = json.loads(ws.recv())
        ws.send(json.dumps({"type": "state"}))
        assert json.loads(ws.recv())["type"] == "state"
    assert answer["type"] == "error" and answer["data"]["message"].startswith("invalid JSON: ")
    assert (answer["data"]["code"], answer["data"]["status"]) == ("INVALID_JSON", 400)
    assert _metric(server.url, counted) - before == 1
    for _ in range(100):  # the log reaches ``lines`` through a reader thread
        if len(_logged(server, event="refused", path="/ws")) > logged:
            break
        threading.Event().wait(0.05)
    (event,) = _logged(server, event="refused", path="/ws")[logged:]
    assert (event["status"], event["code"], event["reason"]) == (400, "INVALID_JSON", "invalid_request")


def test_remote_env_passes_check_env(server):
    env = gym.make("KBench-v0", url=server.url, token=TOKEN, task="level1/relu", max_turns=3)
    assert isinstance(env.unwrapped, RemoteKBenchEnv)
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_remote_env_behaves_like_the_local_env(server):
    local = gym.make("KBench-v0", suite="default", device="cpu", max_turns=3,
                     config=EvaluatorConfig.from_options(time_candidates=False, spare_worker=False))
    remote = gym.make("KBench-v0", url=server.url, token=TOKEN, suite="default", max_turns=3, device="cpu")
    assert remote.action_space == local.action_space and remote.observation_space == local.observation_space
    for seed in (3, 11):  # a seeded draw from the suite picks the same task
        assert remote.reset(seed=seed) == local.reset(seed=seed)
    obs_l, info_l = local.reset(seed=5, options={"task": "level1/relu"})
    obs_r, info_r = remote.reset(seed=5, options={"task": "level1/relu"})
    assert (obs_r, info_r) == (obs_l, info_l)
    for action in (RELU, candidates.WRONG_SHAPE, 12345):
        *step_l, info_l = local.step(action)
        *step_r, info_r = remote.step(action)
        assert step_r == step_l and _comparable(info_r) == _comparable(info_l)
    assert step_r[3] is True  # the third turn truncates, on both
    assert info_r["eval"]["correct"] is False
    local.close()
    remote.close()
    with pytest.raises(ValueError, match="backend"):
        gym.make("KBench-v0", url=server.url, token=TOKEN, backend="cuda")


def test_oversized_requests_are_refused_with_a_clear_error(server):
    big = httpx.post(server.url + "/reset", content=b"{" + b" " * 2_100_000 + b"}", headers=AUTH)
    assert big.status_code == 413 and "--max-body-bytes" in big.json()["error"]
    env = RemoteKBenchEnv(server.url, TOKEN, task="level1/relu")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="body"):
        env.step("x" * 2_100_000)
    many = httpx.post(server.url + "/batch", headers=AUTH,
                      json={"items": [{"task": "level1/relu", "source": "x"}] * 9})
    assert many.status_code == 413 and "--max-batch" in many.json()["error"]
    unknown = httpx.post(server.url + "/batch", headers=AUTH,
                         json={"items": [{"task": "../../etc/passwd", "source": "x"}]})
    first, last = [json.loads(ln) for ln in unknown.text.splitlines()]  # the item's error, not the batch's
    assert unknown.status_code == 200 and first["status"] == 404 and "no task named" in first["error"]
    assert last == {"done": True, "count": 1, "failed": 1}
    env.close()


def test_reset_options_refuse_nan_and_endless_turns(server):
    """JSON as Python reads it allows NaN and Infinity: a reset option given NaN, or max_turns given Infinity, is
    refused (400), not a 500."""
    for name, value in (("max_turns", "NaN"), ("max_turns", "Infinity"), ("target_speedup", "NaN")):
        answer = httpx.post(server.url + "/reset", headers={**AUTH, "Content-Type": "application/json"},
                            content='{"task": "level1/relu", "%s": %s}' % (name, value))
        assert answer.status_code == 400 and f"{name} must be a number >= " in answer.json()["error"], answer.text


def test_batch_streams_every_result(server):
    items = [("level1/relu", RELU), ("level1/relu", "garbage"), ("relu", candidates.WRONG_SHAPE)]

    async def run():
        async with AsyncKBenchClient(server.url, TOKEN) as client:
            return await client.evaluate_many(items, seed=0)

    lines = asyncio.run(run())
    assert [ln["index"] for ln in lines] == [0, 1, 2]
    assert lines[0]["researcher_record"]["correct"] and lines[0]["reward"] > 0
    assert lines[1]["reward"] == pytest.approx(-0.6) and lines[1]["researcher_record"]["error_stage"] == "screen"
    assert not lines[2]["researcher_record"]["correct"] and lines[2]["researcher_record"]["compiled"] is not None


def _clients(url: str, actions: list, seeds) -> dict:
    """One remote episode per seed, each in its own thread stepping through ``actions``: {seed: rewards}."""
    results: dict = {}

    def client(seed: int):
        env = RemoteKBenchEnv(url, TOKEN, task="level1/relu", max_turns=len(actions))
        env.reset(seed=seed)
        results[seed] = [env.step(a)[1] for a in actions]
        env.close()

    threads = [threading.Thread(target=client, args=(seed,)) for seed in seeds]
    for t in threads:
        t.start()
    for t in threads:
        t.join(1200)
    return results


def test_bounded_load_loses_no_request(server):
    before = _metric(server.url, "kbench_evaluations_total")
    actions = [RELU, "garbage", candidates.RAISES_IN_FORWARD, RELU, "class ModelNew: pass"]
    results = _clients(server.url, actions, range(4))
    assert sorted(results) == [0, 1, 2, 3]
    for rewards in results.values():
        assert rewards[0] > 0 and rewards[3] > 0  # the honest ones pay
        assert rewards[1] == pytest.approx(-0.6) and rewards[2] < 0 and rewards[4] < 0
    assert _metric(server.url, "kbench_evaluations_total") - before == 20
    assert _metric(server.url, "kbench_queue_depth") == 0 and _metric(server.url, "kbench_running") == 0


def test_eight_clients_by_fifty_mixed_actions_lose_nothing_and_leak_no_worker(server):
    """The issue's load test: 8 clients x 50 actions each (honest, garbage and hostile: crashes, aborts, exits at
    import, wrong answers, input writes), each client its own episode. Every step gets its answer, the honest ones
    pay and nothing else does, the server counts 400 evaluations, and once idle it has the processes it had before
    (every worker of the 400 is gone)."""
    cycle = [RELU, "garbage", candidates.SEGFAULT, candidates.RAISES_IN_FORWARD, "class ModelNew: pass",
             candidates.WRONG_SHAPE, candidates.ABORT, candidates.EXIT_AT_IMPORT, candidates.MODIFIES_INPUT, "x = ("]
    actions = cycle * 5
    warm = RemoteKBenchEnv(server.url, TOKEN, task="level1/relu", max_turns=2)
    warm.reset(seed=99)
    for a in (RELU, candidates.RAISES_IN_FORWARD):  # the fork server and the builder start on first use: not leaks
        warm.step(a)
    warm.close()
    before_procs = server.descendants()
    assert before_procs  # (the list of processes under the server is read at all)
    before = _metric(server.url, "kbench_evaluations_total")
    results = _clients(server.url, actions, range(100, 108))
    assert sorted(results) == list(range(100, 108)) and all(len(r) == 50 for r in results.values())
    for rewards in results.values():
        for k, reward in enumerate(rewards):
            assert (reward > 0) == (k % len(cycle) == 0), (k, reward)
    assert _metric(server.url, "kbench_evaluations_total") - before == 400
    assert _metric(server.url, "kbench_queue_depth") == 0 and _metric(server.url, "kbench_running") == 0
    deadline = time.monotonic() + 30
    while server.descendants() - before_procs and time.monotonic() < deadline:
        time.sleep(0.5)
    left = server.descendants() - before_procs
    assert not left, f"processes left behind after the load: {[cmdline(p) for p in left]}"


SLOW = candidates._forward("        return x", at_import="time.sleep(6)\n")


def test_full_queue_answers_429_and_shutdown_finishes_in_flight_work():
    srv = ServerProcess("--workers", "1", "--queue", "0", "--suite", "default")
    answer: dict = {}

    def slow():
        answer["r"] = httpx.post(srv.url + "/batch", headers=AUTH, timeout=300,
                                 json={"items": [{"task": "level1/relu", "source": SLOW}]})

    worker = threading.Thread(target=slow)
    worker.start()
    try:
        for _ in range(600):  # until the slow evaluation holds the only place
            if _metric(srv.url, "kbench_running") == 1:
                break
            threading.Event().wait(0.05)
        full = httpx.post(srv.url + "/batch", headers=AUTH, json={"items": [{"task": "level1/relu", "source": "x"}]})
        assert full.status_code == 429 and full.headers["retry-after"].isdigit()
        assert "queue is full" in full.json()["error"]
        under = srv.descendants()
    finally:
        code = srv.stop()  # SIGTERM while the slow evaluation runs
    worker.join(300)
    lines = [json.loads(ln) for ln in answer["r"].text.splitlines()]
    assert answer["r"].status_code == 200 and lines[-1] == {"done": True, "count": 1, "failed": 0}
    assert lines[0]["task"] == "level1/relu" and "researcher_record" not in lines[0]
    assert code == 0 and "in-flight work finished" in "".join(srv.lines)
    events = [json.loads(ln) for ln in srv.lines if ln.startswith("{")]  # the log (stderr, merged here)
    assert [e["reason"] for e in events if e["event"] == "refused"] == ["queue_full"]
    begin, done = [e for e in events if e["event"] == "shutdown"]
    assert begin["in_flight"] == 1 and (done["finished"], done["handed_back"]) == (1, 0)
    assert under  # the evaluation ran in worker processes under the server
    # Python's forkserver leaves when it reads EOF from the server that started it: wait for that, bounded
    for _ in range(300):
        if not [pid for pid in under if alive(pid)]:
            break
        threading.Event().wait(0.1)
    assert not [pid for pid in under if alive(pid)]
