"""Trace readers: the shared public traces (known counts and statistics) and every bad-input message."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import needs_traces, traces_dir

from llumverify.errors import UserError
from llumverify.requests import HIGH, NORMAL
from llumverify.sim.traces import read_trace

TRACES = traces_dir()
AZURE_CONV = TRACES / "azure_llm_2023" / "AzureLLMInferenceTrace_conv.csv"
AZURE_CODE = TRACES / "azure_llm_2023" / "AzureLLMInferenceTrace_code.csv"
MOONCAKE_CONV = TRACES / "mooncake_fast25" / "conversation_trace.jsonl"
MOONCAKE_SYN = TRACES / "mooncake_fast25" / "synthetic_trace.jsonl"
VIDUR = TRACES / "vidur" / "arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv"

# file, rows, span in s (None: no timestamps), mean input, mean output (traces README)
KNOWN = [
    (AZURE_CONV, 19_366, 3501.7, 1154.7, 211.1),
    (AZURE_CODE, 8_819, 3435.9, 2047.8, 27.9),
    (MOONCAKE_CONV, 12_031, 3537.0, 12035.1, 342.6),
    (MOONCAKE_SYN, 3_993, 1022.0, 15325.5, 149.1),
    (VIDUR, 28_257, None, 2588.1, 291.4),
]


@needs_traces
@pytest.mark.traces
@pytest.mark.parametrize("path,rows,span,mean_in,mean_out", KNOWN, ids=lambda v: getattr(v, "stem", None))
def test_shared_trace(path: Path, rows: int, span: float | None, mean_in: float, mean_out: float) -> None:
    reqs = read_trace(path, rate=5.0 if span is None else None)
    assert len(reqs) == rows and [r.id for r in reqs] == list(range(rows))
    assert all(a.arrival_s <= b.arrival_s for a, b in zip(reqs, reqs[1:]))
    if span is not None:
        assert reqs[0].arrival_s == 0.0 and reqs[-1].arrival_s == pytest.approx(span, abs=0.05)
    assert np.mean([r.prompt_tokens for r in reqs]) == pytest.approx(mean_in, abs=0.05)
    assert np.mean([r.output_tokens for r in reqs]) == pytest.approx(mean_out, abs=0.05)
    assert all(r.priority == NORMAL for r in reqs)


@needs_traces
@pytest.mark.traces
def test_azure_known_rows() -> None:
    reqs = read_trace(AZURE_CONV)
    assert (reqs[0].prompt_tokens, reqs[0].output_tokens) == (374, 44)
    assert reqs[1].arrival_s == pytest.approx(50.9951690 - 46.6805900, abs=1e-9)
    assert reqs[-1].arrival_s == pytest.approx(3501.7219370, abs=1e-9)


@needs_traces
@pytest.mark.traces
def test_mooncake_spread_is_seeded_and_stays_in_bucket() -> None:
    burst = read_trace(MOONCAKE_CONV)
    spread = read_trace(MOONCAKE_CONV, spread=True, seed=1)
    assert spread == read_trace(MOONCAKE_CONV, spread=True, seed=1)
    assert spread != read_trace(MOONCAKE_CONV, spread=True, seed=2)
    assert len({r.arrival_s for r in burst}) == 1180 and len({r.arrival_s for r in spread}) == len(spread)
    assert sorted((r.prompt_tokens, r.output_tokens) for r in burst) == \
        sorted((r.prompt_tokens, r.output_tokens) for r in spread)
    assert spread[-1].arrival_s < burst[-1].arrival_s + 3.1


@needs_traces
@pytest.mark.traces
def test_vidur_needs_rate_and_is_seeded() -> None:
    with pytest.raises(UserError, match=r"has no timestamps: give --rate"):
        read_trace(VIDUR)
    a = read_trace(VIDUR, rate=4.0, arrival="gamma", cv=2.0, seed=3, limit=5000)
    assert a == read_trace(VIDUR, rate=4.0, arrival="gamma", cv=2.0, seed=3, limit=5000)
    assert len(a) == 5000 and (a[0].prompt_tokens, a[0].output_tokens) == (3772, 54)
    assert 4999 / a[-1].arrival_s == pytest.approx(4.0, rel=0.15)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_generic_csv_any_order_priority(tmp_path: Path) -> None:
    path = _write(tmp_path, "t.csv", "output_tokens,priority,arrival_s,prompt_tokens\n"
                                     "5,0,10.5,7\n6,1,11.0,8\n\n1,0,12.5,9\n")
    reqs = read_trace(path)
    assert [(r.id, r.arrival_s, r.prompt_tokens, r.output_tokens, r.priority) for r in reqs] == [
        (0, 0.0, 7, 5, NORMAL), (1, 0.5, 8, 6, HIGH), (2, 2.0, 9, 1, NORMAL)]


@pytest.mark.parametrize("column", ["priorty", "request_id", "extra"])
def test_generic_csv_refuses_a_column_it_would_drop(tmp_path: Path, column: str) -> None:
    """The project's own CSV has no other columns: a misspelt priority would leave every request at 0."""
    path = _write(tmp_path, "t.csv", f"arrival_s,prompt_tokens,output_tokens,{column}\n0,10,10,1\n")
    with pytest.raises(UserError, match=rf"t\.csv:1: unknown column '{column}' \(known: arrival_s, output_tokens, "
                                        r"priority, prompt_tokens\)"):
        read_trace(path)


def test_public_formats_keep_their_own_columns_and_refuse_misspelt_ones(tmp_path: Path) -> None:
    """Vidur's files carry columns the reader does not use (num_total_tokens, pd_ratio) and a harness may
    add its own keys: kept; a name some format reads, or one a letter away from it, would be dropped: refused."""
    vidur = _write(tmp_path, "v.csv", "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio,source\n"
                                      "3,1,4,3.0,arxiv\n")
    assert [(r.prompt_tokens, r.output_tokens) for r in read_trace(vidur, rate=1.0)] == [(3, 1)]
    mooncake = _write(tmp_path, "m.jsonl", '{"timestamp": 0, "input_length": 5, "output_length": 2, "session": 4}\n')
    assert [r.prompt_tokens for r in read_trace(mooncake)] == [5]
    for name, text, culprit in [
            ("v2.csv", "num_prefill_tokens,num_decode_tokens,priorty\n3,1,1\n", r"v2\.csv:1: unknown column 'priorty'"),
            ("a.csv", AZURE_HEAD.replace("Tokens\n", "Tokens,priority\n").replace(",2\n", ",2,1\n"),
             r"a\.csv:1: unknown column 'priority' \(known: ContextTokens, GeneratedTokens, TIMESTAMP\)"),
            ("m2.jsonl", JSON_OK + '{"timestamp": 1, "input_length": 5, "output_length": 2, "hash_id": [0]}\n',
             r"m2\.jsonl:2: unknown key 'hash_id' \(known: .*hash_ids"),
            ("w.jsonl", '{"arrival_time_ns": 0, "input_toks": 5, "output_toks": 2, "output_hash_id": []}\n',
             r"w\.jsonl:1: unknown key 'output_hash_id'")]:
        with pytest.raises(UserError, match=culprit):
            read_trace(_write(tmp_path, name, text))


def test_limit_and_rate_scale(tmp_path: Path) -> None:
    path = _write(tmp_path, "t.csv", "arrival_s,prompt_tokens,output_tokens\n0,1,1\n2,1,1\n4,1,1\n6,1,1\n")
    assert [r.arrival_s for r in read_trace(path, limit=3)] == [0.0, 2.0, 4.0]
    assert [r.arrival_s for r in read_trace(path, rate_scale=2.0)] == [0.0, 1.0, 2.0, 3.0]
    assert [r.arrival_s for r in read_trace(path, limit=2, rate_scale=0.5)] == [0.0, 4.0]
    assert len(read_trace(path, limit=100)) == 4


def test_rate_replaces_timestamps_keeping_lengths(tmp_path: Path) -> None:
    path = _write(tmp_path, "t.csv", "arrival_s,prompt_tokens,output_tokens\n0,3,1\n0,4,2\n")
    reqs = read_trace(path, rate=2.0, seed=9)
    assert [r.prompt_tokens for r in reqs] == [3, 4] and 0 < reqs[0].arrival_s < reqs[1].arrival_s


def test_mooncake_small_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "t.jsonl", '{"timestamp": 3000, "input_length": 5, "output_length": 2, "hash_ids": [0]}\n'
                                       '{"timestamp": 6000, "input_length": 6, "output_length": 3}\n')
    assert [(r.arrival_s, r.prompt_tokens) for r in read_trace(path)] == [(0.0, 5), (3.0, 6)]


AZURE_HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,10,2\n"
GENERIC_HEAD = "arrival_s,prompt_tokens,output_tokens\n0,1,1\n"
JSON_OK = '{"timestamp": 0, "input_length": 5, "output_length": 2}\n'

BAD_FILES = [
    ("empty.csv", "", r"empty\.csv: empty file"),
    ("empty.jsonl", "", r"empty\.jsonl: empty file"),
    ("header.csv", "arrival_s,prompt_tokens,output_tokens\n", r"header\.csv: no data rows"),
    ("blank.jsonl", "\n\n", r"blank\.jsonl: no data rows"),
    ("t.txt", "a,b\n", r"t\.txt: unknown trace format \(extension '\.txt'\); accepted: \.csv"),
    ("h.csv", "a,b,c\n1,2,3\n", r"h\.csv:1: unknown trace format, header 'a,b,c' not recognised; accepted"),
    ("m.csv", "arrival_s,prompt_tokens\n0,1\n", r"m\.csv:1: missing column output_tokens"),
    ("v.csv", "num_prefill_tokens,x\n1,2\n", r"v\.csv:1: missing column num_decode_tokens"),
    ("a.csv", "TIMESTAMP,ContextTokens\n2023-11-16 18:17:03,1\n", r"a\.csv:1: missing column GeneratedTokens"),
    ("n.csv", GENERIC_HEAD + "1,2.5,1\n", r"n\.csv:3: prompt_tokens '2\.5' is not an integer"),
    ("z.csv", GENERIC_HEAD + "1,1,0\n", r"z\.csv:3: output_tokens must be an integer in \[1, 2,147,483,647\], got 0"),
    ("neg.csv", AZURE_HEAD + "2023-11-16 18:17:04.0,-3,1\n", r"neg\.csv:3: ContextTokens must be an integer in \[1, 2,147,483,647\], got -3"),
    # an output past int32 crashed the ledger (exit 70); `1_000` and another script's digits are mangled fields
    ("big.csv", GENERIC_HEAD + "1,1,2147483648\n", r"big\.csv:3: output_tokens must be an integer in \[1, 2,147,483,647\]"),
    ("u.csv", GENERIC_HEAD + "1,1_000,1\n", r"u\.csv:3: prompt_tokens '1_000' is not an integer \(ASCII digits\)"),
    ("ar.csv", GENERIC_HEAD + "1,\u0661\u0660,1\n", r"ar\.csv:3: prompt_tokens '\u0661\u0660' is not an integer"),
    ("ts.csv", AZURE_HEAD + "2023-11-16 25:17:04.0,3,1\n", r"ts\.csv:3: unparseable timestamp '2023-11-16 25:17:04\.0'"),
    ("ts2.csv", AZURE_HEAD + "yesterday,3,1\n", r"ts2\.csv:3: unparseable timestamp 'yesterday'"),
    ("order.csv", AZURE_HEAD + "2023-11-16 18:17:05.0,3,1\n2023-11-16 18:17:04.0,3,1\n",
     r"order\.csv:4: timestamp earlier than line 3"),
    ("g.csv", GENERIC_HEAD + "abc,1,1\n", r"g\.csv:3: arrival_s 'abc' is not a finite number"),
    ("p.csv", "arrival_s,prompt_tokens,output_tokens,priority\n0,1,1,2\n", r"p\.csv:2: priority must be 0 or 1"),
    ("w.csv", GENERIC_HEAD + "1,1\n", r"w\.csv:3: expected 3 fields as in the header, got 2"),
    ("j.jsonl", JSON_OK + "{not json\n", r"j\.jsonl:2: malformed JSON"),
    ("k.jsonl", JSON_OK + '{"timestamp": 1, "input_length": 5}\n', r"k\.jsonl:2: missing key output_length"),
    ("l.jsonl", JSON_OK + "[1, 2]\n", r"l\.jsonl:2: expected a JSON object, got list"),
    ("f.jsonl", JSON_OK + '{"timestamp": 1, "input_length": 5.5, "output_length": 2}\n',
     r"f\.jsonl:2: input_length 5\.5 is not an integer"),
    ("s.jsonl", JSON_OK + '{"timestamp": "soon", "input_length": 5, "output_length": 2}\n',
     r"s\.jsonl:2: unparseable timestamp 'soon'"),
    ("o.jsonl", '{"timestamp": 9, "input_length": 5, "output_length": 2}\n' + JSON_OK,
     r"o\.jsonl:2: timestamp earlier than line 1"),
]


@pytest.mark.parametrize("name,text,message", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_bad_file(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = _write(tmp_path, name, text)
    with pytest.raises(UserError, match=message) as info:
        read_trace(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_missing_file_and_bad_options(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"nope\.csv: trace file not found"):
        read_trace(tmp_path / "nope.csv")
    path = _write(tmp_path, "t.csv", GENERIC_HEAD)
    for kwargs, message in [({"limit": 0}, "limit must be a positive integer"),
                            ({"rate_scale": 0.0}, "rate_scale must be positive"),
                            ({"rate_scale": -1.0}, "rate_scale must be positive"),
                            ({"spread": True}, "spread applies only to Mooncake")]:
        with pytest.raises(UserError, match=message):
            read_trace(path, **kwargs)


def test_the_validation_workload_s_times_are_nanoseconds(tmp_path: Path) -> None:
    path = _write(tmp_path, "w.jsonl", '{"arrival_time_ns": 0, "input_toks": 5, "output_toks": 2}\n'
                                       '{"arrival_time_ns": 2500000000, "input_toks": 6, "output_toks": 3}\n')
    assert [(r.arrival_s, r.prompt_tokens, r.output_tokens) for r in read_trace(path)] == [(0.0, 5, 2), (2.5, 6, 3)]


def _bursts(tmp_path: Path) -> Path:
    """Mooncake rows at 0, 1 and 2 s and 40 at 12 s: distinct-timestamp gaps 1, 1 and 10 s, median 1 s."""
    stamps = [0, 1000, 2000, *[12_000] * 40]
    return _write(tmp_path, "b.jsonl", "".join(f'{{"timestamp": {t}, "input_length": 5, "output_length": 2}}\n'
                                               for t in stamps))


def test_spread_spreads_the_last_bucket_over_the_median_gap(tmp_path: Path) -> None:
    # the first row lands in [0, 1) and becomes 0: the last bucket's 40 rows lie within (11, 13) s
    reqs = read_trace(_bursts(tmp_path), spread=True, seed=3)
    assert len(reqs) == 43 and all(11.0 < r.arrival_s < 13.0 for r in reqs[3:])


def test_limit_keeps_the_first_requests_after_spreading(tmp_path: Path) -> None:
    spread = read_trace(_bursts(tmp_path), spread=True, seed=3)
    assert read_trace(_bursts(tmp_path), spread=True, seed=3, limit=5) == spread[:5]
