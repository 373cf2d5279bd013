"""The engine settings a real run used, from its meta.json, and where each one came from.

Harnesses record vLLM's settings in up to three places, and a setting left to vLLM is `null` or
absent in the first: the arguments given (`engine_kwargs`, `kv_cache`), the configuration vLLM
resolved at start-up (`resolved_config.scheduler_config` / `cache_config`, exact: it holds the
defaults vLLM chose), else vLLM's own default, stated in a note (the run did not say). validate,
calibrate and the hardware reading (run_hardware.py) all read settings through `lookup`, so a
value cannot be taken from one place by one and from another by the other.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from llumverify.errors import UserError, brief
from llumverify.files.inputs import exact_bool, exact_int, finite
from llumverify.settings.config import EngineConfig
from llumverify.sim.engine_v1 import GIB, vllm_serve_defaults


# Where each setting may be written (full paths), most specific first (the resolved config last: it
# is what vLLM actually ran with, but older harnesses do not record it).
_ARGS, _SCHED, _CACHE = ("engine_kwargs",), ("resolved_config", "scheduler_config"), ("resolved_config", "cache_config")
PLACES: dict[str, tuple[tuple[str, ...], ...]] = {key: tuple((*section, key) for section in sections) for key, sections in {
    "max_num_seqs": (_ARGS, _SCHED),
    "max_num_batched_tokens": (_ARGS, _SCHED),
    "num_gpu_blocks": (("kv_cache",), _CACHE),
    "block_size": (("kv_cache",), _ARGS, _CACHE),
    "enable_prefix_caching": (("kv_cache",), _ARGS, _CACHE),
    "gpu_memory_utilization": (("kv_cache",), _ARGS, _CACHE),
    "kv_cache_memory_bytes": (("kv_cache",), _ARGS, _CACHE),
    "tensor_parallel_size": (_ARGS, ("resolved_config", "parallel_config")),
    "data_parallel_size": (_ARGS, ("resolved_config", "parallel_config")),
    "enable_expert_parallel": (_ARGS, ("resolved_config", "parallel_config")),
    "max_model_len": (_ARGS, ("resolved_config", "model_config")),
    "quantization": (("resolved_config", "model_config"), _ARGS),  # vLLM resolves modelopt to modelopt_fp4 for an FP4 checkpoint
    "async_scheduling": (_ARGS, _SCHED),
}.items()}
PLACES["kv_cache_dtype"] = (("engine_kwargs", "kv_cache_dtype"), (*_CACHE, "cache_dtype"))


# Settings vLLM never changes from the argument: where both places record one, they must agree (the first would
# be read, a TP-2 run replayed at TP 1 without a word; a max_num_seqs of 64 replayed as the 256 vLLM ran). A
# max_model_len of -1 ("auto") is resolved by vLLM, so it is not compared.
AGREEING = ("tensor_parallel_size", "data_parallel_size", "max_num_seqs", "max_num_batched_tokens", "max_model_len")


SECTIONS = (("engine_kwargs",), ("kv_cache",), ("hardware",), ("resolved_config",), _SCHED, _CACHE,
            ("resolved_config", "parallel_config"), ("resolved_config", "model_config"))


def check_sections(meta: dict, where: Path | str) -> None:
    """Each section meta.json may have is a JSON object (or null/absent): a list or a string where
    settings belong is a malformed file, not a run that left everything to vLLM. An engine setting at
    the top level is refused: the harness writes them in engine_kwargs, kv_cache or resolved_config,
    where they are read, so one there would be ignored (a TP-2 run replayed at TP 1)."""
    for path in SECTIONS:
        value = dig(meta, path)
        if value is not None and not isinstance(value, dict):
            raise UserError(f"{where}: {'.'.join(path)} must be a JSON object, got {type(value).__name__}")
    misplaced = [key for key in (*PLACES, *(u.key for u in UNMODELLED)) if key in meta]
    if misplaced:
        raise UserError(f"{where}: {misplaced[0]} at the top level: a run records its engine settings in "
                        "engine_kwargs (kv_cache, resolved_config), where they are read")
    for key in AGREEING:  # vLLM runs these as given: an argument and a resolved value that differ are two runs' records
        given, resolved = (dig(meta, path) for path in PLACES[key])
        if key == "max_model_len" and type(given) is int and given == AUTO_LENGTH:
            continue
        if given is not None and resolved is not None and given != resolved:
            raise UserError(f"{where}: {'.'.join(PLACES[key][0])} {brief(given)} but {'.'.join(PLACES[key][1])} "
                            f"{brief(resolved)}: vLLM runs the {key} it is given, so the two cannot both be this run's")


def dig(meta: object, path: tuple[str, ...]) -> object:
    """meta[path[0]][path[1]]..., None where a step is missing or not a JSON object."""
    for part in path:
        meta = meta.get(part) if isinstance(meta, dict) else None
    return meta


def first(meta: dict, paths: tuple[tuple[str, ...], ...]) -> tuple[object, str]:
    """(value, "a.b.c" it was read from) of the first path that sets it, (None, "") if none (null = unset)."""
    for path in paths:
        value = dig(meta, path)
        if value is not None:
            return value, ".".join(path)
    return None, ""


def lookup(meta: dict, key: str) -> tuple[object, str]:
    """A setting (PLACES) as `first` reads it."""
    return first(meta, PLACES[key])


VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)  # vLLM's CacheConfig BlockSize (vllm/config/cache.py)
AUTO_LENGTH = -1  # max_model_len "auto" (vLLM 0.11+: the longest the KV memory holds)


def block_size(meta: dict, where: Path | str) -> int:
    """The run's tokens per KV block: 16 (vLLM's default on CUDA) where unset, else one vLLM allows
    (7 or 2^20 would size every block and the KV cache wrongly)."""
    value, place = lookup(meta, "block_size")
    if value is None:
        return 16
    if exact_int(value, f"{where}: {place}") not in VLLM_BLOCK_SIZES:
        raise UserError(f"{where}: {place} must be one of vLLM's block sizes ({', '.join(map(str, VLLM_BLOCK_SIZES))}), "
                        f"got {brief(value)}")
    return value


def max_model_len(meta: dict, where: Path | str) -> tuple[int | None, str]:
    """(the run's longest request in tokens, where it was read), (None, "") where unset or asked as
    "auto" (-1) without the resolved length: an integer >= 1 as written, so "10" or -10 are refused,
    not skipped (the request-length check and vLLM's cap on its batch default read it)."""
    for path in PLACES["max_model_len"]:
        value = dig(meta, path)
        if value is None or (path[0] == "engine_kwargs" and type(value) is int and value == AUTO_LENGTH):
            continue
        return exact_int(value, f"{where}: {'.'.join(path)}", lo=1, hi=1 << 31), ".".join(path)
    return None, ""


# Settings that change what a step costs or what the run is, and that the replay does not model. A
# run with any value but the modelled one is refused rather than simulated as if it ran the modelled
# way. Where the resolved configuration records the setting it decides (vLLM may override the
# argument: V1 0.8-0.11 chunk prefills whatever enable_chunked_prefill asked); else the argument does.
_PARALLEL, _MODEL = ("resolved_config", "parallel_config"), ("resolved_config", "model_config")
FLOAT32 = ("float32", "float", "torch.float32")


@dataclass(frozen=True)
class Unmodelled:
    what: str
    key: str  # the engine argument (engine_kwargs)
    resolved: tuple[str, ...]  # where vLLM's resolved configuration records it
    modelled: Callable[[object], bool]  # the value(s) the replay models (a resolved null: off)
    kind: str = "any"  # "bool", "int" or "number": the type a value must have, checked first


UNMODELLED = (
    Unmodelled("pipeline parallelism", "pipeline_parallel_size", (*_PARALLEL, "pipeline_parallel_size"),
               lambda v: v == 1, "int"),
    Unmodelled("speculative decoding", "speculative_config", ("resolved_config", "speculative_config"),
               lambda v: v in ({}, None)),
    Unmodelled("eager mode (no CUDA graphs: every kernel launched from the CPU)", "enforce_eager",
               (*_MODEL, "enforce_eager"), lambda v: v is False, "bool"),
    Unmodelled("prefill without chunking", "enable_chunked_prefill", (*_SCHED, "enable_chunked_prefill"),
               lambda v: v is True, "bool"),
    Unmodelled("concurrent partial prefills", "max_num_partial_prefills", (*_SCHED, "max_num_partial_prefills"),
               lambda v: v == 1, "int"),
    Unmodelled("decode context parallelism", "decode_context_parallel_size",
               (*_PARALLEL, "decode_context_parallel_size"), lambda v: v == 1, "int"),
    Unmodelled("prefill context parallelism", "prefill_context_parallel_size",
               (*_PARALLEL, "prefill_context_parallel_size"), lambda v: v == 1, "int"),
    Unmodelled("KV offloading to CPU memory", "kv_offloading_size", (*_CACHE, "kv_offloading_size"),
               lambda v: v == 0, "number"),
    Unmodelled("weights offloaded to CPU memory", "cpu_offload_gb", (*_CACHE, "cpu_offload_gb"),
               lambda v: v == 0, "number"),
    Unmodelled("32-bit weights", "dtype", (*_MODEL, "dtype"), lambda v: v not in FLOAT32),
    Unmodelled("LoRA adapters", "enable_lora", ("resolved_config", "lora_config"), lambda v: v in (False, None)),
)


def _typed(value: object, where: str, kind: str) -> None:
    """A wrong type is its own error, not a setting the replay does not model ("false" is no boolean)."""
    if kind == "bool":
        exact_bool(value, where)
    elif kind == "int":
        exact_int(value, where, lo=0)
    elif kind == "number":
        finite(value, where, ge=0)


def refuse_unmodelled(meta: dict, where: str) -> None:
    """A one-line error naming the first setting the run used that the replay does not model."""
    for u in UNMODELLED:
        section = dig(meta, u.resolved[:-1])
        if isinstance(section, dict) and u.resolved[-1] in section:  # the resolved value decides, null meaning off
            path, value = u.resolved, section[u.resolved[-1]]
        else:
            path, value = (*_ARGS, u.key), dig(meta, (*_ARGS, u.key))
        if value is None:
            continue
        _typed(value, f"{where}: {'.'.join(path)}", u.kind)
        if not u.modelled(value):
            raise UserError(f"{where}: {'.'.join(path)} = {brief(value)}: not modelled ({u.what}); "
                            "validate and calibrate replay engines without it")


def data_parallel(meta: dict, where: Path | str) -> tuple[int, bool]:
    """(data-parallel ranks, expert parallelism) of the run: vLLM's defaults 1 and off where unset.
    Each rank is an engine with its own scheduler and KV cache; the replay runs one instance per rank."""
    dp, place = lookup(meta, "data_parallel_size")
    dp = 1 if dp is None else exact_int(dp, f"{where}: {place}", lo=1, hi=1024)
    ep, place = lookup(meta, "enable_expert_parallel")
    return dp, False if ep is None else exact_bool(ep, f"{where}: {place}")


def served_formats(meta: dict, where: str) -> tuple[str, str]:
    """(weight format, KV format) the run served with, as HardwareConfig names them ("", "fp8", "int4"
    or "nvfp4"; "auto" or "fp8"; sim/quantization.py); a format the simulator does not model is a
    UserError. The method vLLM resolved is read before the argument. A method that does not say the
    format (compressed-tensors, gptq, gptq_marlin, modelopt) takes the one the checkpoint's name ends in;
    modelopt with no format in the name is ModelOpt FP8."""
    from llumverify.sim.checkpoint_names import split_format
    from llumverify.sim.quantization import METHOD_FORMATS, NAMED_METHODS

    method, place = lookup(meta, "quantization")
    resolved = dig(meta, _MODEL)
    if method is not None and isinstance(resolved, dict) and resolved.get("quantization", "") is None:
        # the argument, read where vLLM's resolved method is null: a method given is never resolved to none
        raise UserError(f"{where}: {place} = {brief(method)} but {'.'.join(_MODEL)}.quantization is null: vLLM resolves a "
                        "method it is given to one (awq to awq_marlin) or refuses the checkpoint, never runs none")
    name = meta.get("model") if isinstance(meta.get("model"), str) else ""
    _, named = split_format(name) if name else ("", "")
    kv = _kv_format(meta, where)
    if method is None:
        return named, kv
    if isinstance(method, str):
        if method in METHOD_FORMATS and named in ("", METHOD_FORMATS[method]):
            return METHOD_FORMATS[method], kv
        if named in NAMED_METHODS.get(method, ()):
            return named, kv
        if method == "modelopt" and not named:  # vLLM's ModelOpt FP8; an FP4 checkpoint turns it into modelopt_fp4
            return "fp8", kv
    raise UserError(f"{where}: {place} = {method!r}" + (f" with an {named} checkpoint ({name})" if named else "")
                    + ": modelled are " + ", ".join(sorted(METHOD_FORMATS)) + " (and " + ", ".join(sorted(NAMED_METHODS))
                    + " when the checkpoint's name ends in its format, e.g. -FP8, -w4a16, -GPTQ-Int4, -NVFP4)")


def _kv_format(meta: dict, where: str) -> str:
    """The run's KV cache format: "auto", "fp8" or "bf16" (16 bits asked for). "auto" is the model's 16 bits, or fp8 where the checkpoint
    is read from its own files and they carry KV scales (sim/hf_quant.py); a checkpoint named, not read, has no
    files to say so."""
    kv, place = lookup(meta, "kv_cache_dtype")
    if kv is None or kv == "auto":
        return "auto"
    if kv in ("bfloat16", "float16", "half"):
        return "bf16"
    if isinstance(kv, str) and kv.startswith("fp8"):
        return "fp8"
    raise UserError(f"{where}: {place} = {kv!r}: only a 16-bit or fp8 KV cache is modelled")


def vllm_batch_defaults(meta: dict) -> tuple[int, int, str]:
    """(max_num_batched_tokens, max_num_seqs, why) as `vllm serve` (V1) picks them when not given:
    EngineArgs.get_batch_defaults (vllm/engine/arg_utils.py), OPENAI_API_SERVER usage context:
    8,192 tokens and 1,024 sequences on a device of >= 70 GiB whose name does not contain "a100",
    else 2,048 and 256 (engine_settings applies vLLM's caps on them)."""
    name = dig(meta, ("hardware", "device_name"))
    name = name if isinstance(name, str) else ""
    memory = dig(meta, ("hardware", "device_total_memory_bytes"))
    if isinstance(memory, bool) or not isinstance(memory, int) or memory <= 0:  # 0: vLLM's own "unknown"
        memory = _catalog_memory(name)
    elif memory >= 1 << 50:  # 1 PiB: no device; a huge value would overflow the GiB below
        raise UserError(f"hardware.device_total_memory_bytes must be a byte count below 2^50, got {brief(memory)}")
    tokens, seqs = vllm_serve_defaults(name, memory)
    device = f"{name or 'an unnamed device'} ({memory / GIB:.0f} GiB)" if memory else (name or "an unknown device")
    return tokens, seqs, f"vLLM V1 `vllm serve` defaults for {device}"


def _catalog_memory(label: str) -> int:
    """The catalog's visible memory of a GPU label, 0 when unknown (vLLM's own fallback)."""
    from llumverify.sim.catalog import get_gpu

    try:
        return get_gpu(label).usable_memory_bytes if label else 0
    except UserError:
        return 0


FIRST_V1_DEFAULT = (0, 8)  # vLLM 0.8.0 made the V1 engine the default
FIRST_ASYNC_DEFAULT = (0, 14)  # vLLM 0.14.0 made async scheduling the default (PR #27614)


def recorded_version(meta: dict) -> tuple[int, int] | None:
    version = meta.get("vllm_version")
    parts = re.match(r"v?(\d+)\.(\d+)", version) if isinstance(version, str) else None
    return None if parts is None else (int(parts[1]), int(parts[2]))


def async_setting(meta: dict, where: Path | str) -> tuple[bool, list[str]]:
    """Whether the run's engine scheduled one step ahead (vLLM's async scheduler): as recorded, else
    its vLLM's default (on from FIRST_ASYNC_DEFAULT; on for an unrecorded version, as in the vLLM the
    engine model follows), with a note saying so."""
    value, place = lookup(meta, "async_scheduling")
    if value is not None:
        return exact_bool(value, f"{where}: {place}"), []
    version = recorded_version(meta)
    on = version is None or version >= FIRST_ASYNC_DEFAULT
    which = "an unrecorded vLLM's" if version is None else f"vLLM {meta['vllm_version'][:20]}'s"
    return on, [f"async_scheduling: not recorded, {'on' if on else 'off'} ({which} default)"]


def version_notes(meta: dict) -> list[str]:
    """A note when the run's vLLM (meta.json `vllm_version`) predates V1 as the default engine: the
    replay is V1's scheduler (chunked prefill, prefills mixed into decode steps) whatever ran."""
    version = recorded_version(meta)
    if version is None or version >= FIRST_V1_DEFAULT:
        return []
    return [f"vLLM {meta['vllm_version'][:20]} ran its V0 engine by default (V1 became the default in 0.8); the replay is V1's "
            "scheduler (chunked prefill, prefills mixed into decode steps), so scheduling differences count as error"]


def engine_settings(meta: dict, where: Path | str, num_blocks: int | None = None) -> tuple[EngineConfig, list[str]]:
    """The vllm-v1 engine a run used, each setting exactly as written (2.9 sequences or the string
    "false" are refused, not read as 2 and true), and one note per setting taken from vLLM's
    defaults. KV blocks: `num_blocks` when given (run_hardware derives them for runs that do not
    record them), else the recorded count; neither is an error."""
    check_sections(meta, where)
    notes: list[str] = []

    def count(key: str, default: int | None = None) -> int:
        value, place = lookup(meta, key)
        if value is None:
            if default is None:
                raise UserError(f"{where}: missing engine setting {key} (in engine_kwargs, kv_cache or resolved_config)")
            return default
        return exact_int(value, f"{where}: {place}", lo=1, hi=1 << 31)

    if num_blocks is None:
        blocks = count("num_gpu_blocks")
    else:
        blocks = num_blocks
    given = {key: lookup(meta, key)[0] is not None for key in ("max_num_batched_tokens", "max_num_seqs")}
    tokens_default, seqs_default, why = 0, 0, ""  # vLLM's defaults, read only when a limit is not recorded
    if not all(given.values()):
        try:
            tokens_default, seqs_default, why = vllm_batch_defaults(meta)
        except UserError as exc:
            raise UserError(f"{where}: {exc}") from None
    tokens = count("max_num_batched_tokens", tokens_default)
    seqs = count("max_num_seqs", seqs_default)
    max_len, _ = max_model_len(meta, where)  # vLLM's caps on defaulted values, in its order
    if not given["max_num_batched_tokens"] and max_len is not None:
        tokens = min(tokens, seqs * max_len)
    if not given["max_num_seqs"]:
        seqs = min(seqs, tokens)
    missing = [f"{k} {v}" for k, v in (("max_num_batched_tokens", tokens), ("max_num_seqs", seqs)) if not given[k]]
    if missing:
        notes.append(f"{' and '.join(missing)}: not recorded, {why}")
    notes += version_notes(meta)
    block = block_size(meta, where)
    prefix, place = lookup(meta, "enable_prefix_caching")
    caching = True if prefix is None else exact_bool(prefix, f"{where}: {place}")  # V1 caches prefixes by default
    ahead, said = async_setting(meta, where)
    return EngineConfig(num_blocks=blocks, block_size=block, max_num_seqs=seqs, max_num_batched_tokens=tokens,
                        generation="vllm-v1", prefix_caching=caching, async_scheduling=ahead), notes + said
