"""What the server lets in: the token, request sizes, per-client concurrency and the bounded evaluation queue.

The server runs untrusted code for remote callers, so every limit answers early with a clear error instead of
growing: a missing or wrong token 401, a body or source too large 413, a client with too many requests in flight
or a full queue 429 with ``Retry-After``. ``Admission`` counts evaluations (a batch of n takes n places) against
``workers + queue`` places, and requests (a batch is one) per client against ``per_client``; a place is given
back when its evaluation really ends, not when a request times out, so the bound holds while a timed-out
evaluation still runs.
"""

from __future__ import annotations

import base64
import hmac
import threading
from collections import Counter
from dataclasses import dataclass

from kbench_env.pipeline.screen import MAX_ACTION_CHARS


@dataclass
class ServerLimits:
    """The server's limits (``kbench serve --help`` names each)."""

    workers: int = 2  # evaluations running at once
    queue: int = 16  # evaluations waiting beyond those
    per_client: int = 8  # requests in flight per client address
    max_body_bytes: int = 8 << 20
    max_source_chars: int = MAX_ACTION_CHARS  # beyond the env's own limit, which answers with "invalid"
    max_batch: int = 64
    request_timeout: float = 900.0  # seconds per evaluation request (a batch: per item)
    max_sessions: int = 256
    session_idle: float = 1800.0  # seconds before an idle session is closed
    retry_after: int = 5  # seconds a 429 asks the client to wait


#: a refusal's reason in the log when its raiser names none
REASONS = {400: "invalid_request", 401: "token", 404: "not_found", 409: "conflict", 413: "too_large",
           429: "busy", 504: "request_timeout"}


class Refused(Exception):
    """A request the server will not take: ``status`` (401, 413, 429, ...), a message for people, headers, and
    ``reason``, a snake_case word for the log (``token_wrong``, ``queue_full``, ...)."""

    def __init__(self, status: int, message: str, code: str = "VALIDATION_ERROR", headers: dict | None = None,
                 reason: str | None = None):
        super().__init__(message)
        self.status, self.message, self.code, self.headers = status, message, code, headers or {}
        self.reason = reason or REASONS.get(status, f"http_{status}")


def _given_token(header: str | None, query_token: str | None) -> str | None:
    """The token a request carries: ``Authorization: Bearer <token>``, HTTP Basic with the token as password
    (what a URL ``http://user:<token>@host`` makes clients send), or ``query_token`` (``?token=`` on the
    WebSocket's URL); None when it carries none."""
    if header:
        scheme, _, value = header.strip().partition(" ")
        if scheme.lower() == "bearer":
            return value.strip()
        if scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(value.strip(), validate=True).decode()
            except (ValueError, UnicodeDecodeError):
                return ""
            return decoded.partition(":")[2]
        return ""
    return query_token


def check_token(header: str | None, token: str, query_token: str | None = None) -> None:
    """Refuse (401) a request whose token (``_given_token``) is missing or not ``token`` (constant time)."""
    given = _given_token(header, query_token)
    if given is None:
        raise Refused(401, "missing token: send 'Authorization: Bearer <token>', or put it in the URL as "
                           "http://kbench:<token>@host:port (kbench serve printed or was given the token: "
                           "--token-file or $KBENCH_TOKEN)", "SESSION_ERROR", reason="token_missing")
    if not hmac.compare_digest(given.encode(), token.encode()):
        raise Refused(401, "wrong token: the request's token (bearer, basic-auth password or ?token=) is not this "
                           "server's", "SESSION_ERROR", reason="token_wrong")


def check_source(source, limits: ServerLimits, where: str = "action.source"):
    """``source`` if within the limit. A non-string passes: the evaluator answers it with "invalid", as in-process
    (the body limit bounds its size)."""
    if isinstance(source, str) and len(source) > limits.max_source_chars:
        raise Refused(413, f"{where} is {len(source):,} characters; this server takes at most "
                           f"{limits.max_source_chars:,} (--max-source-chars)", "TOO_LARGE",
                      reason="source_too_large")
    return source


class Admission:
    """Places for evaluations (running + queued) and requests per client; thread-safe (places are given back from
    the evaluation threads)."""

    def __init__(self, limits: ServerLimits):
        self.limits = limits
        self.capacity = limits.workers + limits.queue
        self.admitted = 0  # evaluations holding a place: running or waiting
        self.running = 0
        self.clients: Counter = Counter()
        self._lock = threading.Lock()

    def _busy(self, message: str, reason: str) -> Refused:
        return Refused(429, message, "CAPACITY_REACHED", {"Retry-After": str(self.limits.retry_after)}, reason)

    def enter_client(self, client: str) -> None:
        with self._lock:
            if self.clients[client] >= self.limits.per_client:
                raise self._busy(f"client {client} already has {self.clients[client]} requests in flight "
                                 f"(--per-client {self.limits.per_client}); retry after {self.limits.retry_after} s",
                                 "client_limit")
            self.clients[client] += 1

    def leave_client(self, client: str) -> None:
        with self._lock:
            self.clients[client] -= 1
            if self.clients[client] <= 0:
                del self.clients[client]

    def take(self, n: int = 1) -> None:
        """Take ``n`` evaluation places or refuse: 413 when ``n`` could never fit, 429 when the queue is full."""
        if n > self.capacity:
            raise Refused(413, f"{n} evaluations in one request; this server holds at most {self.capacity} at once "
                               f"(--workers + --queue): send smaller batches", "TOO_LARGE",
                          reason="over_capacity")
        with self._lock:
            if self.admitted + n > self.capacity:
                raise self._busy(f"the evaluation queue is full ({self.admitted} of {self.capacity} places taken); "
                                 f"retry after {self.limits.retry_after} s", "queue_full")
            self.admitted += n

    def started(self) -> None:
        with self._lock:
            self.running += 1

    def give_back(self, was_running: bool) -> None:
        with self._lock:
            self.admitted -= 1
            if was_running:
                self.running -= 1

    @property
    def queued(self) -> int:
        return self.admitted - self.running
