"""Which CUDA graphs a recorded vLLM run replayed: the replay's cudagraph_mode, or a refusal.

vLLM V1's default cudagraph_mode FULL_AND_PIECEWISE replays a graph for every step (full graphs for
decode-only steps, piecewise ones for steps with a prefill chunk; steps above
max_cudagraph_capture_size run without a graph in every mode, and are GPU-bound anyway). Under
FULL_DECODE_ONLY a step with a prefill chunk launches every kernel from the CPU: the replay gives
such steps the CPU floor of sim/graphless.py (HardwareConfig.cudagraph_mode "full_decode_only").
Under NONE every step does, decode steps too, which is not modelled: such runs are refused, naming
the setting. PIECEWISE and FULL are replayed as graph-replayed.

vLLM (CUDAGraphMode, CompilationMode): a mode is a name (case-insensitive) or, as a resolved
configuration records it, NONE = 0, PIECEWISE = 1, FULL = 2, FULL_DECODE_ONLY = [2, 0],
FULL_AND_PIECEWISE = [2, 1]. Below VLLM_COMPILE (compilation mode or level 0-2) vLLM turns a mode
that needs piecewise graphs, the default included, into NONE; so does optimization_level 0.
"""

from __future__ import annotations

import json

from llumverify.errors import UserError, brief
from llumverify.files.inputs import exact_int
from llumverify.validation.run_engine import dig

NAMES = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
NUMBERS = {0: "NONE", 1: "PIECEWISE", 2: "FULL", (2, 0): "FULL_DECODE_ONLY", (2, 1): "FULL_AND_PIECEWISE"}
PIECEWISE_MODES = ("PIECEWISE", "FULL_AND_PIECEWISE")  # need VLLM_COMPILE's piecewise graphs
VLLM_COMPILE = 3  # CompilationMode (formerly level) of vLLM's piecewise compilation: below it, no piecewise graphs
COMPILE_NAMES = ("NONE", "STOCK_TORCH_COMPILE", "DYNAMO_TRACE_ONCE", "VLLM_COMPILE")


def mode_name(value: object, where: str) -> str:
    """The name of a recorded cudagraph_mode; anything else is a one-line UserError."""
    if isinstance(value, str) and value.upper() in NAMES:
        return value.upper()
    key = tuple(value) if isinstance(value, list) else value
    whole = all(type(v) is int for v in key) if isinstance(key, tuple) else type(key) is int  # not bool, not 2.0
    if not whole or key not in NUMBERS:
        raise UserError(f"{where} must be a vLLM CUDA graph mode ({', '.join(NAMES)}; resolved: 0, 1, 2, [2, 0] or "
                        f"[2, 1]), got {brief(value)}")
    return NUMBERS[key]


def _compile_mode(value: object, where: str) -> int:
    """A compilation mode or level as its number (0-3)."""
    if isinstance(value, str) and value.upper() in COMPILE_NAMES:
        return COMPILE_NAMES.index(value.upper())
    return exact_int(value, where, lo=0, hi=VLLM_COMPILE)


def _argument(meta: dict, where: str) -> object:
    """engine_kwargs.compilation_config as a JSON object (vLLM's CLI takes it as a JSON string), or a level."""
    value = dig(meta, ("engine_kwargs", "compilation_config"))
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):  # RecursionError: nested too deeply for the decoder
            raise UserError(f"{where}: engine_kwargs.compilation_config is not valid JSON: {brief(value)}") from None
    return value


def _below_vllm_compile(sections: list[tuple[object, str]], where: str) -> str:
    """"setting = value" of the first recorded compilation mode (or level) below VLLM_COMPILE, or ""."""
    for section, place in sections:
        if isinstance(section, dict):
            for key in ("mode", "level"):
                value = section.get(key)
                if value is not None:
                    below = _compile_mode(value, f"{where}: {place}.{key}") < VLLM_COMPILE
                    return f"{place}.{key} = {brief(value)}" if below else ""
        elif section is not None:  # a bare level (-O3 of older vLLM)
            return f"{place} = {brief(section)}" if _compile_mode(section, f"{where}: {place}") < VLLM_COMPILE else ""
    return ""


def recorded_mode(meta: dict, where: str) -> tuple[str, str] | None:
    """(cudagraph_mode name, "setting = value" that decided it) of a run, or None where nothing is
    recorded (vLLM's default). A resolved mode decides; else an argument's, except that vLLM turns a
    mode needing piecewise compilation (PIECEWISE, FULL_AND_PIECEWISE, and the default) into NONE when
    compilation is below VLLM_COMPILE (VllmConfig.__post_init__), as it does at optimization_level 0."""
    resolved = dig(meta, ("resolved_config", "compilation_config"))
    if isinstance(resolved, dict) and resolved.get("cudagraph_mode") is not None:
        value, place = resolved["cudagraph_mode"], "resolved_config.compilation_config.cudagraph_mode"
        return mode_name(value, f"{where}: {place}"), f"{place} = {brief(value)}"
    argument = _argument(meta, where)
    below = _below_vllm_compile([(resolved, "resolved_config.compilation_config"),
                                 (argument, "engine_kwargs.compilation_config")], where)
    if isinstance(argument, dict) and argument.get("cudagraph_mode") is not None:
        value, place = argument["cudagraph_mode"], "engine_kwargs.compilation_config.cudagraph_mode"
        name = mode_name(value, f"{where}: {place}")
        if below and name in PIECEWISE_MODES:
            return "NONE", f"{place} = {brief(value)} with {below}"
        return name, f"{place} = {brief(value)}"
    if below:
        return "NONE", below
    for path in (("resolved_config", "optimization_level"), ("engine_kwargs", "optimization_level")):
        value = dig(meta, path)
        if value is not None:
            if exact_int(value, f"{where}: {'.'.join(path)}", lo=0, hi=VLLM_COMPILE) == 0:
                return "NONE", f"{'.'.join(path)} = 0"
            break
    return None


def replayed_mode(meta: dict, where: str) -> str:
    """HardwareConfig.cudagraph_mode for the run: "full_decode_only" where its steps with a prefill chunk
    had no graph, else "full_and_piecewise"; a one-line UserError where no step had one (NONE)."""
    found = recorded_mode(meta, where)
    if found is not None and found[0] == "NONE":
        raise UserError(f"{where}: {found[1]}: not modelled (cudagraph_mode NONE: no CUDA graph for any step, each "
                        "launches every kernel from the CPU); validate and calibrate replay engines with graphs for "
                        "decode steps at least")
    return "full_decode_only" if found is not None and found[0] == "FULL_DECODE_ONLY" else "full_and_piecewise"
