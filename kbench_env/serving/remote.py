"""An Evaluator that lives on a ``kbench serve`` server: ``RemoteEvaluator(url, token)`` has the parts of
``Evaluator`` that trainers and ``KBenchEnv`` use (``evaluate``, ``evaluate_many``, ``device``, ``backend``,
``backend_name``, ``rules``, ``format``), so the GRPO reward function and multi-turn rollout (``training/``) evaluate on the
server's GPUs or Ray cluster instead of in the trainer's process (``python -m kbench_training.grpo --env-url ...``).

``evaluate_many`` sends the items through ``POST /batch`` in chunks the server takes (``--max-batch``, and no more
than its ``--workers + --queue`` places at once), a few chunks in flight, each retried after ``Retry-After`` while
the server answers 429. Tasks travel by name: the server must serve every task the trainer's dataset names
(``check_tasks``), and expose its evaluation records (``kbench serve --expose-info``): the rollouts build the
policy's feedback from them here, as a local Evaluator's caller does. An item the server could not evaluate (its
line carries ``error``) raises ``ServerError``: a reward is never made up.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from kbench_env.backends import get_backend
from kbench_env.config import environ
from kbench_env.pipeline.result import EvalResult
from kbench_env.serving.remote_env import _JSON_TYPES, ServerError, raise_for, retry_after
from kbench_env.serving.api import RECORD_FIELD, TOKEN_ENV, auth_header
from kbench_env.tasks.task import Task


class RemoteEvaluator:
    """``url``: the server (``http://host:port``); ``token``: its bearer token (default ``$KBENCH_TOKEN``);
    ``timeout``: seconds per HTTP request (a batch chunk's stream may stay open while items finish);
    ``retries``: how many 429 answers to wait out per chunk."""

    def __init__(self, url: str, token: str | None = None, timeout: float = 960.0, retries: int = 60):
        token = token or environ.get(TOKEN_ENV)
        if not token:
            raise ValueError(f"the server at {url} needs its token: --env-token / token=... or ${TOKEN_ENV}")
        self.url = url.rstrip("/")
        self.http = httpx.Client(base_url=self.url, headers=auth_header(token), timeout=timeout,
                                 limits=httpx.Limits(max_connections=32))
        self.retries = retries
        schema = self._get("/schema")
        self.device = schema["evaluator"]["device"]
        self.backend_name = schema["evaluator"]["backend"]
        self.backend = get_backend(self.backend_name)
        self.rules = schema["evaluator"]["rules"]
        self.format = schema["evaluator"].get("format", "kernelbench")
        if not schema.get("expose_info"):
            raise ValueError(f"the server at {url} keeps its evaluation records to itself: a trainer reads them "
                             f"(the rollouts' feedback, the reward's inputs); start it with kbench serve "
                             f"--expose-info")
        limits = schema["limits"]
        capacity = max(1, int(limits["workers"]) + int(limits["queue"]))
        self.chunk = max(1, min(int(limits["max_batch"]), capacity))
        self.in_flight = max(1, min(int(limits["per_client"]), capacity // self.chunk))

    def _get(self, path: str) -> dict:
        try:
            response = self.http.get(path)
        except httpx.HTTPError as exc:
            raise ConnectionError(f"cannot reach the kbench server at {self.url}: {exc} (is `kbench serve` running "
                                  f"there, and the URL its 'listening on' line printed?)") from None
        raise_for(response)
        return response.json()

    def check_tasks(self, names) -> None:
        """Raise ValueError naming the tasks the server does not serve (start it with a --suite that has them)."""
        served = set(self._get("/tasks")["tasks"])
        missing = sorted(set(names) - served)
        if missing:
            raise ValueError(f"the server at {self.url} does not serve {len(missing)} task(s) of the dataset: "
                             f"{', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''} (GET /tasks lists "
                             f"its tasks; start kbench serve with a --suite that has them)")

    def _chunk(self, items: list, seed: int | None) -> list[dict]:
        body = {"items": [{"task": t.name if hasattr(t, "name") else t, "source": a, "seed": seed} for t, a in items]}
        for attempt in range(self.retries + 1):
            with self.http.stream("POST", "/batch", json=body) as response:
                if response.status_code == 429 and attempt < self.retries:
                    time.sleep(retry_after(response))
                    continue
                if response.status_code >= 400:
                    response.read()
                    raise_for(response)
                lines: list = [None] * len(items)
                for line in response.iter_lines():
                    if not line.strip():
                        continue
                    msg = json.loads(line)
                    if msg.get("done"):
                        return lines
                    if "error" in msg:
                        raise ServerError(502, f"the server could not evaluate item {msg['index']} (task "
                                               f"{msg.get('task')}): {msg.get('code')}: {msg['error']}")
                    lines[msg["index"]] = msg
                raise ConnectionError(f"the batch stream from {self.url} ended before its closing line")
        raise ServerError(429, f"the server at {self.url} stayed full through {self.retries} retries")

    def evaluate_many(self, items: list, max_workers: int | None = None, seed: int | None = None,
                      progress=None) -> list[EvalResult]:
        """Evaluate ``[(task, action), ...]`` on the server; EvalResults in the same order. ``max_workers`` is
        the server's to choose (``--workers``) and is ignored here."""
        items = [(t, a if isinstance(a, _JSON_TYPES) else repr(a)) for t, a in items]
        chunks = [items[i:i + self.chunk] for i in range(0, len(items), self.chunk)]
        with ThreadPoolExecutor(max_workers=min(self.in_flight, max(1, len(chunks)))) as pool:
            answers = list(pool.map(lambda c: self._chunk(c, seed), chunks))
        results = [EvalResult.from_dict(line[RECORD_FIELD]) for chunk in answers for line in chunk]
        if progress is not None:
            for done, r in enumerate(results, 1):
                progress(done, len(results), r)
        return results

    def evaluate(self, task: Task, action, seed: int | None = None) -> EvalResult:
        return self.evaluate_many([(task, action)], seed=seed)[0]

    def close(self) -> None:
        self.http.close()
