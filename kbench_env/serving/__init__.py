"""The environment as a service: an HTTP/WebSocket server speaking OpenEnv's reset/step/state protocol
(``app.py``), its admission control (``admission.py``), episodes per client session (``sessions.py``), metrics
(``metrics.py``), its structured log (``logs.py`` writes it, ``logevents.py`` says what it holds), and the
clients: a Gymnasium env (``remote_env.py``) and an async client for trainers (``aclient.py``). The wire format both
sides share is ``api.py``. Needs the [serve] extra (starlette, uvicorn, httpx); ``import kbench_env`` never imports
this package."""
