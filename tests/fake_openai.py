"""A fake OpenAI-compatible chat endpoint on 127.0.0.1 for tests: ``POST /v1/chat/completions`` answers each request
with the text ``reply(body)`` returns (default: a ``ModelNew`` stub in a code block) and keeps every request."""

from __future__ import annotations

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STUB = "```python\nclass ModelNew: pass\n```"


class FakeOpenAI(ThreadingHTTPServer):
    """The server: ``base_url`` for a client, ``requests`` as ``(path, Authorization header, body)``."""

    daemon_threads = True

    def __init__(self, reply=None):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.reply = reply or (lambda body: STUB)
        self.requests: list[tuple[str, str | None, dict]] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: FakeOpenAI

    def do_POST(self):  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append((self.path, self.headers.get("Authorization"), body))
        answer = {"id": f"x{len(self.server.requests)}", "object": "chat.completion", "created": 0,
                  "model": body["model"],
                  "choices": [{"index": 0, "finish_reason": "stop",
                               "message": {"role": "assistant", "content": self.server.reply(body)}}],
                  "usage": {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def fake_openai(reply=None):
    """A running ``FakeOpenAI`` (see the module docstring), shut down on exit."""
    server = FakeOpenAI(reply)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
