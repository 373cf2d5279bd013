"""benchmarks/inferencex_multiturn.py: a conversation's turns share their prompt and answer blocks,
runs that overlapped another experiment are found in sweep.log, the settings are read from the
sweep's commands and logs, the run folder it writes is one validate replays, and the a + b/TP split
of TPOT is a least-squares fit."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import benchmark_script

from llumverify.errors import UserError


def _script():
    return benchmark_script("inferencex_multiturn")


def _row(start: float, conv: str, prompt: int, out: int) -> dict:
    return {"start_time_ms": str(start), "conversation_id": conv, "input_num_tokens": str(prompt),
            "output_num_tokens": str(out), "ttft_ms": "50", "latency_ms": str(50 + 10 * out)}


def test_a_turn_shares_the_last_turns_prompt_and_output_blocks() -> None:
    script = _script()
    rows = [_row(0, "a", 40, 20), _row(5, "b", 33, 4), _row(900, "a", 100, 8), _row(1000, "c", 0, 3)]
    lines, hit, empty = script.conversation_blocks(rows)
    first, other, second, blank = lines
    # prompt and answer of "a" fill blocks 0-2: the prompt's two, the answer's third named as its output's
    assert (first["hash_ids"], first["output_hash_ids"]) == ([0, 1], [2])
    assert (other["hash_ids"], other["output_hash_ids"]) == ([3, 4], [])
    # the second turn re-sends those 60 tokens (3 full blocks) and adds 40: 6 blocks, 3 shared
    assert (second["hash_ids"], second["output_hash_ids"]) == ([0, 1, 2, 5, 6, 7], [])
    assert blank["input_toks"] == 1 and blank["hash_ids"] == [] and empty == 1
    assert hit == pytest.approx(3 * 16 / (40 + 33 + 100 + 1))
    assert [x["arrival_time_ns"] for x in lines] == [0, 5_000_000, 900_000_000, 1_000_000_000]
    with pytest.raises(UserError, match="conversation a: a request with 0 output tokens"):
        script.conversation_blocks([_row(0, "a", 10, 0)])


def test_settings_come_from_the_command_the_config_and_the_log() -> None:
    script = _script()
    command = "vllm serve m --max-num-seqs 16 --gpu-memory-utilization 0.9 --tensor-parallel-size 8"
    assert script.flag(command, "gpu-memory-utilization", "c") == "0.9"
    assert script.flag("kv-cache-dtype: fp8\nmax-num-batched-tokens: 8192\n", "max-num-batched-tokens", "y") == "8192"
    with pytest.raises(UserError, match="^run/vllm_command.txt: no kv-cache-dtype$"):
        script.flag(command, "kv-cache-dtype", "run/vllm_command.txt")
    log = "x Initializing a V1 LLM engine (v0.15.0) with config\ny GPU KV cache size: 8,066,320 tokens\n"
    assert script.server_facts(log) == ("0.15.0", 8_066_320) and script.server_facts("") == ("unknown", None)


def test_the_run_folder_it_writes_replays(tmp_path: Path) -> None:
    script = _script()
    rows = [_row(1000.0 * i, f"c{i % 3}", 200 + 30 * i, 20) for i in range(9)]
    lines, _, _ = script.conversation_blocks(rows)
    run = script.write_run(tmp_path, lines, tp=2, seqs=4, budget=8192, util=0.9, kv_dtype="fp8", version="0.15.0",
                           kv_tokens=None)
    doc = script.replay(run, ["--workload", str(tmp_path / "workload.jsonl")])
    assert doc["simulated_prefix_hit_rate"] > 0.5  # every turn after a conversation's first re-sends its past
    assert doc["tpot"]["real_mean_s"] == pytest.approx(0.200 / 19)  # (latency - ttft) / (out - 1)
    assert doc["tpot"]["sim_mean_s"] > 0 and doc["e2e"]["real_mean_s"] == pytest.approx(0.25)


def test_tpot_splits_into_a_part_that_shrinks_with_tp_and_one_that_does_not() -> None:
    script = _script()
    rows = [{"clients": 16, "complete": True, "tp": tp, "real_mean_s": {"tpot": (8 + 10 / tp) / 1e3},
             "sim_mean_s": {"tpot": (4 + 10 / tp) / 1e3}} for tp in (1, 2, 4, 8)]
    rows.append({"clients": 16, "complete": False, "tp": 2, "real_mean_s": {"tpot": 1.0}, "sim_mean_s": {"tpot": 1.0}})
    assert script.tp_fit(rows) == {"real": [8.0, 10.0], "sim": [4.0, 10.0]}
    assert script.tp_fit(rows[:1]) is None


def _started(name: str, at: str, attempt: str = " (attempt 1/3)") -> str:
    """sweep.log's lines for an experiment's start, as the sweep script writes them."""
    return f"Running experiment: {name}{attempt}\n  TP=2, BS=16, Offload=off\n  Started at Wed Feb  4 {at} UTC 2026\n"


def _finished(name: str, at: str) -> str:
    return f"Experiment {name} finished at Wed Feb  4 {at} UTC 2026\n"


SWEEP_LOG = "".join([
    "Starting sweep experiment at Wed Feb  4 15:00:00 UTC 2026\n", _started("tp2_bs16_offloadoff", "16:00:01", ""),
    "Starting sweep experiment at Wed Feb  4 16:08:32 UTC 2026\n", _started("tp2_bs16_offloadon", "17:00:00"),
    _finished("tp2_bs16_offloadon", "17:22:16"), _started("tp2_bs16_offloadoff", "17:22:16"),
    _finished("tp2_bs16_offloadoff", "17:54:37"),
    _started("tp2_bs32_offloadoff", "18:17:53"), _started("tp2_bs32_offloadoff", "18:18:04"),  # two sweeps at once
    _finished("tp2_bs32_offloadoff", "18:25:55"), _finished("tp2_bs32_offloadoff", "18:26:10"),
    _started("tp2_bs64_offloadoff", "18:26:10"), _finished("tp2_bs64_offloadoff", "18:40:00")])


def test_a_run_that_overlapped_another_experiment_is_found_and_a_restart_is_not() -> None:
    """tp2_bs16 was started by a sweep that was stopped, then run again alone (from the moment the
    last experiment finished); tp2_bs32 ran twice at once; tp2_bs64 began as tp2_bs32 ended."""
    assert _script().concurrent_runs(SWEEP_LOG) == {"tp2_bs32_offloadoff"}
    assert _script().concurrent_runs(SWEEP_LOG.replace("18:40:00", "18:26:10").replace(
        "Started at Wed Feb  4 18:26:10", "Started at Wed Feb  4 18:20:00")) == {"tp2_bs32_offloadoff", "tp2_bs64_offloadoff"}


def test_an_unreadable_client_csv_is_a_one_line_error_naming_the_row(monkeypatch: pytest.MonkeyPatch) -> None:
    script = _script()
    header = "start_time_ms,ttft_ms,latency_ms,input_num_tokens,output_num_tokens,conversation_id\n"
    for body, message in (("1,2,3,4,5,c\n1,2,3,4\n", "run/metrics_client_metrics.csv:3: unreadable output_num_tokens ''"),
                          ("1,2,x,4,5,c\n", "run/metrics_client_metrics.csv:2: unreadable latency_ms 'x'"),
                          ("", "run/metrics_client_metrics.csv: no requests")):
        monkeypatch.setattr(script, "show", lambda repo, path, text=header + body: text)
        with pytest.raises(UserError, match=f"^{message}$"):
            script.client_rows(Path("."), "run")
