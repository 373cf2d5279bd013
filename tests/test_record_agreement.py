"""A run's records that agree, or leave a value out, are accepted: the refusals of records that disagree
(TP/DP argument vs resolved, sends off the queue clock, served name vs model argument, a method resolved
to none, an unknown device memory) stop at the disagreement."""

from __future__ import annotations

from pathlib import Path

import pytest

from llumverify.errors import UserError
from llumverify.validation.replay import derived_workload
from llumverify.validation.run_engine import check_sections, served_formats
from llumverify.validation.run_hardware import run_hardware


def test_data_parallel_sizes_that_disagree_are_refused_and_agreeing_ones_pass() -> None:
    agree = {"engine_kwargs": {"data_parallel_size": 2}, "resolved_config": {"parallel_config": {"data_parallel_size": 2}}}
    check_sections(agree, "m")
    check_sections({"engine_kwargs": {"data_parallel_size": 2}}, "m")  # one place recorded: nothing to compare
    disagree = {"engine_kwargs": {"data_parallel_size": 2}, "resolved_config": {"parallel_config": {"data_parallel_size": 4}}}
    with pytest.raises(UserError, match="data_parallel_size"):
        check_sections(disagree, "m")


def test_a_send_backlogged_behind_the_engine_is_paced_by_the_run_through_its_last_token(tmp_path: Path) -> None:
    """The first request sent waits 100 s before its queue (a backlog), the next is queued as sent: the lags
    differ by 100 s, more than the queue times' own spread (0 s) and its slack, within the run's 200 s to its
    last token."""
    rows = [{"input_toks": 8, "output_toks": 3, "arrival_time": 0.0, "queued_ts": 100.0, "first_token_ts": 101.0,
             "last_token_ts": 102.0},
            {"input_toks": 8, "output_toks": 3, "arrival_time": 100.0, "queued_ts": 100.0, "first_token_ts": 101.0,
             "last_token_ts": 300.0}]
    _, specs, key = derived_workload(tmp_path / "requests.jsonl", rows, [1, 2])
    assert key == "arrival_time" and [s.arrival_s for s in specs] == [0.0, 100.0]
    rows[1]["last_token_ts"] = 102.0  # the run then spans 2 s: 100 s of drift is sends off the engine's clock
    with pytest.raises(UserError, match="drift"):
        derived_workload(tmp_path / "requests.jsonl", rows, [1, 2])


def test_device_memory_zero_is_vllms_unknown_not_a_refusal() -> None:
    meta = {"model": "meta-llama/Llama-3.1-8B", "engine_kwargs": {"tensor_parallel_size": 1},
            "hardware": {"device_name": "NVIDIA H100 80GB HBM3", "device_total_memory_bytes": 0}}
    assert run_hardware(meta, "m").gpu == "NVIDIA H100 80GB HBM3"


def test_a_served_name_the_catalogs_do_not_know_is_not_compared_with_the_model_argument() -> None:
    meta = {"model": "my-served-llama", "engine_kwargs": {"model": "meta-llama/Llama-3.1-8B-Instruct",
                                                         "tensor_parallel_size": 1},
            "hardware": {"device_name": "NVIDIA H100 80GB HBM3"}}
    assert run_hardware(meta, "m").model == "my-served-llama"
    meta["engine_kwargs"]["model"] = "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8"  # a served base name for its FP8 checkpoint
    meta["model"] = "meta-llama/Llama-3.1-8B-Instruct"
    run_hardware(meta, "m")


def test_a_resolved_model_config_without_a_quantization_key_takes_the_argument() -> None:
    meta = {"model": "meta-llama/Llama-3.1-8B", "engine_kwargs": {"quantization": "fp8"},
            "resolved_config": {"model_config": {"max_model_len": 4096}}}
    assert served_formats(meta, "m")[0] == "fp8"
    meta["resolved_config"]["model_config"]["quantization"] = None
    with pytest.raises(UserError, match="null"):
        served_formats(meta, "m")


def test_a_key_given_twice_with_one_value_is_read_and_with_two_is_refused(tmp_path: Path) -> None:
    from llumverify.files.paths import read_json_object

    same, two = tmp_path / "same.json", tmp_path / "two.json"
    same.write_text('{"max_num_seqs": 8, "block_size": 16, "max_num_seqs": 8}')
    two.write_text('{"max_num_seqs": 8, "block_size": 16, "max_num_seqs": 256}')
    assert read_json_object(same, "meta.json") == {"max_num_seqs": 8, "block_size": 16}
    with pytest.raises(UserError, match="key 'max_num_seqs' given twice"):
        read_json_object(two, "meta.json")


def test_device_memory_written_as_a_whole_float_is_a_byte_count() -> None:
    meta = {"model": "meta-llama/Llama-3.1-8B", "engine_kwargs": {"tensor_parallel_size": 1},
            "hardware": {"device_name": "NVIDIA H100 80GB HBM3", "device_total_memory_bytes": 85899345920.0}}
    assert run_hardware(meta, "m").memory == 85899345920
    meta["hardware"]["device_total_memory_bytes"] = 85899345920.5
    with pytest.raises(UserError, match="must be an integer"):
        run_hardware(meta, "m")
