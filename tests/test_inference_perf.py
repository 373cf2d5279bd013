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


def _metrics(count: int, failed: int = 0, ttft: float = 0.05) -> dict:
    lat = {"request_latency": {"mean": 0.5, "p90": 0.6}, "time_to_first_token": {"mean": ttft, "p90": 1.2 * ttft}}
    return {"successes": {"count": count, "prompt_len": {"mean": 104.4}, "latency": lat},
            "failures": {"count": failed}}


def _folder(tmp_path: Path, groups: int = 2, extra: str = "", counts: tuple[int, int] = (20, 20),
            failed: int = 0, ttft: float = 0.05) -> Path:
    run = tmp_path / "run"
    (run / "results").mkdir(parents=True)
    (run / "exp-config.yaml").write_text("model: meta-llama/Llama-2-7b-hf\ntensor_parallelism: 2\n"
                                         "max_num_batched_tokens: 2048\nmax_num_seqs: 64\n")
    (run / "results" / "config.yaml").write_text(DUMP.format(groups=groups) + extra)
    for k, n in enumerate(counts):
        (run / "results" / f"stage_{k}_lifecycle_metrics.json").write_text(json.dumps(_metrics(n, failed, ttft)))
    return run


def test_a_run_is_read_and_its_prompts_recur_whole(tmp_path) -> None:
    run = read_run(_folder(tmp_path))
    assert (run.model, run.tp, run.max_num_batched_tokens, run.max_num_seqs) == ("meta-llama/Llama-2-7b-hf", 2, 2048, 64)
    assert (run.groups, run.per_group, run.system, run.question, run.output) == (2, 3, 40, 60, 20)
    assert [(s.rate, s.seconds, s.requests) for s in run.stages] == [(2.0, 10.0, 20), (4.0, 5.0, 20)]
    assert run.stages[0].e2e_mean == 500.0 and run.stages[0].ttft_p90 == pytest.approx(60.0)
    assert run.stages[0].e2e_p90 == pytest.approx(600.0)  # request_latency p90 0.6 s, not its mean
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
    ({"ttft": 0.5}, "mean request latency 500 ms is not above mean TTFT 500 ms"),
    ({"groups": 10**6}, "more than 2,000,000, not replayed"),
])
def test_what_a_replay_cannot_take_is_one_line(tmp_path, change, says) -> None:
    with pytest.raises(UserError, match=says) as err:
        read_run(_folder(tmp_path, **change))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("value, says", [("1.9", "tensor_parallelism must be a whole number, got '1.9'"),
                                         ("inf", "tensor_parallelism must be a whole number, got 'inf'")])
def test_an_inexact_server_setting_is_refused(tmp_path, value, says) -> None:
    run = _folder(tmp_path)
    (run / "exp-config.yaml").write_text(f"model: m\ntensor_parallelism: {value}\nmax_num_batched_tokens: 2048\n"
                                         "max_num_seqs: 64\n")
    with pytest.raises(UserError, match=says):
        read_run(run)


def test_a_nested_server_config_is_refused(tmp_path) -> None:
    run = _folder(tmp_path)
    (run / "exp-config.yaml").write_text("server:\n  model: x\n")
    with pytest.raises(UserError, match="exp-config.yaml:2: expected a flat"):
        read_run(run)


def test_the_benchmark_replays_a_folder_and_lists_the_runs_it_cannot(tmp_path, capsys) -> None:
    from conftest import benchmark_script

    script = benchmark_script("inference_perf_runs")
    good = _folder(tmp_path / "a")
    bad = _folder(tmp_path / "b", failed=2)
    root = tmp_path / "runs"
    root.mkdir()
    good.rename(root / "good")
    bad.rename(root / "bad")
    assert script.main([str(root), "--out", str(tmp_path / "out")]) == 0
    result = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [(r["run"], r["stage"], r["role"]) for r in result["rows"]] == [("good", 0, "held out"), ("good", 1, "held out")]
    assert len(result["skipped"]) == 1 and result["skipped"][0].startswith("bad: ") and "2 requests failed" in result["skipped"][0]
    row = result["rows"][0]
    assert row["real_ms"]["e2e_mean"] == 500.0 and row["sim_ms"]["ttft_mean"] >= result["client_ms"] > 0
    assert row["error"]["e2e_mean"] == pytest.approx(row["sim_ms"]["e2e_mean"] / 500.0 - 1)
    assert script.main([str(tmp_path / "nothing")]) == 2 and "no run folders" in capsys.readouterr().err


def test_the_benchmark_adds_the_client_time_per_request_and_per_prompt_token(tmp_path, monkeypatch) -> None:
    """Each request's TTFT and E2E get the constant plus its prompt's tokens at the per-token time (every prompt
    here is 104 tokens); --client-fit reads the time per request back beside the per-token one."""
    from conftest import benchmark_script

    from llumverify.validation.client_time import ClientTime

    script = benchmark_script("inference_perf_runs")
    root = tmp_path / "runs"
    root.mkdir()
    _folder(tmp_path / "a").rename(root / "good")
    rows = {}
    for name, client in (("none", ClientTime()), ("fixed", ClientTime(0.0075)), ("token", ClientTime(0.0, 1e-5))):
        monkeypatch.setattr(script, "client_time", lambda c=client: c)
        assert script.main([str(root), "--out", str(tmp_path / name)]) == 0
        rows[name] = json.loads((tmp_path / name / "results.json").read_text())["rows"][0]["sim_ms"]
    for metric in ("ttft_mean", "ttft_p90", "e2e_mean", "e2e_p90"):
        assert rows["fixed"][metric] - rows["none"][metric] == pytest.approx(7.5)
        assert rows["token"][metric] - rows["none"][metric] == pytest.approx(104 * 1e-2)
    fit = [{"real_ms": {"ttft_mean": 20.0, "ttft_p90": 30.0, "e2e_mean": 500.0, "e2e_p90": 600.0},
            "sim_ms": {"ttft_mean": 15.0, "ttft_p90": 25.0, "e2e_mean": 495.0, "e2e_p90": 595.0}}]
    monkeypatch.setattr(script, "client_time", lambda: ClientTime(0.0075, 2.25e-6))
    assert script.client_fit(fit).startswith("client fit on the calibration run: mean TTFT gap 12.50 ms; grid best 12.5 ms")


def test_the_benchmark_replays_each_run_with_its_checkpoints_sampling(tmp_path, monkeypatch) -> None:
    """inference-perf sends no sampling key: Llama-2-7b-hf's generation_config.json (top_p < 1) makes it top-p,
    passed to the replay; a checkpoint GENERATION_DEFAULTS does not list is a one-line error."""
    from conftest import benchmark_script

    script = benchmark_script("inference_perf_runs")
    seen = []
    real = script.simulate_served
    monkeypatch.setattr(script, "simulate_served", lambda *a, **k: seen.append(k["sampling"]) or real(*a, **k))
    script.stage_rows(_folder(tmp_path / "a"))
    assert seen == ["top-p"]
    assert script.checkpoint_sampling("mistralai/Mixtral-8x7B-v0.1") == "greedy"
    with pytest.raises(UserError, match="how meta-llama/Llama-3.1-8B samples is not known"):
        script.checkpoint_sampling("meta-llama/Llama-3.1-8B")
