"""``POST /batch``: many ``(task, source)`` pairs in one request, for trainers that keep no episodes. Every item
is checked before any runs (task names from the registry, sources within the limit, the batch within the queue),
all take their places at once or the batch is refused, and results stream back as NDJSON lines in the order they
finish, ending with ``{"done": true, "count", "failed"}`` so a reader knows nothing was lost."""

from __future__ import annotations

import asyncio
import json

from starlette.requests import Request
from starlette.responses import StreamingResponse

from kbench_env.serving.admission import Refused, check_source, check_token
from kbench_env.serving.http import error_response, read_json
from kbench_env.serving.logevents import client_key, origin
from kbench_env.serving.wire import TOKEN_HEADER


def _parse_items(server, data: dict) -> list[tuple]:
    items = data.get("items")
    if not isinstance(items, list) or not items:
        raise Refused(400, "batch body must be {\"items\": [{\"task\": name, \"source\": str, \"seed\"?: int, "
                           "\"id\"?: any}, ...]} with at least one item")
    if len(items) > server.limits.max_batch:
        raise Refused(413, f"batch of {len(items)} items; this server takes at most {server.limits.max_batch} "
                           f"per request (--max-batch)", "TOO_LARGE", reason="batch_too_large")
    parsed = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise Refused(400, f"items[{i}] must be an object with task and source")
        seed = item.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise Refused(400, f"items[{i}].seed must be an integer, not {seed!r}")
        task = server.registry.task(item.get("task"))
        parsed.append((i, item.get("id"), task, check_source(item.get("source"), server.limits, f"items[{i}].source"),
                       seed))
    return parsed


def _line(obj: dict) -> bytes:
    return (json.dumps(obj) + "\n").encode()


async def _stream(server, jobs: dict, client: str):
    """NDJSON lines as the evaluations finish; the client's place is held until the last line."""
    failed = 0
    try:
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
                result = fut.result()
                yield _line({"index": i, "id": item_id, "task": task.name, "reward": result.reward,
                             "result": result.to_dict()})
        yield _line({"done": True, "count": len(jobs), "failed": failed})
    finally:
        server.admission.leave_client(client)


def batch_route(server):
    async def batch(request: Request):
        server.metrics.requests["batch"] += 1
        client = client_key(request.scope.get("client"))
        try:
            check_token(request.headers.get(TOKEN_HEADER), server.token)
            items = _parse_items(server, await read_json(request, server.limits.max_body_bytes))
            server.admission.enter_client(client)
            try:
                server.admission.take(len(items))
            except Refused:
                server.admission.leave_client(client)
                raise
        except Refused as exc:
            server.refuse(exc, client, request.url.path)
            return error_response(exc)
        # the request id (origin's) names the batch in the log; ``batch`` says how many items it has
        jobs = {asyncio.wrap_future(server.evaluations.submit(task, source, seed, origin(batch=len(items), index=i))):
                (i, item_id, task) for i, item_id, task, source, seed in items}
        return StreamingResponse(_stream(server, jobs, client), media_type="application/x-ndjson")
    return batch
