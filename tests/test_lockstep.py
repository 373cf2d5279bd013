"""Data-parallel ranks of an MoE engine step in lockstep (sim/lockstep.py), checked by hand on a
tiny step cost: 10 ns + 1 ns per token."""

from __future__ import annotations

import pytest
from conftest import run_both_paths
from hypothesis import given, settings
from hypothesis import strategies as st

from llumverify.errors import UserError
from llumverify.requests import RequestSpec
from llumverify.settings.config import AutoscaleConfig, ClusterConfig, EngineConfig, SimConfig
from llumverify.sim.run import simulate
from llumverify.sim.stepcost import StepCost

TINY = StepCost(fixed_ns=10, linear=((1, 1),), per_seq=((1, 0),))
ENGINE = EngineConfig(num_blocks=64, block_size=4, max_num_seqs=8, max_num_batched_tokens=64, generation="vllm-v1")
# X (2 + 6 tokens) and Y (a 40-token prefill) arrive together: vLLM's balancer sends Y to rank 1
# (rank 0 has X waiting: 4 x 1 > 0); Z (4 + 1) arrives at 60 ns, when only rank 0 is busy.
SPECS = [RequestSpec(0, 0.0, 2, 6), RequestSpec(1, 0.0, 40, 1), RequestSpec(2, 60e-9, 4, 1)]


def times(lockstep: int) -> dict[int, tuple[int, int, int]]:
    cfg = SimConfig(engine=ENGINE, cluster=ClusterConfig(num_instances=2, lockstep=lockstep), step=TINY)
    res = simulate(SPECS, "vllm-dp", cfg, keep_records=True)
    return {r.id: (r.instance, r.first_token_ns, r.finish_ns) for r in res.records}


def test_ranks_on_their_own() -> None:
    # X: prefill 12, five decodes of 11; Y: prefill 50; Z starts on arrival: 60 + 14
    assert times(1) == {0: (0, 12, 67), 1: (1, 50, 50), 2: (1, 74, 74)}


def test_a_lockstep_step_lasts_as_long_as_the_slowest_rank_and_an_idle_rank_joins_the_next_one() -> None:
    # [0, 50): X's 12 ns prefill waits for Y's 50; [50, 61): X decodes alone; Z, arriving at 60,
    # starts with the next group step [61, 75), which lasts Z's 14 ns on both ranks; X's last
    # three decodes end at 86, 97, 108
    assert times(2) == {0: (0, 50, 108), 1: (1, 50, 50), 2: (1, 75, 75)}


def test_lockstep_groups_must_tile_the_instances_and_stay_fixed() -> None:
    with pytest.raises(UserError, match="lockstep 2 must divide num_instances 3"):
        ClusterConfig(num_instances=3, lockstep=2).validate()
    with pytest.raises(UserError, match="prefill/decode roles"):
        ClusterConfig(num_instances=4, lockstep=2, pd="2:2").validate()
    with pytest.raises(UserError, match="autoscaling and instance failures"):
        SimConfig(engine=ENGINE, cluster=ClusterConfig(num_instances=2, lockstep=2),
                  autoscale=AutoscaleConfig(enabled=True)).validate()


rows = st.lists(st.tuples(st.sampled_from([0.0, 0.0, 1e-8, 3e-7]), st.integers(1, 40), st.sampled_from([1, 2, 5, 17])),
                min_size=1, max_size=20)


@settings(max_examples=20)
@given(rows=rows, blocks=st.integers(12, 40), instances=st.sampled_from([2, 4]),
       policy=st.sampled_from(["vllm-dp", "least-loaded", "llumnix"]))
def test_random_lockstep_workloads_keep_the_audits_and_paths_agree(tmp_path_factory, rows, blocks, instances, policy):
    """Every request ends once, the block and clock audits hold (the step-by-step path audits every
    step), and the closed-form path gives the same requests.csv, with ranks in lockstep pairs."""
    t, specs = 0.0, []
    for i, (gap, prompt, output) in enumerate(rows):
        t += gap
        specs.append(RequestSpec(i, t, prompt, output))
    engine = EngineConfig(num_blocks=blocks, block_size=4, max_num_seqs=8, max_num_batched_tokens=16,
                          generation="vllm-v1")
    cfg = SimConfig(engine=engine, cluster=ClusterConfig(num_instances=instances, lockstep=2), step=TINY)
    fast, slow = run_both_paths(specs, policy, cfg, tmp_path_factory.mktemp("csv"))
    assert fast == slow
    assert fast.count(b"\n") == len(rows) + 1


def test_an_moe_engines_data_parallel_ranks_step_together_and_dp_is_refused_for_a_dense_model() -> None:
    from llumverify.settings.config import HardwareConfig
    from llumverify.sim.engine_profile import resolve

    v1 = EngineConfig(generation="vllm-v1")
    cfg = SimConfig(engine=v1, cluster=ClusterConfig(num_instances=4),
                    hardware=HardwareConfig(gpu="H100", model="Qwen3-30B-A3B", dp=2, expert_parallel=True))
    assert resolve(cfg).cluster.lockstep == 2
    with pytest.raises(UserError, match="Llama-3.1-8B is not an MoE model; its data-parallel ranks are independent"):
        resolve(SimConfig(engine=v1, cluster=ClusterConfig(num_instances=4),
                          hardware=HardwareConfig(gpu="H100", model="Llama-3.1-8B", dp=2)))
    with pytest.raises(UserError, match="hardware.dp 3 .* must divide the 4 instances"):
        SimConfig(engine=v1, cluster=ClusterConfig(num_instances=4),
                  hardware=HardwareConfig(gpu="H100", model="Qwen3-30B-A3B", dp=3)).validate()
