"""The worker protocol's message kinds live in protocol/messages.py: the worker serves every request kind that
needs a handler, and no module of the trusted side or the worker spells a kind as a string literal."""

from __future__ import annotations

import re
from pathlib import Path

from kbench_env.protocol import messages
from kbench_env.worker import loop

PKG = Path(__file__).resolve().parents[1] / "kbench_env"


def test_the_worker_serves_every_request_after_load():
    # SOURCE comes before load (a spare's candidate), GO inside a WALLCLOCK exchange, BUILT answers the worker's BUILD
    assert set(loop.HANDLERS) == messages.REQUESTS - {messages.SOURCE, messages.GO, messages.BUILT}
    assert not messages.REQUESTS & messages.REPLIES


def test_no_message_kind_is_spelt_outside_protocol():
    kinds = "|".join(re.escape(k) for k in messages.REQUESTS | messages.REPLIES | {messages.WARM_UP})
    literal = re.compile(r"""["']type["']\s*[:\]]\s*(?:==|!=)?\s*["'](%s)["']|get\(["']type["']\)\s*(?:==|!=|in)\s*""" % kinds)
    found = []
    for part in ("pipeline", "worker"):
        for path in (PKG / part).rglob("*.py"):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if literal.search(line) and not re.search(r"msg\.|messages\.", line):
                    found.append(f"{path.relative_to(PKG)}:{n}: {line.strip()}")
    assert not found, "message kinds spelt as strings:\n" + "\n".join(found)
