"""The cost model: calibration to the published 7B/A10 latencies, TOML overrides, copy stages."""

from __future__ import annotations

import pytest

from llumverify.settings.config import CostConfig
from llumverify.errors import UserError
from llumverify.sim.costmodel import PUBLISHED_DECODE_MS, CostModel, calibration, load_cost_config


def test_defaults_are_within_ten_percent_of_every_published_point():
    for point, published, fitted in calibration(CostModel(CostConfig())):
        assert abs(fitted - published) <= 0.10 * published, point


def test_decode_calibration_point_lies_in_the_published_range():
    lo, hi = PUBLISHED_DECODE_MS
    assert lo <= calibration(CostModel(CostConfig()))[-1][2] <= hi


def test_a_linear_prefill_cannot_fit_the_three_points():
    # slopes between consecutive points differ by more than 10 %: hence the quadratic term
    s1 = (436 - 58) / (2048 - 256)
    s2 = (1995 - 436) / (8192 - 2048)
    assert s2 / s1 > 1.1


def test_decode_terms_give_the_same_step_time_as_decode_ns():
    cost = CostModel(CostConfig())
    for slow in (0, 20_000):
        fixed, per_token = cost.decode_terms(32, slow)
        assert fixed + per_token * 8192 == cost.decode_ns(32, 8192, slow)
    assert cost.decode_ns(32, 8192, 20_000) > cost.decode_ns(32, 8192)


def test_copy_stage_time_is_bytes_over_bandwidth_plus_rpc():
    cost = CostModel(CostConfig(rpc_ns=1_000_000, bandwidth_bps=64_000_000_000))
    # one 16-token block of 0.5 MiB per token = 8 MiB = 67,108,864 bits at 64 Gb/s = 1,048,576 ns
    assert cost.copy_stage_ns(1, 16) == 1_048_576 + 1_000_000
    assert cost.copy_stage_ns(0, 16) == 1_000_000
    assert cost.copy_stage_ns(1, 16, sharers=3) == 3 * 1_048_576 + 1_000_000  # shared copies: the link, not the RPC


def test_toml_overrides_named_coefficients(tmp_path):
    path = tmp_path / "cost.toml"
    path.write_text("gap_ns = 0\ndecode_ns = 30_000_000\n")
    cfg = load_cost_config(path)
    assert cfg.gap_ns == 0 and cfg.decode_ns == 30_000_000 and cfg.prefill_ns == CostConfig().prefill_ns


@pytest.mark.parametrize("text, fragment", [
    ("gap_nsec = 1\n", "unknown key 'gap_nsec'"),
    ("gap_ns = 1.5\n", "gap_ns must be a non-negative integer up to 60,000,000,000, got 1.5"),
    ("gap_ns = -1\n", "gap_ns must be a non-negative integer up to 60,000,000,000, got -1"),
    ("gap_ns = \n", "cost.toml"),
])
def test_bad_toml_is_one_line_user_error_naming_the_problem(tmp_path, text, fragment):
    path = tmp_path / "cost.toml"
    path.write_text(text)
    with pytest.raises(UserError, match=fragment) as info:
        load_cost_config(path)
    assert "\n" not in str(info.value)


def test_missing_toml_file(tmp_path):
    with pytest.raises(UserError, match="file not found"):
        load_cost_config(tmp_path / "absent.toml")


def test_engine_cpu_per_sequence_adds_to_decode_steps_outside_the_gpu_slowdown():
    cost = CostModel(CostConfig(decode_ns_per_seq=100, decode_ns_per_token=2, decode_ns=1_000, gap_ns=50,
                                cpu_ns_per_seq=30))
    assert cost.decode_ns(4, 10) == 50 + 4 * 30 + 4 * 100 + 1_000 + 2 * 10
    # a 100 % slow-down doubles the GPU terms only
    assert cost.decode_terms(4, slow_ppm=1_000_000) == (50 + 4 * 30 + 2 * (4 * 100 + 1_000), 4)
    # the published step latencies compare with the GPU step: calibration leaves the CPU time out
    without = CostModel(CostConfig(decode_ns_per_seq=100, decode_ns_per_token=2, decode_ns=1_000, gap_ns=50))
    assert calibration(cost)[-1] == calibration(without)[-1]


def test_engine_cpu_per_output_token_charges_output_tokens_not_prompt_tokens():
    cost = CostModel(CostConfig(decode_ns_per_seq=100, decode_ns_per_token=2, decode_ns=1_000, gap_ns=50,
                                cpu_ns_per_output_token=7))
    first, growth = cost.decode_run_terms(4, 100, 30)  # 4 sequences, 100 KV tokens, 30 of them output
    assert first == cost.decode_ns(4, 100) + 7 * 30
    assert growth == (2 + 7) * 4  # every step adds one KV token and one output token per sequence
    # a slow-down scales the GPU terms only, not the engine's CPU time per output token
    slow_first, slow_growth = cost.decode_run_terms(4, 100, 30, slow_ppm=1_000_000)
    assert slow_first == cost.decode_ns(4, 100, slow_ppm=1_000_000) + 7 * 30 and slow_growth == (4 + 7) * 4
