"""A run's engine settings from meta.json: the arguments given, else the config vLLM resolved, else
vLLM's own defaults (stated): a run that leaves max_num_batched_tokens to vLLM used to be refused."""

from __future__ import annotations

import json

import pytest
from conftest import validation_dir

from llumverify.errors import UserError
from llumverify.validation.run_engine import engine_settings, lookup, max_model_len, vllm_batch_defaults
from llumverify.validation.run_hardware import run_hardware

GIB = 1 << 30
RUN = validation_dir() / "llmservingsim" / "runs" / "RTX4090-Llama-3.1-8B"


def meta(device: str = "", memory: int | None = None, **kwargs) -> dict:
    hardware = {"device_name": device} | ({} if memory is None else {"device_total_memory_bytes": memory})
    return {"engine_kwargs": {"max_num_seqs": None, "max_num_batched_tokens": None, "async_scheduling": True, **kwargs},
            "kv_cache": {"num_gpu_blocks": 1000}, "hardware": hardware}


@pytest.mark.parametrize(("device", "memory", "expected"), [
    ("NVIDIA H100 80GB HBM3", 85 * 10**9, (8192, 1024)),  # >= 70 GiB, not an A100
    ("NVIDIA A100-SXM4-80GB", 85 * 10**9, (2048, 256)),  # vLLM keeps A100s small (its PR #17885)
    ("NVIDIA GeForce RTX 4090", 25 * 10**9, (2048, 256)),
    ("NVIDIA H100 80GB HBM3", None, (8192, 1024)),  # memory from the catalog when not recorded
    ("NVIDIA H100 80GB HBM3", 0, (8192, 1024)),  # 0 recorded: vLLM's "unknown", so the catalog's too
    ("", None, (2048, 256)),  # nothing known: vLLM's own fallback (device memory 0)
])
def test_vllm_serve_batch_defaults_follow_the_device(device: str, memory: int | None, expected) -> None:
    tokens, seqs, why = vllm_batch_defaults(meta(device, memory))
    assert (tokens, seqs) == expected and "vllm serve" in why
    engine, notes = engine_settings(meta(device, memory), "m.json")
    assert (engine.max_num_batched_tokens, engine.max_num_seqs) == expected
    assert notes == [f"max_num_batched_tokens {expected[0]} and max_num_seqs {expected[1]}: not recorded, {why}"]


def test_given_values_win_and_defaults_are_capped_as_vllm_caps_them() -> None:
    engine, notes = engine_settings(meta("NVIDIA H100 80GB HBM3", max_num_seqs=4, max_model_len=512), "m.json")
    assert (engine.max_num_seqs, engine.max_num_batched_tokens) == (4, 2048)  # 4 x 512 < 8,192
    assert notes == [notes[0]] and notes[0].startswith("max_num_batched_tokens 2048:")
    engine, notes = engine_settings(meta("NVIDIA H100 80GB HBM3", max_num_batched_tokens=100), "m.json")
    assert (engine.max_num_seqs, engine.max_num_batched_tokens, notes[0][:16]) == (100, 100, "max_num_seqs 100")


def test_the_resolved_config_is_read_before_any_default() -> None:
    m = meta("NVIDIA H100 80GB HBM3")
    m["kv_cache"] = None
    m["resolved_config"] = {"scheduler_config": {"max_num_seqs": 64, "max_num_batched_tokens": 4096},
                            "cache_config": {"num_gpu_blocks": 777, "block_size": 32, "enable_prefix_caching": False}}
    engine, notes = engine_settings(m, "m.json")
    assert (engine.max_num_seqs, engine.max_num_batched_tokens, engine.num_blocks, engine.block_size,
            engine.prefix_caching, notes) == (64, 4096, 777, 32, False, [])
    assert lookup(m, "num_gpu_blocks") == (777, "resolved_config.cache_config.num_gpu_blocks")
    assert engine_settings(m, "m.json", num_blocks=5)[0].num_blocks == 5


@pytest.mark.parametrize(("recorded", "version", "on", "note"), [
    (True, None, True, ""), (False, "0.19.0", False, ""),  # recorded: read as written
    (None, "0.13.0", False, "off (vLLM 0.13.0's default)"), (None, "v0.14.0", True, "on (vLLM v0.14.0's default)"),
    (None, None, True, "on (an unrecorded vLLM's default)"),
])
def test_async_scheduling_is_read_or_taken_from_the_run_s_vllm(recorded, version, on, note) -> None:
    m = meta("NVIDIA H100 80GB HBM3", max_num_seqs=8, max_num_batched_tokens=64)
    m["engine_kwargs"]["async_scheduling"] = recorded
    if version:
        m["vllm_version"] = version
    engine, notes = engine_settings(m, "m.json")
    assert engine.async_scheduling is on
    assert [n for n in notes if n.startswith("async")] == ([f"async_scheduling: not recorded, {note}"] if note else [])
    m["resolved_config"] = {"scheduler_config": {"async_scheduling": not on}}
    m["engine_kwargs"]["async_scheduling"] = None
    assert engine_settings(m, "m.json")[0].async_scheduling is (not on)  # the resolved config, where recorded


def test_bad_values_are_refused_naming_where_they_were_read() -> None:
    m = meta()
    m["resolved_config"] = {"scheduler_config": {"max_num_seqs": 2.5}}
    with pytest.raises(UserError, match=r"m.json: resolved_config.scheduler_config.max_num_seqs must be an integer"):
        engine_settings(m, "m.json")
    m = meta(enable_prefix_caching="false")
    with pytest.raises(UserError, match="engine_kwargs.enable_prefix_caching must be true or false"):
        engine_settings(m, "m.json")
    with pytest.raises(UserError, match="missing engine setting num_gpu_blocks"):
        engine_settings({"engine_kwargs": {}}, "m.json")
    for bad, name in (({"engine_kwargs": []}, "engine_kwargs"), ({"resolved_config": {"cache_config": "x"}},
                                                                 "resolved_config.cache_config")):
        with pytest.raises(UserError, match=f"m.json: {name} must be a JSON object, got"):
            engine_settings({"kv_cache": {"num_gpu_blocks": 5}, **bad}, "m.json")


@pytest.mark.parametrize("value", ["10", -10, 0, 10.0, True])
def test_max_model_len_is_a_positive_integer_as_written(value: object) -> None:
    """A string or negative max_model_len used to be skipped, so the request-length check never ran."""
    with pytest.raises(UserError, match=r"m.json: engine_kwargs.max_model_len must be an integer"):
        engine_settings(meta(max_num_seqs=8, max_num_batched_tokens=64, max_model_len=value), "m.json")


def test_max_model_len_auto_is_the_length_vllm_resolved() -> None:
    """-1 is vLLM's "auto" (the longest the memory holds): the resolved config has the length it chose."""
    m = meta(max_model_len=-1)
    assert max_model_len(m, "m.json") == (None, "")
    m["resolved_config"] = {"model_config": {"max_model_len": 9000}}
    assert max_model_len(m, "m.json") == (9000, "resolved_config.model_config.max_model_len")
    assert max_model_len(meta(max_model_len=512), "m.json") == (512, "engine_kwargs.max_model_len")


@pytest.mark.parametrize("size", [7, 0, 2, 48, 512, 1 << 20])
def test_a_block_size_vllm_does_not_allow_is_refused_by_both_readers(size: object) -> None:
    m = meta(max_num_seqs=8, max_num_batched_tokens=64)
    m["kv_cache"]["block_size"] = size
    for read in (lambda: engine_settings(m, "m.json"), lambda: run_hardware(m, "m.json")):
        with pytest.raises(UserError, match=r"m.json: kv_cache.block_size must be one of vLLM's block sizes "
                                            r"\(1, 8, 16, 32, 64, 128, 256\)"):
            read()
    m["kv_cache"]["block_size"] = 128
    assert engine_settings(m, "m.json")[0].block_size == run_hardware(m, "m.json").block_size == 128


@pytest.mark.parametrize("key", ["tensor_parallel_size", "max_model_len", "block_size", "enforce_eager"])
def test_an_engine_setting_at_the_top_level_is_refused_not_ignored(key: str) -> None:
    """vLLM's harness records engine settings in engine_kwargs (kv_cache, resolved_config); one at the
    top level was read by nothing, so a run with tensor_parallel_size 2 there was replayed at TP 1."""
    m = {**meta(max_num_seqs=8, max_num_batched_tokens=64), key: 2}
    for read in (lambda: engine_settings(m, "m.json"), lambda: run_hardware(m, "m.json")):
        with pytest.raises(UserError, match=rf"m.json: {key} at the top level: .* engine_kwargs"):
            read()


@pytest.mark.skipif(not RUN.is_dir(), reason=f"no shared validation data at {RUN}")
def test_the_shared_run_reads_the_same_from_every_place() -> None:
    """The shared run records each setting in engine_kwargs/kv_cache and in resolved_config: both agree."""
    recorded = json.loads((RUN / "meta.json").read_text())
    engine, notes = engine_settings(recorded, "m.json")
    resolved = {"resolved_config": recorded["resolved_config"], "hardware": recorded["hardware"]}
    assert engine_settings(resolved, "m.json") == (engine, []) and notes == []
    assert (engine.max_num_seqs, engine.max_num_batched_tokens, engine.num_blocks) == (256, 2048, 2588)


@pytest.mark.parametrize(("section", "key", "value", "what", "modelled"), [
    ("engine_kwargs", "pipeline_parallel_size", 2, "pipeline parallelism", 1),
    ("resolved_config", "speculative_config", {"method": "ngram"}, "speculative decoding", {}),
    ("engine_kwargs", "enforce_eager", True, "eager mode", False),
    ("resolved_config.scheduler_config", "enable_chunked_prefill", False, "prefill without chunking", True),
    ("resolved_config.scheduler_config", "max_num_partial_prefills", 4, "concurrent partial prefills", 1),
    ("resolved_config.parallel_config", "decode_context_parallel_size", 2, "decode context parallelism", 1),
    ("resolved_config.cache_config", "kv_offloading_size", 64.0, "KV offloading", 0),
    ("resolved_config.model_config", "dtype", "torch.float32", "32-bit weights", "torch.bfloat16"),
    ("engine_kwargs", "enable_lora", True, "LoRA adapters", False),
    ("resolved_config.parallel_config", "prefill_context_parallel_size", 2, "prefill context parallelism", 1),
    ("engine_kwargs", "cpu_offload_gb", 16, "weights offloaded to CPU memory", 0),
])
def test_settings_the_replay_does_not_model_are_refused_not_ignored(section, key, value, what, modelled) -> None:
    """A PP=2, eager or fp32 run used to be replayed as a plain one-engine bf16 run with CUDA graphs,
    silently; the value the replay does model passes (an empty speculative_config is none)."""
    from llumverify.validation.run_hardware import run_hardware

    m = meta("NVIDIA H100 80GB HBM3")
    target = m
    for part in section.split("."):
        target = target.setdefault(part, {})
    target[key] = value
    with pytest.raises(UserError, match=f"m.json: {section}.{key} = .*: not modelled \\({what}"):
        run_hardware(m, "m.json")
    target[key] = modelled
    assert run_hardware(m, "m.json").tp == 1


@pytest.mark.parametrize(("changes", "expected"), [
    ({}, ("", "auto")),
    ({"engine_kwargs": {"quantization": "fp8", "kv_cache_dtype": "fp8_e4m3"}}, ("fp8", "fp8")),
    ({"model": "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8",
      "resolved_config": {"model_config": {"quantization": "compressed-tensors"}}}, ("fp8", "auto")),
    ({"model": "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8"}, ("fp8", "auto")),  # the name says it
    ({"model": "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", "engine_kwargs": {"quantization": "awq_marlin"}},
     ("int4", "auto")),
    ({"engine_kwargs": {"quantization": "awq"}}, ("int4", "auto")),
    ({"model": "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16",
      "resolved_config": {"model_config": {"quantization": "compressed-tensors"}}}, ("int4", "auto")),
    ({"model": "Qwen/Qwen3-32B-GPTQ-Int4", "engine_kwargs": {"quantization": "gptq"}}, ("int4", "auto")),
    ({"model": "Qwen/Qwen3-32B-GPTQ-Int4", "engine_kwargs": {"quantization": "gptq_marlin"}}, ("int4", "auto")),
    ({"model": "nvidia/Llama-3.1-8B-Instruct-FP4", "engine_kwargs": {"quantization": "modelopt"}}, ("nvfp4", "auto")),
    ({"model": "nvidia/Llama-3.1-8B-Instruct-FP8", "engine_kwargs": {"quantization": "modelopt"}}, ("fp8", "auto")),
    ({"engine_kwargs": {"quantization": "modelopt"}}, ("fp8", "auto")),
    ({"engine_kwargs": {"quantization": "fbgemm_fp8"}}, ("fp8", "auto")),
    ({"engine_kwargs": {"quantization": "modelopt", "kv_cache_dtype": "bfloat16"},  # what vLLM resolved wins
      "resolved_config": {"model_config": {"quantization": "modelopt_fp4"}}}, ("nvfp4", "bf16")),
    ({"model": "nvidia/Llama-3.1-8B-Instruct-FP4", "engine_kwargs": {"quantization": "modelopt_fp4",
                                                                     "kv_cache_dtype": "fp8"}}, ("nvfp4", "fp8")),
])
def test_quantised_runs_are_read_in_their_format(changes: dict, expected: tuple[str, str]) -> None:
    from llumverify.validation.run_hardware import run_hardware

    run = run_hardware({"model": "meta-llama/Llama-3.1-8B", **changes}, "m.json")
    assert (run.quantization, run.kv_cache_dtype) == expected


@pytest.mark.parametrize(("changes", "match"), [
    ({"engine_kwargs": {"quantization": "bitsandbytes"}}, "engine_kwargs.quantization = 'bitsandbytes': modelled are"),
    ({"resolved_config": {"model_config": {"quantization": "compressed-tensors"}}}, "compressed-tensors"),
    ({"engine_kwargs": {"quantization": "gptq"}}, "'gptq': modelled are"),  # 4 or 8 bits: the name must say
    ({"engine_kwargs": {"quantization": "gptq_marlin"}}, "'gptq_marlin': modelled are"),
    ({"model": "nvidia/Llama-3.1-8B-Instruct-FP4", "engine_kwargs": {"quantization": "awq"}}, "'awq' with an nvfp4"),
    ({"model": "TheBloke/Llama-2-7B-AWQ", "engine_kwargs": {"quantization": "fp8"}}, "'fp8' with an int4 checkpoint"),
    ({"engine_kwargs": {"kv_cache_dtype": "int8"}}, "only a 16-bit or fp8 KV cache"),
    ({"engine_kwargs": {"quantization": ["fp8"]}}, r"quantization = \['fp8'\]: modelled are"),  # not a name
    ({"engine_kwargs": {"kv_cache_dtype": {"fp8": True}}}, "only a 16-bit or fp8 KV cache"),
    ({"model": "TheBloke/Llama-2-7B-GPTQ-Int8"}, "GPTQ-Int8 weights are not modelled"),
])
def test_formats_not_modelled_are_refused(changes: dict, match: str) -> None:
    from llumverify.validation.run_hardware import run_hardware

    with pytest.raises(UserError, match=match):
        run_hardware({"model": "meta-llama/Llama-3.1-8B", **changes}, "m.json")


@pytest.mark.parametrize(("settings", "expected"), [
    ({}, (1, False)),
    ({"engine_kwargs": {"data_parallel_size": 2, "enable_expert_parallel": True}}, (2, True)),
    ({"resolved_config": {"parallel_config": {"data_parallel_size": 4, "enable_expert_parallel": False}}}, (4, False)),
])
def test_data_and_expert_parallelism_are_read_where_vllm_records_them(settings: dict, expected: tuple) -> None:
    from llumverify.validation.run_hardware import run_hardware

    run = run_hardware({"model": "Qwen/Qwen3-30B-A3B", **settings}, "m.json")
    assert (run.dp, run.expert_parallel) == expected


@pytest.mark.parametrize(("key", "value"), [("data_parallel_size", 0), ("data_parallel_size", 1.5),
                                            ("enable_expert_parallel", "yes")])
def test_malformed_data_parallel_settings_are_one_line_errors(key: str, value: object) -> None:
    from llumverify.validation.run_hardware import run_hardware

    with pytest.raises(UserError, match=f"m.json: engine_kwargs.{key}"):
        run_hardware({"model": "Qwen/Qwen3-30B-A3B", "engine_kwargs": {key: value}}, "m.json")


def test_what_vllm_resolved_decides_over_what_was_asked_and_types_are_checked_first() -> None:
    """vLLM V1 0.8-0.11 chunked prefills whatever --no-enable-chunked-prefill asked: the resolved value
    is what ran. A resolved null means off. A value of the wrong type is named as such, not as the feature."""
    from llumverify.validation.run_hardware import run_hardware

    m = meta("NVIDIA H100 80GB HBM3", enable_chunked_prefill=False)
    with pytest.raises(UserError, match="engine_kwargs.enable_chunked_prefill = False: not modelled"):
        run_hardware(m, "m.json")
    m["resolved_config"] = {"scheduler_config": {"enable_chunked_prefill": True}, "lora_config": None}
    assert run_hardware(m, "m.json").tp == 1
    m["engine_kwargs"]["enforce_eager"] = "false"
    with pytest.raises(UserError, match="engine_kwargs.enforce_eager must be true or false, got 'false'"):
        run_hardware(m, "m.json")
    m["engine_kwargs"]["enforce_eager"] = False
    m["engine_kwargs"]["pipeline_parallel_size"] = "1"
    with pytest.raises(UserError, match="engine_kwargs.pipeline_parallel_size must be an integer"):
        run_hardware(m, "m.json")


@pytest.mark.parametrize(("key", "section", "given", "resolved", "refused"), [
    ("max_num_batched_tokens", "scheduler_config", 2048, 8192, True),
    ("max_model_len", "model_config", 4096, 8192, True),
    ("max_model_len", "model_config", -1, 9000, False),  # vLLM's "auto": the length it chose
    ("max_num_seqs", "scheduler_config", 256, 256, False),
])
def test_a_batch_limit_given_and_resolved_otherwise_is_refused(key: str, section: str, given: int, resolved: int,
                                                               refused: bool) -> None:
    from llumverify.validation.run_engine import check_sections

    m = meta(max_num_seqs=8, max_num_batched_tokens=64)
    m["engine_kwargs"][key] = given
    m["resolved_config"] = {section: {key: resolved}}
    if refused:
        with pytest.raises(UserError, match=rf"m.json: engine_kwargs.{key} {given} but resolved_config"):
            check_sections(m, "m.json")
    else:
        check_sections(m, "m.json")
