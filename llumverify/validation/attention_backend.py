"""Which attention kernels a recorded vLLM run read its KV cache with: HardwareConfig.attention_backend.

What it decides is the price of an fp8 KV cache (sim/kv_dequant.py); a 16-bit cache is priced alike by every
backend, so such a run is "auto". vLLM's FLASHINFER backend runs FlashInfer's own FA2-template kernels, which
dequantise an fp8 cache as they read it, unless it uses the TRT-LLM kernels. As vLLM 0.15's flashinfer.py decides
(can_use_trtllm_attention), the one version read (CHECKED):
- use_trtllm_attention false: FlashInfer's own kernels, in any version that has the setting ("flashinfer-fa2");
- by default on the SM100 family (B200, B300, GB200): TRT-LLM kernels for decode ("auto"); checked for 0.15 only
  (earlier vLLMs ran FlashInfer's own on an fp8 cache there, later ones are not read): other versions refused;
- on other NVIDIA GPUs: FlashInfer's own, up to 0.15 (later ones decode with TRT-LLM's XQA kernels on more GPUs:
  refused, as is an unrecorded version);
- a run that records no backend: "auto" where vLLM's FlashAttention reads an fp8 cache (Hopper) or vLLM 0.15
  picks FLASHINFER with TRT-LLM kernels (the SM100 family); refused elsewhere, where FlashAttention reads none and
  vLLM chose another backend it did not record.
Also refused in one line: FLASHINFER on an AMD GPU, on a GPU file without an arch, or with
disable_flashinfer_q_quantization on SM100 (16-bit queries: not checked), and an attention_config that is not a
table. The GPU is the one the run is replayed on (--gpu or a GPU file where the run names none the catalog
knows). A profile or step-cost source prices no fp8 cache (engine_profile.check refuses it): "auto" there.
"""

from __future__ import annotations

from typing import NamedTuple

from llumverify.errors import UserError, brief
from llumverify.sim.quantization import TRTLLM_ARCHS, base_arch, reads_fp8
from llumverify.validation.run_engine import dig, recorded_version

CHECKED = (0, 15)  # the vLLM whose kernel choice this follows (flashinfer.py read at its release)


def _setting(meta: dict, key: str, where: str) -> tuple[object, str]:
    """attention_config.`key` as resolved, else as passed (value, where it was read); (None, "") if neither."""
    for section in ("resolved_config", "engine_kwargs"):
        config = dig(meta, (section, "attention_config"))
        if config is not None and not isinstance(config, dict):
            raise UserError(f"{where}: {section}.attention_config must be a table of vLLM attention settings, got "
                            f"{brief(config)}")
        if config is not None and config.get(key) is not None:
            return config[key], f"{section}.attention_config.{key}"
    return None, ""


def _flag(meta: dict, key: str, where: str) -> bool | None:
    value, place = _setting(meta, key, where)
    if value is not None and not isinstance(value, bool):
        raise UserError(f"{where}: {place} must be true or false, got {brief(value)}")
    return value


class AttentionRecord(NamedTuple):
    """What a run records of its attention kernels (None: not recorded)."""

    backend: str | None = None  # attention_config.backend or the attention_backend argument, upper case
    trtllm: bool | None = None  # attention_config.use_trtllm_attention
    bf16_queries: bool | None = None  # attention_config.disable_flashinfer_q_quantization
    version: tuple[int, int] | None = None  # vllm_version
    version_text: str = "unrecorded"


def attention_record(meta: dict, where: str) -> AttentionRecord:
    """The run's AttentionRecord; a value of the wrong kind is a one-line UserError naming its key."""
    backend, place = _setting(meta, "backend", where)
    if backend is None and dig(meta, ("engine_kwargs", "attention_backend")) is not None:
        backend, place = dig(meta, ("engine_kwargs", "attention_backend")), "engine_kwargs.attention_backend"
    if backend is not None and not isinstance(backend, str):
        raise UserError(f"{where}: {place} must be a vLLM attention backend's name, got {brief(backend)}")
    return AttentionRecord(None if backend is None else backend.upper(), _flag(meta, "use_trtllm_attention", where),
                           _flag(meta, "disable_flashinfer_q_quantization", where), recorded_version(meta),
                           f"{meta['vllm_version']:.20}" if isinstance(meta.get("vllm_version"), str) else "unrecorded")


def replayed_backend(record: AttentionRecord, arch: str, kv_format: str, where: str) -> str:
    """HardwareConfig.attention_backend for a run on a GPU of `arch` ("" where unknown) with a `kv_format`
    ("auto" or "fp8") cache."""
    if kv_format != "fp8":
        return "auto"
    family = base_arch(arch)
    if record.backend is None:
        if not reads_fp8(arch):
            raise UserError(f"{where}: an fp8 KV cache on {arch} with no attention backend recorded: vLLM's "
                            "FlashAttention reads no fp8 cache there, so it chose another (likely FLASHINFER, whose "
                            "kernels dequantise it): record attention_config.backend")
        if family in TRTLLM_ARCHS and record.version != CHECKED:
            raise _unchecked(record, arch, where)
        return "auto"
    if record.backend != "FLASHINFER":
        return "auto"
    if arch.startswith("gfx"):
        raise UserError(f"{where}: FLASHINFER on {arch}: vLLM's FlashInfer backend runs on NVIDIA GPUs only")
    if record.trtllm is False:
        return "flashinfer-fa2"
    if not arch:
        raise UserError(f"{where}: FLASHINFER with an fp8 KV cache on a GPU of unknown arch: which kernels ran depends "
                        "on it: give the GPU file an arch")
    if family in TRTLLM_ARCHS:
        if record.version != CHECKED:
            raise _unchecked(record, arch, where)
        if record.bf16_queries:
            raise UserError(f"{where}: FLASHINFER with an fp8 KV cache and disable_flashinfer_q_quantization on "
                            f"{arch}: which kernels vLLM then runs is not modelled")
        return "auto"
    if record.version is None or record.version > CHECKED:
        raise _unchecked(record, arch, where)
    return "flashinfer-fa2"


def _unchecked(record: AttentionRecord, arch: str, where: str) -> UserError:
    return UserError(f"{where}: FLASHINFER with an fp8 KV cache on {arch} under vLLM {record.version_text}: which "
                     f"kernels it runs is checked for 0.{CHECKED[1]} (on {', '.join(TRTLLM_ARCHS)}) or up to it "
                     "(elsewhere) only: later ones decode with TRT-LLM's XQA kernels on more GPUs, earlier ones ran "
                     "FlashInfer's own on an fp8 cache on B200 too")
