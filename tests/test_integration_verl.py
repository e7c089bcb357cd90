"""kbench's verl adapters (``kbench_apps.integrations.verl_reward``, ``verl_interaction``, ``verl_data``).

verl is not installed here: verl 0.9.1 requires transformers<5.11, which the [train] extra's TRL stack excludes
(transformers>=5.17), and brings 65 packages (ray[default], wandb, tensorboard, ...). So these tests make the calls
verl makes, in the form its source makes them (the file of each is named at its test), on the adapters' real
evaluations; ``bench/verl_contract.py`` runs the same adapters inside verl's own classes where verl is installed
(and this file checks the installed verl's source too, when there is one). Pinned against: verl 0.9.1, and verl
0.7.1 for the interaction interface (verl 0.8 removed ``verl/interactions``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from kbench_apps.integrations import episode, verl_data, verl_reward
from kbench_apps.integrations.verl_interaction import KBenchInteraction
from kbench_env.env.env import KBenchEnv
from kbench_env.tasks.suite import resolve_task, solution_path
from tests.serving_server import TOKEN, ServerProcess

VERL_VERSION = "0.9.1"
TASK = "level1/relu"
GOOD = solution_path(resolve_task(TASK), "cpu").read_text()
# the shipped kernel (its build is reused), its output replaced by one column repeated: wrong values
WRONG = GOOD + '''

_Correct = ModelNew


class ModelNew(_Correct):
    def forward(self, x):
        out = super().forward(x)
        return out[:, :1].expand_as(out)
'''


def fenced(source: str) -> str:
    return f"Here is the kernel.\n```python\n{source}```\n"


@pytest.fixture(scope="module")
def row():
    """A row as verl_data writes it (extra_info holds the prompt's settings)."""
    (r,) = verl_data.build_rows([resolve_task(TASK)], verl_reward.prompt_settings("cpu", suite="default"), "train")
    return r


@pytest.fixture()
def scoring(evaluator, monkeypatch):
    """compute_score on the session's CPU evaluator, counting its evaluate_many calls (which still run)."""
    calls = []
    real = evaluator.evaluate_many

    def counted(items, *args, **kwargs):
        calls.append(len(items))
        return real(items, *args, **kwargs)

    monkeypatch.setattr(evaluator, "evaluate_many", counted)
    verl_reward.use_evaluator(evaluator)
    yield calls
    verl_reward.use_evaluator(None)


def test_per_sample_form_as_the_reward_managers_call_it(scoring, row):
    """verl/experimental/reward_loop/reward_manager/naive.py (the trainer's default) and
    verl/workers/reward_manager/naive.py: keyword arguments, extra_info = the row's plus num_turns and
    rollout_reward_scores; a dict answer's "score" is the reward, its other keys reward_extra_info."""
    extra = {**row["extra_info"], "num_turns": None, "rollout_reward_scores": {}}
    good = verl_reward.compute_score(data_source=row["data_source"], solution_str=fenced(GOOD),
                                     ground_truth=row["reward_model"]["ground_truth"], extra_info=dict(extra))
    wrong = verl_reward.compute_score(data_source="kbench", solution_str=fenced(WRONG), ground_truth=TASK,
                                      extra_info=dict(extra), reward_router_address=None, reward_model_tokenizer=None)
    assert tuple(good) == tuple(wrong) == verl_reward.SCORE_KEYS
    assert good["acc"] == 1.0 and good["score"] > 0 and good["speedup"] > 0 and good["stage"] == "timed", good
    assert wrong["acc"] == 0.0 and wrong["score"] == pytest.approx(-0.2) and wrong["speedup"] is None, wrong
    assert wrong["compiled"] == 1.0 and wrong["stage"] == "ran"


def test_batched_form_as_batch_reward_manager_calls_it(scoring, row):
    """verl/workers/reward_manager/batch.py (BatchRewardManager.verify): data_sources and extra_infos are NumPy
    object arrays, each extra_info with rollout_reward_scores; one answer per sample, in order. The batch is one
    evaluate_many, and its dicts have one key set (verl/experimental/agent_loop/agent_loop.py, _postprocess, takes
    the first sample's keys and indexes every sample with them)."""
    infos = np.array([{**row["extra_info"], "rollout_reward_scores": {}} for _ in range(2)], dtype=object)
    scores = verl_reward.compute_score(data_sources=np.array(["kbench"] * 2, dtype=object),
                                       solution_strs=[fenced(WRONG), fenced(GOOD)], ground_truths=[TASK, TASK],
                                       extra_infos=infos)
    assert scoring == [2]
    assert [s["acc"] for s in scores] == [0.0, 1.0] and scores[0]["score"] < 0 < scores[1]["score"]
    keys = list(scores[0].keys())
    columns = {k: np.array([s[k] for s in scores]) for k in keys}  # what verl does with them
    assert set(columns) == set(verl_reward.SCORE_KEYS) and len(columns["speedup"]) == 2


def test_an_episode_already_scored_by_its_turns_is_not_evaluated_again(scoring, row):
    """The interaction's turn rewards reach the reward function as extra_info["turn_scores"] (the agent loop's
    extra fields, merged in by the reward loop's naive manager): the episode's reward (the best turn's less
    turn_cost per turn after the first, or the last turn's), nothing evaluated."""
    turns = [-0.2, 0.9, 0.5]
    got = verl_reward.compute_score(data_source="kbench", solution_str="(the whole conversation)", ground_truth=TASK,
                                    extra_info={**row["extra_info"], "turn_scores": turns}, turn_cost=0.05)
    assert scoring == [] and got["stage"] == "episode" and tuple(got) == verl_reward.SCORE_KEYS
    assert got["score"] == pytest.approx(0.9 - 2 * 0.05)
    last = verl_reward.compute_score(data_source="kbench", solution_str="", ground_truth=TASK, mode="last",
                                     extra_info={**row["extra_info"], "turn_scores": turns})
    assert last["score"] == pytest.approx(0.5 - 2 * 0.02)


def test_settings_that_differ_from_the_prompts_are_refused(scoring, row):
    """A prompt written for one device, backend or format is not scored under another, and an option that is not
    one is an error rather than ignored."""
    with pytest.raises(ValueError, match="written for device='cpu'"):
        verl_reward.compute_score("kbench", GOOD, TASK, dict(row["extra_info"]), device="cuda")
    other = {**row["extra_info"], "kbench": {**row["extra_info"]["kbench"], "backend": "cuda", "device": "cuda"}}
    with pytest.raises(ValueError, match="other settings than the evaluator's"):
        verl_reward.compute_score("kbench", GOOD, TASK, other)
    with pytest.raises(TypeError, match="unknown option"):
        verl_reward.compute_score("kbench", GOOD, TASK, dict(row["extra_info"]), devise="cpu")
    assert scoring == []


def test_a_factory_from_the_environment_makes_the_evaluator_once(evaluator, row, tmp_path, monkeypatch):
    """``$KBENCH_VERL_FACTORY=module:function`` (or ``factory=``): called with the sample's options, once per
    process for them; its evaluator scores the samples."""
    (tmp_path / "kbench_factory_probe.py").write_text(
        "CALLS = []\nEVALUATOR = None\n\ndef make(**options):\n    CALLS.append(options)\n    return EVALUATOR\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    probe = importlib.import_module("kbench_factory_probe")
    probe.EVALUATOR = evaluator
    monkeypatch.setattr(episode, "_SHARED", {})  # the session's evaluator is not the shared cache's to close
    monkeypatch.setenv(verl_reward.FACTORY_ENV, "kbench_factory_probe:make")
    scores = verl_reward.compute_score(data_sources=["kbench"] * 2, solution_strs=[fenced(WRONG)] * 2,
                                       ground_truths=[TASK] * 2, extra_infos=[row["extra_info"]] * 2)
    assert [s["acc"] for s in scores] == [0.0, 0.0] and len(probe.CALLS) == 1
    assert probe.CALLS[0]["device"] == "cpu" and probe.CALLS[0]["backend"] == "cpu"


def test_verl_and_the_other_adapters_share_one_evaluator_per_setting(row, monkeypatch):
    """One cache per process: the Evaluator verl's reward makes for a prompt's settings is the one that a shared
    source of the other adapters (SkyRL-gym, verifiers, inspect) with those settings gives its envs, whatever its
    episodes' options; it is kept between calls, and other settings get another."""
    monkeypatch.setattr(episode, "_SHARED", {})  # this test's evaluators only, closed below
    settings = row["extra_info"]["kbench"]
    try:
        ours = verl_reward.evaluator_for(verl_reward.sample_options(row["extra_info"], {}))
        source = episode.shared_source(suite="default", max_turns=2,
                                       **{k: settings[k] for k in verl_reward.PROMPT_SETTINGS})
        env = source.make()
        try:
            assert env.unwrapped.evaluator is ours
        finally:
            env.close()
        assert verl_reward.evaluator_for(verl_reward.sample_options(row["extra_info"], {})) is ours
        binary = verl_reward.evaluator_for(verl_reward.sample_options(row["extra_info"], {"reward": "binary"}))
        assert binary is not ours and binary.reward_fn is not ours.reward_fn
        assert episode.shared_source(reward="binary", **{k: settings[k] for k in verl_reward.PROMPT_SETTINGS}
                                     )._evaluator() is binary
    finally:
        episode.close_shared()


def test_interaction_runs_an_episode_over_two_turns(evaluator, row):
    """verl 0.7.1's ToolAgentLoop: start_interaction(request_id, **interaction_kwargs) (its "name" among them),
    generate_response(request_id, messages, **interaction_kwargs) -> (done, text, reward, info); the text becomes
    the next user message. The env's feedback and reward, turn by turn."""
    verl_reward.use_evaluator(evaluator)
    kwargs = dict(row["extra_info"]["interaction_kwargs"])
    interaction = KBenchInteraction({"name": "kbench", "max_turns": 2})

    async def episode():
        iid = await interaction.start_interaction("request-1", **kwargs)
        messages = list(row["prompt"]) + [{"role": "assistant", "content": fenced(WRONG)}]
        first = await interaction.generate_response(iid, messages, **kwargs)
        messages += [{"role": "user", "content": first[1]}, {"role": "assistant", "content": fenced(GOOD)}]
        second = await interaction.generate_response(iid, messages, **kwargs)
        score = await interaction.calculate_score(iid)
        summary = interaction.episode_summary(iid)
        await interaction.finalize_interaction(iid)
        return iid, first, second, score, summary

    try:
        iid, first, second, score, summary = asyncio.run(episode())
    finally:
        verl_reward.use_evaluator(None)
    done, feedback, reward, info = first
    assert iid == "request-1" and not done and reward == pytest.approx(-0.2) and not info["correct"]
    assert "configuration 'small'" in feedback and "Attempt 1 of 2" in feedback, feedback
    done, feedback, reward, info = second
    assert done and info["correct"] and reward > 0 and info["turn"] == 2
    assert score == pytest.approx(reward - 0.02) and summary["score"] == score and summary["acc"] == 1.0
    with pytest.raises(KeyError, match="no open kbench episode"):
        interaction.turn_rewards(iid)


def test_interaction_config_is_checked():
    with pytest.raises(ValueError, match="unknown config key"):
        KBenchInteraction({"name": "kbench", "max_turn": 2})
    with pytest.raises(ValueError, match="max_turns"):
        KBenchInteraction({"name": "kbench", "max_turns": 0})


def test_the_call_forms_verl_uses_bind_to_the_adapters():
    """The signatures, as verl calls them (files above); where verl is installed, its source still calls so."""
    sig = inspect.signature(verl_reward.compute_score)
    sig.bind(data_source="kbench", solution_str="s", ground_truth=TASK, extra_info={})
    sig.bind(data_sources=["kbench"], solution_strs=["s"], ground_truths=[TASK], extra_infos=[{}])
    i = KBenchInteraction({"name": "kbench"})
    inspect.signature(i.start_interaction).bind("rid", name="kbench", task=TASK, kbench={})
    inspect.signature(i.generate_response).bind("rid", [], name="kbench", task=TASK)
    inspect.signature(i.calculate_score).bind()
    inspect.signature(i.calculate_score).bind("rid")
    inspect.signature(i.finalize_interaction).bind("rid")
    if importlib.util.find_spec("verl") is None:
        return
    from verl.workers.reward_manager.batch import BatchRewardManager
    from verl.workers.reward_manager.naive import NaiveRewardManager

    batch, naive = inspect.getsource(BatchRewardManager.verify), inspect.getsource(NaiveRewardManager.__call__)
    for form in ("data_sources=data_sources", "solution_strs=responses_str", "ground_truths=ground_truths",
                 "extra_infos=extras"):
        assert form in batch, form
    for form in ("data_source=data_source", "solution_str=response_str", "ground_truth=ground_truth"):
        assert form in naive, form


def test_parquet_layout_and_no_held_out_configuration_in_the_prompt(tmp_path, evaluator, capsys):
    """verl/utils/dataset/rl_dataset.py's columns; the prompt is what KBenchEnv.reset returns, held-out
    configurations as a count only (no name, no shape)."""
    verl_data.main(["--suite", "default", "--test-suite", TASK, "--out", str(tmp_path), "--device", "cpu"])
    assert "train: 4 rows" in capsys.readouterr().out
    train, test = (pq.read_table(tmp_path / f"{s}.parquet").to_pylist() for s in ("train", "test"))
    assert [r["reward_model"]["ground_truth"] for r in test] == [TASK]
    for index, r in enumerate(train):
        assert set(r) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
        name = r["reward_model"]["ground_truth"]
        assert r["data_source"] == "kbench" and r["reward_model"]["style"] == "rule"
        assert r["extra_info"]["index"] == index and r["extra_info"]["split"] == "train"
        assert r["extra_info"]["interaction_kwargs"]["name"] == "kbench"
        assert r["extra_info"]["interaction_kwargs"]["task"] == name == r["extra_info"]["task"]
        assert [m["role"] for m in r["prompt"]] == ["system", "user"]
        task = resolve_task(name)
        env = KBenchEnv(task=task, evaluator=evaluator)
        assert r["prompt"][1]["content"] == env.reset()[0]
        env.close()
        text = json.dumps(r)
        configs = task.configs_for("cpu")
        shown = {s for c in configs if not c.held_out for s in task.input_shapes(c)}
        held = [c for c in configs if c.held_out]
        assert held and f"{len(held)} held-out configuration" in r["prompt"][1]["content"]
        for c in held:
            for shape in set(task.input_shapes(c)) - shown:
                assert shape not in text and shape.split("[", 1)[1].rstrip("]") not in text, (name, shape)
            assert f"'{c.name}'" not in text and f"{c.name} (held out)" not in text and f"- {c.name}:" not in text


def test_scoring_on_a_kbench_serve_server(row):
    """``url=`` (verl's reward_kwargs): the samples go to the server's /batch by task name."""
    server = ServerProcess("--expose-info", "--suite", TASK)
    try:
        scores = verl_reward.compute_score(data_sources=["kbench"] * 2, solution_strs=[fenced(GOOD), fenced(WRONG)],
                                           ground_truths=[TASK, TASK], extra_infos=[row["extra_info"]] * 2,
                                           url=server.url, token=TOKEN)
    finally:
        verl_reward.close_evaluators()
        server.stop()
    assert [s["acc"] for s in scores] == [1.0, 0.0] and scores[1]["score"] == pytest.approx(-0.2)
