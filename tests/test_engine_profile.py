"""sim/engine_profile.py's resolution runs inside the cluster: a caller that never resolves the
profile still gets the step costs and KV capacity its hardware settings name (not the A10 fit)."""

from __future__ import annotations

from llumverify.scheduler.policies import get_policy
from llumverify.settings.config import ClusterConfig, EngineConfig, HardwareConfig, SimConfig
from llumverify.sim.cluster import Cluster
from llumverify.sim.engine_profile import resolve
from llumverify.sim.run import simulate
from llumverify.sim.workload import generate

V1 = EngineConfig(generation="vllm-v1")
H100 = SimConfig(engine=V1, cluster=ClusterConfig(num_instances=1), hardware=HardwareConfig(gpu="H100", model="Llama-3.1-8B"))


def test_the_cluster_resolves_what_the_caller_did_not() -> None:
    cluster = Cluster([], get_policy("least-loaded"), H100)
    assert cluster.step_cost is not None and (cluster.step_cost.gpu, cluster.step_cost.model) == ("H100", "Llama-3.1-8B")
    assert cluster.cfg.engine.num_blocks == resolve(H100).engine.num_blocks != V1.num_blocks  # catalog KV capacity


def test_resolving_first_gives_the_same_run() -> None:
    specs = generate(40, 8.0, seed=3)
    unresolved = simulate(specs, "least-loaded", H100).summary
    assert unresolved == simulate(specs, "least-loaded", resolve(H100)).summary
    assert unresolved != simulate(specs, "least-loaded", SimConfig(engine=V1, cluster=H100.cluster)).summary


def test_no_hardware_means_the_cost_config_in_the_v1_step_form() -> None:
    a10 = resolve(SimConfig(engine=V1))
    assert a10.step is not None and a10.step.gpu == "A10" and resolve(a10) is a10


def test_a_tp_instance_hands_off_each_gpus_kv_shard_per_token() -> None:
    """Migrations and P/D hand-offs of a catalog model copy the KV of one GPU's shard per token (every GPU of the
    group sends its own over its link): Llama-3-70B at TP4 holds 2 of its 8 KV heads a GPU, 80 layers x K and V x
    2 heads x 128 x 2 bytes = 81,920, not the whole model's 327,680. Guards the copy priced at tp=1's bytes."""
    from llumverify.sim.engine_profile import kv_bytes_per_token

    hw = HardwareConfig(gpu="H100", model="Llama-3-70B", tp=4)
    cfg = resolve(SimConfig(engine=V1, cluster=ClusterConfig(num_instances=1), hardware=hw))
    assert cfg.step is not None
    assert kv_bytes_per_token(hw, cfg.step) == 81_920 == cfg.cost.kv_bytes_per_token


def test_an_fp8_kv_cache_migrates_one_byte_a_value() -> None:
    """`--kv-cache-dtype fp8` sizes the cache at 1 byte a value (twice the blocks), so a migration or hand-off copies
    1 byte a value too: Llama-3.1-8B, 32 layers x K and V x 8 KV heads x 128 = 65,536 bytes a token, not the 16-bit
    131,072. A hunt found the copy priced at 16 bits (2x the copy time, downtime and bytes of every fp8 run)."""
    sized = {}
    for kv in ("auto", "fp8"):
        hw = HardwareConfig(gpu="H100", model="Llama-3.1-8B", kv_cache_dtype=kv)
        cfg = resolve(SimConfig(engine=V1, cluster=ClusterConfig(num_instances=1), hardware=hw))
        sized[kv] = (cfg.engine.num_blocks, cfg.cost.kv_bytes_per_token)
    assert sized["auto"][1] == 131_072 and sized["fp8"][1] == 65_536
    assert sized["fp8"][0] >= 2 * sized["auto"][0] - 1  # the same bytes hold twice the blocks


def test_a_given_fixed_ns_replaces_a_step_cost_file_s_own(tmp_path) -> None:
    """validate --step-cost FILE --fixed-ns N: N per step, not N on top of the file's calibrated constant."""
    import dataclasses

    from llumverify.sim.engine_profile import step_cost
    from llumverify.sim.roofline import step_cost_first_principles

    path = tmp_path / "cost.toml"
    path.write_text(dataclasses.replace(step_cost_first_principles("Llama-3.1-8B", "H100"), fixed_ns=3_000_000).to_toml())
    hw = HardwareConfig(cost_file=str(path))
    assert step_cost(hw).fixed_ns == 3_000_000 and step_cost(hw, 1_000_000).fixed_ns == 1_000_000


def test_a_step_cost_file_s_engine_is_its_name_then_how_it_ran(tmp_path) -> None:
    """The validation report writes engine = "vllm-v1 (vLLM 0.19.0, ...)": taken as vllm-v1. vllm-0.2 is an
    engine, but not one timed by step costs: refused (review of session 45)."""
    import dataclasses

    import pytest

    from llumverify.errors import UserError
    from llumverify.sim.engine_profile import step_cost
    from llumverify.sim.roofline import step_cost_first_principles

    base = step_cost_first_principles("Llama-3.1-8B", "H100")
    for engine, ok in (("vllm-v1 (vLLM 0.19.0, chunked prefill 2048, prefix caching)", True), ("vllm-0.2", False)):
        path = tmp_path / f"{ok}.toml"
        path.write_text(dataclasses.replace(base, engine=engine).to_toml())
        if ok:
            assert step_cost(HardwareConfig(cost_file=str(path))).fixed_ns == base.fixed_ns
        else:
            with pytest.raises(UserError, match="engine 'vllm-0.2' is not an engine timed by step costs"):
                step_cost(HardwareConfig(cost_file=str(path)))
