"""LLM clients for the reference agents: one small interface, three implementations.

- ``OpenAIClient``: any OpenAI-compatible chat endpoint (OpenAI, vLLM, SGLang, llama.cpp server, ...) through the
  ``openai`` package. Base URL, model and key come from arguments or from ``KBENCH_LLM_BASE_URL``,
  ``KBENCH_LLM_MODEL`` and ``OPENAI_API_KEY``.
- ``TransformersClient``: a local Hugging Face ``transformers`` causal LM loaded from a path.
- ``OfflineClient``: deterministic and model-free, for tests and demos (see its docstring).

All three share what ``LLMClient`` owns: retries with exponential back-off, a per-call timeout, a concurrency limit
(``complete_many`` runs requests in parallel up to ``max_concurrency``), and token and cost accounting
(``client.usage``). Messages are OpenAI-style ``[{"role": "system" | "user" | "assistant", "content": str}]``.
This module knows nothing about kernels except the offline client's stand-in replies.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Callable

from kbench_env.config import environ


class LLMError(RuntimeError):
    """A completion failed after all retries."""


@dataclass
class Usage:
    """What the client has spent so far (all calls, all threads)."""

    calls: int = 0
    failed_calls: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["cost_usd"] = round(d["cost_usd"], 6)
        d["seconds"] = round(d["seconds"], 3)
        return d

    def minus(self, other: "Usage") -> "Usage":
        """The usage accumulated since ``other`` (a snapshot)."""
        return Usage(**{k: getattr(self, k) - getattr(other, k) for k in self.__dataclass_fields__})


def approx_tokens(text: str) -> int:
    """A tokenizer-free estimate (about 4 characters a token), used where the backend reports no counts."""
    return max(1, (len(text) + 3) // 4)


class LLMClient:
    """Base class: subclasses implement ``_complete(messages, temperature, max_tokens, seed) -> (text, p_tok, c_tok)``.

    Args:
        model: the model's name (recorded in results).
        temperature: default sampling temperature.
        max_tokens: default completion length limit.
        timeout: seconds per request (passed to the backend where it supports one).
        max_retries: retries after a failed request (exponential back-off from ``retry_backoff`` seconds).
        max_concurrency: at most this many requests in flight at once, over all threads.
        price_input_per_mtok / price_output_per_mtok: US dollars per million prompt / completion tokens, for
            the cost estimate (0 for local models).
    """

    model: str = "?"

    def __init__(self, model: str = "?", temperature: float = 0.7, max_tokens: int = 4096, timeout: float = 300.0,
                 max_retries: int = 3, retry_backoff: float = 2.0, max_concurrency: int = 4,
                 price_input_per_mtok: float = 0.0, price_output_per_mtok: float = 0.0):
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        self.max_concurrency = max(1, max_concurrency)
        self.price_input_per_mtok = price_input_per_mtok
        self.price_output_per_mtok = price_output_per_mtok
        self.usage = Usage()
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self.max_concurrency)

    # ------------------------------------------------------------------ public API
    def complete(self, messages: list[dict], temperature: float | None = None, max_tokens: int | None = None,
                 seed: int | None = None) -> str:
        """One completion for ``messages``; raises ``LLMError`` once all retries have failed."""
        temperature = self.temperature if temperature is None else temperature
        max_tokens = self.max_tokens if max_tokens is None else max_tokens
        last: Exception | None = None
        for attempt in range(self.max_retries + 1):
            if attempt:
                with self._lock:
                    self.usage.retries += 1
                time.sleep(self.retry_backoff * (2 ** (attempt - 1)) * (0.5 + random.random()))
            t0 = time.perf_counter()
            try:
                with self._slots:
                    text, p_tok, c_tok = self._complete(messages, temperature, max_tokens, seed)
            except Exception as exc:  # noqa: BLE001 - any backend failure is retried, then reported
                last = exc
                if not self._retryable(exc):
                    break
                continue
            finally:
                with self._lock:
                    self.usage.seconds += time.perf_counter() - t0
            with self._lock:
                self.usage.calls += 1
                self.usage.prompt_tokens += p_tok
                self.usage.completion_tokens += c_tok
                self.usage.cost_usd += (p_tok * self.price_input_per_mtok + c_tok * self.price_output_per_mtok) / 1e6
            return text
        with self._lock:
            self.usage.failed_calls += 1
        raise LLMError(f"{type(self).__name__}({self.model}): request failed after {self.max_retries + 1} "
                       f"attempt(s): {type(last).__name__}: {last}") from last

    def complete_many(self, batch: list[list[dict]], temperature: float | None = None,
                      max_tokens: int | None = None, seed: int | None = None) -> list[str | None]:
        """Completions for several conversations, in parallel up to ``max_concurrency``; ``None`` where one failed."""
        def one(i_msgs):
            i, msgs = i_msgs
            try:
                return self.complete(msgs, temperature, max_tokens, None if seed is None else seed + i)
            except LLMError:
                return None

        if len(batch) <= 1 or self.max_concurrency <= 1:
            return [one(x) for x in enumerate(batch)]
        with ThreadPoolExecutor(max_workers=min(len(batch), self.max_concurrency)) as pool:
            return list(pool.map(one, enumerate(batch)))

    def snapshot(self) -> Usage:
        with self._lock:
            return Usage(**asdict(self.usage))

    def describe(self) -> str:
        return f"{type(self).__name__}({self.model})"

    # ------------------------------------------------------------------ for subclasses
    def _complete(self, messages, temperature, max_tokens, seed) -> tuple[str, int, int]:
        raise NotImplementedError

    def _retryable(self, exc: Exception) -> bool:
        return True


# ====================================================================== OpenAI-compatible endpoint
class OpenAIClient(LLMClient):
    """An OpenAI-compatible chat-completions endpoint.

    Args:
        base_url: e.g. ``http://localhost:8000/v1`` (vLLM); default ``$KBENCH_LLM_BASE_URL`` (else OpenAI's).
        model: default ``$KBENCH_LLM_MODEL``.
        api_key: default ``$OPENAI_API_KEY``; local servers that need none get a placeholder.
        extra_body: extra request fields (e.g. ``{"top_k": 20}`` for vLLM).
        (the rest: see ``LLMClient``)
    """

    def __init__(self, base_url: str | None = None, model: str | None = None, api_key: str | None = None,
                 extra_body: dict | None = None, **kwargs):
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError("OpenAIClient needs the openai package: pip install 'kbench[llm]'") from exc
        base_url = base_url or environ.get("KBENCH_LLM_BASE_URL")
        model = model or environ.get("KBENCH_LLM_MODEL")
        if not model:
            raise ValueError("no model name: pass model= (--llm-model) or set KBENCH_LLM_MODEL")
        api_key = api_key or os.environ.get("OPENAI_API_KEY") or ("EMPTY" if base_url else None)
        if not api_key:
            raise ValueError("no API key: set OPENAI_API_KEY (or KBENCH_LLM_BASE_URL for a local server)")
        super().__init__(model=model, **kwargs)
        self.base_url = base_url
        self.extra_body = dict(extra_body or {})
        self._openai = openai
        # The client's own retries are off: LLMClient.complete retries, so the accounting sees every attempt.
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=self.timeout, max_retries=0)

    def _complete(self, messages, temperature, max_tokens, seed):
        kwargs = dict(model=self.model, messages=messages, temperature=temperature, max_tokens=max_tokens)
        if seed is not None:
            kwargs["seed"] = seed
        if self.extra_body:
            kwargs["extra_body"] = self.extra_body
        resp = self._client.chat.completions.create(**kwargs)
        text = resp.choices[0].message.content or ""
        usage = getattr(resp, "usage", None)
        p_tok = getattr(usage, "prompt_tokens", None) or approx_tokens("".join(m["content"] for m in messages))
        c_tok = getattr(usage, "completion_tokens", None) or approx_tokens(text)
        return text, int(p_tok), int(c_tok)

    def _retryable(self, exc):
        o = self._openai
        if isinstance(exc, (o.AuthenticationError, o.PermissionDeniedError, o.NotFoundError, o.BadRequestError)):
            return False
        return True

    def describe(self):
        return f"openai-compatible {self.model} at {self.base_url or 'api.openai.com'}"


# ====================================================================== local transformers model
class TransformersClient(LLMClient):
    """A local ``transformers`` causal LM (a path or hub id already on disk), one generation at a time.

    Args:
        model_path: folder with the model and tokenizer.
        device: "auto" (cuda if available), "cpu", "cuda", ...
        dtype: "auto", "bfloat16", "float16", "float32".
        (the rest: see ``LLMClient``; ``max_concurrency`` is forced to 1: one model, one generate at a time)
    """

    def __init__(self, model_path: str, device: str = "auto", dtype: str = "auto", **kwargs):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        kwargs["max_concurrency"] = 1
        kwargs.setdefault("max_retries", 0)
        super().__init__(model=os.path.basename(os.path.normpath(model_path)) or model_path, **kwargs)
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = device
        torch_dtype = "auto" if dtype == "auto" else getattr(torch, dtype)
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.lm = AutoModelForCausalLM.from_pretrained(model_path, torch_dtype=torch_dtype).to(device)
        self.lm.eval()

    def _complete(self, messages, temperature, max_tokens, seed):
        import torch

        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        else:
            prompt = "\n\n".join(f"{m['role'].upper()}: {m['content']}" for m in messages) + "\n\nASSISTANT: "
        enc = tok(prompt, return_tensors="pt").to(self.device)
        if seed is not None:
            torch.manual_seed(seed)
        gen = dict(max_new_tokens=max_tokens, do_sample=temperature > 0,
                   pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
        if temperature > 0:
            gen["temperature"] = temperature
        with torch.no_grad():
            out = self.lm.generate(**enc, **gen)
        new = out[0, enc["input_ids"].shape[1]:]
        return tok.decode(new, skip_special_tokens=True), int(enc["input_ids"].shape[1]), int(new.shape[0])


# ====================================================================== deterministic offline client
class OfflineClient(LLMClient):
    """A deterministic, model-free client for tests and demos.

    With ``responder=f``, replies ``f(messages, call_index)``; with ``replies=[...]``, cycles through them.
    Otherwise it plays a plausible kernel engineer, deterministically (a hash of the conversation and ``seed``):

    - asked for a kernel (a prompt that begins ``Task <name>:`` as ``build_prompt`` writes it), it answers with the
      suite's shipped solution for the backend and format the prompt names, in a fenced code block; when the prompt holds
      code blocks with ``// kbench-tune:`` constants (a parent to improve), it answers with the last of them
      with one tunable constant changed to another listed value (or two parents' choices combined);
    - asked by a soft verifier (a prompt containing ``VERDICT-JSON``), it answers a JSON verdict from simple
      source heuristics (see ``heuristic_verdict``);
    - for a task with no shipped solution, it answers a ``ModelNew`` with no kernel (which the screen rejects).

    Token counts are estimated (``approx_tokens``); cost is zero.
    """

    def __init__(self, responder: Callable[[list[dict], int], str] | None = None, replies: list[str] | None = None,
                 seed: int = 0, **kwargs):
        kwargs.setdefault("max_retries", 0)
        super().__init__(model=kwargs.pop("model", "offline"), **kwargs)
        self.responder = responder
        self.replies = list(replies or [])
        self.seed = seed
        self._count = 0

    def _complete(self, messages, temperature, max_tokens, seed):
        with self._lock:
            i = self._count
            self._count += 1
        if self.responder is not None:
            text = self.responder(messages, i)
        elif self.replies:
            text = self.replies[i % len(self.replies)]
        else:
            text = default_offline_reply(messages, seed=self.seed if seed is None else seed)
        prompt = "".join(m["content"] for m in messages)
        return text, approx_tokens(prompt), approx_tokens(text)


_TASK_LINE = re.compile(r"^Task (\S+)", re.MULTILINE)
_BACKEND_LINE = re.compile(r"Backend: (\w+)\.")
_FORMAT_LINE = re.compile(r"^Answer format: (\w+)", re.MULTILINE)
# Fences at the start of a line only: prompts mention "```python" inside sentences too.
_CODE = re.compile(r"^```[ \t]*[\w+-]*[ \t]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def default_offline_reply(messages: list[dict], seed: int = 0) -> str:
    """The offline client's stand-in for a model (see ``OfflineClient``)."""
    text = "\n".join(m["content"] for m in messages)
    rng = random.Random(int.from_bytes(hashlib.sha256(f"{seed}\0{text}".encode()).digest()[:8], "little"))
    if "VERDICT-JSON" in text:
        blocks = _CODE.findall(messages[-1]["content"])
        return json.dumps(heuristic_verdict(blocks[-1] if blocks else ""))
    from kbench_agents.tunables import crossover as tune_crossover, mutate as tune_mutate, parse_tunables

    parents = [b for b in _CODE.findall(messages[-1]["content"]) if "ModelNew" in b and parse_tunables(b)]
    if not parents:  # a multi-turn conversation: improve the model's own previous answer
        last = next((m["content"] for m in reversed(messages) if m["role"] == "assistant"), "")
        parents = [b for b in _CODE.findall(last) if "ModelNew" in b and parse_tunables(b)][-1:]
    if len(parents) >= 2 and "Combine" in messages[-1]["content"]:
        child = tune_crossover(parents[-2], parents[-1], rng)
        if child is not None:
            return f"Combining the two parents' best choices:\n\n```python\n{child}```\n"
    if parents:
        child = tune_mutate(parents[-1], rng)
        if child is not None:
            return f"Trying another tile/chunk setting:\n\n```python\n{child}```\n"
    m = _TASK_LINE.search(text)
    b = _BACKEND_LINE.search(text)
    f = _FORMAT_LINE.search(text)
    if m:
        from kbench_env.tasks.suite import resolve_task, solution_path

        try:
            path = solution_path(resolve_task(m.group(1).rstrip(":")), b.group(1) if b else "cpu",
                                 f.group(1) if f else "kernelbench")
        except Exception:  # noqa: BLE001 - an unknown task gets the no-kernel answer
            path = None
        if path is not None:
            return f"Here is a kernel implementation:\n\n```python\n{path.read_text()}```\n"
    return ("I could not write a kernel for this one.\n\n```python\nimport torch.nn as nn\n\n"
            "class ModelNew(nn.Module):\n    def forward(self, *args):\n        return args[0]\n```\n")


def heuristic_verdict(source: str) -> dict:
    """Simple source heuristics in the soft verifier's answer format (used by the offline client)."""
    builds = re.search(r"load_inline|\bload\(|cpp_kernel|cuda_kernel|triton\.jit", source)
    compile_fail = not builds or source.count("{") != source.count("}")
    memory = bool(re.search(r"\bnullptr\s*;|\[\s*-\s*1\s*\]|<=\s*n\b|<=\s*numel", source))
    numerics = bool(re.search(r"__fp16|half\b|-ffast-math", source))
    return {"compile_error": compile_fail, "memory_error": memory, "numerics_error": numerics,
            "reason": "offline heuristics: kernel build call and brace balance, null or out-of-range indexing, "
                      "reduced precision"}


# ====================================================================== factory
def make_client(kind: str = "openai", **kwargs) -> LLMClient:
    """``"openai"`` (an OpenAI-compatible endpoint), ``"transformers"`` (``model_path=``) or ``"offline"``."""
    kind = kind.lower()
    if kind in ("openai", "api", "endpoint"):
        return OpenAIClient(**kwargs)
    if kind in ("transformers", "hf", "local"):
        return TransformersClient(**kwargs)
    if kind == "offline":
        return OfflineClient(**kwargs)
    raise ValueError(f"unknown LLM client kind {kind!r}: openai, transformers or offline")


__all__ = ["LLMClient", "LLMError", "OpenAIClient", "OfflineClient", "TransformersClient", "Usage", "make_client",
           "approx_tokens", "heuristic_verdict", "default_offline_reply"]
