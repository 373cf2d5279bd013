"""inference-perf run folders (llumverify/validation/inference_perf.py): the server, the workload the
benchmark dumped and the per-stage measurements are read; what cannot be replayed is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llumverify.errors import UserError
from llumverify.validation.inference_perf import read_run, specs

DUMP = """data:
  type: shared_prefix
  shared_prefix:
    num_groups: {groups}
    num_prompts_per_group: 3
    system_prompt_len: 40
    question_len: 60
    output_len: 20
load:
  type: constant
  stages:
  - rate: 2.0
    duration: 10
  - rate: 4.0
    duration: 5
"""


def _metrics(count: int, failed: int = 0) -> dict:
    lat = {k: {"mean": 0.5, "p90": 0.6} for k in ("request_latency", "time_to_first_token")}
    return {"successes": {"count": count, "prompt_len": {"mean": 104.4}, "latency": lat},
            "failures": {"count": failed}}


def _folder(tmp_path: Path, groups: int = 2, extra: str = "", counts: tuple[int, int] = (20, 20),
            failed: int = 0) -> Path:
    run = tmp_path / "run"
    (run / "results").mkdir(parents=True)
    (run / "exp-config.yaml").write_text("model: meta-llama/Llama-2-7b-hf\ntensor_parallelism: 2\n"
                                         "max_num_batched_tokens: 2048\nmax_num_seqs: 64\n")
    (run / "results" / "config.yaml").write_text(DUMP.format(groups=groups) + extra)
    for k, n in enumerate(counts):
        (run / "results" / f"stage_{k}_lifecycle_metrics.json").write_text(json.dumps(_metrics(n, failed)))
    return run


def test_a_run_is_read_and_its_prompts_recur_whole(tmp_path) -> None:
    run = read_run(_folder(tmp_path))
    assert (run.model, run.tp, run.max_num_batched_tokens, run.max_num_seqs) == ("meta-llama/Llama-2-7b-hf", 2, 2048, 64)
    assert (run.groups, run.per_group, run.system, run.question, run.output) == (2, 3, 40, 60, 20)
    assert [(s.rate, s.seconds, s.requests) for s in run.stages] == [(2.0, 10.0, 20), (4.0, 5.0, 20)]
    assert run.stages[0].e2e_mean == 500.0 and run.stages[0].ttft_p90 == 600.0
    reqs = specs(run)
    assert len(reqs) == 40 and reqs[21].arrival_s == pytest.approx(10.25)
    assert {r.prompt_tokens for r in reqs} == {104} and {r.output_tokens for r in reqs} == {20}
    period = run.groups * run.per_group
    assert all(reqs[i].hash_ids == reqs[i + period].hash_ids for i in range(len(reqs) - period))
    assert len({r.hash_ids for r in reqs}) == period  # six prompts, each recurring
    assert len({r.hash_ids[:2] for r in reqs}) == run.groups  # the system prompt's 2 full blocks, per group
    own = [set(r.hash_ids[2:]) for r in reqs[:period]]
    assert all(not (a & b) for i, a in enumerate(own) for b in own[i + 1:])


@pytest.mark.parametrize("change, says", [
    ({"extra": "    enable_multi_turn_chat: true\n"}, "multi-turn chat is enabled"),
    ({"failed": 3}, "3 requests failed"),
    ({"counts": (20, 19)}, "19 requests succeeded where 4/s for 5 s sends 20"),
    ({"groups": 0}, "num_groups must be at least 1"),
])
def test_what_a_replay_cannot_take_is_one_line(tmp_path, change, says) -> None:
    with pytest.raises(UserError, match=says) as err:
        read_run(_folder(tmp_path, **change))
    assert "\n" not in str(err.value)


def test_a_nested_server_config_is_refused(tmp_path) -> None:
    run = _folder(tmp_path)
    (run / "exp-config.yaml").write_text("server:\n  model: x\n")
    with pytest.raises(UserError, match="exp-config.yaml:2: expected a flat"):
        read_run(run)
