"""kbench's verl adapters inside verl's own classes (needs verl: ``pip install 'kbench[verl]'``, or verl's wheel and
the few packages it imports on ``PYTHONPATH``; CPU is enough).

What it runs, each on the shipped CPU ReLU solution and a wrong variant of it (level1/relu):

1. ``verl_data``'s parquet read by verl's ``RLHFDataset`` (its ``interaction_kwargs``, ``raw_prompt``);
2. a ``DataProto`` of decoded responses (a tiny tokenizer trained on the task files, no download) scored by
   ``compute_score`` through verl's ``NaiveRewardManager`` and ``BatchRewardManager`` (``verl.workers``) and the
   reward loop's ``NaiveRewardManager`` (``verl.experimental.reward_loop``, the trainer's default);
3. ``KBenchAgentLoop`` built as verl builds it (``hydra.utils.instantiate`` of its config entry) with a scripted
   LLM server answering the wrong variant, then the solution: two turns, feedback tokens masked out.

    PYTHONPATH=$PWD:/path/to/verl-site python bench/verl_contract.py --out bench/results/verl_contract_cpu.md
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kbench_apps.integrations import verl_data, verl_reward  # noqa: E402
from kbench_env.tasks.suite import resolve_task, solution_path  # noqa: E402
from tests.conftest import cpu_evaluator  # noqa: E402
from kbench_training.tiny import build_tokenizer  # noqa: E402

TASK = "level1/relu"
WRONG_TAIL = '''

_Correct = ModelNew


class ModelNew(_Correct):
    def forward(self, x):
        out = super().forward(x)
        return out[:, :1].expand_as(out)  # one column repeated: wrong values
'''


def answers() -> dict[str, str]:
    good = solution_path(resolve_task(TASK), "cpu").read_text()
    return {"correct": f"```python\n{good}```", "wrong": f"```python\n{good + WRONG_TAIL}```"}


def data_proto(tok, rows: list[dict], texts: list[str]):
    """A DataProto as verl's rollout leaves it: left-padded prompts, right-padded responses, the rows' columns."""
    from verl import DataProto

    prompts = [tok.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=True, return_dict=False)
               for r in rows]
    responses = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    p_len, r_len = max(map(len, prompts)), max(map(len, responses))
    p = torch.tensor([[0] * (p_len - len(x)) + x for x in prompts])
    r = torch.tensor([x + [0] * (r_len - len(x)) for x in responses])
    mask = torch.tensor([[0] * (p_len - len(a)) + [1] * len(a) + [1] * len(b) + [0] * (r_len - len(b))
                         for a, b in zip(prompts, responses)])
    non_tensor = {k: np.array([row[k] for row in rows], dtype=object) for k in ("data_source", "reward_model",
                                                                                 "extra_info")}
    return DataProto.from_dict(tensors={"prompts": p, "responses": r, "attention_mask": mask,
                                        "input_ids": torch.cat([p, r], 1)}, non_tensors=non_tensor)


def check_managers(tok, rows, texts) -> dict:
    from omegaconf import OmegaConf
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager as LoopNaive
    from verl.workers.reward_manager import BatchRewardManager, NaiveRewardManager

    out = {}
    for name, manager in (("workers.NaiveRewardManager", NaiveRewardManager(tok, 0, verl_reward.compute_score)),
                          ("workers.BatchRewardManager", BatchRewardManager(tok, 0, verl_reward.compute_score))):
        t0 = time.perf_counter()
        got = manager(data_proto(tok, rows, texts), return_dict=True)
        rewards = got["reward_tensor"].sum(-1).tolist()
        out[name] = {"rewards": rewards, "acc": list(got["reward_extra_info"]["acc"]),
                     "seconds": round(time.perf_counter() - t0, 1)}
    loop_manager = LoopNaive(OmegaConf.create({"reward": {}}), tok, verl_reward.compute_score)
    data = data_proto(tok, rows, texts)

    async def all_rows():
        return await asyncio.gather(*(loop_manager.run_single(data[i:i + 1]) for i in range(len(data))))

    t0 = time.perf_counter()
    got = loop_manager.loop.run_until_complete(all_rows())
    out["reward_loop.NaiveRewardManager"] = {"rewards": [g["reward_score"] for g in got],
                                             "acc": [g["reward_extra_info"]["acc"] for g in got],
                                             "seconds": round(time.perf_counter() - t0, 1)}
    return out


class ScriptedServer:
    """An LLM server that answers each turn with the next of ``texts``."""

    def __init__(self, tok, texts: list[str]):
        self.tok, self.texts, self.prompts = tok, list(texts), []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        self.prompts.append(list(prompt_ids))
        ids = self.tok(self.texts.pop(0), add_special_tokens=False)["input_ids"] + [self.tok.eos_token_id]
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids))


def check_agent_loop(tok, row: dict, texts: list[str]) -> dict:
    import hydra
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 8192, "response_length": 16384}},
                               "data": {}})
    entry = OmegaConf.create({"name": "kbench", "_target_": "kbench_apps.integrations.verl_agent_loop.KBenchAgentLoop",
                              "max_turns": 2})
    server = ScriptedServer(tok, texts)
    loop = hydra.utils.instantiate(entry, trainer_config=DictConfigWrap(config), server_manager=server, tokenizer=tok,
                                   processor=None, hf_model_type=None, dataset_cls=RLHFDataset,
                                   data_config=DictConfigWrap(config.data), tools=ToolListWrap([]))
    kwargs = {"raw_prompt": row["prompt"], "interaction_kwargs": row["extra_info"]["interaction_kwargs"],
              "reward_model": row["reward_model"], "extra_info": row["extra_info"]}
    t0 = time.perf_counter()
    output = loop.loop.run_until_complete(loop.run({"temperature": 1.0}, **kwargs))
    mask = output.response_mask
    feedback = tok.decode([t for t, m in zip(output.response_ids, mask) if m == 0], skip_special_tokens=True)
    return {"reward_score": output.reward_score, "turn_scores": output.extra_fields["turn_scores"],
            "num_turns": output.num_turns, "generate_calls": len(server.prompts),
            "response_tokens": len(output.response_ids), "masked_out": mask.count(0), "trained": mask.count(1),
            "logprobs_aligned": len(output.response_logprobs or []) == len(mask),
            "feedback_head": feedback.strip()[:160],
            "extra_info": output.extra_fields["reward_extra_info"], "seconds": round(time.perf_counter() - t0, 1)}


def check_dataset(tok, folder: Path) -> dict:
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    ds = RLHFDataset(data_files=[str(folder / "train.parquet")], tokenizer=tok,
                     config=OmegaConf.create({"max_prompt_length": 8192, "return_raw_chat": True,
                                              "cache_dir": str(folder / "cache")}))
    item = ds[0]
    return {"rows": len(ds), "interaction_kwargs": dict(item["interaction_kwargs"]),
            "raw_prompt_roles": [m["role"] for m in item["raw_prompt"]], "index": int(item["index"])}


def main(argv=None) -> None:
    import verl

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=None, help="write a markdown record here (and the JSON beside it)")
    args = p.parse_args(argv)
    evaluator = cpu_evaluator()
    verl_reward.use_evaluator(evaluator)
    tok = build_tokenizer()
    text = answers()
    with tempfile.TemporaryDirectory() as tmp:
        verl_data.write_dataset(tmp, suite=TASK, device="cpu")
        import transformers

        report = {"verl": verl.__version__, "verl_at": str(Path(verl.__file__).parent),
                  "transformers": transformers.__version__, "dataset": check_dataset(tok, Path(tmp))}
        rows = [r for r in verl_data.build_rows([resolve_task(TASK)], verl_reward.prompt_settings("cpu"), "train")]
    report["managers"] = check_managers(tok, rows * 2, [text["correct"], text["wrong"]])
    report["agent_loop"] = check_agent_loop(tok, rows[0], [text["wrong"], text["correct"]])
    evaluator.close()
    print(json.dumps(report, indent=1, default=str))
    if args.out:
        Path(args.out).with_suffix(".json").write_text(json.dumps(report, indent=1, default=str) + "\n")
        Path(args.out).write_text(f"# verl {report['verl']}: kbench's adapters in verl's classes (CPU)\n\n"
                                  f"`python bench/verl_contract.py --out {args.out}`, verl imported from "
                                  f"`{report['verl_at']}` with transformers {report['transformers']}.\n\n```json\n"
                                  + json.dumps(report, indent=1, default=str) + "\n```\n")


if __name__ == "__main__":
    main()
