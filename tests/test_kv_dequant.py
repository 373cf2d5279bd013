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
from llumverify.validation.attention_backend import replayed_backend

FIRST = HardwareConfig(gpu="B200", model="Llama-3-70B", tp=1)


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


@pytest.mark.parametrize(("config", "arch", "want"), [
    ({"backend": "FLASHINFER", "use_trtllm_attention": False}, "sm_100", "flashinfer-fa2"),
    ({"backend": "flashinfer"}, "sm_90", "flashinfer-fa2"),  # no TRT-LLM kernels off the B200 family
    ({"backend": "FLASHINFER"}, "sm_100a", "auto"),  # vLLM decodes with TRT-LLM kernels there
    ({"backend": "FLASHINFER"}, "", "auto"),  # a GPU the catalog lacks: not assumed
    ({"backend": "FLASH_ATTN", "use_trtllm_attention": False}, "sm_90", "auto"),
    ({"use_trtllm_attention": False}, "sm_100", "auto"),  # the backend vLLM chose is in its log only
])
def test_a_runs_record_decides_its_backend(config: dict, arch: str, want: str) -> None:
    assert replayed_backend({"resolved_config": {"attention_config": config}}, arch, "m.json") == want
    assert replayed_backend({"engine_kwargs": {"attention_config": config}}, arch, "m.json") == want


def test_a_bad_record_is_one_line() -> None:
    assert replayed_backend({"engine_kwargs": {"attention_backend": "FLASHINFER"}}, "sm_120", "m") == "flashinfer-fa2"
    with pytest.raises(UserError, match=r"^m.json: engine_kwargs.attention_config.backend must be a vLLM attention"):
        replayed_backend({"engine_kwargs": {"attention_config": {"backend": 3}}}, "sm_90", "m.json")
    with pytest.raises(UserError, match=r"^m.json: resolved_config.attention_config.use_trtllm_attention must be true"):
        replayed_backend({"resolved_config": {"attention_config": {"use_trtllm_attention": "no"}}}, "sm_90", "m.json")


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
