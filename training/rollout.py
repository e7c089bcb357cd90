"""Multi-turn GRPO rollouts: each generation is one KBench-v0 episode of up to ``max_turns`` attempts.

TRL 1.16 API used: ``GRPOTrainer(..., rollout_func=MultiTurnRollout(...))``. The trainer calls
``rollout_func(prompts, trainer)`` with this process's prompts (each prompt already repeated ``num_generations``
times by TRL's sampler, so one episode per entry) and expects a dict with ``prompt_ids``, ``completion_ids`` and
``logprobs`` (one entry per prompt); other keys go to the reward functions, except ``env_mask``, which marks the
completion tokens the loss trains on (1: written by the model) and those it skips (0: the environment's feedback).
(``environment_factory`` is TRL's other multi-turn API, but it drives the model through *tool calls*: the kernel
would travel as a JSON string argument and the model's chat template must support tool calling. Here the model
answers in plain text and the env's feedback comes back as the next user message, as in ``KBench-v0`` itself.)

One episode, token by token::

    prompt_ids      = chat(system, user: env prompt) + "<assistant>"
    completion_ids  = attempt 1 | feedback 1 (+ "<assistant>") | attempt 2 | feedback 2 | ... | attempt T
    env_mask        =     1...1 |           0...0              |     1...1 |     0...0  | ... |     1...1

Each attempt is generated with the trainer's own generation path (vLLM colocate or server, or transformers
``generate``) through ``GRPOTrainer._generate_single_turn`` with ``max_completion_length`` new tokens per turn;
the attempts of all live episodes of a turn are evaluated together (``Evaluator.evaluate_many``) and recorded in one
``KBenchEnv`` per episode (``env.record``), whose observation (the feedback text) is the next user message and whose
termination / truncation ends the episode, exactly as ``env.step`` would. Attempt tokens are kept as sampled (never
re-tokenized from text); the feedback's tokens are the chat template's rendering of a user turn.

Episode reward (``episode_reward``, in ``kbench_env.pipeline.reward`` for the framework adapters too), with
``r_1..r_T`` the env's per-turn rewards and ``T`` the turns used:

    "best" (default):  max_t r_t - turn_cost * (T - 1)
    "last":            r_T       - turn_cost * (T - 1)

"best" pays for the best kernel the episode produced (what a user of the agent keeps) and does not punish an
exploratory later attempt; the small per-turn cost (default 0.02, one tenth of the gap between tiers) makes solving
in fewer turns worth more. An episode ends early only when the env terminates it (``target_speedup`` reached), so
with ``target_speedup=None`` every episode takes ``max_turns`` turns and the cost is a constant that GRPO's
group normalisation removes.
"""

from __future__ import annotations

import time

from kbench_env.env.env import KBenchEnv
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.pipeline.reward import episode_reward
from kbench_env.tasks.task import Task

from .data import prompt_index

def truncate_feedback(text: str, max_chars: int | None) -> str:
    """Keep the head (the error or the table) and the last line (the env's request for the next attempt)."""
    if not max_chars or len(text) <= max_chars:
        return text
    head, _, last = text.rpartition("\n")
    keep = max(0, max_chars - len(last) - 40)
    return head[:keep] + "\n... (feedback truncated)\n" + last


def feedback_suffix_ids(tokenizer, feedback: str, chat_template_kwargs: dict | None = None,
                        chat_template: str | None = None) -> list[int]:
    """Token ids that follow an assistant turn ending in EOS: the user message ``feedback`` and the generation
    prompt of the next assistant turn (the rendering of a longer conversation minus that of a shorter one, cut
    after the assistant's EOS, as TRL does for tool results)."""
    kw = dict(chat_template_kwargs or {})
    base = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
    prefix = tokenizer.apply_chat_template(base, add_generation_prompt=False, tokenize=True, return_dict=False,
                                           chat_template=chat_template, **kw)
    full = tokenizer.apply_chat_template(base + [{"role": "user", "content": feedback}], add_generation_prompt=True,
                                         tokenize=True, return_dict=False, chat_template=chat_template, **kw)
    eos = [i for i, t in enumerate(prefix) if t == tokenizer.eos_token_id]
    if eos:
        prefix = prefix[: eos[-1] + 1]
    if full[: len(prefix)] != prefix:
        raise ValueError("the chat template is not prefix-preserving: cannot append feedback turns")
    return list(full[len(prefix):])


class MultiTurnRollout:
    """``rollout_func`` for ``GRPOTrainer``: runs one KBench-v0 episode per prompt (see the module docstring).

    Args:
        evaluator: the Evaluator every episode's env shares (one build cache, one device lock).
        tasks: the tasks of the dataset (a prompt is matched to its task by its text).
        backend, device: as the dataset was built with (they shape the prompt text); the action format is the
            evaluator's (``evaluator.format``), as the dataset's prompts must be.
        max_turns: attempts per episode.
        mode, turn_cost: the episode reward (``episode_reward``).
        target_speedup: the env ends an episode early once an attempt is correct and this much faster.
        max_feedback_chars: longest feedback message sent back (head and last line kept).
        max_workers: candidates in flight at once in ``evaluate_many``.
        keep_history: keep every episode's record in ``history`` (tests, debugging).
    """

    def __init__(self, evaluator: Evaluator, tasks: list[Task], backend: str, device: str, max_turns: int = 2,
                 mode: str = "best", turn_cost: float = 0.02, target_speedup: float | None = None,
                 max_feedback_chars: int | None = 4000, max_workers: int | None = None, keep_history: bool = False):
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        episode_reward([0.0], mode, turn_cost)  # validates mode
        self.evaluator = evaluator
        self.index = prompt_index(tasks, backend, device, getattr(evaluator, "format", "kernelbench"))
        self.max_turns = max_turns
        self.mode = mode
        self.turn_cost = turn_cost
        self.target_speedup = target_speedup
        self.max_feedback_chars = max_feedback_chars
        self.max_workers = max_workers
        self.keep_history = keep_history
        self.history: list[dict] = []

    # ------------------------------------------------------------------ helpers
    def _task(self, prompt) -> Task:
        text = prompt[-1]["content"] if isinstance(prompt, list) else prompt
        if isinstance(text, list):  # content blocks
            text = "".join(b.get("text", "") for b in text if isinstance(b, dict))
        try:
            return self.index[text]
        except KeyError:
            raise ValueError("a prompt that is not one of the dataset's task prompts reached the rollout") from None

    @staticmethod
    def _context_limit(trainer) -> int:
        if getattr(trainer, "use_vllm", False) and getattr(trainer, "vllm_mode", None) == "colocate":
            return int(trainer.vllm_generation.llm.llm_engine.model_config.max_model_len)
        limit = getattr(trainer.args, "vllm_max_model_length", None) if getattr(trainer, "use_vllm", False) else None
        return int(limit or getattr(trainer.model.config, "max_position_embeddings", None) or 1 << 30)

    @staticmethod
    def _generate(trainer, ids: list[list[int]]):
        """One attempt per context through the trainer's generation backend."""
        completion_ids, logprobs = trainer._generate_single_turn(ids, None, {}, 1)
        return [list(c) for c in completion_ids], logprobs

    # ------------------------------------------------------------------ the rollout
    def __call__(self, prompts: list, trainer) -> dict:
        tok = trainer.processing_class
        kw = dict(getattr(trainer, "chat_template_kwargs", None) or {})
        template = getattr(trainer, "chat_template", None)
        limit = self._context_limit(trainer)
        per_turn = int(trainer.args.max_completion_length or 256)
        distributed = trainer.accelerator.num_processes > 1

        n = len(prompts)
        envs = []
        for p in prompts:
            env = KBenchEnv(task=self._task(p), evaluator=self.evaluator, max_turns=self.max_turns,
                            target_speedup=self.target_speedup)
            env.reset()
            envs.append(env)
        prompt_ids = [list(tok.apply_chat_template(p, add_generation_prompt=True, tokenize=True, return_dict=False,
                                                   chat_template=template, **kw)) for p in prompts]
        completion = [[] for _ in range(n)]
        env_mask = [[] for _ in range(n)]
        logps: list | None = [[] for _ in range(n)]
        rewards = [[] for _ in range(n)]
        results = [[] for _ in range(n)]
        attempts = [[] for _ in range(n)]
        active = list(range(n))
        t0 = time.perf_counter()

        for turn in range(1, self.max_turns + 1):
            if not active and not distributed:
                break
            contexts = [prompt_ids[i] + completion[i] for i in active]
            if distributed:
                # Every process generates the same number of sequences every turn: vLLM server mode gathers all
                # processes' prompts and hands each process back the slice at process_index * len(prompts), and
                # sharded or tensor-parallel generation runs collectives. Finished episodes are stood in for by
                # a short context whose output is dropped.
                contexts += [prompt_ids[0]] * (n - len(contexts))
            new_ids, new_logps = self._generate(trainer, contexts)
            new_ids = new_ids[: len(active)]
            if not active:
                continue
            if new_logps is None:
                logps = None
            texts = tok.batch_decode(new_ids, skip_special_tokens=True)
            evals = self.evaluator.evaluate_many([(envs[i].task, t) for i, t in zip(active, texts)],
                                                 max_workers=self.max_workers)
            still = []
            for k, i in enumerate(active):
                ids = new_ids[k]
                completion[i] += ids
                env_mask[i] += [1] * len(ids)
                if logps is not None:
                    logps[i] += [float(x[0]) if isinstance(x, (list, tuple)) else float(x) for x in new_logps[k]]
                obs, reward, terminated, truncated, _ = envs[i].record(evals[k])
                rewards[i].append(float(reward))
                results[i].append(evals[k].to_dict())
                attempts[i].append(texts[k])
                if terminated or truncated:
                    continue
                suffix = feedback_suffix_ids(tok, truncate_feedback(obs, self.max_feedback_chars), kw, template)
                if not ids or ids[-1] != tok.eos_token_id:  # cut off (or another stop token): close the turn
                    suffix = [tok.eos_token_id] + suffix
                if len(prompt_ids[i]) + len(completion[i]) + len(suffix) + per_turn > limit:
                    continue  # no room for another attempt in the model's context: the episode ends here
                completion[i] += suffix
                env_mask[i] += [0] * len(suffix)
                if logps is not None:
                    logps[i] += [0.0] * len(suffix)
                still.append(i)
            active = still

        episodes = [{"task": envs[i].task.name, "turns": len(rewards[i]), "turn_rewards": rewards[i],
                     "reward": episode_reward(rewards[i], self.mode, self.turn_cost), "results": results[i]}
                    for i in range(n)]
        if self.keep_history:
            self._keep(episodes, attempts, prompt_ids, completion, env_mask, t0)
        return {"prompt_ids": prompt_ids, "completion_ids": completion, "logprobs": logps, "env_mask": env_mask,
                "kbench_episode": episodes}

    def _keep(self, episodes, attempts, prompt_ids, completion, env_mask, t0: float) -> None:
        """Appends each episode to ``history`` with its attempts' texts and token ids (``keep_history``)."""
        for i, ep in enumerate(episodes):
            self.history.append({**ep, "attempts": attempts[i], "prompt_ids": prompt_ids[i],
                                 "completion_ids": list(completion[i]), "env_mask": list(env_mask[i]),
                                 "rollout_seconds": time.perf_counter() - t0})
