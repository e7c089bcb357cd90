"""``kbench serve``: the environment as an HTTP/WebSocket server (``kbench_env.serving``) on one host, evaluating
through the local executor (every GPU here, else the CPU) or a Ray cluster (``--ray-address``: the same
``RayExecutor`` as ``make_executor("ray", address=...)``, whose actors' device and backend the prompts name).

It binds 127.0.0.1 unless ``--host`` says otherwise, needs a token (``--token-file``, ``$KBENCH_TOKEN``, else one
is made and printed), prints ``kbench serve: listening on http://HOST:PORT`` on stdout once it accepts connections,
and on SIGINT or SIGTERM stops accepting, finishes the requests in flight, then closes the executor. Its log
(``kbench_env.serving.logs``: JSON Lines, or text) goes to stderr or ``--log-file``; stdout has the lines for people.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
from pathlib import Path

from kbench_apps.runner import TIMING_PRESETS, add_remote_builds
from kbench_env.config import environ
from kbench_env.executors import make_executor
from kbench_env.pipeline.formats import FORMATS
from kbench_env.pipeline.reward import PRESETS
from kbench_env.pipeline.rules import RULES
from kbench_env.serving import logs
from kbench_env.serving.admission import ServerLimits
from kbench_env.serving.registry import TaskRegistry

TOKEN_ENV = "KBENCH_TOKEN"


def _token(args) -> str:
    if args.token_file:
        token = Path(args.token_file).read_text().strip()
        if not token:
            raise ValueError(f"--token-file {args.token_file} is empty")
        return token
    if environ.get(TOKEN_ENV):
        return environ.get(TOKEN_ENV)
    token = secrets.token_urlsafe(24)
    # stdout, not the log: the log never holds the token
    print(f"kbench serve: no --token-file or ${TOKEN_ENV}; this run's token: {token}", flush=True)
    return token


def _evaluator_kwargs(args) -> dict:
    kwargs = {"backend": args.backend, "reward": args.reward, "rules": args.rules, "format": args.format}
    if args.remote_builds:
        kwargs["remote_builds"] = args.remote_builds
    if args.timing == "off":
        kwargs["time_candidates"] = False
    elif TIMING_PRESETS.get(args.timing):
        kwargs["timing"] = TIMING_PRESETS[args.timing]
    return kwargs


def _limits(args, workers: int) -> ServerLimits:
    return ServerLimits(workers=workers, queue=args.queue, per_client=args.per_client,
                        max_body_bytes=args.max_body_bytes, max_source_chars=args.max_source_chars,
                        max_batch=args.max_batch, request_timeout=args.request_timeout,
                        max_sessions=args.max_sessions, session_idle=args.session_idle)


def _uvicorn_server(config, server):
    """uvicorn's server, telling ``server`` when shutdown begins (uvicorn then waits for open requests)."""
    import uvicorn

    class Server(uvicorn.Server):
        signal_name = None

        def handle_exit(self, sig, frame):
            self.signal_name = self.signal_name or signal.Signals(sig).name
            super().handle_exit(sig, frame)

        async def shutdown(self, sockets=None):
            server.stopping(self.signal_name)
            await super().shutdown(sockets=sockets)

    return Server(config)


def _log_start(args, host, port, registry, front, limits: ServerLimits) -> None:
    logs.event("server_start", host=host, port=port, executor="ray" if args.ray_address else "local",
               ray_address=args.ray_address, workers=limits.workers, device=front.device,
               backend=front.backend_name, rules=args.rules, reward=args.reward, timing=args.timing,
               suite=args.suite, tasks=len(registry.tasks), limits=dict(limits.__dict__), pid=os.getpid(),
               expose_info=args.expose_info)


def cmd_serve(args) -> int:
    import uvicorn

    from kbench_env.serving.app import KBenchServer  # the [serve] extra (starlette)

    logs.configure(args.log_level, args.log_format, args.log_file)
    token = _token(args)
    registry = TaskRegistry(args.suite, dtype=args.dtype)
    kwargs = _evaluator_kwargs(args)
    if args.ray_address:
        executor = make_executor("ray", device=args.device, workers=args.workers, address=args.ray_address, **kwargs)
        front = executor  # the actors' device, backend and rules, which the prompts name; no Evaluator here
        workers = args.workers or len(executor.actors)  # default: one evaluation per actor (per GPU)
    else:
        workers = args.workers or 2
        executor = make_executor("local", device=args.device, workers=workers, **kwargs)
        front = executor.evaluators[0]
    limits = _limits(args, workers)
    server = KBenchServer(executor, front, registry, token, limits, expose_info=args.expose_info)
    sock = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # accepted connections inherit it: a response's head and body, written apart, must not wait out the
    # client's delayed ACK (40 ms a request)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((args.host, args.port))
    sock.listen(128)  # connections queue from here on, before uvicorn accepts them
    host, port = sock.getsockname()[:2]
    # uvicorn's records go through the log's handler (log_config=None), from warning up unless debugging; its
    # access lines are the log's request events
    config = uvicorn.Config(server.app, log_config=None, access_log=False,
                            log_level=args.log_level if args.log_level in ("debug", "error") else "warning",
                            timeout_graceful_shutdown=int(limits.request_timeout) + 30,
                            ws_max_size=limits.max_body_bytes, timeout_keep_alive=30)
    _log_start(args, host, port, registry, front, limits)
    print(f"kbench serve: listening on http://{host}:{port} ({len(registry.tasks)} tasks of {args.suite!r}, "
          f"{front.device} {front.backend_name} backend, {limits.workers} workers + {limits.queue} queued)",
          flush=True)
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then raises the signal again under the handlers it found:
    # these make that second delivery a no-op, so the command ends with its own status
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    _uvicorn_server(config, server).run(sockets=[sock])
    print("kbench serve: stopped; in-flight work finished", flush=True)
    return 0


def add_parser(sub, device_help: str, dtype_arg: dict, formatter) -> None:
    s = sub.add_parser("serve", formatter_class=formatter, help="serve the environment over HTTP/WebSocket "
                                                                "(OpenEnv's protocol; needs the [serve] extra)")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (0.0.0.0: every interface)")
    s.add_argument("--port", type=int, default=8000, help="port (0: a free one, printed)")
    s.add_argument("--token-file", default=None, help=f"file holding the bearer token (else ${TOKEN_ENV}, else one "
                                                      f"is made and printed)")
    s.add_argument("--suite", default="all", help="the tasks offered (requests name tasks of it, never paths)")
    s.add_argument("--expose-info", action="store_true",
                   help="answers also carry the researcher's record (researcher_record: the EvalResult, which names "
                        "the held-out configurations with their shapes and times) beside the observation; off: "
                        "clients get only what a policy may read. A trainer's RemoteEvaluator (--env-url) needs it")
    s.add_argument("--dtype", **dtype_arg)
    s.add_argument("--device", default="auto", help=device_help)
    s.add_argument("--backend", default=None, help="cpu, cuda or triton (default: from the device)")
    s.add_argument("--reward", default="tiered", choices=sorted(PRESETS), help="reward preset")
    s.add_argument("--rules", default="strict", choices=RULES, help="what forward may run (see kbench eval)")
    s.add_argument("--format", default="kernelbench", choices=FORMATS,
                   help="the action format the prompts ask for and the evaluations hold candidates to (see kbench "
                        "eval): kernelbench, fast (~1 s builds: what an RL policy can be trained on) or triton")
    s.add_argument("--timing", default="default", choices=["default", "quick", "off"],
                   help="timing repetitions: the Evaluator's, few, or none (correctness only)")
    s.add_argument("--ray-address", default=None,
                   help="evaluate on Ray actors, one per GPU (--workers: how many): 'auto' joins the cluster running "
                        "here (`ray start --head` / `ray start --address`), HOST:PORT another, 'local' starts one")
    add_remote_builds(s)
    s.add_argument("--workers", type=int, default=None,
                   help="evaluations running at once (default 2; with --ray-address, actors, default one per GPU)")
    s.add_argument("--queue", type=int, default=16, help="evaluations waiting beyond those (more: 429)")
    s.add_argument("--per-client", type=int, default=8, help="requests in flight per client address")
    s.add_argument("--max-body-bytes", type=int, default=8 << 20, help="largest request body (more: 413)")
    s.add_argument("--max-source-chars", type=int, default=1_000_000, help="largest candidate source (more: 413)")
    s.add_argument("--max-batch", type=int, default=64, help="most items in one /batch request")
    s.add_argument("--request-timeout", type=float, default=900.0, help="seconds a request waits for a result")
    s.add_argument("--max-sessions", type=int, default=256, help="episodes open at once")
    s.add_argument("--session-idle", type=float, default=1800.0, help="seconds before an idle episode is closed")
    s.add_argument("--log-level", default="info", choices=logs.LEVELS,
                   help="the log's least level (info: every request, evaluation and refusal)")
    s.add_argument("--log-format", default="json", choices=logs.FORMATS,
                   help="json: one JSON object a line (ts, level, event, fields); text: one line for people")
    s.add_argument("--log-file", default=None, help="append the log to this file (default: stderr)")
    s.set_defaults(fn=cmd_serve)
