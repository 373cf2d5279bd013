"""Which steps of a run folder replayed a CUDA graph (validation/cudagraphs.py): FULL_DECODE_ONLY gives its prefill
steps the CPU floor (sim/graphless.py); NONE, no graph for any step, is refused."""

from __future__ import annotations

import json

import pytest

from llumverify.errors import UserError
from llumverify.validation.cudagraphs import recorded_mode
from llumverify.validation.run_hardware import run_hardware

RESOLVED_MODES = [(0, "NONE"), (1, "PIECEWISE"), (2, "FULL"), ([2, 0], "FULL_DECODE_ONLY"),
                  ([2, 1], "FULL_AND_PIECEWISE")]


def _meta(**sections: dict) -> dict:
    return {"model": "meta-llama/Llama-3.1-8B", "hardware": {"device_name": "NVIDIA H100 80GB HBM3"}, **sections}


def _check(meta: dict, mode: str | None) -> None:
    """`mode`: the recorded mode the run resolves to (None: nothing recorded, vLLM's default)."""
    if mode == "NONE":
        with pytest.raises(UserError, match=r"^m\.json: .*: not modelled \(cudagraph_mode NONE: no CUDA graph for any step"):
            run_hardware(meta, "m.json")
    else:
        assert run_hardware(meta, "m.json").cudagraph_mode == ("full_decode_only" if mode == "FULL_DECODE_ONLY"
                                                               else "full_and_piecewise")


@pytest.mark.parametrize(("value", "name"), RESOLVED_MODES)
def test_every_resolved_mode_is_read_and_only_none_refused(value: object, name: str) -> None:
    meta = _meta(resolved_config={"compilation_config": {"cudagraph_mode": value}})
    assert recorded_mode(meta, "m.json")[0] == name
    _check(meta, name)


@pytest.mark.parametrize("name", ["none", "Piecewise", "FULL", "full_decode_only", "FULL_AND_PIECEWISE"])
def test_every_mode_name_in_any_case_is_read_from_the_arguments(name: str) -> None:
    meta = _meta(engine_kwargs={"compilation_config": {"cudagraph_mode": name}})
    assert recorded_mode(meta, "m.json")[0] == name.upper()
    _check(meta, name.upper())


def test_a_json_string_compilation_config_is_read_as_vllm_reads_it() -> None:
    """`--compilation-config '{...}'` reaches engine_kwargs as a string (InferenceX's B200 sweep passed it so)."""
    meta = _meta(engine_kwargs={"compilation_config": json.dumps({"cudagraph_mode": "FULL_DECODE_ONLY"})})
    _check(meta, "FULL_DECODE_ONLY")
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
    _check(_meta(**sections), "NONE")


@pytest.mark.parametrize("sections", [
    {},
    {"engine_kwargs": {"compilation_config": 3}},
    {"engine_kwargs": {"compilation_config": {"level": 3}}},
    {"engine_kwargs": {"optimization_level": 2}},
    {"resolved_config": {"compilation_config": {"cudagraph_mode": None, "mode": 3}}},
])
def test_compiled_or_unrecorded_runs_pass(sections: dict) -> None:
    assert recorded_mode(_meta(**sections), "m.json") is None
    _check(_meta(**sections), None)


@pytest.mark.parametrize(("mode", "resolved"), [("FULL_AND_PIECEWISE", "NONE"), ("PIECEWISE", "NONE"), ("FULL", "FULL")])
def test_a_piecewise_mode_without_vllm_compile_is_none(mode: str, resolved: str) -> None:
    """vLLM overrides a mode needing piecewise compilation to NONE below VLLM_COMPILE; FULL needs none."""
    _check(_meta(engine_kwargs={"compilation_config": {"cudagraph_mode": mode, "mode": 0}}), resolved)


def test_the_resolved_mode_decides_and_a_null_one_defers_to_the_arguments() -> None:
    graphed = _meta(resolved_config={"compilation_config": {"cudagraph_mode": [2, 1]}},
                    engine_kwargs={"compilation_config": {"cudagraph_mode": "FULL_DECODE_ONLY"}})
    _check(graphed, "FULL_AND_PIECEWISE")
    graphed["resolved_config"]["compilation_config"]["cudagraph_mode"] = None
    _check(graphed, "FULL_DECODE_ONLY")


@pytest.mark.parametrize("value", ["graphs", True, 3, 2.0, [2], [2, 0, 1], [0, 2], [1, 1], [1, 0], [[2], 0],
                                   {"decode": 2}])
def test_a_value_that_is_no_vllm_mode_is_named_as_such(value: object) -> None:
    """A misspelt or malformed mode is its own error, not "not modelled" and not read as a real mode."""
    meta = _meta(resolved_config={"compilation_config": {"cudagraph_mode": value}})
    with pytest.raises(UserError, match="compilation_config.cudagraph_mode must be a vLLM CUDA graph mode"):
        run_hardware(meta, "m.json")
