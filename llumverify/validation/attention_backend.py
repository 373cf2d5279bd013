"""Which attention kernels a recorded vLLM run read its KV cache with: HardwareConfig.attention_backend.

What it decides is the price of an fp8 KV cache (sim/kv_dequant.py); a 16-bit cache is priced alike by every
backend, so such a run is "auto". vLLM's FLASHINFER backend runs FlashInfer's own FA2-template kernels, which
dequantise an fp8 cache as they read it, unless it uses the TRT-LLM kernels. As vLLM 0.15's flashinfer.py
decides (can_use_trtllm_attention): not where attention_config.use_trtllm_attention is false, in any version
that has the setting; by default, on SM100-family GPUs (B200, B300, GB200) only, where it then decodes with them.
So an fp8 run is replayed as "flashinfer-fa2" where it records the FLASHINFER backend (attention_config.backend,
or the attention_backend argument) and use_trtllm_attention false, or the backend on another NVIDIA GPU under a
vLLM up to 0.15 (later ones decode with TRT-LLM's XQA kernels on more GPUs: not checked, refused in one line);
anything else is "auto". The GPU is the one the run is replayed on (--gpu or a GPU file where the run names none
the catalog knows). Refused too: FLASHINFER on SM100 with disable_flashinfer_q_quantization, which keeps
the queries in 16 bits and changes which kernels run (not checked), and an attention_config that is not a
table. vLLM records the backend it chose by default only in its log: a run that left the choice to vLLM
replays as "auto" (B200's default FLASHINFER decodes with TRT-LLM kernels).
"""

from __future__ import annotations

from typing import NamedTuple

from llumverify.errors import UserError, brief
from llumverify.sim.quantization import base_arch
from llumverify.validation.run_engine import dig, recorded_version

TRTLLM_ARCHS = ("sm_100", "sm_103")  # vLLM's supports_trtllm_attention: the SM100 family
LAST_CHECKED = (0, 15)  # the vLLM whose kernel choice off the SM100 family this follows


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
                           f"{meta.get('vllm_version', 'unrecorded')!s:.20}")


def replayed_backend(record: AttentionRecord, arch: str, kv_format: str, where: str) -> str:
    """HardwareConfig.attention_backend for a run on a GPU of `arch` ("" where unknown) with a `kv_format`
    ("auto" or "fp8") cache."""
    if kv_format != "fp8" or record.backend != "FLASHINFER":
        return "auto"
    if record.trtllm is False:
        return "flashinfer-fa2"
    if arch == "" or arch.startswith("gfx"):
        return "auto"
    if base_arch(arch) in TRTLLM_ARCHS:
        if record.bf16_queries:
            raise UserError(f"{where}: FLASHINFER with an fp8 KV cache and disable_flashinfer_q_quantization on "
                            f"{arch}: which kernels vLLM then runs is not modelled")
        return "auto"
    if record.version is None or record.version > LAST_CHECKED:
        raise UserError(f"{where}: FLASHINFER with an fp8 KV cache on {arch} under vLLM {record.version_text}: which "
                        f"kernels it runs is checked up to 0.{LAST_CHECKED[1]} only (later ones decode with TRT-LLM's "
                        "XQA kernels on more GPUs)")
    return "flashinfer-fa2"
