"""benchmarks/h200_aggregates.py: the decode step a serving aggregate implies (Little's law for the
requests in flight, the arrivals' prefills spread over the steps)."""

from __future__ import annotations

import pytest
from conftest import benchmark_script

from llumverify.sim import engine_profile


def test_the_implied_step_is_the_decode_step_at_the_load_little_s_law_gives() -> None:
    script = benchmark_script("h200_aggregates")
    doc = {"completed": 100, "total_input_tokens": 20_000, "total_output_tokens": 20_000, "request_throughput": 1.0,
           "mean_e2el_ms": 4_000.0, "request_rate": 1.0}
    step = engine_profile.step_cost(script.SOURCE)
    decode = step.step_ns([], 4, 4 * 300)  # 4 in flight, each over 200 + 100 KV tokens
    prefill = step.step_ns([(200, 0)], 4, 4 * 300) - decode
    assert script.implied_tpot_ms(doc) == pytest.approx(decode / (1 - prefill / 1e9) / 1e6)
    assert script.implied_tpot_ms(doc | {"request_rate": 1e-9}) == pytest.approx(decode / 1e6, rel=1e-6)
