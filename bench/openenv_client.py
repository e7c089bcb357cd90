"""openenv-core's own GenericEnvClient against ``kbench serve``, given only a URL that holds the token (the record:
bench/results/openenv_client.md). Run in a venv with openenv-core installed (not a kbench dependency):

    python3 -m venv /tmp/oe && /tmp/oe/bin/pip install openenv-core==0.3.0
    KBENCH_TOKEN=t python -m kbench_apps serve --port 18765 --device cpu --suite default &
    /tmp/oe/bin/python bench/openenv_client.py http://kbench:t@127.0.0.1:18765 tasks/solutions/cpu/level1/relu.py
"""

from __future__ import annotations

import importlib.metadata as md
import json
import sys


def main(url: str, relu_path: str) -> None:
    import websockets
    from openenv.core.generic_client import GenericEnvClient  # openenv-core, in its own venv

    print("openenv-core", md.version("openenv-core"), "websockets", websockets.__version__)
    relu = open(relu_path).read()
    with GenericEnvClient(base_url=url).sync() as env:
        r = env.reset(task="level1/relu", seed=0)
        print("reset: observation keys", sorted(r.observation), "reward", r.reward, "done", r.done,
              "text starts", repr(r.observation["text"][:60]))
        r = env.step({"source": "not python ("})
        print("step 1 (invalid): reward", r.reward, "done", r.done)
        r = env.step({"source": relu})
        print("step 2 (honest relu): reward", r.reward, "done", r.done, "keys", sorted(r.observation))
        print("  feedback:", " | ".join(r.observation["text"].splitlines()[:3]))
        s = env.state()
        print("state:", json.dumps({k: s[k] for k in ("step_count", "task", "device", "backend", "rules")}))
    bad = url.replace(url.split("@")[0].split("//")[1], "kbench:wrong")
    try:
        with GenericEnvClient(base_url=bad).sync() as env:
            env.reset()
        print("wrong token: ACCEPTED (bad)")
    except Exception as exc:  # noqa: BLE001 - what the client raises is what is recorded
        print("wrong token refused:", type(exc).__name__, str(exc)[:120])


if __name__ == "__main__":
    main(*sys.argv[1:3])
