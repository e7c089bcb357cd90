"""``POST /batch``: many ``(task, source)`` pairs in one request, for trainers that keep no episodes. The body
is checked first (a list of at most ``--max-batch`` items), then each item: an item that cannot run (an unknown
task, a source over the limit, a bad seed) gets its own error line and the others are evaluated; the valid items
take their places at once or the batch is refused (429). Results stream back as NDJSON lines in the order they
finish, error lines first, ending with ``{"done": true, "count", "failed"}`` so a reader knows nothing was lost.

A result line holds the reward and the policy's view of the result (``feedback``: what a step's observation
would say); the whole EvalResult, which names the held-out configurations, only from a server started with
``--expose-info`` (``researcher_record``, api.py)."""

from __future__ import annotations

import asyncio
import json

from starlette.requests import Request
from starlette.responses import StreamingResponse

from kbench_env.pipeline.feedback import policy_feedback
from kbench_env.serving.admission import Refused, check_source, check_token
from kbench_env.serving.http import error_response, read_json
from kbench_env.serving.logevents import client_key, origin
from kbench_env.serving.api import RECORD_FIELD, TOKEN_HEADER


def _item(server, i: int, item) -> tuple:
    """``(index, id, task, source, seed)`` of one item, or Refused saying why it cannot run."""
    if not isinstance(item, dict):
        raise Refused(400, f"items[{i}] must be an object with task and source")
    seed = item.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise Refused(400, f"items[{i}].seed must be an integer, not {seed!r}")
    task = server.registry.task(item.get("task"))
    return i, item.get("id"), task, check_source(item.get("source"), server.limits, f"items[{i}].source"), seed


def _parse_items(server, data: dict) -> tuple[list[tuple], list[tuple]]:
    """The items that can run, and ``(error line, Refused)`` for each that cannot (the batch goes on without it)."""
    items = data.get("items")
    if not isinstance(items, list) or not items:
        raise Refused(400, "batch body must be {\"items\": [{\"task\": name, \"source\": str, \"seed\"?: int, "
                           "\"id\"?: any}, ...]} with at least one item")
    if len(items) > server.limits.max_batch:
        raise Refused(413, f"batch of {len(items)} items; this server takes at most {server.limits.max_batch} "
                           f"per request (--max-batch)", "TOO_LARGE", reason="batch_too_large")
    parsed, errors = [], []
    for i, item in enumerate(items):
        try:
            parsed.append(_item(server, i, item))
        except Refused as exc:
            given = item if isinstance(item, dict) else {}
            task = given.get("task")
            errors.append(({"index": i, "id": given.get("id"), "task": task[:200] if isinstance(task, str) else None,
                            "code": exc.code, "status": exc.status, "error": exc.message}, exc))
    return parsed, errors


def _result_line(server, i: int, item_id, task, result) -> dict:
    line = {"index": i, "id": item_id, "task": task.name, "reward": result.reward, "correct": result.correct,
            "speedup": result.speedup, "feedback": policy_feedback(result)}
    if server.expose_info:
        line[RECORD_FIELD] = result.to_dict()
    return line


def _line(obj: dict) -> bytes:
    return (json.dumps(obj) + "\n").encode()


async def _stream(server, jobs: dict, client: str | None, errors: list[dict]):
    """NDJSON lines: the items that could not run, then results as the evaluations finish; the client's place
    (``client``: None when nothing runs) is held until the last line."""
    failed = len(errors)
    try:
        for line in errors:
            yield _line(line)
        pending = set(jobs)
        while pending:
            done, pending = await asyncio.wait(pending, timeout=server.limits.request_timeout,
                                               return_when=asyncio.FIRST_COMPLETED)
            if not done:  # nothing finished for a whole request timeout: say so for each, keep the places
                for fut in pending:
                    i, item_id, task = jobs[fut]
                    failed += 1
                    yield _line({"index": i, "id": item_id, "task": task.name, "code": "TIMEOUT",
                                 "error": f"no result within {server.limits.request_timeout:g} s (--request-timeout)"})
                break
            for fut in done:
                i, item_id, task = jobs[fut]
                if fut.exception() is not None:
                    failed += 1
                    yield _line({"index": i, "id": item_id, "task": task.name, "code": "EXECUTION_ERROR",
                                 "error": f"{type(fut.exception()).__name__}: {fut.exception()}"})
                    continue
                yield _line(_result_line(server, i, item_id, task, fut.result()))
        yield _line({"done": True, "count": len(jobs) + len(errors), "failed": failed})
    finally:
        if client is not None:
            server.admission.leave_client(client)


def batch_route(server):
    async def batch(request: Request):
        server.metrics.requests["batch"] += 1
        client = client_key(request.scope.get("client"))
        try:
            check_token(request.headers.get(TOKEN_HEADER), server.token)
            items, errors = _parse_items(server, await read_json(request, server.limits.max_body_bytes))
            if items:
                server.admission.enter_client(client)
                try:
                    server.admission.take(len(items))
                except Refused:
                    server.admission.leave_client(client)
                    raise
        except Refused as exc:
            server.refuse(exc, client, request.url.path)
            return error_response(exc)
        for _, exc in errors:  # counted and logged as a refused request is
            server.refuse(exc, client, request.url.path)
        # the request id (origin's) names the batch in the log; ``batch`` says how many items it has
        jobs = {asyncio.wrap_future(server.evaluations.submit(task, source, seed, origin(batch=len(items), index=i))):
                (i, item_id, task) for i, item_id, task, source, seed in items}
        return StreamingResponse(_stream(server, jobs, client if items else None, [ln for ln, _ in errors]),
                                 media_type="application/x-ndjson")
    return batch
