"""What a client of ``kbench serve`` receives (issue 35): the policy-facing observation holds only what the local
env's observation holds, the researcher's record travels only from a server started with ``--expose-info``;
OpenEnv's own client (``GenericEnvClient``, whose WebSocket cannot add a header) connects with a URL and a token
alone; and ``/batch`` evaluates the good items of a batch that has a bad one."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from kbench_env.tasks.suite import load_suite, solution_path
from tests import candidates
from tests.conftest import read
from tests.serving_server import TOKEN, ServerProcess

AUTH = {"Authorization": f"Bearer {TOKEN}"}
SUITE = "default"
#: what an observation may hold: the local env's observation (the text) and the episode's end and session
OBSERVATION_KEYS = {"text", "terminated", "truncated", "session_id"}

# A forward taking any inputs, so one wrong candidate fits every task of the suite.
WRONG = candidates._HEADER + '''
class ModelNew(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, *xs):
        return xs[0].detach().clone()
'''


def held_out_only_wrong(solution: str, shown: list) -> str:
    """The task's correct solution, wrong on every input shape but the shown configuration's."""
    return solution + f'''

_Correct = ModelNew


class ModelNew(_Correct):
    def forward(self, *xs):
        out = super().forward(*xs)
        if [tuple(x.shape) for x in xs] == {shown!r}:
            return out
        return out + 1.0
'''


def _shape(text: str) -> tuple:
    return tuple(int(d) for d in text.split("[", 1)[1].rstrip("]").split(", "))


def secrets_of(task) -> list[str]:
    """What no client without --expose-info may receive about the task's held-out CPU configurations: their
    input shapes (as the record spells them, and as bare dimension lists), their names as JSON strings."""
    configs = task.configs_for("cpu")
    shown = {s for c in configs if not c.held_out for s in task.input_shapes(c)}
    out = []
    for c in configs:
        if not c.held_out:
            continue
        for s in task.input_shapes(c):
            if s not in shown:
                out += [s, json.dumps(list(_shape(s))), s.split("[", 1)[1].rstrip("]")]
        out += [json.dumps(c.name), repr(c.name), f"{c.name} (held out)"]
    return out


def actions_for(task) -> dict:
    shown = [_shape(s) for s in task.input_shapes(task.shown_configs("cpu")[0])]
    return {"wrong": WRONG, "wrong_held_out": held_out_only_wrong(read(solution_path(task, "cpu")), shown)}


@pytest.fixture(scope="module")
def server():
    srv = ServerProcess("--suite", SUITE, "--workers", "2", "--queue", "16")
    yield srv
    srv.stop()


def _http_episode(url: str, task, actions: dict) -> list[tuple[str, str, dict]]:
    """``(candidate, raw answer text, answer)`` of a reset and one step per action, over HTTP."""
    out = []
    with httpx.Client(base_url=url, headers=AUTH, timeout=600) as http:
        reset = http.post("/reset", json={"task": task.name, "seed": 0, "max_turns": len(actions) + 1})
        assert reset.status_code == 200, reset.text
        sid = reset.json()["observation"]["session_id"]
        out.append(("reset", reset.text, reset.json()))
        for name, source in actions.items():
            step = http.post("/step", json={"session_id": sid, "action": {"source": source}})
            assert step.status_code == 200, step.text
            out.append((name, step.text, step.json()))
        state = http.get("/state", params={"session_id": sid})
        out.append(("state", state.text, state.json()))
        http.post("/close", json={"session_id": sid})
    return out


def _ws_episode(url: str, task, actions: dict) -> list[tuple[str, str, dict]]:
    from websockets.sync.client import connect

    out = []
    with connect(url.replace("http", "ws") + "/ws", additional_headers=AUTH, open_timeout=60) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"task": task.name, "seed": 0, "max_turns": 5}}))
        raw = ws.recv(600)
        out.append(("reset", raw, json.loads(raw)["data"]))
        for name, source in actions.items():
            ws.send(json.dumps({"type": "step", "data": {"action": {"source": source}}}))
            raw = ws.recv(600)
            out.append((name, raw, json.loads(raw)["data"]))
        ws.send(json.dumps({"type": "state"}))
        raw = ws.recv(60)
        out.append(("state", raw, json.loads(raw)["data"]))
    return out


def _batch(url: str, items: list, headers=AUTH) -> tuple[str, list[dict]]:
    answer = httpx.post(url + "/batch", headers=headers, json={"items": items}, timeout=900)
    assert answer.status_code == 200, answer.text
    return answer.text, [json.loads(ln) for ln in answer.text.splitlines() if ln.strip()]


def test_no_held_out_name_or_shape_reaches_a_client_without_the_option(server):
    """Every task of the default suite, stepped over HTTP and the WebSocket and sent through /batch with a wrong
    candidate and one wrong on the held-out shapes only: no held-out name or shape anywhere in what the client
    receives, the observation holds the local env's observation only, and no answer carries the record."""
    tasks = load_suite(SUITE)
    batch_items = []
    for task in tasks:
        actions = actions_for(task)
        secrets = secrets_of(task)
        assert secrets, task.name  # the task holds configurations out on the CPU: there is something to hide
        answers = _http_episode(server.url, task, actions) + _ws_episode(server.url, task, actions)
        for cand, raw, answer in answers:
            for secret in secrets:
                assert secret not in raw, f"{task.name}, {cand}: {secret!r} reached the client:\n{raw[:3000]}"
            assert "researcher_record" not in answer and "\"eval\":" not in raw, (task.name, cand, raw[:2000])
            if cand != "state":
                assert set(answer["observation"]) == OBSERVATION_KEYS, answer["observation"].keys()
                assert answer["info"]["task"] == task.name
        held = [a for c, _, a in answers if c == "wrong_held_out"]
        for answer in held:  # the held-out failure path was taken, and says only which and that it failed
            text = answer["observation"]["text"]
            assert "held-out configuration 1 of" in text and answer["reward"] < 0, text
        batch_items += [{"task": task.name, "source": s, "id": f"{task.name}:{c}", "seed": 0}
                        for c, s in actions.items()]
    raw, lines = _batch(server.url, batch_items)
    for secret in [s for t in tasks for s in secrets_of(t)]:
        assert secret not in raw, f"/batch: {secret!r} reached the client"
    results = [ln for ln in lines if "index" in ln]
    assert len(results) == len(batch_items) and all("researcher_record" not in ln for ln in results)
    assert all("held-out configuration 1 of" in ln["feedback"] for ln in results if ln["id"].endswith("held_out"))


def test_the_record_travels_only_with_expose_info_and_never_inside_the_observation():
    srv = ServerProcess("--suite", "level1/relu", "--workers", "1", "--expose-info")
    try:
        schema = httpx.get(srv.url + "/schema", headers=AUTH, timeout=120).json()
        assert schema["expose_info"] is True and "info" not in schema["observation"]["properties"]
        reset = httpx.post(srv.url + "/reset", headers=AUTH, json={"seed": 0}, timeout=120)
        sid = reset.json()["observation"]["session_id"]
        step = httpx.post(srv.url + "/step", headers=AUTH, timeout=600,
                          json={"session_id": sid, "action": {"source": WRONG}}).json()
        assert set(step["observation"]) == OBSERVATION_KEYS
        record = step["researcher_record"]
        assert any(c["held_out"] and c["inputs"] for c in record["configs"])  # the researcher's record, whole
        _, lines = _batch(srv.url, [{"task": "level1/relu", "source": WRONG}])
        assert lines[0]["researcher_record"]["task"] == "level1/relu"
    finally:
        srv.stop()


# ---------------------------------------------------------------------- OpenEnv's own client, on the wire


def _openenv_ws_url(base_url: str) -> str:
    """``EnvClient.__init__`` in openenv-core 0.3.0: ``convert_to_ws_url(base_url) + "/ws"``."""
    ws_url = base_url.rstrip("/")
    if ws_url.startswith("http://"):
        ws_url = "ws://" + ws_url[7:]
    elif ws_url.startswith("https://"):
        ws_url = "wss://" + ws_url[8:]
    elif not ws_url.startswith(("ws://", "wss://")):
        ws_url = "ws://" + ws_url
    return f"{ws_url}/ws"


class FakeGenericEnvClient:
    """openenv-core 0.3.0's ``GenericEnvClient`` (``env_client.py``, ``generic_client.py``), message for message:
    it connects with ``websockets.asyncio.client.connect(ws_url, open_timeout=..., max_size=...)`` and no headers;
    ``reset(**kw)`` sends ``{"type": "reset", "data": kw}``, ``step(action)`` ``{"type": "step", "data": action}``,
    ``state()`` ``{"type": "state"}``, ``close()`` ``{"type": "close"}``; an answer of type "error" raises; a
    result is ``(observation, reward, done)`` read from ``data``."""

    def __init__(self, base_url: str):
        self.ws_url = _openenv_ws_url(base_url)
        self.ws = None

    async def connect(self):
        from websockets.asyncio.client import connect as ws_connect

        self.ws = await ws_connect(self.ws_url, open_timeout=10.0, max_size=100 * 1024 * 1024)

    async def _send_and_receive(self, message: dict) -> dict:
        await self.ws.send(json.dumps(message))
        response = json.loads(await asyncio.wait_for(self.ws.recv(), timeout=600))
        if response.get("type") == "error":
            raise RuntimeError(f"Server error: {response['data'].get('message')}")
        return response

    async def reset(self, **kwargs):
        data = (await self._send_and_receive({"type": "reset", "data": kwargs})).get("data", {})
        return data.get("observation", {}), data.get("reward"), data.get("done", False)

    async def step(self, action: dict):
        data = (await self._send_and_receive({"type": "step", "data": action})).get("data", {})
        return data.get("observation", {}), data.get("reward"), data.get("done", False)

    async def state(self):
        return (await self._send_and_receive({"type": "state"})).get("data", {})

    async def close(self):
        await self.ws.send(json.dumps({"type": "close"}))
        await self.ws.close()


def _with_token(url: str, token: str) -> str:
    return url.replace("http://", f"http://kbench:{token}@")


def test_openenv_generic_client_messages_work_with_a_url_and_a_token(server):
    relu = read(solution_path(load_suite("level1/relu")[0], "cpu"))

    async def episode(base_url: str):
        client = FakeGenericEnvClient(base_url)
        await client.connect()
        try:
            obs, reward, done = await client.reset(task="level1/relu", seed=0)
            assert "ModelNew" in obs["text"] and reward is None and done is False
            obs, reward, done = await client.step({"source": relu})
            state = await client.state()
        finally:
            await client.close()
        return obs, reward, done, state

    obs, reward, done, state = asyncio.run(episode(_with_token(server.url, TOKEN)))
    assert reward > 0 and done is False and "Reward:" in obs["text"], obs
    assert state["step_count"] == 1 and state["task"] == "level1/relu"
    # the token as the ws URL's query, for clients that can set neither a header nor a URL's user part
    from websockets.sync.client import connect

    with connect(server.url.replace("http", "ws") + f"/ws?token={TOKEN}", open_timeout=30) as ws:
        ws.send(json.dumps({"type": "state"}))
        assert json.loads(ws.recv(30))["type"] == "state"
    # a wrong token in the URL is refused before the connection opens
    from websockets.exceptions import InvalidStatus

    with pytest.raises((InvalidStatus, ConnectionError)):
        asyncio.run(episode(_with_token(server.url, "wrong")))
    # and the same URL works over plain HTTP (httpx sends the user part as basic auth)
    assert httpx.get(_with_token(server.url, TOKEN) + "/tasks", timeout=120).status_code == 200
    assert httpx.get(_with_token(server.url, "wrong") + "/tasks", timeout=120).status_code == 401


# ---------------------------------------------------------------------- /batch is not all or nothing


def test_an_unknown_task_fails_its_item_and_the_others_are_evaluated(server):
    relu = read(solution_path(load_suite("level1/relu")[0], "cpu"))
    items = [{"task": "level1/relu", "source": relu, "id": i} for i in range(3)]
    items.insert(1, {"task": "level2/76_Gemm_Add_ReLU", "source": relu, "id": "unknown"})
    items.append({"task": "level1/relu", "source": "x" * 2_000_000, "id": "too big"})
    _, lines = _batch(server.url, items)
    by_index = {ln["index"]: ln for ln in lines if "index" in ln}
    assert lines[-1] == {"done": True, "count": 5, "failed": 2}
    assert by_index[1]["status"] == 404 and "no task named" in by_index[1]["error"] and by_index[1]["id"] == "unknown"
    assert by_index[4]["status"] == 413 and "--max-source-chars" in by_index[4]["error"]
    assert [by_index[i]["reward"] > 0 and by_index[i]["correct"] for i in (0, 2, 3)] == [True] * 3


def test_a_trainers_remote_evaluator_asks_for_expose_info(server):
    """The trainer's RemoteEvaluator builds the policy's feedback from the records: against a server that keeps
    them, it says which option the server needs instead of failing later."""
    from kbench_env.serving.remote import RemoteEvaluator

    with pytest.raises(ValueError, match="--expose-info"):
        RemoteEvaluator(server.url, TOKEN)
