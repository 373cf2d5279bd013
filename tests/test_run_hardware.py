"""validate/calibrate inputs: the run's TP, GPU and model from meta.json, KV capacity derived when
the run does not record it, step costs for another run refused, failed fits write nothing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import pytest
from conftest import validation_dir

from llumverify.cli import main
from llumverify.settings.config import HardwareConfig
from llumverify.errors import UserError
from llumverify.validation.run_hardware import kv_blocks_for_run, prepare, run_hardware, source_for_run
from llumverify.sim.catalog import get_model
from llumverify.sim.roofline import MoEGroup, kv_capacity_blocks

LSS = validation_dir() / "llmservingsim"
RUN = LSS / "runs" / "RTX4090-Llama-3.1-8B"
WORKLOAD = LSS / "workloads" / "sharegpt-llama-3.1-8b-300-sps10.jsonl"
QWEN = LSS / "profiles" / "RTXPRO6000" / "Qwen3-32B"
LLAMA = LSS / "profiles" / "RTX4090" / "Llama-3.1-8B"
needs_shared = pytest.mark.skipif(not RUN.is_dir(), reason=f"no shared validation data at {LSS}")


def cli(*args: str) -> int:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    return exc.value.code


def small_run(tmp_path: Path, n: int = 40, **meta_changes) -> tuple[Path, Path]:
    """The shared RTX 4090 run's first n requests, its meta.json changed as given (None deletes)."""
    run = tmp_path / "run"
    run.mkdir(parents=True)
    meta = json.loads((RUN / "meta.json").read_text())
    meta["num_requests"] = n  # the requests it logs
    for key, value in meta_changes.items():
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value
    (run / "meta.json").write_text(json.dumps(meta))
    (run / "requests.jsonl").write_text("".join((RUN / "requests.jsonl").read_text().splitlines(True)[:n]))
    workload = tmp_path / "w.jsonl"
    workload.write_text("".join(WORKLOAD.read_text().splitlines(True)[:n]))
    return run, workload


def test_run_hardware_reads_meta_and_defaults() -> None:
    meta = {"model": "Qwen/Qwen3-32B", "engine_kwargs": {"tensor_parallel_size": 2},
            "hardware": {"device_name": "Nvidia GH200 GPU"}}
    run = run_hardware(meta, "m")
    assert (run.model, run.gpu, run.tp, run.gpu_memory_utilization, run.recorded_blocks) == (
        "Qwen/Qwen3-32B", "Nvidia GH200 GPU", 2, 0.9, None)
    hw = source_for_run(HardwareConfig(), run, False, "r")
    assert (hw.gpu, hw.tp) == ("GH200", 2) and hw.model == "Qwen/Qwen3-32B"
    blocks, how = kv_blocks_for_run(run, hw, None)
    assert blocks == kv_capacity_blocks("Qwen3-32B", "GH200", tp=2) and "derived" in how
    assert kv_blocks_for_run(run, hw, 1234) == (1234, "1234 KV blocks (--num-gpu-blocks)")
    with pytest.raises(UserError, match="--tp 1, but r ran with tensor_parallel_size 2"):
        source_for_run(HardwareConfig(tp=1), run, True, "r")
    with pytest.raises(UserError, match="tensor_parallel_size must be an integer >= 1"):
        run_hardware({"engine_kwargs": {"tensor_parallel_size": "2"}}, "m")


def test_the_kv_size_comes_from_what_the_run_recorded_before_the_catalogs() -> None:
    """vLLM logs the KV cache in tokens; kv_cache_memory_bytes replaces memory x utilization as its
    budget; a MIG slice reports less memory than its board: each is read before the catalog's GPU."""
    base = {"model": "meta-llama/Llama-3.1-8B", "hardware": {"device_name": "NVIDIA A100-SXM4-80GB"}}
    hw = HardwareConfig(gpu="A100-80GB", model="meta-llama/Llama-3.1-8B")
    tokens = run_hardware(base | {"kv_cache": {"num_kv_tokens": 41408, "block_size": 32}}, "m")
    assert kv_blocks_for_run(tokens, hw, None) == (
        1294, "1294 KV blocks (recorded in meta.json as kv_cache.num_kv_tokens 41408 / block size 32)")
    budget = run_hardware(base | {"engine_kwargs": {"kv_cache_memory_bytes": 8 << 30}}, "m")
    per_block = 16 * get_model("Llama-3.1-8B").kv_bytes_per_token(1)
    assert kv_blocks_for_run(budget, hw, None)[0] == (8 << 30) // per_block == 4096
    small = run_hardware(base | {"hardware": {"device_name": "NVIDIA A100-SXM4-80GB",
                                              "device_total_memory_bytes": 42314694656}}, "m")
    blocks, how = kv_blocks_for_run(small, hw, None)
    assert blocks < kv_capacity_blocks("Llama-3.1-8B", "A100-80GB") / 2 and "39.4 GiB, not the catalog's" in how
    with pytest.raises(UserError, match="a MIG slice; its share of the GPU's compute and bandwidth is not modelled"):
        run_hardware(base | {"hardware": {"device_name": "NVIDIA A100-SXM4-80GB MIG 3g.40gb"}}, "m")
    with pytest.raises(UserError, match="m: hardware.device_total_memory_bytes 1: under 1 GiB"):
        run_hardware(base | {"hardware": {"device_name": "NVIDIA A100-SXM4-80GB", "device_total_memory_bytes": 1}}, "m")
    with pytest.raises(UserError, match="m: kv_cache.num_kv_tokens 41408 is not kv_cache.num_gpu_blocks 2000 x block"):
        run_hardware(base | {"kv_cache": {"num_kv_tokens": 41408, "num_gpu_blocks": 2000}}, "m")
    with pytest.raises(UserError, match="m: kv_cache_memory_bytes 1 holds no KV block"):
        kv_blocks_for_run(run_hardware(base | {"engine_kwargs": {"kv_cache_memory_bytes": 1}}, "m"), hw, None)
    same = run_hardware(base | {"hardware": {"device_name": "NVIDIA A100-SXM4-80GB",
                                             "device_total_memory_bytes": 85 * 10**9}}, "m")
    assert kv_blocks_for_run(same, hw, None)[0] == kv_capacity_blocks("Llama-3.1-8B", "A100-80GB")


def test_a_kv_budget_in_bytes_holds_a_gpus_shard_of_each_token() -> None:
    """kv_cache_memory_bytes is vLLM's KV budget per GPU, and at TP 2 each GPU holds half of Llama-3.1-8B's 8 KV
    heads: 8 GiB hold 8 GiB / (16 tokens x 32 layers x (K, V) x 4 heads x 128 x 2 bytes) = 8,192 blocks, twice
    a single GPU's 4,096."""
    meta = {"model": "meta-llama/Llama-3.1-8B", "hardware": {"device_name": "NVIDIA A100-SXM4-80GB"},
            "engine_kwargs": {"kv_cache_memory_bytes": 8 << 30, "tensor_parallel_size": 2}}
    run = run_hardware(meta, "m")
    hw = HardwareConfig(gpu="A100-80GB", model="meta-llama/Llama-3.1-8B", tp=run.tp)
    assert kv_blocks_for_run(run, hw, None)[0] == (8 << 30) // (16 * 32 * 2 * 4 * 128 * 2) == 8192


@needs_shared
def test_a_profile_for_another_model_is_refused_not_reported(tmp_path, capsys) -> None:
    """A Qwen3-32B profile against a Llama run used to give -70 % as a result."""
    assert cli("validate", str(RUN), "--workload", str(WORKLOAD), "--profile", str(QWEN)) == 2
    err = capsys.readouterr().err
    assert "was measured on RTXPRO6000, not RTX 4090" in err and len(err.strip().splitlines()) == 1
    arguments = json.loads((RUN / "meta.json").read_text())["engine_kwargs"] | {"model": "Qwen/Qwen3-32B"}  # one model
    run, workload = small_run(tmp_path, model="Qwen/Qwen3-32B", engine_kwargs=arguments,
                              hardware={"device_name": "NVIDIA RTX PRO 6000 Blackwell Server Edition"})
    assert cli("validate", str(run), "--workload", str(workload), "--profile",
               str(LSS / "profiles" / "RTXPRO6000" / "Llama-3.1-8B")) == 2
    assert "is for meta-llama/Llama-3.1-8B, not Qwen/Qwen3-32B" in capsys.readouterr().err
    assert cli("validate", str(RUN), "--workload", str(WORKLOAD), "--gpu", "H100", "--model", "Llama-3.1-8B") == 2
    assert "--gpu H100, but" in capsys.readouterr().err


@needs_shared
def test_a_run_without_kv_cache_gets_a_derived_capacity(tmp_path, capsys) -> None:
    run, workload = small_run(tmp_path, kv_cache=None)  # vLLM's resolved cache_config still records it
    assert cli("validate", str(run), "--workload", str(workload), "--profile", str(LLAMA)) == 0
    assert "KV cache: 2588 KV blocks (recorded in meta.json)" in capsys.readouterr().out
    run, workload = small_run(tmp_path / "bare", kv_cache=None, resolved_config=None)
    assert cli("validate", str(run), "--workload", str(workload), "--profile", str(LLAMA)) == 0
    out = capsys.readouterr().out
    derived = kv_capacity_blocks("Llama-3.1-8B", "RTX 4090")
    assert f"KV cache: {derived} KV blocks derived (not recorded in meta.json)" in out
    assert cli("validate", str(run), "--workload", str(workload), "--profile", str(LLAMA),
               "--num-gpu-blocks", "2588") == 0
    assert "2588 KV blocks (--num-gpu-blocks)" in capsys.readouterr().out


@needs_shared
def test_validate_takes_tp_from_the_run(tmp_path, capsys) -> None:
    meta = json.loads((RUN / "meta.json").read_text())
    resolved = meta["resolved_config"]  # a TP-2 run records TP 2 in both places (the two disagreeing is refused)
    resolved["parallel_config"]["tensor_parallel_size"] = 2
    run, workload = small_run(tmp_path, engine_kwargs={**meta["engine_kwargs"], "tensor_parallel_size": 2},
                              resolved_config=resolved)
    assert cli("validate", str(run), "--workload", str(workload), "--profile", str(LLAMA)) == 0
    assert "tp = 2" in capsys.readouterr().out
    assert cli("validate", str(run), "--workload", str(workload), "--profile", str(LLAMA), "--tp", "1") == 2
    assert "ran with tensor_parallel_size 2" in capsys.readouterr().err


@needs_shared
def test_calibrate_exits_non_zero_and_writes_nothing_when_the_fit_fails(tmp_path, capsys) -> None:
    """A10 step costs are slower than this RTX 4090 run even with fixed_ns = 0 (the constant
    cannot be negative): calibrate used to write fixed_ns = 0 with an empty error."""
    run, workload = small_run(tmp_path, n=60)
    slow = tmp_path / "slow.toml"
    from llumverify.sim.roofline import step_cost_first_principles

    slow.write_text(step_cost_first_principles("Llama-3.1-8B", "A10").to_toml().replace('gpu = "A10"', 'gpu = ""'))
    out = tmp_path / "fit.toml"
    assert cli("calibrate", "--step-cost", str(slow), "--run", str(run), "--workload", str(workload),
               "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert "fit failed: with no per-step constant the step costs already simulate a mean TPOT of" in err
    assert "a constant can only add time" in err and not out.exists()


@needs_shared
def test_an_fp8_run_is_simulated_in_fp8_and_refused_with_16_bit_kernels(tmp_path, capsys) -> None:
    meta = json.loads((RUN / "meta.json").read_text())
    run, workload = small_run(tmp_path, engine_kwargs={**meta["engine_kwargs"], "quantization": "fp8"}, kv_cache=None,
                              resolved_config=None)
    assert cli("validate", str(run), "--workload", str(workload), "--gpu", "RTX 4090", "--model", "Llama-3.1-8B") == 0
    out = " ".join(capsys.readouterr().out.split())  # printed lines wrap at 100 columns
    fp8_blocks = kv_capacity_blocks(get_model("Llama-3.1-8B-FP8"), "RTX 4090")
    assert f"KV cache: {fp8_blocks} KV blocks derived" in out and "Llama-3.1-8B shapes (fp8 weights" in out
    assert fp8_blocks > kv_capacity_blocks("Llama-3.1-8B", "RTX 4090")  # the weights' freed bytes hold KV
    assert cli("validate", str(run), "--workload", str(workload), "--profile", str(LLAMA)) == 2
    err = capsys.readouterr().err
    assert "quantised weights or an fp8 KV cache" in err and "priced from first principles" in err and err.count("\n") == 1


@needs_shared
def test_a_data_parallel_moe_run_is_replayed_on_one_instance_per_rank(tmp_path, capsys) -> None:
    """vLLM DP=2 + expert parallelism (how MoE models are served): two ranks, each its own
    scheduler and KV cache, requests spread by vLLM's 4 x waiting + running rule, experts and
    tokens shared in the step cost. Used to be refused."""
    from llumverify.settings.config import ClusterConfig, SimConfig
    from llumverify.sim import engine_profile
    from llumverify.sim.run import simulate
    from llumverify.validation import replay as v

    meta = json.loads((RUN / "meta.json").read_text())
    kwargs = {**meta["engine_kwargs"], "model": "Qwen/Qwen3-30B-A3B-Instruct-2507", "data_parallel_size": 2,
              "enable_expert_parallel": True}
    run_dir, workload = small_run(tmp_path, n=80, model=kwargs["model"], engine_kwargs=kwargs, kv_cache=None,
                                  resolved_config=None, hardware=None)
    assert cli("validate", str(run_dir), "--workload", str(workload), "--gpu", "RTX PRO 6000") == 0
    out = capsys.readouterr().out
    per_rank = kv_capacity_blocks("Qwen3-30B-A3B", "RTX PRO 6000", group=MoEGroup(2, True))
    assert f"KV cache: {per_rank} KV blocks per data-parallel rank (× 2) derived" in out and "dp=2 (whole experts" in out
    assert "dp = 2: one instance a rank, vLLM's balancer, in lockstep (MoE)" in out
    hw, blocks, _ = prepare(run_dir, HardwareConfig(gpu="RTX PRO 6000"), False, None)
    run = v.load_run(run_dir, workload, blocks)
    assert run.dp == 2 and (hw.dp, hw.expert_parallel, hw.model) == (2, True, kwargs["model"])
    step = engine_profile.step_cost(hw)

    def ranks(lockstep: int) -> list:
        cluster = ClusterConfig(num_instances=2, lockstep=lockstep)
        res = simulate(list(run.specs), "vllm-dp", SimConfig(engine=run.engine, cluster=cluster, step=step),
                       keep_records=True)
        assert all(r.status == "finished" for r in res.records) and len(res.records) == 80
        return sorted(res.records, key=lambda r: r.id)

    together, alone = ranks(2), ranks(1)
    assert 25 <= [r.instance for r in together].count(0) <= 55  # both ranks serve
    sim = v.replay(run, step)  # an MoE engine's ranks step in lockstep (sim/lockstep.py)
    assert np.array_equal(sim["finish"], np.array([r.finish_ns for r in together]) / 1e9)
    assert sum(r.finish_ns - r.arrival_ns for r in together) > sum(r.finish_ns - r.arrival_ns for r in alone)


@needs_shared
def test_a_run_without_a_device_name_takes_its_gpu_from_its_cluster_config(tmp_path, capsys) -> None:
    """LLMServingSim's published runs record no hardware.device_name; their cluster config names the
    GPU, beside meta.json (the shared layout) or one folder up (bench/examples/<GPU>/<model>/)."""
    run, workload = small_run(tmp_path / "bench" / "m", hardware=None)
    (run.parent / "config.json").write_text("{not json")  # another program's ../config.json is not ours to refuse
    assert cli("validate", str(run), "--workload", str(workload)) == 2
    assert "it records no hardware.device_name: give --gpu" in capsys.readouterr().err
    assert cli("validate", str(run), "--workload", str(workload), "--gpu", "RTX 4090") == 0
    capsys.readouterr()
    cluster = json.loads((RUN / "cluster-config.json").read_text())
    (run.parent / "config.json").write_text(json.dumps(cluster))
    assert cli("validate", str(run), "--workload", str(workload)) == 0
    out = " ".join(capsys.readouterr().out.split())  # printed lines wrap at 100 columns
    assert "from ../config.json (meta.json names none)" in out and "RTX 4090 datasheet peaks" in out
    (run / "cluster-config.json").write_text(json.dumps({"nodes": [{"instances": [{"hardware": 4090}]}]}))
    assert cli("validate", str(run), "--workload", str(workload)) == 2  # beside meta.json comes first
    assert "cluster-config.json: nodes[0].instances[0].hardware must be a GPU name, got 4090" in capsys.readouterr().err


def test_derived_kv_blocks_take_the_run_s_memory_share() -> None:
    """gpu_memory_utilization 0.5 recorded: the KV cache is sized from half the memory, not vLLM's default 0.9."""
    meta = {"model": "Qwen/Qwen3-32B", "engine_kwargs": {"tensor_parallel_size": 2, "gpu_memory_utilization": 0.5},
            "hardware": {"device_name": "Nvidia GH200 GPU"}}
    run = run_hardware(meta, "m")
    blocks, how = kv_blocks_for_run(run, source_for_run(HardwareConfig(), run, False, "r"), None)
    assert blocks == kv_capacity_blocks("Qwen3-32B", "GH200", tp=2, gpu_memory_utilization=0.5) < kv_capacity_blocks(
        "Qwen3-32B", "GH200", tp=2)
    assert "× 0.5 −" in how
