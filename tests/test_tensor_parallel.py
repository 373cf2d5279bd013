"""sim/tensor_parallel.py and engine_profile: --tp honoured by every step-cost source."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import validation_dir

from llumverify.sim import engine_profile
from llumverify.settings.config import HardwareConfig
from llumverify.errors import UserError
from llumverify.sim import collectives
from llumverify.sim import roofline as rl
from llumverify.sim.catalog import get_gpu, get_model
from llumverify.sim.stepcost import interpolate
from llumverify.sim.tensor_parallel import scale_to_tp

PROFILES = validation_dir() / "llmservingsim" / "profiles"
QWEN = PROFILES / "RTXPRO6000" / "Qwen3-32B"
needs_profiles = pytest.mark.skipif(not QWEN.is_dir(), reason=f"no shared profiles at {PROFILES}")


def test_scaling_first_principles_reproduces_first_principles_at_tp() -> None:
    """Scaling the tp=1 first-principles cost must give the tp=4 first-principles cost: the shard
    ratios and the collectives are the same model's (up to integer rounding)."""
    one = rl.step_cost_first_principles("Llama-3-70B", "H100", tp=1)
    four = rl.step_cost_first_principles("Llama-3-70B", "H100", tp=4)
    scaled = scale_to_tp(one, 4)
    assert scaled.tp == 4 and "scaled to tp=4" in scaled.source
    for t in (1, 3, 64, 2048):
        assert interpolate(scaled.linear, t) == pytest.approx(interpolate(four.linear, t), rel=1e-3)
    for s in (1, 256):
        assert interpolate(scaled.per_seq, s) == pytest.approx(interpolate(four.per_seq, s), rel=1e-3)
    for name in ("decode_attn_ns_per_token", "prefill_attn_fs_per_pair", "decode_attn_ns"):
        assert getattr(scaled, name) == pytest.approx(getattr(four, name), rel=1e-3, abs=2)
    assert scale_to_tp(one, 1) is one


def test_a_scaled_cost_keeps_its_own_step_constant_plus_the_tp_groups(monkeypatch) -> None:
    """A one-GPU cost scaled to TP keeps its own (measured) per-step constant and adds only what a TP group adds
    (tp_step_ns), not the first-principles constant a second time (session 38's cost hunt, slip S30: equivalent
    while the shipped efficiencies' fixed_ns is 0, so this test gives them nonzero ones)."""
    eff = dataclasses.replace(rl.load_efficiency(), fixed_ns=700_000, tp_step_ns=300_000, layer_ns=2_000)
    monkeypatch.setattr(rl, "load_efficiency", lambda *a, **k: eff)
    measured = dataclasses.replace(rl.step_cost_first_principles("Llama-3-70B", "H100", tp=1), fixed_ns=1_000_000)
    assert scale_to_tp(measured, 4).fixed_ns == 1_000_000 + 300_000


def test_only_one_gpu_costs_with_names_can_be_scaled() -> None:
    two = rl.step_cost_first_principles("Llama-3-70B", "H100", tp=2)
    with pytest.raises(UserError, match="tp=2 cannot be rescaled to tp=4"):
        scale_to_tp(two, 4)
    anonymous = dataclasses.replace(rl.step_cost_first_principles("Llama-3-70B", "H100"), gpu="")
    with pytest.raises(UserError, match="needs their GPU and model"):
        scale_to_tp(anonymous, 2)


@needs_profiles
def test_tp_is_honoured_with_a_profile() -> None:
    """--tp with --profile was silently ignored: now the one-GPU profile is scaled, pays the
    interconnect's all-reduces, and the KV cache is sized for the shard."""
    one = engine_profile.step_cost(HardwareConfig(profile=str(QWEN)))
    two = engine_profile.step_cost(HardwareConfig(profile=str(QWEN), tp=2))
    assert (one.tp, two.tp) == (1, 2)
    model, link = get_model("Qwen3-32B"), get_gpu("RTX PRO 6000").link
    for t in (1, 128, 2048):
        comm = collectives.step_allreduce_ns(model, t, 2, link)
        assert interpolate(one.linear, t) / 2 < interpolate(two.linear, t) - comm * 0.99
        assert interpolate(two.linear, t) < interpolate(one.linear, t) + comm
    assert two.decode_attn_ns_per_token * 2 == pytest.approx(one.decode_attn_ns_per_token, abs=2)
    blocks_one = engine_profile.kv_blocks(HardwareConfig(profile=str(QWEN)))
    blocks_two = engine_profile.kv_blocks(HardwareConfig(profile=str(QWEN), tp=2))
    assert blocks_two > 2 * blocks_one > 0


@needs_profiles
def test_a_profile_for_another_gpu_or_model_is_refused() -> None:
    with pytest.raises(UserError, match="measured on RTXPRO6000, not H100"):
        engine_profile.step_cost(HardwareConfig(profile=str(QWEN), gpu="H100"))
    with pytest.raises(UserError, match="is for Qwen/Qwen3-32B, not Llama-3.1-8B"):
        engine_profile.step_cost(HardwareConfig(profile=str(QWEN), model="Llama-3.1-8B"))


def test_a_step_cost_file_is_scaled_or_refused_by_tp(tmp_path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(rl.step_cost_first_principles("Llama-3-70B", "H100", tp=1).to_toml())
    two = engine_profile.step_cost(HardwareConfig(cost_file=str(path), tp=2))
    assert two.tp == 2 and "scaled to tp=2" in two.source
    path.write_text(rl.step_cost_first_principles("Llama-3-70B", "H100", tp=2).to_toml())
    with pytest.raises(UserError, match="is for tp=2, not tp=4"):
        engine_profile.step_cost(HardwareConfig(cost_file=str(path), tp=4))
    assert engine_profile.kv_blocks(HardwareConfig(cost_file=str(path), tp=2)) == rl.kv_capacity_blocks(
        "Llama-3-70B", "H100", tp=2)


def test_a_source_without_gpu_and_model_cannot_size_the_kv_cache(tmp_path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(dataclasses.replace(rl.step_cost_first_principles("Llama-3.1-8B", "H100"), gpu="").to_toml())
    with pytest.raises(UserError, match="cannot size the KV cache"):
        engine_profile.kv_blocks(HardwareConfig(cost_file=str(path)))


def test_a_measured_mixed_surcharge_scales_with_the_query_heads_where_kv_heads_are_replicated() -> None:
    """The mixed-step surcharge is padded query rows' FLOPs, which follow the query heads: Qwen3-30B-A3B's 32 query
    heads are 4 a GPU at TP8, an eighth (128 -> 16 ns a KV token), while its 4 KV heads, replicated, are one a GPU, a
    quarter (the decode KV term's ratio). Guards the surcharge scaled by the KV ratio."""
    one = dataclasses.replace(rl.step_cost_first_principles("Qwen3-30B-A3B", "A100-80GB"),
                              mixed_decode_attn_ns_per_token=128, mixed_decode_attn_ns_per_seq=40)
    eight = scale_to_tp(one, 8)
    assert (eight.mixed_decode_attn_ns_per_token, eight.mixed_decode_attn_ns_per_seq) == (16, 40)
    assert eight.decode_attn_ns_per_token == pytest.approx(one.decode_attn_ns_per_token / 4, abs=1)
