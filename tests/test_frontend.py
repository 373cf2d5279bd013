"""The serving front end (cost.api_server_ns, cost.tokenize_ns_per_token, issue #28 item 4): a
request reaches the engine after the API server and tokenisation, latencies count from the
client's send, and the engine sees requests in the order they get through."""

from __future__ import annotations

from dataclasses import replace

import pytest

from llumverify.requests import RequestSpec
from llumverify.settings.config import CostConfig, EngineConfig, SimConfig
from llumverify.sim.cluster import to_ns
from llumverify.sim.frontend import engine_arrivals
from llumverify.sim.run import simulate

FRONT = CostConfig(api_server_ns=3_000_000, tokenize_ns_per_token=2_000)


def _cfg(cost: CostConfig, generation: str = "vllm-0.2") -> SimConfig:
    cfg = replace(SimConfig(), cost=cost, engine=EngineConfig(generation=generation))
    return replace(cfg, cluster=replace(cfg.cluster, num_instances=1))


def test_a_long_prompt_sent_first_reaches_the_engine_after_a_short_one_sent_just_after():
    specs = [RequestSpec(0, 0.0, 4_000, 8), RequestSpec(1, 0.001, 10, 8), RequestSpec(2, 0.001, 10, 8),
             RequestSpec(3, 1.0, 10, 8)]
    got = [(at, sent, s.id) for at, sent, s in engine_arrivals(specs, FRONT, to_ns)]
    assert [i for *_, i in got] == [1, 2, 0, 3]  # ties keep the send order
    assert got[2] == (3_000_000 + 8_000_000, 0, 0)
    assert got[0] == (1_000_000 + 3_000_000 + 20_000, 1_000_000, 1)


@pytest.mark.parametrize("generation", ["vllm-0.2", "vllm-v1"])
def test_an_idle_engine_adds_exactly_the_front_end_to_ttft_and_e2e(generation):
    spec = [RequestSpec(0, 0.5, 300, 6)]
    (bare,) = simulate(spec, "round-robin", _cfg(CostConfig(), generation), keep_records=True).records
    (front,) = simulate(spec, "round-robin", _cfg(FRONT, generation), keep_records=True).records
    delay = 3_000_000 + 300 * 2_000
    assert front.sent_ns == bare.sent_ns == to_ns(0.5)
    assert front.arrival_ns == bare.arrival_ns + delay
    assert front.first_token_ns - front.sent_ns == bare.first_token_ns - bare.sent_ns + delay
    assert front.finish_ns - front.sent_ns == bare.finish_ns - bare.sent_ns + delay


def test_reported_latencies_count_from_the_send_and_every_request_ends_once():
    specs = [RequestSpec(i, 0.01 * i, 50 + 37 * (i % 11), 4 + i % 5) for i in range(200)]
    bare = simulate(specs, "least-loaded", _cfg(CostConfig())).summary
    front = simulate(specs, "least-loaded", _cfg(FRONT), keep_records=True)
    assert front.summary["finished"] == 200  # the cluster's audits (Little's law, one end each) passed
    delays = [3_000_000 + 2_000 * s.prompt_tokens for s in specs]
    assert sorted(r.arrival_ns - r.sent_ns for r in front.records) == sorted(delays)
    assert front.summary["ttft_mean_s"] > bare["ttft_mean_s"] + 3e-3


def test_the_header_says_when_latencies_are_the_clients():
    from llumverify.cli.simulate_output import describe_run
    from llumverify.study.experiment import Workload

    work = Workload("default", rate=1.0)
    assert "front_end" not in describe_run(_cfg(CostConfig()), work, 10, 0)
    assert describe_run(_cfg(FRONT), work, 10, 0)["front_end"].startswith("3 ms + 2 us per prompt token")
