"""vLLM's multi-turn benchmark CSV as a real run (llumverify/validation/multiturn.py): a conversation's
turns share their prompt and answer blocks, the client's times are scored, a bad row is a one-line
error, and the engine settings the CSV lacks come from validate's options."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from llumverify.cli import main
from llumverify.errors import UserError
from llumverify.validation.client_time import ClientTime
from llumverify.validation.multiturn import conversation_specs, read_rows

HEADER = "start_time_ms,relative_time_sec,ttft_ms,tpot_ms,latency_ms,input_num_turns,input_num_tokens,output_num_tokens," \
         "conversation_id\n"


def _csv(tmp_path: Path, rows: list[tuple], name: str = "m.csv") -> Path:
    """rows: (send ms, conversation, prompt, output, TTFT ms, latency ms)."""
    path = tmp_path / name
    path.write_text(HEADER + "".join(f"{t},0,{ttft},0,{lat},1,{p},{o},{c}\n" for t, c, p, o, ttft, lat in rows))
    return path


def test_a_turn_shares_the_last_turns_prompt_and_answer_blocks(tmp_path: Path) -> None:
    rows = read_rows(_csv(tmp_path, [(0, "a", 40, 20, 50, 250), (5, "b", 33, 4, 50, 80), (900, "a", 100, 8, 50, 120),
                                     (1000, "c", 0, 3, 50, 70)]))
    order, specs, real, hit, empty = conversation_specs(rows)
    first, other, second, blank = specs
    # prompt and answer of "a" fill blocks 0-2: the prompt's two, the answer's third named as its output's
    assert (first.hash_ids, first.output_hash_ids, first.hash_block) == ((0, 1), (2,), 16)
    assert (other.hash_ids, other.output_hash_ids) == ((3, 4), ())
    # the second turn re-sends those 60 tokens (3 full blocks) and adds 40: 6 blocks, 3 shared
    assert (second.hash_ids, second.output_hash_ids) == ((0, 1, 2, 5, 6, 7), ())
    assert (blank.prompt_tokens, blank.hash_ids, empty) == (1, (), 1)
    assert [s.user for s in specs] == [0, 1, 0, 2]  # a conversation is one closed-loop client
    assert hit == pytest.approx(3 * 16 / (40 + 33 + 100 + 1))
    assert [s.arrival_s for s in specs] == [0, 0.005, 0.9, 1.0] and order == [0, 1, 2, 3]
    assert real["ttft"][0] == 0.05 and real["e2e"][0] == 0.25 and real["tpot"][0] == pytest.approx(0.2 / 19)


def test_rows_are_taken_in_send_order_and_an_answer_ending_a_block_names_it(tmp_path: Path) -> None:
    """Listed out of order; 40 + 8 tokens end exactly on block 3, which the next turn (48 + 16) finds."""
    rows = read_rows(_csv(tmp_path, [(900, "a", 64, 8, 50, 120), (0, "a", 40, 8, 50, 120)]))
    order, specs, _, hit, _ = conversation_specs(rows)
    assert order == [1, 0] and [s.prompt_tokens for s in specs] == [40, 64]
    assert (specs[0].hash_ids, specs[0].output_hash_ids) == ((0, 1), (2,))
    assert specs[1].hash_ids == (0, 1, 2, 3) and hit == pytest.approx(48 / 104)


def test_an_answer_in_one_chunk_has_no_tpot(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_text("start_time_ms,ttft_ms,latency_ms,input_num_tokens,output_num_tokens,output_num_chunks,"
                    "conversation_id\n0,50,90,40,9,8,a\n1000,50,51,40,9,0,b\n")
    real = conversation_specs(read_rows(path))[2]
    assert real["tpot"][0] == pytest.approx(0.040 / 8) and np.isnan(real["tpot"][1])


CLIENT_HEADER = "start_time_ms,ttft_ms,latency_ms,input_num_tokens,output_num_tokens,conversation_id,client_id\n"


def test_a_client_runs_its_conversations_one_after_another(tmp_path: Path) -> None:
    """The closed loop is the client's, not the conversation's: client 0's second conversation (b) waits for
    its first (a) in the replay, as it did in the run; client 1's (c) does not."""
    path = tmp_path / "m.csv"
    path.write_text(CLIENT_HEADER + "0,50,300,40,8,a,0\n10,50,300,60,8,c,1\n305,50,300,80,8,b,0\n")
    specs = conversation_specs(read_rows(path))[1]
    assert [s.user for s in specs] == [0, 1, 0]
    # the client's own time after its last answer (300 ms sent, 5 ms later the next), plus the client time of
    # this request: 8 ms and 10 µs for each of its 40, 60 and 80 prompt tokens
    client = ClientTime(0.008, 1e-5)
    assert [s.after_s for s in conversation_specs(read_rows(path), client)[1]] == pytest.approx([0.0084, 0.0086, 0.0138])
    assert [s.chained for s in specs] == [False, False, True]  # sent on the client's last answer, not when recorded


def test_a_clients_next_conversation_waits_for_its_simulated_answer_not_behind_a_full_batch(tmp_path: Path) -> None:
    """One seat (max_num_seqs 1), one client, two conversations of 4,000-token prompts whose real answers took 45 ms
    (far faster than any simulated one): with the client as the loop, b is sent when a ends and its TTFT is a's;
    as two loops (no client_id), b arrives while a still decodes and waits for the seat."""
    ttft = {}
    for name, header, rows in (("client", CLIENT_HEADER, "0,5,45,4000,200,a,0\n46,5,45,4000,200,b,0\n"),
                               ("conversation", CLIENT_HEADER.replace(",client_id", ""),
                                "0,5,45,4000,200,a\n46,5,45,4000,200,b\n")):
        path, out = tmp_path / f"{name}.csv", tmp_path / name
        path.write_text(header + rows)
        assert _run("validate", str(path), "--gpu", "H100", "--model", "Llama-3.1-8B", "--max-num-seqs", "1",
                    "--client-ms", "0", "--client-us-per-token", "0", "--out", str(out)) == 0
        ttft[name] = json.loads((out / "validation.json").read_text())["ttft"]["sim_p90_s"]
    assert ttft["conversation"] > 2 * ttft["client"]


@pytest.mark.parametrize("body,message", [
    ("0,50,300,40,8,a,0\n100,50,300,40,8,b,0\n",
     "m.csv:3: client 0 sent it before its request on line 2 ended: not a closed-loop client"),
    ("0,50,300,40,8,a,\n", "m.csv:2: client_id is empty"),
    ("0,50,300,40,8,a, \n", "m.csv:2: client_id is empty"),
    ("0,50,300,40,8,a,0\n299.5,50,300,40,8,b,0\n", None),  # within the clock's 1 ms rounding: accepted
])
def test_a_client_that_is_not_a_closed_loop_is_refused(tmp_path: Path, body: str, message: str | None) -> None:
    path = tmp_path / "m.csv"
    path.write_text(CLIENT_HEADER + body)
    if message is None:
        assert len(read_rows(path)) == 2
        return
    with pytest.raises(UserError, match=message):
        read_rows(path)


@pytest.mark.parametrize("body,message", [
    ("1,0,2,0,3,1,4,5,c\n1,0,2,0,3,1,4\n", "m.csv:3: output_num_tokens '' is not a count or time"),
    ("1,0,2,0,x,1,4,5,c\n", "m.csv:2: latency_ms 'x' is not a count or time"),
    ("1,0,2,0,3,1,-4,5,c\n", "m.csv:2: input_num_tokens '-4' is not a count or time"),
    ("1,0,2,0,3,1,4,5,\n", "m.csv:2: conversation_id '' is not a name"),
    ("1,0,2,0,3,1,4,0,c\n", "m.csv:2: output_num_tokens 0: a request that streamed nothing"),
    ("1,0,9,0,3,1,4,5,c\n", "m.csv:2: latency_ms 3 is shorter than ttft_ms 9"),
    ("", "m.csv: no requests"),
    ("1,0,2,0,3,1,٣,5,c\n", "m.csv:2: input_num_tokens '٣' is not a count or time"),
    ("1,0,2,0,3,1,1_000,5,c\n", "m.csv:2: input_num_tokens '1_000' is not a count or time"),
    ("1,0,2,0,3,1,4,5,c,extra\n", "m.csv:2: more fields than the header names"),
    ("0,0,2,0,300,1,40,20,a\n100,0,2,0,300,1,70,5,a\n",
     "m.csv:3: conversation a does not follow on from line 2: it was sent before the last turn's answer ended"),
    ("0,0,2,0,300,1,40,20,a\n400,0,2,0,300,1,50,5,a\n",
     "m.csv:3: conversation a does not follow on from line 2: its prompt is shorter than the last turn's prompt"),
    ("0,0,2,0,300,1,40,20,a\n0,0,2,0,300,1,40,20,a\n", "conversation a does not follow on"),  # a row logged twice
])
def test_a_bad_row_is_one_line_naming_it(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "m.csv"
    path.write_text(HEADER + body)
    with pytest.raises(UserError, match=message):
        read_rows(path)
    path.write_text("start_time_ms,ttft_ms\n1,2\n")
    with pytest.raises(UserError, match="no latency_ms, input_num_tokens, output_num_tokens, conversation_id column"):
        read_rows(path)
    path.write_text(HEADER.strip() + ",ttft_ms\n")
    with pytest.raises(UserError, match="the header names ttft_ms twice"):
        read_rows(path)


def _run(*args: str) -> int:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    return exc.value.code


def test_validate_replays_the_csv_with_the_engine_settings_given(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rows = [(1000.0 * i, f"c{i % 3}", 200 + 30 * i, 20, 30, 230) for i in range(9)]
    path, out = _csv(tmp_path, rows), tmp_path / "v"
    assert _run("validate", str(path), "--gpu", "H100", "--model", "Llama-3.1-8B", "--max-num-seqs", "4",
                "--kv-cache-dtype", "fp8", "--client-ms", "0", "--client-us-per-token", "0", "--out", str(out)) == 0
    said = " ".join(capsys.readouterr().out.split())  # printed lines wrap at 100 columns
    assert "a conversation's turns share their prompt and answer blocks: 60.0 % of the prompt tokens" in said
    assert "fp8 KV cache" in said  # stated: max_num_seqs is not among the defaults taken
    assert "engine: max_num_batched_tokens 8192: not recorded, vLLM V1 `vllm serve` defaults for H100" in said
    doc = json.loads((out / "validation.json").read_text())
    assert doc["n_requests"] == 9 and doc["e2e"]["real_mean_s"] == pytest.approx(0.23)
    assert doc["simulated_prefix_hit_rate"] > 0.5 and doc["client_ms_added"] == 0
    assert _run("validate", str(path), "--gpu", "H100") == 2
    assert "names no model: give --model" in capsys.readouterr().err
    assert _run("validate", str(path), "--gpu", "H100", "--model", "Llama-3.1-8B", "--workload", str(path)) == 2
    assert "--workload goes with a run folder" in capsys.readouterr().err
    assert _run("validate", str(path), "--gpu", "H100", "--model", "Llama-3.1-8B", "--max-num-seqs", "64",
                "--max-num-batched-tokens", "8") == 2
    assert "--max-num-batched-tokens 8 is below --max-num-seqs 64: vLLM refuses that" in capsys.readouterr().err
    seconds = _csv(tmp_path, [(t / 1e3, c, p, o, f / 1e3, lat / 1e3) for t, c, p, o, f, lat in rows], "s.csv")
    assert _run("validate", str(seconds), "--gpu", "H100", "--model", "Llama-3.1-8B") == 2
    assert "0.0105 ms per output token after the first: are they in seconds" in capsys.readouterr().err


def test_engine_settings_are_refused_where_a_run_states_its_own(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run = tmp_path / "run"
    run.mkdir()
    assert _run("validate", str(run), "--max-num-seqs", "4", "--kv-cache-dtype", "fp8") == 2
    assert ("--max-num-seqs, --kv-cache-dtype: for a vllm bench serve result or a multi-turn CSV: a run folder's "
            "meta.json records its engine settings") in capsys.readouterr().err


def test_calibrate_fits_the_per_step_constant_on_the_csv(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """20 ms a token measured where the kernels take about 7: the constant takes up the rest."""
    rows = [(1000.0 * i, f"c{i % 3}", 200 + 30 * i, 20, 30, 30 + 19 * 20) for i in range(12)]
    out = tmp_path / "c.toml"
    assert _run("calibrate", "--run", str(_csv(tmp_path, rows)), "--gpu", "H100", "--model", "Llama-3.1-8B",
                "--max-num-seqs", "4", "--calib-frac", "0.5", "--out", str(out)) == 0
    said = capsys.readouterr().out
    fixed = int(said.rsplit("fixed_ns = ", 1)[1].split(";")[0])
    assert 8_000_000 < fixed < 18_000_000 and f"fixed_ns = {fixed}" in out.read_text()
    assert "client: 7.5 ms per request + 2.25 µs per prompt token in the wait before a client's next turn only" in said
    assert _run("calibrate", "--run", str(tmp_path / "m.csv"), "--gpu", "H100", "--model", "Llama-3.1-8B",
                "--kv-cache-dtype", "fp8", "--out", str(tmp_path / "f.toml")) == 2
    assert "a step-cost file holds 16-bit KV kernels" in capsys.readouterr().err


def test_a_prompt_the_cache_cannot_hold_is_refused_before_its_blocks_are_named(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2^31-token prompt took 22 s and 7 GB of block ids (conversation_specs) before the KV check refused it:
    the lengths are checked first."""
    from llumverify.validation import multiturn

    def naming(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("block ids named before the lengths were checked")

    monkeypatch.setattr(multiturn, "conversation_specs", naming)
    path = _csv(tmp_path, [(0, "a", 2_147_483_000, 20, 30, 125)])
    assert _run("validate", str(path), "--gpu", "H100", "--model", "Llama-3.1-8B") == 2
    err = capsys.readouterr().err
    assert f"{path}:2 (2147483000 prompt + 20 output tokens) does not fit the simulated KV cache" in err
