"""Attention over an fp8 KV cache by FlashInfer's FA2 kernels (sim/kv_dequant.py): the slowdown is the median of its
published decode rows; under it an fp8 cache's reads cost a 16-bit cache's times the slowdown (not half of them), and
a prefill chunk's query-key compute too; "auto" keeps the bytes; the backend is a setting of simulate and validate, read
from a run's record, refused with measured kernels."""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path

import pytest

from llumverify.cli import main
from llumverify.errors import UserError
from llumverify.settings.config import HardwareConfig
from llumverify.sim.engine_profile import step_cost
from llumverify.sim.kv_dequant import BACKENDS, DEQUANT_RATIO, PUBLISHED, slowdown
from llumverify.validation.attention_backend import attention_record, replayed_backend

FIRST = HardwareConfig(gpu="B200", model="Llama-3-70B", tp=1)


def _backend(meta: dict, arch: str, kv: str, where: str = "m") -> str:
    return replayed_backend(attention_record(meta, where), arch, kv, where)


def test_the_slowdown_is_the_median_of_the_published_decode_rows() -> None:
    decode = [fp8 / bf16 for _, _, phase, *_, bf16, fp8 in PUBLISHED if phase == "decode"]
    assert len(decode) >= 2 and DEQUANT_RATIO == statistics.median(decode)
    assert all(fp8 > bf16 for *_, bf16, fp8 in PUBLISHED)  # every row: slower on the fp8 cache, not faster
    assert slowdown("flashinfer-fa2", "fp8") == DEQUANT_RATIO
    assert slowdown("flashinfer-fa2", "bf16") == slowdown("auto", "fp8") == 1.0
    with pytest.raises(UserError, match="attention backend 'fa3' is not modelled"):
        slowdown("fa3", "fp8")
    assert HardwareConfig.__dataclass_fields__["attention_backend"].metadata["setting"].choices == BACKENDS


def test_an_fp8_cache_read_by_the_fa2_kernels_costs_a_16_bit_caches_time_times_the_slowdown() -> None:
    bf16, fp8 = (step_cost(dataclasses.replace(FIRST, kv_cache_dtype=kv)) for kv in ("bf16", "fp8"))
    fa2 = step_cost(dataclasses.replace(FIRST, kv_cache_dtype="fp8", attention_backend="flashinfer-fa2"))
    assert fp8.decode_attn_ns_per_token == pytest.approx(bf16.decode_attn_ns_per_token / 2, abs=1)
    assert fa2.decode_attn_ns_per_token == pytest.approx(bf16.decode_attn_ns_per_token * DEQUANT_RATIO, abs=1)
    assert fa2.prefill_attn_ps_per_ctx_token == pytest.approx(bf16.prefill_attn_ps_per_ctx_token * DEQUANT_RATIO, abs=1)
    assert fa2.prefill_attn_fs_per_pair == pytest.approx(fp8.prefill_attn_fs_per_pair * DEQUANT_RATIO, abs=1)
    assert (fa2.linear, fa2.per_seq, fa2.fixed_ns) == (fp8.linear, fp8.per_seq, fp8.fixed_ns)  # GEMMs untouched
    assert "FlashInfer's FA2 kernels dequantising" in fa2.source and "dequantising" not in fp8.source
    assert step_cost(dataclasses.replace(FIRST, kv_cache_dtype="bf16", attention_backend="flashinfer-fa2")) == bf16


def test_measured_kernels_are_not_repriced(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(step_cost(HardwareConfig(gpu="H100", model="Llama-3.1-8B")).to_toml())
    with pytest.raises(UserError, match="--attention-backend flashinfer-fa2 prices how first principles"):
        step_cost(HardwareConfig(cost_file=str(path), attention_backend="flashinfer-fa2"))


@pytest.mark.parametrize(("config", "arch", "kv", "want"), [
    ({"backend": "FLASHINFER", "use_trtllm_attention": False}, "sm_100", "fp8", "flashinfer-fa2"),
    ({"backend": "FLASHINFER", "use_trtllm_attention": False}, "sm_100", "auto", "auto"),  # 16 bits: priced alike
    ({"backend": "flashinfer"}, "sm_90", "fp8", "flashinfer-fa2"),  # vLLM 0.15: no TRT-LLM kernels off the B200 family
    ({"backend": "FLASHINFER"}, "sm_100a", "fp8", "auto"),  # vLLM decodes with TRT-LLM kernels there
    ({"backend": "FLASHINFER"}, "", "fp8", "auto"),  # a GPU the catalog lacks: not assumed
    ({"backend": "FLASH_ATTN", "use_trtllm_attention": False}, "sm_90", "fp8", "auto"),
    ({"use_trtllm_attention": False}, "sm_100", "fp8", "auto"),  # the backend vLLM chose is in its log only
])
def test_a_runs_record_decides_its_backend(config: dict, arch: str, kv: str, want: str) -> None:
    for section in ("resolved_config", "engine_kwargs"):
        assert _backend({section: {"attention_config": config}, "vllm_version": "0.15.0"}, arch, kv, "m") == want


def test_a_bad_or_unchecked_record_is_one_line() -> None:
    """Bad values name their key; FLASHINFER on an fp8 cache where the kernels were not checked is refused: vLLM
    after 0.15 (or unrecorded) off the B200 family, and 16-bit queries on it."""
    flashinfer = {"engine_kwargs": {"attention_backend": "FLASHINFER"}}
    assert _backend({**flashinfer, "vllm_version": "0.15.1"}, "sm_120", "fp8", "m") == "flashinfer-fa2"
    for version in ({"vllm_version": "0.19.0"}, {}):
        with pytest.raises(UserError, match=r"^m: FLASHINFER with an fp8 KV cache on sm_90 under vLLM .*checked up to 0.15"):
            _backend({**flashinfer, **version}, "sm_90", "fp8", "m")
    assert _backend({**flashinfer, "vllm_version": "0.19.0"}, "sm_90", "auto", "m") == "auto"
    queries = {"resolved_config": {"attention_config": {"backend": "FLASHINFER", "disable_flashinfer_q_quantization": True}}}
    with pytest.raises(UserError, match=r"^m: FLASHINFER with an fp8 KV cache and disable_flashinfer_q_quantization on sm_100"):
        _backend(queries, "sm_100", "fp8", "m")
    with pytest.raises(UserError, match=r"^m.json: engine_kwargs.attention_config.backend must be a vLLM attention"):
        _backend({"engine_kwargs": {"attention_config": {"backend": 3}}}, "sm_90", "fp8", "m.json")
    with pytest.raises(UserError, match=r"^m.json: resolved_config.attention_config.use_trtllm_attention must be true"):
        _backend({"resolved_config": {"attention_config": {"use_trtllm_attention": "no"}}}, "sm_90", "fp8", "m.json")
    for config in ("FLASHINFER", []):
        with pytest.raises(UserError, match=r"^m: engine_kwargs.attention_config must be a table of vLLM attention"):
            _backend({"engine_kwargs": {"attention_config": config}}, "sm_90", "auto", "m")


def _run(args: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code


def test_validate_prices_a_multiturn_csv_on_the_backend_given(tmp_path: Path, capsys) -> None:
    """Sixteen long one-turn requests at once on an fp8 cache: decode attention is a large part of each step, and the
    FA2 kernels' reads make TPOT longer than "auto" does."""
    path = tmp_path / "m.csv"
    path.write_text("start_time_ms,ttft_ms,latency_ms,input_num_tokens,output_num_tokens,conversation_id\n"
                    + "".join(f"0,30,2000,30000,100,c{i}\n" for i in range(16)))
    tpot = {}
    for backend in BACKENDS:
        out = tmp_path / backend
        assert _run(["validate", str(path), "--gpu", "H100", "--model", "Llama-3.1-8B", "--kv-cache-dtype", "fp8",
                     "--attention-backend", backend, "--out", str(out)]) == 0
        tpot[backend] = json.loads((out / "validation.json").read_text())["tpot"]["sim_mean_s"]
    assert tpot["flashinfer-fa2"] > 1.2 * tpot["auto"]
    capsys.readouterr()
    assert _run(["validate", str(path), "--gpu", "H100", "--model", "Llama-3.1-8B", "--attention-backend", "fa3"]) == 2
    assert "'fa3' is not one of 'auto', 'flashinfer-fa2'" in capsys.readouterr().err
    assert _run(["simulate", "--attention-backend", "flashinfer-fa2", "--requests", "10"]) == 2
    assert "--attention-backend: applies to step costs, and none are given" in capsys.readouterr().err


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_step_costs_attention_is_the_per_layer_attention(backend: str) -> None:
    """The StepCost fields and roofline's per-layer attention (which predict_attention uses) price the same
    chunk, decode and mixed-step attention, slowdown and all (B200 pays the mixed surcharge)."""
    from llumverify.sim.catalog import get_gpu
    from llumverify.sim.roofline import decode_attn_ns, load_efficiency, prefill_attn_ns

    hw = dataclasses.replace(FIRST, kv_cache_dtype="fp8", attention_backend=backend)
    cost, eff, gpu = step_cost(hw), load_efficiency(), get_gpu("B200")
    from llumverify.sim.engine_profile import served_model

    model, layers = served_model(hw.model, hw), 80
    for chunk, ctx in ((512, 0), (512, 30_000), (8192, 4096)):
        assert cost.chunk_ns(chunk, ctx) == pytest.approx(layers * prefill_attn_ns(model, chunk, ctx, gpu, eff), rel=1e-3)
    for n, ctx in ((16, 56_000), (256, 700_000)):
        fixed, per_token = cost.decode_terms(n)
        priced = cost.decode_attn_ns + n * cost.decode_attn_ns_per_seq + per_token * ctx
        assert priced == pytest.approx(layers * decode_attn_ns(model, n, ctx, gpu, eff), rel=1e-2)  # whole-ns per token
        mixed = n * cost.mixed_decode_attn_ns_per_seq + ctx * cost.mixed_decode_attn_ns_per_token
        assert priced + mixed == pytest.approx(layers * decode_attn_ns(model, n, ctx, gpu, eff, mixed=True), rel=1e-2)


def test_calibrate_refuses_the_fa2_backend(tmp_path: Path, capsys) -> None:
    """calibrate fits 16-bit caches only (a step-cost file does not say which cache it was fitted on)."""
    path = tmp_path / "m.csv"
    path.write_text("start_time_ms,ttft_ms,latency_ms,input_num_tokens,output_num_tokens,conversation_id\n"
                    + "".join(f"{1000 * i},30,230,200,20,c{i}\n" for i in range(12)))
    assert _run(["calibrate", "--run", str(path), "--gpu", "H100", "--model", "Llama-3.1-8B", "--attention-backend",
                 "flashinfer-fa2", "--out", str(tmp_path / "c.toml")]) == 2
    assert "--attention-backend flashinfer-fa2: a step-cost file holds 16-bit KV kernels" in capsys.readouterr().err
    assert not (tmp_path / "c.toml").exists()
    assert _run(["simulate", "--gpu", "MI300X", "--model", "Llama-3.1-8B", "--kv-cache-dtype", "fp8",
                 "--attention-backend", "flashinfer-fa2", "--requests", "10"]) == 2
    assert "FlashInfer's kernels run on NVIDIA GPUs, not on MI300X" in capsys.readouterr().err
