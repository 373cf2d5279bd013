"""The sampler's top-p sort (sim/sampling.py): its size by GPU and vocabulary, added to every step-cost source."""

from __future__ import annotations

import dataclasses

import pytest
from test_profile import make_profile

from llumverify.errors import UserError
from llumverify.settings.config import HardwareConfig
from llumverify.sim import engine_profile
from llumverify.sim.catalog import get_gpu, get_model
from llumverify.sim.roofline import load_efficiency, step_cost_first_principles
from llumverify.sim.sampling import REF_VOCAB, sort_ns_per_seq, with_sampling


def test_the_sort_is_stated_at_h100_and_scales_with_the_vocabulary_and_inversely_with_sms_times_clock() -> None:
    h100, a100, b200 = get_gpu("H100"), get_gpu("A100-80GB"), get_gpu("B200")
    assert sort_ns_per_seq(12_000, h100, REF_VOCAB) == pytest.approx(12_000)
    assert sort_ns_per_seq(12_000, h100, 2 * REF_VOCAB) == pytest.approx(24_000)
    assert sort_ns_per_seq(12_000, a100, REF_VOCAB) == pytest.approx(12_000 * 132 * 1.98 / (108 * 1.41))
    assert sort_ns_per_seq(12_000, b200, REF_VOCAB) == pytest.approx(12_000 * 132 * 1.98 / (148 * 1.965))


def test_top_p_adds_the_sort_to_each_sequence_of_a_step_and_nothing_else() -> None:
    cost = step_cost_first_principles("Llama-3.1-8B", "H100")
    assert with_sampling(cost, "greedy", 12_000, get_gpu("H100"), 128_256) is cost
    topp = with_sampling(cost, "top-p", 12_000, get_gpu("H100"), 128_256)
    per = sort_ns_per_seq(12_000, get_gpu("H100"), 128_256)
    assert [v - w for (_, v), (_, w) in zip(topp.per_seq, cost.per_seq)] == [round(per * s) for s, _ in cost.per_seq]
    assert dataclasses.replace(topp, per_seq=cost.per_seq, source=cost.source) == cost
    assert "top-p sampling: a 128,256-token sort" in topp.source
    for n in (1, 32, 200):  # a decode step of n sequences: n sorts more
        assert topp.step_ns([], n, 500 * n) - cost.step_ns([], n, 500 * n) == pytest.approx(per * n, abs=n)
    with pytest.raises(UserError, match="sampling must be one of greedy, top-p, got 'top-k'"):
        with_sampling(cost, "top-k", 12_000, get_gpu("H100"), 128_256)


def test_every_step_cost_source_pays_the_sort_of_its_own_gpu_and_model(tmp_path) -> None:
    eff = load_efficiency()
    assert eff.topp_sort_ns > 0
    llama = get_model("Llama-3.1-8B")
    profile = make_profile(tmp_path / "p", "vllm_version: 0.19.0\nhardware: RTXPRO6000\nmodel: meta-llama/Llama-3.1-8B\n")
    for hw, gpu in ((HardwareConfig(gpu="A100-80GB", model="Llama-3.1-8B"), "A100-80GB"),
                    (HardwareConfig(profile=str(profile)), "RTX PRO 6000")):
        greedy = engine_profile.step_cost(hw)
        topp = engine_profile.step_cost(dataclasses.replace(hw, sampling="top-p"))
        per = sort_ns_per_seq(eff.topp_sort_ns, get_gpu(gpu), llama.vocab)
        assert topp.step_ns([], 64, 64 * 700) - greedy.step_ns([], 64, 64 * 700) == pytest.approx(64 * per, abs=64)
        assert topp.linear == greedy.linear and topp.fixed_ns == greedy.fixed_ns


def test_a_gpu_without_sm_numbers_cannot_price_top_p_and_the_setting_needs_a_step_cost_source() -> None:
    assert get_gpu("H20").sms == 0  # no published boost clock (sim/catalog/gpus.toml)
    with pytest.raises(UserError, match="top-p sampling is priced by the GPU's SM count and boost clock, which H20"):
        engine_profile.step_cost(HardwareConfig(gpu="H20", model="Llama-3.1-8B", sampling="top-p"))
    engine_profile.step_cost(HardwareConfig(gpu="H20", model="Llama-3.1-8B"))  # greedy needs neither
    with pytest.raises(UserError, match="sampling"):
        HardwareConfig(sampling="top-p").validate()


def test_every_catalog_gpu_but_two_gives_its_sms_and_boost_clock() -> None:
    from llumverify.sim.catalog import gpus

    missing = sorted(g.name for g in gpus() if not (g.sms and g.clock_ghz))
    assert missing == ["GB300", "H20"]
    assert all(16 <= g.sms <= 400 and 1.0 <= g.clock_ghz <= 3.0 for g in gpus() if g.sms)
    assert (get_gpu("MI250").sms, get_gpu("MI300X").sms, get_gpu("H100-PCIe").sms) == (104, 304, 114)  # per GCD; PCIe


def test_a_step_cost_file_pays_the_sort_of_its_gpu_and_model(tmp_path) -> None:
    """The third step-cost source: a calibrate-style TOML (its gpu and model named in it) pays the sort too."""
    eff = load_efficiency()
    path = tmp_path / "cost.toml"
    path.write_text(step_cost_first_principles("Llama-3.1-8B", "A100-80GB").to_toml())
    hw = HardwareConfig(cost_file=str(path))
    greedy, topp = engine_profile.step_cost(hw), engine_profile.step_cost(dataclasses.replace(hw, sampling="top-p"))
    per = sort_ns_per_seq(eff.topp_sort_ns, get_gpu("A100-80GB"), get_model("Llama-3.1-8B").vocab)
    assert topp.step_ns([], 64, 64 * 700) - greedy.step_ns([], 64, 64 * 700) == pytest.approx(64 * per, abs=64)
    assert "top-p sampling" in topp.source and "top-p sampling" not in greedy.source


@pytest.mark.parametrize("source", ["first-principles", "profile"])
def test_every_gpu_of_a_tp_group_sorts_the_whole_vocabulary(tmp_path, source) -> None:
    """vLLM V1 gathers the full logits on every rank and every rank samples: the sort is not divided by tp,
    and a one-GPU profile's TP scaling does not touch it."""
    eff = load_efficiency()
    if source == "profile":
        profile = make_profile(tmp_path / "p", "vllm_version: 0.19.0\nhardware: RTXPRO6000\nmodel: meta-llama/Llama-3.1-8B\n")
        hw, gpu = HardwareConfig(profile=str(profile), tp=2), "RTX PRO 6000"
    else:
        hw, gpu = HardwareConfig(gpu="H100", model="Llama-3.1-8B", tp=4), "H100"
    greedy, topp = engine_profile.step_cost(hw), engine_profile.step_cost(dataclasses.replace(hw, sampling="top-p"))
    per = sort_ns_per_seq(eff.topp_sort_ns, get_gpu(gpu), get_model("Llama-3.1-8B").vocab)
    assert topp.step_ns([], 64, 64 * 700) - greedy.step_ns([], 64, 64 * 700) == pytest.approx(64 * per, abs=64)


def test_validate_replays_a_run_with_the_sampling_it_is_given(capsys) -> None:
    """validate RUN --sampling top-p prices the sort in the replay it prints (not only in its early check)."""
    from pathlib import Path

    from llumverify.cli import main

    corpus = Path(__file__).parent / "bad_inputs" / "runs"
    for sampling, has in (("greedy", False), ("top-p", True)):
        with pytest.raises(SystemExit) as exc:
            main(["validate", str(corpus / "ok"), "--workload", str(corpus / "workload.jsonl"), "--gpu", "RTX 4090",
                  "--model", "Llama-3.1-8B", "--sampling", sampling])
        assert exc.value.code in (0, None)
        out = " ".join(capsys.readouterr().out.split())
        assert ("top-p sampling: a 128,256-token sort" in out) == has
