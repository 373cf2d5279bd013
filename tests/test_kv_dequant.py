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
REPO = Path(__file__).resolve().parents[1]


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
    ({"backend": "FLASH_ATTN", "use_trtllm_attention": False}, "sm_90", "fp8", "auto"),
    ({"use_trtllm_attention": False}, "sm_100", "fp8", "auto"),  # no backend recorded: vLLM 0.15's default there
    ({}, "sm_90", "fp8", "auto"),  # FlashAttention 3 reads fp8
])
def test_a_runs_record_decides_its_backend(config: dict, arch: str, kv: str, want: str) -> None:
    for section in ("resolved_config", "engine_kwargs"):
        assert _backend({section: {"attention_config": config}, "vllm_version": "0.15.0"}, arch, kv, "m") == want


def test_a_bad_or_unchecked_record_is_one_line() -> None:
    """Bad values name their key; FLASHINFER on an fp8 cache where the kernels were not checked is refused: vLLM
    after 0.15 (or unrecorded) off the B200 family, and 16-bit queries on it."""
    flashinfer = {"engine_kwargs": {"attention_backend": "FLASHINFER"}}
    assert _backend({**flashinfer, "vllm_version": "0.15.1"}, "sm_120", "fp8", "m") == "flashinfer-fa2"
    for version in ({"vllm_version": "0.19.0"}, {}, {"vllm_version": 0.15}):
        with pytest.raises(UserError, match=r"^m: FLASHINFER with an fp8 KV cache on sm_90 under vLLM (0.19.0|unrecorded)"
                                            r": which kernels it runs is checked for 0.15"):
            _backend({**flashinfer, **version}, "sm_90", "fp8", "m")
    for version in ("0.10.1", "0.19.0"):  # B200: earlier vLLMs ran FlashInfer's own kernels on fp8, later are unread
        with pytest.raises(UserError, match=f"^m: FLASHINFER with an fp8 KV cache on sm_100 under vLLM {version}"):
            _backend({**flashinfer, "vllm_version": version}, "sm_100", "fp8", "m")
        with pytest.raises(UserError, match=f"on sm_100 under vLLM {version}"):
            _backend({"vllm_version": version}, "sm_100", "fp8", "m")  # no backend recorded: vLLM's default
    with pytest.raises(UserError, match="^m: FLASHINFER with an fp8 KV cache on a GPU of unknown arch"):
        _backend({**flashinfer, "vllm_version": "0.15.0"}, "", "fp8", "m")
    with pytest.raises(UserError, match="^m: FLASHINFER on gfx942: vLLM's FlashInfer backend runs on NVIDIA GPUs only"):
        _backend({"engine_kwargs": {"attention_config": {"backend": "FLASHINFER", "use_trtllm_attention": False}}},
                 "gfx942", "fp8", "m")
    with pytest.raises(UserError, match="^m: an fp8 KV cache on sm_80 with no attention backend recorded"):
        _backend({"vllm_version": "0.15.0"}, "sm_80", "fp8", "m")
    assert _backend({"vllm_version": "0.15.0"}, "sm_80", "auto", "m") == "auto"
    assert _backend({**flashinfer, "vllm_version": "0.19.0"}, "sm_90", "auto", "m") == "auto"
    queries = {"vllm_version": "0.15.1",
               "resolved_config": {"attention_config": {"backend": "FLASHINFER", "disable_flashinfer_q_quantization": True}}}
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


def _kv_scale_checkpoint(tmp_path: Path) -> Path:
    """A Llama-3.1-8B config.json whose ModelOpt side file says only its KV cache is fp8 (a checkpoint with KV scales)."""
    import json

    cfg = json.loads((REPO / "tests" / "hf_configs" / "llama-3.1-8b-instruct" / "config.json").read_text())
    folder = tmp_path / "kv8"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**cfg, "_name_or_path": "acme/kv8"}))
    (folder / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": None,
                                                                              "kv_cache_quant_algo": "FP8"}}))
    return folder


def _run_folder(tmp_path: Path, name: str, meta: dict) -> Path:
    import json
    import shutil

    folder = tmp_path / name
    folder.mkdir()
    shutil.copy(REPO / "tests" / "bad_inputs" / "runs" / "cudagraph_mode_bad" / "requests.jsonl", folder)
    (folder / "meta.json").write_text(json.dumps({"kv_cache": {"num_gpu_blocks": 2588, "block_size": 16,
                                                               "enable_prefix_caching": True}, **meta}))
    return folder


def test_a_runs_checkpoint_or_the_gpu_given_decides_the_cache_and_backend(tmp_path: Path) -> None:
    """A run whose checkpoint carries KV scales has an fp8 cache though kv_cache_dtype is auto (also under --model
    naming the catalog's 16-bit entry, and with measured kernels, which then refuse it); a run naming no GPU is
    decided on --gpu."""
    from llumverify.validation.run_hardware import run_hardware, source_for_run

    kv8 = _kv_scale_checkpoint(tmp_path)
    flashinfer = {"vllm_version": "0.15.0", "model": str(kv8),
                  "engine_kwargs": {"attention_config": {"backend": "FLASHINFER"}}}
    for given in ("", "Llama-3.1-8B"):
        hw = source_for_run(HardwareConfig(gpu="H100", model=given), run_hardware(flashinfer, "m"), False, "m")
        assert (hw.kv_cache_dtype, hw.attention_backend) == ("fp8", "flashinfer-fa2")
    cost = tmp_path / "c.toml"
    cost.write_text(step_cost(HardwareConfig(gpu="H100", model="Llama-3.1-8B")).to_toml())
    measured = source_for_run(HardwareConfig(cost_file=str(cost)), run_hardware(flashinfer, "m"), False, "m")
    assert measured.attention_backend == "auto"
    with pytest.raises(UserError, match="an fp8 KV cache .* are priced from first principles"):
        step_cost(measured)


def test_fa2_slows_a_mixed_steps_padded_decode_rows_too() -> None:
    """The padded-tile surcharge of decodes in a prefill kernel (B200 pays it) takes the slowdown on its pair term."""
    from llumverify.sim.catalog import get_gpu
    from llumverify.sim.engine_profile import served_model
    from llumverify.sim.roofline import flops, load_efficiency, mixed_extra_ns, pair_flops

    eff, gpu = load_efficiency(), get_gpu("B200")
    fp8, fa2 = (served_model("Llama-3-70B", dataclasses.replace(FIRST, kv_cache_dtype="fp8", attention_backend=b))
                for b in BACKENDS)
    pair = 50_000 * eff.mixed_rows * pair_flops(fp8) / (flops(gpu, eff) * eff.attn_flops) * 1e9
    assert mixed_extra_ns(fa2, 16, 50_000, gpu, eff) - mixed_extra_ns(fp8, 16, 50_000, gpu, eff) == pytest.approx(
        pair * (DEQUANT_RATIO - 1))


def test_calibrate_refuses_a_run_folder_with_an_fp8_cache(tmp_path: Path, capsys) -> None:
    run = _run_folder(tmp_path, "run", {"model": "meta-llama/Llama-3.1-8B", "engine_kwargs": {"kv_cache_dtype": "fp8"}})
    out = tmp_path / "c.toml"
    assert _run(["calibrate", "--run", str(run), "--gpu", "H100", "--out", str(out)]) == 2
    assert "served an fp8 KV cache: a step-cost file holds 16-bit KV kernels" in capsys.readouterr().err
    assert not out.exists()


def test_an_fp8_cache_a_checkpoint_implies_is_refused_under_auto_where_no_kernel_reads_fp8(tmp_path: Path,
                                                                                            capsys) -> None:
    """`simulate --gpu A100 --model <checkpoint with KV scales>`: the cache is fp8 though --kv-cache-dtype is auto, and
    on A100 vLLM has no kernel that reads fp8 (it dequantises through FLASHINFER): refused like an explicit fp8 cache,
    naming the backend to give; with that backend it runs."""
    config = str(_kv_scale_checkpoint(tmp_path) / "config.json")
    base = ["simulate", "--gpu", "A100", "--model", config, "--requests", "20", "--instances", "1"]
    assert _run(base) == 2
    assert "(--attention-backend) auto" in capsys.readouterr().err.splitlines()[0]
    assert _run([*base, "--attention-backend", "flashinfer-fa2"]) == 0
