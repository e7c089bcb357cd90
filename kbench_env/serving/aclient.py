"""An async client for trainers (httpx): episodes (``reset``/``step``/``close``) and the streamed batch
(``batch`` yields results as the server finishes them; ``evaluate_many`` gathers them in order). A full queue
(429) is retried after the server's ``Retry-After``.

    async with AsyncKBenchClient("http://host:8000", token) as client:
        async for line in client.batch([("level1/relu", source), ...]):
            print(line["index"], line["reward"], line["feedback"])

A result line holds the reward and the policy's feedback; the whole EvalResult (``researcher_record``) only from
a server started with ``--expose-info`` (``api.py``).
"""

from __future__ import annotations

import asyncio
import json

import httpx

from kbench_env.config import environ
from kbench_env.serving.api import TOKEN_ENV, auth_header
from kbench_env.serving.remote_env import raise_for, retry_after


class AsyncKBenchClient:
    def __init__(self, url: str, token: str | None = None, timeout: float = 960.0, retries: int = 30):
        token = token or environ.get(TOKEN_ENV)
        if not token:
            raise ValueError(f"the client needs the server's token: token=... or ${TOKEN_ENV}")
        self.http = httpx.AsyncClient(base_url=url.rstrip("/"), headers=auth_header(token), timeout=timeout)
        self.retries = retries

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        for attempt in range(self.retries + 1):
            response = await self.http.request(method, path, json=body)
            if response.status_code != 429 or attempt == self.retries:
                break
            await asyncio.sleep(retry_after(response))
        raise_for(response)
        return response.json()

    async def reset(self, session_id: str | None = None, **options) -> dict:
        """Open (or, with ``session_id``, restart) an episode: the OpenEnv answer, whose observation holds
        ``session_id``. Options: ``seed``, ``task``, ``suite``, ``max_turns``, ``target_speedup``."""
        return await self._call("POST", "/reset", dict(options, session_id=session_id))

    async def step(self, session_id: str, source: str) -> dict:
        return await self._call("POST", "/step", {"session_id": session_id, "action": {"source": source}})

    async def close(self, session_id: str) -> None:
        await self._call("POST", "/close", {"session_id": session_id})

    async def batch(self, items, seed: int | None = None):
        """Evaluate ``(task, source)`` pairs (or dicts with task, source, seed, id); yield each NDJSON result
        line as it arrives, and raise if the stream ends before its closing line (nothing is lost silently)."""
        body = {"items": [dict(it) if isinstance(it, dict) else {"task": it[0], "source": it[1], "seed": seed}
                          for it in items]}
        for attempt in range(self.retries + 1):
            async with self.http.stream("POST", "/batch", json=body) as response:
                if response.status_code == 429 and attempt < self.retries:
                    await asyncio.sleep(retry_after(response))
                    continue
                if response.status_code >= 400:
                    await response.aread()
                    raise_for(response)
                async for line in response.aiter_lines():
                    if not line.strip():
                        continue
                    msg = json.loads(line)
                    if msg.get("done"):
                        return
                    yield msg
                raise ConnectionError("the batch stream ended before its closing line")

    async def evaluate_many(self, items, seed: int | None = None) -> list[dict]:
        """The batch's result lines in the order of ``items``."""
        out: list = [None] * len(items)
        async for msg in self.batch(items, seed):
            out[msg["index"]] = msg
        return out
