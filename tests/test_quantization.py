"""fp8 weights and an fp8 KV cache in first principles (sim/quantization.py): what halves, what
doubles, where FP8 tensor cores exist, and that 16-bit models are untouched."""

from __future__ import annotations

import re

import pytest

from llumverify.cli import main
from llumverify.errors import UserError
from llumverify.sim.catalog import get_gpu, get_model
from llumverify.sim.checkpoint_names import split_format
from llumverify.sim.quantization import with_formats
from llumverify.sim.roofline import gemm_ns, kv_capacity_blocks, load_efficiency, step_cost_first_principles

LLAMA = get_model("Llama-3.1-8B")
FP8 = with_formats(LLAMA, "fp8", "auto")
EFF = load_efficiency()


def test_fp8_weights_store_linear_layers_in_one_byte_and_the_rest_in_two() -> None:
    embed_and_head = 2 * LLAMA.vocab * LLAMA.hidden
    assert LLAMA.weight_bytes == 2 * LLAMA.params
    assert FP8.weight_bytes == FP8.linear_params() + 2 * (LLAMA.params - FP8.linear_params())
    assert LLAMA.params - FP8.linear_params() > embed_and_head  # plus norms: they stay 16-bit


def test_the_16_bit_model_is_unchanged() -> None:
    assert with_formats(LLAMA, "", "auto") == LLAMA
    assert step_cost_first_principles(with_formats(LLAMA, "bf16", "auto"), "H100") == step_cost_first_principles(LLAMA, "H100")


@pytest.mark.parametrize(("gpu", "compute_ratio"), [("H100", 0.5), ("L40S", 0.5), ("A100-80GB", 1.0)])
def test_fp8_halves_weight_reads_everywhere_and_compute_on_fp8_tensor_cores(gpu: str, compute_ratio: float) -> None:
    import dataclasses

    g, eff = get_gpu(gpu), dataclasses.replace(EFF, gemm_kernels=())  # the datasheet ratios, without a kernel's fixed time
    params = 4096 * 4096
    memory_bound = gemm_ns(params, 1, 1, g, eff, fmt="fp8") / gemm_ns(params, 1, 2, g, eff)
    compute_bound = gemm_ns(params, 65536, 1, g, eff, fmt="fp8") / gemm_ns(params, 65536, 2, g, eff)
    assert memory_bound == pytest.approx(0.5, abs=0.02)
    assert compute_bound == pytest.approx(compute_ratio, abs=0.02)


def test_an_fp8_kv_cache_holds_twice_the_tokens_and_decode_reads_half() -> None:
    kv8 = with_formats(LLAMA, "", "fp8")
    assert kv8.kv_bytes_per_token() * 2 == LLAMA.kv_bytes_per_token()
    assert kv_capacity_blocks(kv8, "H100") in (2 * kv_capacity_blocks(LLAMA, "H100"), 2 * kv_capacity_blocks(LLAMA, "H100") + 1)
    full, half = step_cost_first_principles(LLAMA, "H100"), step_cost_first_principles(kv8, "H100")
    assert half.decode_attn_ns_per_token * 2 == pytest.approx(full.decode_attn_ns_per_token, abs=2)
    assert half.linear == full.linear and "fp8 KV cache" in half.source


@pytest.mark.parametrize(("name", "expected"), [
    ("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8", ("RedHatAI/Meta-Llama-3.1-8B-Instruct", "fp8")),
    ("neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8-dynamic", ("neuralmagic/Meta-Llama-3.1-70B-Instruct", "fp8")),
    ("meta-llama/Llama-3.1-8B", ("meta-llama/Llama-3.1-8B", "")),
])
def test_checkpoint_names_carry_their_format(name: str, expected: tuple[str, str]) -> None:
    assert split_format(name) == expected
    model = get_model(name)
    assert model.weight_format == (expected[1] or "bf16") and model.name in ("Llama-3.1-8B", "Llama-3-70B")


def test_an_unknown_fp8_checkpoint_is_named_as_given() -> None:
    with pytest.raises(UserError, match="unknown model 'Llama-9B-FP8'"):
        get_model("Llama-9B-FP8")


@pytest.mark.parametrize("name, fmt", [
    ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int8", "GPTQ-Int8"), ("neuralmagic/Meta-Llama-3.1-8B-Instruct-quantized.w8a8", "w8a8"),
    ("unsloth/Llama-3.1-8B-bnb-4bit", "bnb-4bit"), ("Qwen/Qwen3-8B-int8", "int8"), ("Llama-3.1-8B-MXFP4", "MXFP4"),
])
def test_quantized_formats_not_modelled_are_refused_by_name(name: str, fmt: str) -> None:
    """Priced as 16-bit they would be silently off by up to 4x in weight bytes."""
    with pytest.raises(UserError, match=f"model '{re.escape(name)}': {fmt} weights are not modelled"):
        get_model(name)


@pytest.mark.parametrize(("name", "base", "fmt"), [
    ("TheBloke/Llama-2-7B-AWQ", "Llama-2-7B", "int4"), ("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", "Llama-3.1-8B", "int4"),
    ("Qwen/Qwen3-32B-GPTQ-Int4", "Qwen3-32B", "int4"), ("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16", "Llama-3.1-8B", "int4"),
    ("nvidia/Llama-3.3-70B-Instruct-FP4", "Llama-3.3-70B-Instruct", "nvfp4"),
    ("RedHatAI/Meta-Llama-3.1-8B-Instruct-NVFP4", "Llama-3.1-8B", "nvfp4"),
])
def test_4_bit_checkpoints_are_read_by_name(name: str, base: str, fmt: str) -> None:
    model = get_model(name)
    assert (model.name, model.weight_format) == (get_model(base).name, fmt)


def test_4_bit_weights_take_half_a_byte_plus_their_scales_and_only_in_linear_layers() -> None:
    """int4: a 16-bit scale per 128 weights; nvfp4: an fp8 scale per 16 (sim/quantization.py)."""
    for fmt, per_weight in (("int4", 0.5 + 2 / 128), ("nvfp4", 0.5 + 1 / 16)):
        m = with_formats(LLAMA, fmt, "auto")
        assert m.linear_bytes == per_weight
        assert m.weight_bytes == pytest.approx(m.linear_params() * per_weight + 2 * (LLAMA.params - m.linear_params()))


@pytest.mark.parametrize(("fmt", "gpu", "compute_ratio"), [
    ("int4", "H100", 1.0), ("int4", "B200", 1.0), ("int4", "A100-80GB", 1.0),
    ("nvfp4", "B200", 0.25), ("nvfp4", "RTX PRO 6000", 0.25), ("nvfp4", "H100", 1.0),
])
def test_4_bit_gemms_read_a_quarter_and_compute_at_their_formats_peak(fmt: str, gpu: str, compute_ratio: float) -> None:
    """W4A16 (Marlin) dequantises to 16 bits; NVFP4 runs W4A4 only on FP4 tensor cores (Blackwell). The
    datasheet ratios, without the W4A4 kernels', Hopper's int4 and the measured dense kernels' fixed times and shares
    (test_w4_kernels_published, test_roofline)."""
    import dataclasses

    g, params, nbytes = get_gpu(gpu), 8192 * 8192, with_formats(LLAMA, fmt, "auto").linear_bytes
    eff = dataclasses.replace(EFF, fp4_gemm_ns=0, fp4_gemm_ps_per_k=0, fp4_gemm_bw=0.0, fp4_gemm_flops=0.0,
                              w4a16_hopper_bw=0.0, w4a16_hopper_ns=0, gemm_kernels=())
    memory_bound = gemm_ns(params, 1, nbytes, g, eff, fmt=fmt, k=8192) / gemm_ns(params, 1, 2, g, eff)
    compute_bound = gemm_ns(params, 65536, nbytes, g, eff, fmt=fmt, k=8192) / gemm_ns(params, 65536, 2, g, eff)
    assert memory_bound == pytest.approx(nbytes / 2, abs=0.02)
    assert compute_bound == pytest.approx(compute_ratio, abs=0.02)


def test_4_bit_decode_steps_and_a_checkpoint_keeps_its_format() -> None:
    """Weight-only 4 bits (int4; NVFP4 off Blackwell) is cheaper than fp8 where every format streams at gemm_bw
    (Ampere). On Hopper it streams at w4a16_hopper_bw and pays w4a16_hopper_ns (vLLM's Marlin kernel there), so it
    is cheaper than bf16 and within 5 % of fp8, which streams at Hopper's measured dense-kernel share and pays its fixed
    time (gemm_kernels; a 70B decode step of 8 at TP2). W4A4 NVFP4 on B200 is cheaper than bf16 but not by the bytes'
    3.6x: the published FP4 GEMMs stream their weights at fp4_gemm_bw (0.78) of the bandwidth and pay a fixed and a
    per-K time (fp8 on Blackwell has no kernel rows here, so the two are not ordered)."""
    big = get_model("Llama-3.3-70B-Instruct")

    def step(fmt: str, gpu: str) -> int:
        return step_cost_first_principles(with_formats(big, fmt, "auto"), gpu, 2).step_ns((), 8, 8 * 1024)

    assert step("bf16", "A100-80GB") > step("fp8", "A100-80GB") > step("nvfp4", "A100-80GB") > step("int4", "A100-80GB")
    # on Hopper the weight-only 4-bit kernels (Marlin: 0.52 of the bandwidth plus 7.7 us a GEMM) and fp8 (0.869 plus
    # 3.5 us) come out within 5 % of each other at decode
    assert step("bf16", "H100") > step("nvfp4", "H100") > max(step("int4", "H100"), step("fp8", "H100"))
    assert step("int4", "H100") == pytest.approx(step("fp8", "H100"), rel=0.05)
    assert step("bf16", "B200") > step("nvfp4", "B200") > step("int4", "B200")
    assert "nvfp4 weights" in step_cost_first_principles(with_formats(big, "nvfp4", "auto"), "B200").source
    with pytest.raises(UserError, match="is an fp8 checkpoint; it cannot be served as int4"):
        with_formats(get_model("Llama-3.1-8B-FP8"), "int4", "auto")
    assert with_formats(get_model("Llama-3.1-8B-AWQ"), "", "auto").weight_format == "int4"


def cli(*args: str) -> int:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    return exc.value.code


def test_simulate_names_the_formats_and_refuses_them_with_measured_kernels(capsys, tmp_path) -> None:
    assert cli("simulate", "--engine", "vllm-v1", "--gpu", "H100", "--model", "Llama-3.1-8B", "--quantization", "fp8",
               "--kv-cache-dtype", "fp8", "--requests", "40", "--policy", "least-loaded",
               "--out", str(tmp_path / "o")) == 0
    assert "H100 / Llama-3.1-8B, TP 1 (fp8 weights, fp8 KV)" in capsys.readouterr().out
    cost = tmp_path / "c.toml"
    cost.write_text(step_cost_first_principles(LLAMA, "H100").to_toml())
    assert cli("simulate", "--engine", "vllm-v1", "--step-cost", str(cost), "--kv-cache-dtype", "fp8") == 2
    assert "priced from first principles (--gpu --model)" in capsys.readouterr().err


def test_an_unknown_format_in_a_file_names_the_choices_including_the_empty_one() -> None:
    from llumverify.settings.config import HardwareConfig

    with pytest.raises(UserError, match=r"quantization must be one of \"\" \(empty\), fp8, int4, nvfp4, got 'int8'"):
        HardwareConfig(gpu="H100", model="Llama-3.1-8B", quantization="int8").validate()


def test_a_quantised_checkpoint_name_is_refused_with_measured_kernels_and_kept_when_rows_are_priced(tmp_path, capsys) -> None:
    from llumverify.validation.static_batch import priced_name

    cost = tmp_path / "c.toml"
    cost.write_text(step_cost_first_principles(LLAMA, "H100").to_toml())
    assert cli("simulate", "--engine", "vllm-v1", "--step-cost", str(cost), "--model", "Llama-3.1-8B-AWQ") == 2
    assert "a checkpoint name such as -FP8 or -AWQ" in capsys.readouterr().err
    for name in ("Llama-3.1-8B-int4", "TheBloke/Llama-2-7B-AWQ", "nvidia/Llama-3.3-70B-Instruct-FP4", "Llama-3.1-8B-FP8"):
        model = get_model(name)
        assert get_model(priced_name(model)) == model


@pytest.mark.parametrize(("arch", "blackwell"), [("sm_100", True), ("sm_100a", True), ("sm_103", True), ("sm_120a", True),
                                                 ("sm_121", True), ("sm_90a", False), ("sm_89", False), ("gfx942", False)])
def test_every_blackwell_arch_runs_nvfp4_as_w4a4_and_fp8_at_twice_the_peak(arch: str, blackwell: bool) -> None:
    from llumverify.sim.quantization import compute_speedup, runs_w4a4

    assert runs_w4a4("nvfp4", arch) is blackwell
    assert compute_speedup("nvfp4", arch) == (4.0 if blackwell else 1.0)
    assert compute_speedup("fp8", arch) == 2.0


@pytest.mark.parametrize(("arch", "fp8"), [("gfx942", True), ("gfx950", True), ("gfx90a", False), ("sm_86", False),
                                           ("sm_80", False)])
def test_fp8_weights_run_at_twice_the_peak_on_fp8_tensor_cores_only(arch: str, fp8: bool) -> None:
    """CDNA4 (gfx950: MI350X, MI355X) has FP8 matrix cores as CDNA3 does; CDNA2 and Ampere run fp8 weight-only."""
    from llumverify.sim.quantization import compute_speedup

    assert compute_speedup("fp8", arch) == (2.0 if fp8 else 1.0)
    assert compute_speedup("nvfp4", arch) == 1.0


def test_an_fp8_kv_cache_writes_a_chunks_k_and_v_in_one_byte() -> None:
    """A prefill chunk token of Llama-3.1-8B (32 query heads, 8 KV heads, head_dim 128) reads q and writes o in 16
    bits, 2 x 4096 x 2 = 16,384 bytes a layer, and writes K and V into the cache: 2 x 8 x 128 x 2 = 4,096 bytes
    in 16 bits, 2,048 in fp8. So 20,480 against 18,432, and the step cost's per-token prefill attention term
    falls by that ratio, 0.9. Guards the cache writes priced at 16 bits whatever the cache's format."""
    from llumverify.sim.roofline import attn_token_bytes

    kv8 = with_formats(LLAMA, "", "fp8")
    assert attn_token_bytes(LLAMA) == 20_480 and attn_token_bytes(kv8) == 18_432
    full, half = step_cost_first_principles(LLAMA, "H100"), step_cost_first_principles(kv8, "H100")
    assert half.prefill_attn_ps_per_token / full.prefill_attn_ps_per_token == pytest.approx(0.9, rel=1e-4)
