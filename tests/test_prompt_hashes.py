"""Workload JSONL with token ids instead of block hashes (LLMServingSim's files): the shared rule, exactly.

llumverify/files/prompt_hashes.py derives `hash_ids` from `input_tok_ids`: the prompt's full
blocks, block i's id a function of blocks 0..i, numbered densely in order of first appearance over
the file. Both readers of the format (validate's load_workload, simulate's read_trace) use it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import validation_dir

from llumverify.errors import UserError
from llumverify.files.prompt_hashes import PromptHashes
from llumverify.sim.traces import read_trace
from llumverify.validation.replay import load_workload

SHARED_WORKLOAD = validation_dir() / "llmservingsim" / "workloads" / "sharegpt-llama-3.1-8b-300-sps10.jsonl"


def _write(tmp_path: Path, rows: list[dict], name: str = "w.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _row(t_ns: int, tokens: list[int], **extra: object) -> dict:
    return {"arrival_time_ns": t_ns, "input_toks": len(tokens), "output_toks": 3, "input_tok_ids": tokens,
            "output_tok_ids": [7, 7, 7], **extra}


A = list(range(10))  # blocks of 4: [0..3] [4..7], two tokens left over
ROWS = [_row(0, A),
        _row(1, A[:4] + [9, 9, 9, 9, 9]),  # shares block 0 only
        _row(2, A[:8]),  # the same two blocks as the first
        _row(3, [5, 5, 5, 5] + A[4:8]),  # block 1's tokens equal the first's, but after another block 0
        _row(4, A[:3])]  # shorter than a block: no id


def test_token_ids_become_chained_dense_block_ids(tmp_path: Path) -> None:
    specs = load_workload(_write(tmp_path, ROWS), 4)
    assert [s.hash_ids for s in specs] == [(0, 1), (0, 2), (0, 1), (3, 4), ()]
    assert [s.hash_block for s in specs] == [4, 4, 4, 4, 0]
    assert [(s.prompt_tokens, s.output_tokens) for s in specs] == [(10, 3), (9, 3), (8, 3), (8, 3), (3, 3)]


def test_the_block_is_the_callers(tmp_path: Path) -> None:
    """Blocks of 8 over the same file: one full block each for the first four prompts."""
    assert [s.hash_ids for s in load_workload(_write(tmp_path, ROWS), 8)] == [(0,), (1,), (0,), (2,), ()]


def test_simulate_reads_the_same_ids_in_its_16_token_blocks(tmp_path: Path) -> None:
    rows = [_row(i * 1000, [i % 2] * 16 + [i] * 20) for i in range(4)]
    path = _write(tmp_path, rows)
    assert [s.hash_ids for s in read_trace(path)] == [s.hash_ids for s in load_workload(path, 16)] == \
        [(0, 1), (2, 3), (0, 4), (2, 5)]


def test_hash_ids_that_agree_are_accepted_and_the_token_lists_dropped() -> None:
    hashes, row = PromptHashes(4), _row(0, A, hash_ids=[0, 1])
    assert hashes.of(row, "w.jsonl:1", 10) == (0, 1)
    assert "input_tok_ids" not in row and "output_tok_ids" not in row


@pytest.mark.parametrize("rows,message", [
    ([_row(0, A, hash_ids=[0, 5])], "w.jsonl:1: hash_ids disagree with those of input_tok_ids at block 1"),
    ([_row(0, A, hash_ids=[0])],
     "w.jsonl:1: hash_ids disagree with those of input_tok_ids at block 1 (1 given, 2 derived"),
    ([{**_row(0, A), "input_toks": 11}], "w.jsonl:1: 10 input_tok_ids for a prompt of 11 tokens"),
    ([_row(0, [1, 2.0, 3])], "w.jsonl:1: input_tok_ids must be a list of integers"),
    ([_row(0, [1, True, 3])], "w.jsonl:1: input_tok_ids must be a list of integers"),
    ([_row(0, [1, "2", 3])], "w.jsonl:1: input_tok_ids must be a list of integers"),
    ([_row(0, [1, 2**64])], "w.jsonl:1: input_tok_ids hold a token id beyond 64 bits"),
    ([{**_row(0, A), "input_tok_ids": "0 1 2"}], "w.jsonl:1: input_tok_ids must be a list of integers"),
    ([_row(0, A), {"arrival_time_ns": 1, "input_toks": 4, "output_toks": 1}], "w.jsonl:2: input_tok_ids missing"),
    ([{"arrival_time_ns": 0, "input_toks": 4, "output_toks": 1}, _row(1, A)], "w.jsonl:2: input_tok_ids present"),
    ([{"arrival_time_ns": 0, "input_toks": 4, "output_toks": 1, "hash_ids": [-1]}],
     "w.jsonl:1: hash_ids must be a list of non-negative integers"),
])
def test_bad_token_ids_are_one_line_errors_naming_file_and_line(tmp_path: Path, rows: list[dict], message: str) -> None:
    path = _write(tmp_path, rows)
    with pytest.raises(UserError) as info:
        load_workload(path, 4)
    assert str(info.value).startswith(f"{tmp_path}/{message}"), info.value
    where = message.split(": ")[0]
    with pytest.raises(UserError, match=f"^{tmp_path}/{where}: "):  # simulate's reader: the same check
        read_trace(path)


def test_hash_ids_name_no_more_blocks_than_the_prompt_has(tmp_path: Path) -> None:
    """An id names a block of the prompt (its last may be partial, as in Mooncake's 512-token blocks):
    more ids than blocks name blocks that do not exist, and the engine would drop them unread."""
    fits = _write(tmp_path, [_turn(0, 17, 2, hash_ids=[0, 1])], "fits.jsonl")  # 16 + 1 tokens: 2 blocks
    assert [s.hash_ids for s in load_workload(fits, 16)] == [(0, 1)] == [s.hash_ids for s in read_trace(fits)]
    over = _write(tmp_path, [_turn(0, 16, 4, hash_ids=list(range(200)))])
    message = "w.jsonl:1: 200 hash_ids for a prompt of 16 tokens: it has 1 block of 16 tokens"
    for read in (lambda: load_workload(over, 16), lambda: read_trace(over)):
        with pytest.raises(UserError, match=message):
            read()
    mooncake = _write(tmp_path, [{"timestamp": 0, "input_length": 10, "output_length": 10, "hash_ids": [1, 2, 3]}],
                      "m.jsonl")
    with pytest.raises(UserError, match="m.jsonl:1: 3 hash_ids for a prompt of 10 tokens: it has 1 block of 512 tokens"):
        read_trace(mooncake)


@pytest.mark.skipif(not SHARED_WORKLOAD.is_file(), reason=f"no shared validation workload at {SHARED_WORKLOAD} "
                    "(set LLUMVERIFY_VALIDATION to the folder)")
def test_the_shared_workloads_hash_ids_follow_the_rule(tmp_path: Path) -> None:
    """Token ids rebuilt from the shared file's hash_ids (block with id h: sixteen tokens h) hash back
    to exactly those ids: they are chained and numbered densely in order of first appearance."""
    shared = [json.loads(line) for line in SHARED_WORKLOAD.read_text().splitlines()]
    rows = []
    for w in shared:
        tokens = [h for h in w["hash_ids"] for _ in range(16)]
        rows.append({**w, "input_tok_ids": tokens + [-1] * (w["input_toks"] - len(tokens))})
    specs = load_workload(_write(tmp_path, rows), 16)  # both keys on every row: they must agree
    assert [s.hash_ids for s in specs] == [tuple(w["hash_ids"]) for w in shared]
    assert sum(map(len, (s.hash_ids for s in specs))) > 10_000 and len(specs) == 300


def _turn(t_ns: int, prompt: int, output: int, **extra: object) -> dict:
    return {"arrival_time_ns": t_ns, "input_toks": prompt, "output_toks": output, **extra}


def test_output_hash_ids_continue_the_prompt_s_full_blocks_in_both_readers(tmp_path: Path) -> None:
    """40 prompt tokens are 2 full blocks of 16; with 10 output tokens, 50 tokens fill a third."""
    path = _write(tmp_path, [_turn(0, 40, 10, hash_ids=[0, 1], output_hash_ids=[2]),
                             _turn(1, 8, 30, output_hash_ids=[3, 4]),  # no full prompt block: both blocks the output's
                             _turn(2, 40, 10, hash_ids=[0, 1])])
    for specs in (load_workload(path, 16), read_trace(path)):
        assert [(s.hash_ids, s.output_hash_ids, s.hash_block) for s in specs] == [
            ((0, 1), (2,), 16), ((), (3, 4), 16), ((0, 1), (), 16)]


@pytest.mark.parametrize("row,message", [
    (_turn(0, 40, 10, hash_ids=[0, 1, 2], output_hash_ids=[3]),
     "w.jsonl:1: output_hash_ids continue the prompt's full blocks, so hash_ids must hold 2 ids (40 tokens in "
     "16-token blocks), not 3"),
    (_turn(0, 40, 10, hash_ids=[0, 1], output_hash_ids=[2, 3]),
     "w.jsonl:1: 2 output_hash_ids, but prompt and output fill only 1 more block"),
    (_turn(0, 40, 10, hash_ids=[0, 1], output_hash_ids="2"), "w.jsonl:1: output_hash_ids must be a list of non-negative"),
    (_turn(0, 40, 10, hash_ids=[0, 1], output_hash_ids=[-2]), "w.jsonl:1: output_hash_ids must be a list of non-negative"),
    (_turn(0, 40, 10, hash_ids=[0, 1], output_hash_ids=0), "w.jsonl:1: output_hash_ids must be a list of non-negative"),
    (_turn(0, 40, 10, hash_ids=[0, 1], output_hash_ids={}), "w.jsonl:1: output_hash_ids must be a list of non-negative"),
    ({**_row(0, list(range(32))), "output_hash_ids": [9]},
     "w.jsonl:1: output_hash_ids with input_tok_ids: derived and given ids are numbered apart"),
])
def test_bad_output_hash_ids_are_one_line_errors(tmp_path: Path, row: dict, message: str) -> None:
    path = _write(tmp_path, [row])
    for read in (lambda: load_workload(path, 16), lambda: read_trace(path)):
        with pytest.raises(UserError) as exc:
            read()
        assert message in str(exc.value)
