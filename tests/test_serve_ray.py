"""``kbench serve --ray-address local``: a real server process whose evaluations run on Ray actors (a local Ray
instance the server starts, in a private temp dir, stopped with it). A batch comes back evaluated by the actors,
the prompts name the actors' device, and killing an actor's process mid-batch loses no request: the item is sent
again to another actor and its result says it was retried."""

from __future__ import annotations

import json
import os
import signal
import threading

import httpx
import pytest

from tests import candidates
from tests.conftest import ROOT
from tests.serving_server import TOKEN, ServerProcess, alive, cmdline

pytest.importorskip("ray")

RELU = (ROOT / "tasks/solutions/cpu/level1/relu.py").read_text()
AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: long enough that the actor running it is still inside it when the test kills that actor
SLOW = "import time\ntime.sleep(8)\n" + RELU


@pytest.fixture(scope="module")
def ray_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ray")
    srv = ServerProcess("--ray-address", "local", "--workers", "2", "--queue", "8", "--suite", "default", "--expose-info",
                        startup=300, env={"RAY_TMPDIR": str(tmp)})
    yield srv
    under = srv.descendants()
    assert srv.stop() == 0
    for _ in range(600):  # Ray's processes leave with the server that started them: wait for that, bounded
        if not [pid for pid in under if alive(pid)]:
            break
        threading.Event().wait(0.1)
    assert not [pid for pid in under if alive(pid)], [cmdline(p) for p in under if alive(p)]


def _actors(srv, method: str = "") -> list[int]:
    return sorted(pid for pid in srv.descendants() if cmdline(pid).startswith("ray::_EvaluatorActor" + method))


def _batch(url: str, items: list) -> list[dict]:
    r = httpx.post(url + "/batch", headers=AUTH, timeout=600, json={"items": items})
    assert r.status_code == 200, r.text
    lines = [json.loads(ln) for ln in r.text.splitlines()]
    assert lines[-1]["done"] is True
    return sorted(lines[:-1], key=lambda ln: ln["index"])


def test_a_batch_is_evaluated_by_ray_actors(ray_server):
    lines = _batch(ray_server.url, [{"task": "level1/relu", "source": s} for s in (RELU, "garbage (", RELU,
                                                                                   candidates.WRONG_SHAPE)])
    assert [ln["researcher_record"]["correct"] for ln in lines] == [True, False, True, False]
    assert lines[1]["reward"] == pytest.approx(-0.6) and lines[3]["researcher_record"]["error_stage"] == "correctness"
    assert not any(ln["researcher_record"].get("retries") for ln in lines)
    assert len(_actors(ray_server)) == 2  # --workers 2: two actors, which did the work (no Evaluator besides)
    schema = httpx.get(ray_server.url + "/schema", headers=AUTH).json()["evaluator"]
    assert schema == {"device": "cpu", "backend": "cpu", "rules": "strict", "format": "kernelbench"}


def test_killing_an_actor_mid_batch_loses_no_request(ray_server):
    answer: dict = {}
    items = [{"task": "level1/relu", "source": SLOW, "id": n} for n in range(2)]
    worker = threading.Thread(target=lambda: answer.setdefault("lines", _batch(ray_server.url, items)))
    worker.start()
    busy = []
    for _ in range(3000):  # until an actor runs one of the slow items (Ray titles it ray::Class.method)
        busy = _actors(ray_server, ".evaluate")
        if busy or not worker.is_alive():
            break
        threading.Event().wait(0.05)
    assert busy, "no actor took the batch"
    os.kill(busy[0], signal.SIGKILL)
    worker.join(600)
    lines = answer["lines"]
    assert [ln["id"] for ln in lines] == [0, 1] and all("error" not in ln for ln in lines)
    assert all(ln["researcher_record"]["correct"] and ln["reward"] == 1.0 for ln in lines)
    retried = [ln["researcher_record"] for ln in lines if ln["researcher_record"].get("retries")]
    assert len(retried) >= 1 and all("actor" in r["retried_because"][0] for r in retried)
    assert all(r["retries"] == len(r["retried_because"]) for r in retried)
    metrics = httpx.get(ray_server.url + "/metrics", headers=AUTH).text
    assert f"kbench_retried_total {len(retried)}" in metrics.splitlines()
    # Ray restarts the dead actor: the server keeps its two
    for _ in range(1200):
        if len(_actors(ray_server)) == 2:
            break
        threading.Event().wait(0.1)
    assert len(_actors(ray_server)) == 2 and busy[0] not in _actors(ray_server)
    assert _batch(ray_server.url, [{"task": "level1/relu", "source": RELU}])[0]["researcher_record"]["correct"]
