"""A run's engine settings from meta.json: the arguments given, else the config vLLM resolved, else
vLLM's own defaults (stated): a run that leaves max_num_batched_tokens to vLLM used to be refused."""

from __future__ import annotations

import json

import pytest
from conftest import validation_dir

from llumverify.errors import UserError
from llumverify.validation.run_engine import engine_settings, lookup, vllm_batch_defaults

GIB = 1 << 30
RUN = validation_dir() / "llmservingsim" / "runs" / "RTX4090-Llama-3.1-8B"


def meta(device: str = "", memory: int | None = None, **kwargs) -> dict:
    hardware = {"device_name": device} | ({} if memory is None else {"device_total_memory_bytes": memory})
    return {"engine_kwargs": {"max_num_seqs": None, "max_num_batched_tokens": None, **kwargs},
            "kv_cache": {"num_gpu_blocks": 1000}, "hardware": hardware}


@pytest.mark.parametrize(("device", "memory", "expected"), [
    ("NVIDIA H100 80GB HBM3", 85 * 10**9, (8192, 1024)),  # >= 70 GiB, not an A100
    ("NVIDIA A100-SXM4-80GB", 85 * 10**9, (2048, 256)),  # vLLM keeps A100s small (its PR #17885)
    ("NVIDIA GeForce RTX 4090", 25 * 10**9, (2048, 256)),
    ("NVIDIA H100 80GB HBM3", None, (8192, 1024)),  # memory from the catalog when not recorded
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


@pytest.mark.skipif(not RUN.is_dir(), reason=f"no shared validation data at {RUN}")
def test_the_shared_run_reads_the_same_from_every_place() -> None:
    """The shared run records each setting in engine_kwargs/kv_cache and in resolved_config: both agree."""
    recorded = json.loads((RUN / "meta.json").read_text())
    engine, notes = engine_settings(recorded, "m.json")
    resolved = {"resolved_config": recorded["resolved_config"], "hardware": recorded["hardware"]}
    assert engine_settings(resolved, "m.json") == (engine, []) and notes == []
    assert (engine.max_num_seqs, engine.max_num_batched_tokens, engine.num_blocks) == (256, 2048, 2588)


@pytest.mark.parametrize(("section", "key", "value", "what"), [
    ("engine_kwargs", "pipeline_parallel_size", 2, "pipeline parallelism"),
    ("engine_kwargs", "data_parallel_size", 4, "data parallelism"),
    ("engine_kwargs", "enable_expert_parallel", True, "expert parallelism"),
    ("engine_kwargs", "kv_cache_dtype", "fp8", "a quantized KV cache"),
    ("engine_kwargs", "quantization", "fp8", "quantized weights"),
    ("resolved_config", "speculative_config", {"method": "ngram"}, "speculative decoding"),
])
def test_settings_the_replay_does_not_model_are_refused_not_ignored(section, key, value, what) -> None:
    """A PP=2 or fp8-KV run used to be replayed as a plain one-engine bf16 run, silently."""
    from llumverify.validation.run_hardware import run_hardware

    m = meta("NVIDIA H100 80GB HBM3")
    m.setdefault(section, {})[key] = value
    with pytest.raises(UserError, match=f"m.json: {section}.{key} = .*: {what}.* is not modelled"):
        run_hardware(m, "m.json")
    m[section][key] = {"pipeline_parallel_size": 1, "data_parallel_size": 1, "enable_expert_parallel": False,
                       "kv_cache_dtype": "auto", "quantization": None, "speculative_config": None}[key]
    assert run_hardware(m, "m.json").tp == 1  # the value that means "off" passes
