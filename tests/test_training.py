"""GRPO training against the env, offline on the CPU: a tokenizer trained here on the suite's text and a random
2-layer Qwen2 train for two steps, single and multi turn, and the rewards the trainer sees are the env's.

A random model writes garbage, which the screen rejects in milliseconds (-0.6); the reward path for real kernels is
proven on the shipped ReLU solution (reward function directly, and the multi-turn rollout with scripted attempts).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("trl")
pytest.importorskip("datasets")

from kbench_env.pipeline.evaluator import Evaluator  # noqa: E402
from kbench_env.env.prompt import SYSTEM_PROMPT  # noqa: E402
from kbench_env.pipeline.reward import INVALID  # noqa: E402
from kbench_env.tasks.suite import resolve_task, solution_path  # noqa: E402
from kbench_training.data import build_dataset, load_tasks, prompt_index, task_messages  # noqa: E402
from kbench_training.rewards import KBenchReward, completion_text  # noqa: E402
from kbench_training.rollout import MultiTurnRollout, episode_reward, feedback_suffix_ids, truncate_feedback  # noqa: E402

RELU = "level1/relu"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A local tiny model directory (tokenizer trained on tasks/**/*.py, random 2-layer Qwen2)."""
    from kbench_training.tiny import build_model, build_tokenizer

    out = tmp_path_factory.mktemp("tiny-qwen2")
    tok = build_tokenizer(vocab_size=1024)
    build_model(tok, hidden=64, layers=2).save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def tokenizer(tiny):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny)


@pytest.fixture(scope="module")
def untimed():
    """Correctness only: a correct candidate earns exactly 1.0, so rewards compare exactly across evaluations."""
    return Evaluator(device="cpu", time_candidates=False)


@pytest.fixture(scope="module")
def relu_solution() -> str:
    return solution_path(resolve_task(RELU), "cpu").read_text()


# ---------------------------------------------------------------------------------------------- data


def test_dataset_prompt_is_the_envs_prompt():
    from kbench_env.env.env import KBenchEnv

    tasks = load_tasks("default", "cpu")
    ds = build_dataset(tasks, "cpu", "cpu", repeats=3)
    assert len(ds) == 3 * len(tasks) and set(ds.column_names) == {"prompt", "task"}
    row = ds[0]
    obs, _ = KBenchEnv(task=row["task"], device="cpu").reset()
    assert row["prompt"] == [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": obs}]
    assert prompt_index(tasks, "cpu", "cpu")[obs].name == row["task"]


def test_tiny_tokenizer(tokenizer):
    assert tokenizer.padding_side == "left" and tokenizer.pad_token is not None
    text = "at::Tensor relu(const at::Tensor& x) { return x; }  // ü"
    assert tokenizer.decode(tokenizer(text)["input_ids"]) == text  # byte-level: lossless
    msgs = [{"role": "user", "content": "hi"}]
    rendered = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert rendered == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


# ---------------------------------------------------------------------------------------------- single turn


def test_reward_function_batch_equals_evaluate(untimed, relu_solution):
    """All completions of a batch in one evaluate_many call; each reward is Evaluator.evaluate's, in order."""
    task = resolve_task(RELU)
    fenced = f"Here is my kernel:\n```python\n{relu_solution}```\n"
    completions = [[{"role": "assistant", "content": relu_solution}], [{"role": "assistant", "content": "garbage"}],
                   [{"role": "assistant", "content": fenced}]]
    logged = {}
    fn = KBenchReward(untimed, [task], max_workers=2)
    rewards = fn(prompts=[None] * 3, completions=completions, task=[RELU] * 3,
                 log_metric=lambda k, v: logged.__setitem__(k, v))
    direct = [untimed.evaluate(task, completion_text(c)).reward for c in completions]
    assert rewards == direct == [1.0, INVALID, 1.0]
    assert logged["kbench/compile_rate"] == pytest.approx(2 / 3)
    assert logged["kbench/correct_rate"] == pytest.approx(2 / 3)
    assert logged["kbench/integrity_flag_rate"] == 0.0


def test_reward_function_timed_shipped_solution(evaluator, relu_solution):
    """With timing, the shipped ReLU earns a positive reward, as Evaluator.evaluate gives it (speedups vary
    between timings, so the two agree on the tier, not to the last digit)."""
    task = resolve_task(RELU)
    fn = KBenchReward(evaluator, [task], keep_history=True)
    (reward,) = fn(prompts=[None], completions=[relu_solution], task=[RELU])
    (_, _, result), = fn.history
    assert result.correct and result.speedup is not None and reward == result.reward > 0
    direct = evaluator.evaluate(task, relu_solution)
    assert direct.correct and direct.reward > 0
    assert "kbench/speedup_mean" in fn.summary()


def _args(model_dir, out, **over):
    from kbench_training.grpo import parse_args

    argv = ["--model", str(model_dir), "--device", "cpu", "--max-steps", "2", "--num-generations", "4",
            "--per-device-batch-size", "4", "--max-completion-length", "12", "--output-dir", str(out), "--no-save",
            "--no-gradient-checkpointing", "--eval-workers", "2"]
    for k, v in over.items():
        argv += [f"--{k.replace('_', '-')}"] + ([] if v is True else [str(v)])
    return parse_args(argv)


def _capture_rewards(trainer) -> list:
    """Record the rewards the trainer computes (the per-function tensor it turns into advantages)."""
    seen = []
    original = trainer._calculate_rewards

    def wrapped(*a, **k):
        out = original(*a, **k)
        seen.append(out[:, 0].tolist())
        return out

    trainer._calculate_rewards = wrapped
    return seen


def test_single_turn_training(tiny, tmp_path):
    from kbench_training.grpo import build_trainer

    trainer, reward_fn, _ = build_trainer(_args(tiny, tmp_path))
    reward_fn.keep_history = True
    seen = _capture_rewards(trainer)
    trainer.train()
    assert trainer.state.global_step == 2
    flat = [r for batch in seen for r in batch]
    assert len(flat) == len(reward_fn.history) == 8
    # the trainer's rewards are the env's: evaluate the same completions directly
    for r, (name, text, result) in zip(flat, reward_fn.history):
        assert r == pytest.approx(result.reward)
        assert reward_fn.evaluator.evaluate(resolve_task(name), text).reward == pytest.approx(r)
    logs = [json.loads(line) for line in (Path(tmp_path) / "log.jsonl").read_text().splitlines()]
    step_logs = [x for x in logs if "kbench/compile_rate" in x]
    assert len(step_logs) == 2 and all(x["reward"] == pytest.approx(sum(b) / len(b)) for x, b in zip(step_logs, seen))


def test_single_turn_training_lora(tiny, tmp_path):
    pytest.importorskip("peft")
    from kbench_training.grpo import build_trainer

    trainer, _, _ = build_trainer(_args(tiny, tmp_path, lora=True, max_steps=1))
    trainer.train()
    assert trainer.state.global_step == 1 and hasattr(trainer.model, "peft_config")


# ---------------------------------------------------------------------------------------------- multi turn


def test_episode_reward_and_feedback_helpers(tokenizer):
    assert episode_reward([-0.6, 1.0, 0.05], "best", 0.02) == pytest.approx(0.96)
    assert episode_reward([-0.6, 1.0, 0.05], "last", 0.02) == pytest.approx(0.01)
    assert episode_reward([1.2], "best", 0.5) == 1.2
    with pytest.raises(ValueError):
        episode_reward([0.0], "mean")
    long = "ERROR\n" + "x" * 10_000 + "\nAttempt 1 of 4. Send an improved ModelNew."
    short = truncate_feedback(long, 500)
    assert len(short) <= 500 and short.startswith("ERROR") and short.endswith("Send an improved ModelNew.")
    suffix = feedback_suffix_ids(tokenizer, "it failed")
    assert tokenizer.decode(suffix) == "\n<|im_start|>user\nit failed<|im_end|>\n<|im_start|>assistant\n"


def _fake_trainer(tokenizer, scripted: list, num_processes: int = 1):
    """The parts of a GRPOTrainer a rollout uses, with generation replaced by scripted attempts: ``scripted[turn]``
    is one text for every context of that turn's call, or a list with one text per context."""
    calls = []

    def generate(ids, images, fields, n):
        texts = scripted[len(calls)]
        calls.append(ids)
        texts = [texts] * len(ids) if isinstance(texts, str) else texts
        return [tokenizer(t)["input_ids"] + [tokenizer.eos_token_id] for t in texts[: len(ids)]], None

    return SimpleNamespace(processing_class=tokenizer, chat_template_kwargs={}, chat_template=None,
                           eos_token_ids=[tokenizer.eos_token_id], use_vllm=False,
                           args=SimpleNamespace(max_completion_length=4096),
                           accelerator=SimpleNamespace(num_processes=num_processes),
                           model=SimpleNamespace(config=SimpleNamespace(max_position_embeddings=1 << 20)),
                           _generate_single_turn=generate), calls


def test_rollout_feeds_env_feedback_back(untimed, tokenizer, relu_solution):
    """Turn 1 garbage, turn 2 the shipped solution: the env's feedback on turn 1 is the user message of turn 2,
    per-turn rewards are the env's, and the episode reward is the best minus the turn cost."""
    from kbench_env.env.env import KBenchEnv

    tasks = [resolve_task(RELU)]
    rollout = MultiTurnRollout(untimed, tasks, "cpu", "cpu", max_turns=2, turn_cost=0.02, keep_history=True)
    trainer, calls = _fake_trainer(tokenizer, ["not a kernel", relu_solution])
    prompt = task_messages(tasks[0], "cpu", "cpu")
    out = rollout([prompt, prompt], trainer)
    assert set(out) == {"prompt_ids", "completion_ids", "logprobs", "env_mask", "kbench_episode"}
    assert out["logprobs"] is None and len(calls) == 2
    env = KBenchEnv(task=RELU, evaluator=untimed, max_turns=2)
    env.reset()
    obs1, r1, *_ = env.step("not a kernel")
    _, r2, *_ = env.step(relu_solution)
    for i, ep in enumerate(out["kbench_episode"]):
        assert ep["turn_rewards"] == [r1, r2] == [INVALID, 1.0]
        assert ep["reward"] == pytest.approx(1.0 - 0.02)
        ids, mask = out["completion_ids"][i], out["env_mask"][i]
        assert len(ids) == len(mask) and mask[0] == 1 and mask[-1] == 1 and 0 in mask
        feedback = tokenizer.decode([t for t, m in zip(ids, mask) if m == 0])
        assert feedback == f"\n<|im_start|>user\n{obs1}<|im_end|>\n<|im_start|>assistant\n"
        # turn 2 was generated from the prompt, attempt 1 and the feedback, token for token
        assert calls[1][i] == out["prompt_ids"][i] + ids[: len(ids) - mask[::-1].index(0)]
        assert rollout.history[i]["attempts"] == ["not a kernel", relu_solution]


def test_rollout_feedback_hides_held_out_configurations(untimed, tokenizer, relu_solution):
    """A wrong first attempt reaches every configuration: the feedback sent back to the model names the held-out
    ones only as "held-out configuration k of n", with no shape or name of theirs."""
    import candidates

    task = resolve_task(RELU)
    rollout = MultiTurnRollout(untimed, [task], "cpu", "cpu", max_turns=2, keep_history=True)
    trainer, _ = _fake_trainer(tokenizer, [candidates.WRONG_SHAPE, relu_solution])
    out = rollout([task_messages(task, "cpu", "cpu")], trainer)
    ids, mask = out["completion_ids"][0], out["env_mask"][0]
    feedback = tokenizer.decode([t for t, m in zip(ids, mask) if m == 0])
    assert "held-out configuration 1 of 2" in feedback, feedback
    for c in task.configs_for("cpu"):
        if c.held_out:
            for secret in [*task.input_shapes(c), repr(c.name), f"{c.name} (held out)"]:
                assert secret not in feedback, f"{secret!r} in the rollout's feedback:\n{feedback}"


def test_rollout_episode_ends_when_env_terminates(evaluator, tokenizer, relu_solution):
    """With target_speedup, the env ends an episode at its first correct attempt that fast; across processes, every
    process still generates a full batch each turn (vLLM server mode slices the gathered batch by process)."""
    tasks = [resolve_task(RELU)]
    rollout = MultiTurnRollout(evaluator, tasks, "cpu", "cpu", max_turns=2, turn_cost=0.02, target_speedup=1e-6)
    trainer, calls = _fake_trainer(tokenizer, [[relu_solution, "junk"], ["junk", "junk"]], num_processes=2)
    prompt = task_messages(tasks[0], "cpu", "cpu")
    out = rollout([prompt, prompt], trainer)
    solved, failed = out["kbench_episode"]
    assert solved["turns"] == 1 and solved["turn_rewards"][0] > 0 and solved["reward"] == solved["turn_rewards"][0]
    assert failed["turn_rewards"] == [INVALID, INVALID] and failed["reward"] == pytest.approx(INVALID - 0.02)
    assert [len(c) for c in calls] == [2, 2]  # turn 2: one live episode, padded to the process's batch
    assert 0 not in out["env_mask"][0] and 0 in out["env_mask"][1]


def test_multi_turn_training(tiny, tmp_path):
    from kbench_training.grpo import build_trainer

    trainer, rollout, reward_fn = build_trainer(_args(tiny, tmp_path, turns=2, turn_cost=0.05))
    rollout.keep_history = True
    seen = _capture_rewards(trainer)
    trainer.train()
    assert trainer.state.global_step == 2
    flat = [r for batch in seen for r in batch]
    assert len(flat) == len(rollout.history) == 8
    for r, ep in zip(flat, rollout.history):
        assert ep["turns"] == 2 and len(ep["attempts"]) == 2
        direct = [rollout.evaluator.evaluate(resolve_task(ep["task"]), a).reward for a in ep["attempts"]]
        assert ep["turn_rewards"] == pytest.approx(direct)
        assert r == pytest.approx(episode_reward(direct, "best", 0.05))
        mask = ep["env_mask"]
        runs = [m for j, m in enumerate(mask) if j == 0 or mask[j - 1] != m]
        assert runs == [1, 0, 1]  # attempt 1 | the env's feedback | attempt 2
        assert mask.count(1) <= 2 * 12  # --max-completion-length new tokens per turn
    assert "kbench/turn1/compile_rate" in reward_fn.summary()


# ---------------------------------------------------------------------------------------------- against a server


@pytest.fixture(scope="module")
def server():
    """A real ``kbench serve`` process on localhost (CPU, timing off: a reward is exact, as ``untimed``'s)."""
    pytest.importorskip("httpx")
    from tests.serving_server import ServerProcess

    srv = ServerProcess("--workers", "2", "--queue", "8", "--max-batch", "3", "--expose-info")
    yield srv
    srv.stop()


def _evaluations(url: str) -> float:
    import httpx

    from tests.serving_server import TOKEN

    text = httpx.get(url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).text
    return next(float(line.split()[-1]) for line in text.splitlines() if line.startswith("kbench_evaluations_total "))


@pytest.mark.parametrize("turns", [1, 2])
def test_training_against_a_server(tiny, tmp_path, server, untimed, turns):
    """--env-url: the rewards the trainer sees come from the server's /batch (in chunks of its --max-batch), every
    evaluation arrives there (its /metrics count them), and each reward is what an in-process Evaluator pays."""
    from kbench_env.serving.remote import RemoteEvaluator
    from tests.serving_server import TOKEN
    from kbench_training.grpo import build_trainer

    before = _evaluations(server.url)
    trainer, rollout, _ = build_trainer(_args(tiny, tmp_path, env_url=server.url, env_token=TOKEN, turns=turns,
                                              max_steps=1 if turns > 1 else 2))
    assert isinstance(rollout.evaluator, RemoteEvaluator) and rollout.evaluator.chunk == 3
    rollout.keep_history = True
    seen = _capture_rewards(trainer)
    trainer.train()
    flat = [r for batch in seen for r in batch]
    if turns == 1:
        assert trainer.state.global_step == 2 and len(flat) == len(rollout.history) == 8
        for r, (name, text, result) in zip(flat, rollout.history):
            assert r == pytest.approx(result.reward)  # the trainer's tensor is float32
            assert result.reward == untimed.evaluate(resolve_task(name), text).reward
        assert _evaluations(server.url) - before == 8
    else:
        assert trainer.state.global_step == 1 and len(flat) == len(rollout.history) == 4
        for r, ep in zip(flat, rollout.history):
            direct = [untimed.evaluate(resolve_task(ep["task"]), a).reward for a in ep["attempts"]]
            assert ep["turn_rewards"] == direct and r == pytest.approx(episode_reward(direct, "best", 0.02))
        assert _evaluations(server.url) - before == 8  # 4 episodes of 2 turns


def test_remote_evaluator_keeps_the_order_across_chunks(server, untimed, relu_solution):
    """Five items in chunks of the server's --max-batch 3: each result is its own item's, as evaluate_many gives."""
    from kbench_env.serving.remote import RemoteEvaluator
    from tests.serving_server import TOKEN

    task = resolve_task(RELU)
    remote = RemoteEvaluator(server.url, TOKEN)
    assert (remote.device, remote.backend_name, remote.rules) == (untimed.device, untimed.backend_name, untimed.rules)
    items = [(task, relu_solution), (task, "garbage"), (task, "class ModelNew: pass"), (task, relu_solution),
             (task, "x = (")]
    got = [(r.correct, r.reward, r.error_stage) for r in remote.evaluate_many(items)]
    want = [(r.correct, r.reward, r.error_stage) for r in untimed.evaluate_many(items)]
    assert got == want and [c for c, _, _ in got] == [True, False, False, True, False]
    with pytest.raises(ValueError, match="does not serve 1 task.*level9/nope"):
        remote.check_tasks(["level1/relu", "level9/nope"])
    remote.close()


def test_training_against_a_server_refuses_what_the_server_decides(server, tiny, tmp_path):
    from tests.serving_server import TOKEN
    from kbench_training.grpo import build_trainer

    with pytest.raises(SystemExit, match="--reward binary.*set these on `kbench serve`"):
        build_trainer(_args(tiny, tmp_path, env_url=server.url, env_token=TOKEN, reward="binary"))
    with pytest.raises(PermissionError, match="token"):
        build_trainer(_args(tiny, tmp_path, env_url=server.url, env_token="wrong"))
