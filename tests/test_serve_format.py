"""``kbench serve --format fast``: the server's prompts ask for the fast format, its schema says so, a fast-format
answer is evaluated correct and a KernelBench-format one is refused as the format says (a trainer can train a
policy on ~1 s builds through the server)."""

from __future__ import annotations

import httpx
import pytest

from kbench_env.serving.remote_env import RemoteKBenchEnv
from tests.conftest import ROOT
from tests.serving_server import TOKEN, ServerProcess

AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def server():
    srv = ServerProcess("--format", "fast", "--suite", "level1/relu", "--workers", "1", "--expose-info")
    yield srv
    srv.stop()


def test_a_fast_format_server_asks_for_and_evaluates_the_fast_format(server):
    schema = httpx.get(server.url + "/schema", headers=AUTH).json()
    assert schema["evaluator"]["format"] == "fast"
    env = RemoteKBenchEnv(server.url, TOKEN, task="level1/relu", max_turns=2)
    prompt, _ = env.reset(seed=0)
    assert "cpp_kernel" in prompt  # the fast format's example, not load_inline's
    _, _, _, _, info = env.step((ROOT / "tasks/solutions/fast_cpu/level1/relu.py").read_text())
    assert info["eval"]["correct"] is True, info["eval"]["error"]
    _, _, _, _, info = env.step((ROOT / "tasks/solutions/cpu/level1/relu.py").read_text())
    assert info["eval"]["correct"] is False and "cpp_extension" in (info["eval"]["error"] or ""), info["eval"]
    env.close()


def test_a_reset_naming_no_task_draws_from_what_the_server_serves(server):
    """The server serves level1/relu only, not the "default" suite a local env draws from: a reset that names
    neither task nor suite gets a task of the server's own (it was refused with 404, naming a task of "default")."""
    answer = httpx.post(server.url + "/reset", json={"seed": 3}, headers=AUTH, timeout=120)
    assert answer.status_code == 200, answer.text
    assert answer.json()["info"]["task"] == "level1/relu"
