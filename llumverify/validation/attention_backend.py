"""Which attention kernels a recorded vLLM run read its KV cache with: HardwareConfig.attention_backend.

What it decides is the price of an fp8 KV cache (sim/kv_dequant.py). vLLM's FLASHINFER backend runs
FlashInfer's own FA2-template kernels, which dequantise an fp8 cache as they read it, unless it uses
the TRT-LLM kernels: on SM100-family GPUs (B200, B300, GB200), where it prefers them for decode, unless
attention_config.use_trtllm_attention is false (vLLM 0.15 flashinfer.py, can_use_trtllm_attention).
So a run is replayed as "flashinfer-fa2" where it records the FLASHINFER backend (attention_config.backend,
or the attention_backend argument) and either use_trtllm_attention false or a GPU outside that family;
anything else is "auto". vLLM records the backend it chose by default only in its log: a run that
left the choice to vLLM replays as "auto" (B200's default FLASHINFER decodes with TRT-LLM kernels).
"""

from __future__ import annotations

from llumverify.errors import UserError, brief
from llumverify.sim.quantization import base_arch
from llumverify.validation.run_engine import dig

TRTLLM_ARCHS = ("sm_100", "sm_103")  # vLLM's supports_trtllm_attention: the SM100 family


def _setting(meta: dict, key: str) -> tuple[object, str]:
    """attention_config.`key` as resolved, else as passed (value, where it was read); (None, "") if neither."""
    for section in ("resolved_config", "engine_kwargs"):
        config = dig(meta, (section, "attention_config"))
        if isinstance(config, dict) and config.get(key) is not None:
            return config[key], f"{section}.attention_config.{key}"
    return None, ""


def replayed_backend(meta: dict, arch: str, where: str) -> str:
    """HardwareConfig.attention_backend for a run on a GPU of `arch` ("" where the catalog lacks it)."""
    backend, place = _setting(meta, "backend")
    if backend is None and dig(meta, ("engine_kwargs", "attention_backend")) is not None:
        backend, place = dig(meta, ("engine_kwargs", "attention_backend")), "engine_kwargs.attention_backend"
    if backend is not None and not isinstance(backend, str):
        raise UserError(f"{where}: {place} must be a vLLM attention backend's name, got {brief(backend)}")
    trtllm, place = _setting(meta, "use_trtllm_attention")
    if trtllm is not None and not isinstance(trtllm, bool):
        raise UserError(f"{where}: {place} must be true or false, got {brief(trtllm)}")
    if backend is None or backend.upper() != "FLASHINFER":
        return "auto"
    native = trtllm is False or (arch != "" and base_arch(arch) not in TRTLLM_ARCHS)
    return "flashinfer-fa2" if native else "auto"
