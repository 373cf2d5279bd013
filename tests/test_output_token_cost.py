"""The engine's CPU time per output token (cost.cpu_ns_per_output_token, issue #29): vLLM 0.2's
detokenisation and RequestOutput re-read every output token of every running sequence each step,
so a decode step costs more the more output the batch holds, whatever its prompts."""

from __future__ import annotations

from dataclasses import replace

import pytest

from llumverify.errors import UserError
from llumverify.requests import RequestSpec
from llumverify.settings.config import CostConfig, EngineConfig, SimConfig
from llumverify.sim.run import simulate


def _finish_ns(prompt: int, output: int, per_output_token: int, fast: bool = True) -> int:
    cfg = replace(SimConfig(), cost=CostConfig(cpu_ns_per_output_token=per_output_token))
    cfg = replace(cfg, cluster=replace(cfg.cluster, num_instances=1))
    if not fast:
        cfg = replace(cfg, fast=False)
    (req,) = simulate([RequestSpec(0, 0.0, prompt, output)], "round-robin", cfg, keep_records=True).records
    return req.finish_ns


@pytest.mark.parametrize("prompt", [16, 700])
@pytest.mark.parametrize("fast", [True, False])
def test_one_request_pays_for_the_output_it_holds_at_each_step(prompt, fast):
    # after the prefill the request holds j output tokens in its KV cache at decode step j = 0..N-2
    n = 40
    extra = _finish_ns(prompt, n, 1_000, fast) - _finish_ns(prompt, n, 0, fast)
    assert extra == 1_000 * (n - 1) * (n - 2) // 2


def test_an_engine_that_does_not_charge_it_refuses_it_in_one_line():
    cfg = replace(SimConfig(), cost=CostConfig(cpu_ns_per_output_token=100),
                  engine=EngineConfig(generation="vllm-v1"))
    with pytest.raises(UserError, match="cpu_ns_per_output_token.*vllm-0.2") as info:
        simulate([RequestSpec(0, 0.0, 16, 4)], "round-robin", cfg)
    assert "\n" not in str(info.value)
