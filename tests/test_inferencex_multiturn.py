"""benchmarks/inferencex_multiturn.py: a conversation's turns share their prompt blocks, the settings
are read from the sweep's commands and logs, the run folder it writes is one validate replays, and
the a + b/TP split of TPOT is a least-squares fit."""

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
    assert first["hash_ids"] == [0, 1] and other["hash_ids"] == [3, 4]  # prompt and output of "a": blocks 0-2
    # the second turn re-sends those 60 tokens (3 full blocks) and adds 40: 6 blocks, 3 shared
    assert second["hash_ids"] == [0, 1, 2, 5, 6, 7]
    assert blank["input_toks"] == 1 and blank["hash_ids"] == [] and empty == 1
    assert hit == pytest.approx(3 * 16 / (40 + 33 + 100 + 1))
    assert [x["arrival_time_ns"] for x in lines] == [0, 5_000_000, 900_000_000, 1_000_000_000]
    with pytest.raises(UserError, match="conversation a: a request with 0 output tokens"):
        script.conversation_blocks([_row(0, "a", 10, 0)])


def test_settings_come_from_the_command_the_config_and_the_log() -> None:
    script = _script()
    command = "vllm serve m --max-num-seqs 16 --gpu-memory-utilization 0.9 --tensor-parallel-size 8"
    assert script.flag(command, "gpu-memory-utilization") == "0.9"
    assert script.flag("kv-cache-dtype: fp8\nmax-num-batched-tokens: 8192\n", "max-num-batched-tokens") == "8192"
    with pytest.raises(UserError, match="no kv-cache-dtype"):
        script.flag(command, "kv-cache-dtype")
    log = "x Initializing a V1 LLM engine (v0.15.0) with config\ny GPU KV cache size: 8,066,320 tokens\n"
    assert script.server_facts(log) == ("0.15.0", 8_066_320) and script.server_facts("") == ("unknown", None)


def test_the_run_folder_it_writes_replays(tmp_path: Path) -> None:
    script = _script()
    rows = [_row(1000.0 * i, f"c{i % 3}", 200 + 30 * i, 20) for i in range(9)]
    lines, _, _ = script.conversation_blocks(rows)
    run = script.write_run(tmp_path, lines, tp=2, seqs=4, budget=8192, util=0.9, kv_dtype="fp8", version="0.15.0",
                           kv_tokens=None)
    doc = script.replay(run, ["--workload", str(tmp_path / "workload.jsonl")])
    assert doc["tpot"]["real_mean_s"] == pytest.approx(0.200 / 19)  # (latency - ttft) / (out - 1)
    assert doc["tpot"]["sim_mean_s"] > 0 and doc["e2e"]["real_mean_s"] == pytest.approx(0.25)


def test_tpot_splits_into_a_part_that_shrinks_with_tp_and_one_that_does_not() -> None:
    script = _script()
    rows = [{"clients": 16, "complete": True, "tp": tp, "real_mean_s": {"tpot": (8 + 10 / tp) / 1e3},
             "sim_mean_s": {"tpot": (4 + 10 / tp) / 1e3}} for tp in (1, 2, 4, 8)]
    rows.append({"clients": 16, "complete": False, "tp": 2, "real_mean_s": {"tpot": 1.0}, "sim_mean_s": {"tpot": 1.0}})
    assert script.tp_fit(rows) == {"real": [8.0, 10.0], "sim": [4.0, 10.0]}
    assert script.tp_fit(rows[:1]) is None
