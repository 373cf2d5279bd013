"""Run folders whose steps with a prefill chunk replayed no CUDA graph are refused (validation/cudagraphs.py)."""

from __future__ import annotations

import json

import pytest

from llumverify.errors import UserError
from llumverify.validation.cudagraphs import recorded_mode
from llumverify.validation.run_hardware import run_hardware

RESOLVED_MODES = [(0, "NONE"), (1, "PIECEWISE"), (2, "FULL"), ([2, 0], "FULL_DECODE_ONLY"),
                  ([2, 1], "FULL_AND_PIECEWISE")]
GRAPHED = ("PIECEWISE", "FULL", "FULL_AND_PIECEWISE")


def _meta(**sections: dict) -> dict:
    return {"model": "meta-llama/Llama-3.1-8B", "hardware": {"device_name": "NVIDIA H100 80GB HBM3"}, **sections}


def _check(meta: dict, refused: bool) -> None:
    if refused:
        with pytest.raises(UserError, match=r"^m\.json: .*: not modelled \(cudagraph_mode (NONE|FULL_DECODE_ONLY): no CUDA"):
            run_hardware(meta, "m.json")
    else:
        assert run_hardware(meta, "m.json").tp == 1


@pytest.mark.parametrize(("value", "name"), RESOLVED_MODES)
def test_every_resolved_mode_is_read_and_only_graphless_prefill_refused(value: object, name: str) -> None:
    meta = _meta(resolved_config={"compilation_config": {"cudagraph_mode": value}})
    assert recorded_mode(meta, "m.json")[0] == name
    _check(meta, name not in GRAPHED)


@pytest.mark.parametrize("name", ["none", "Piecewise", "FULL", "full_decode_only", "FULL_AND_PIECEWISE"])
def test_every_mode_name_in_any_case_is_read_from_the_arguments(name: str) -> None:
    meta = _meta(engine_kwargs={"compilation_config": {"cudagraph_mode": name}})
    assert recorded_mode(meta, "m.json")[0] == name.upper()
    _check(meta, name.upper() not in GRAPHED)


def test_a_json_string_compilation_config_is_read_as_vllm_reads_it() -> None:
    """`--compilation-config '{...}'` reaches engine_kwargs as a string (InferenceX's B200 sweep passed it so)."""
    meta = _meta(engine_kwargs={"compilation_config": json.dumps({"cudagraph_mode": "FULL_DECODE_ONLY"})})
    _check(meta, True)
    for bad in ('{"cudagraph_mode": ', '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"):  # cut short; too deep
        meta["engine_kwargs"]["compilation_config"] = bad
        with pytest.raises(UserError, match="engine_kwargs.compilation_config is not valid JSON"):
            run_hardware(meta, "m.json")


@pytest.mark.parametrize("sections", [
    {"engine_kwargs": {"compilation_config": 0}},
    {"engine_kwargs": {"compilation_config": {"level": 2}}},
    {"engine_kwargs": {"compilation_config": {"mode": "NONE"}}},
    {"resolved_config": {"compilation_config": {"mode": 0}}},
    {"engine_kwargs": {"optimization_level": 0}},
])
def test_no_compilation_means_no_graphs(sections: dict) -> None:
    """Below VLLM_COMPILE (or at -O0) vLLM resolves cudagraph_mode to NONE."""
    _check(_meta(**sections), True)


@pytest.mark.parametrize("sections", [
    {},
    {"engine_kwargs": {"compilation_config": 3}},
    {"engine_kwargs": {"compilation_config": {"level": 3}}},
    {"engine_kwargs": {"optimization_level": 2}},
    {"resolved_config": {"compilation_config": {"cudagraph_mode": None, "mode": 3}}},
])
def test_compiled_or_unrecorded_runs_pass(sections: dict) -> None:
    assert recorded_mode(_meta(**sections), "m.json") is None
    _check(_meta(**sections), False)


@pytest.mark.parametrize(("mode", "refused"), [("FULL_AND_PIECEWISE", True), ("PIECEWISE", True), ("FULL", False)])
def test_a_piecewise_mode_without_vllm_compile_is_none(mode: str, refused: bool) -> None:
    """vLLM overrides a mode needing piecewise compilation to NONE below VLLM_COMPILE; FULL needs none."""
    _check(_meta(engine_kwargs={"compilation_config": {"cudagraph_mode": mode, "mode": 0}}), refused)


def test_the_resolved_mode_decides_and_a_null_one_defers_to_the_arguments() -> None:
    graphed = _meta(resolved_config={"compilation_config": {"cudagraph_mode": [2, 1]}},
                    engine_kwargs={"compilation_config": {"cudagraph_mode": "FULL_DECODE_ONLY"}})
    _check(graphed, False)
    graphed["resolved_config"]["compilation_config"]["cudagraph_mode"] = None
    _check(graphed, True)


@pytest.mark.parametrize("value", ["graphs", True, 3, 2.0, [2], [2, 0, 1], [0, 2], [1, 1], [1, 0], [[2], 0],
                                   {"decode": 2}])
def test_a_value_that_is_no_vllm_mode_is_named_as_such(value: object) -> None:
    """A misspelt or malformed mode is its own error, not "not modelled" and not read as a real mode."""
    meta = _meta(resolved_config={"compilation_config": {"cudagraph_mode": value}})
    with pytest.raises(UserError, match="compilation_config.cudagraph_mode must be a vLLM CUDA graph mode"):
        run_hardware(meta, "m.json")
