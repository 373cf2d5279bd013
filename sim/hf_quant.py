"""A checkpoint's quantisation, read where vLLM reads it: config.json's quantization_config, else
the side file its method keeps (ModelOpt's hf_quant_config.json, AutoAWQ's quant_config.json,
AutoGPTQ's quantize_config.json).

The result is the catalog Model's weight format ("fp8", "int4", "nvfp4": sim/quantization.py), whether
attention stays 16-bit (an attention projection in the ignore list: every layer's is then priced
16-bit), and an fp8 KV cache where the checkpoint carries KV scales (ModelOpt kv_cache_quant_algo FP8,
compressed-tensors kv_cache_scheme), which vLLM's `--kv-cache-dtype auto` then uses (ModelOpt's since
vLLM PR #29980, December 2025; older vLLM keeps the model's 16 bits: `--kv-cache-dtype bf16` says so). A scheme the
simulator cannot price as it runs (8-bit integers, weight-only FP4, MXFP4, int4 weights with 8-bit
activations, mixed schemes) is a one-line UserError naming it, not a silently wrong price.
"""

from __future__ import annotations

from pathlib import Path

from llumverify.errors import UserError
from llumverify.files.paths import read_json_object

# side files beside a config.json and the method each implies: ModelOpt's, which vLLM reads by itself, then
# AutoAWQ's and AutoGPTQ's (which vLLM reads when --quantization names the method; AWQ also reads quantize_config.json)
SIDE_FILES = (("hf_quant_config.json", "modelopt"), ("quant_config.json", "awq"), ("quantize_config.json", "gptq"))
MODELLED = ("4-bit awq or gptq, fp8, fbgemm_fp8, modelopt FP8 or NVFP4, compressed-tensors with fp8 weights, "
            "int4 weights (W4A16) or NVFP4 (fp4 weights and activations, groups of 16)")


def read_scheme(cfg: dict, folder: Path, where: str) -> dict:
    """The Model fields a checkpoint's quantisation sets ({} for a 16-bit checkpoint)."""
    q, source = cfg.get("quantization_config", cfg.get("compression_config")), where  # the latter: older compressed-tensors
    if q is None and Path(where).name == "config.json":
        for name, method in SIDE_FILES:
            side = folder / name
            if side.is_file():
                data = read_json_object(side, f"quantisation file {name}")
                q = ({"quant_method": "modelopt", **data["quantization"]}
                     if method == "modelopt" and isinstance(data.get("quantization"), dict)
                     else {"quant_method": method, **data})
                source = str(side)
                break
        else:
            return {}
    if q is None:
        return {}
    if not isinstance(q, dict):
        raise UserError(f"model config {source}: quantization_config of type {type(q).__name__} is not modelled")
    if "quant_method" not in q and isinstance(q.get("quantization"), dict):  # ModelOpt's file layout inside config.json
        q = {"quant_method": "modelopt", **q["quantization"]}
    method = str(q.get("quant_method", "")).lower()
    kv_only = method == "modelopt" and q.get("quant_algo") is None and q.get("kv_cache_quant_algo") is not None
    fmt, kv = ("bf16" if kv_only else _format(q, method)), "bf16"
    if not fmt:
        raise UserError(f"model config {source}: quantization {_brief(q)} is not modelled (modelled: {MODELLED})")
    if method == "modelopt" and str(q.get("kv_cache_quant_algo", "")).upper() == "FP8":
        kv = "fp8"
    if method == "compressed-tensors" and isinstance(q.get("kv_cache_scheme"), dict):
        kv = "fp8"
    ignored = next((q[k] for k in ("ignore", "exclude_modules", "modules_to_not_convert") if q.get(k)), [])
    attention_16 = isinstance(ignored, list) and any(isinstance(m, str) and "self_attn" in m for m in ignored)
    return dict(weight_format=fmt, fp8_attention=not attention_16, kv_format=kv)


def _format(q: dict, method: str) -> str:
    """The weight format a quantisation config stores, "" when it is not modelled."""
    if method in ("awq", "gptq"):
        return "int4" if q.get("bits", q.get("w_bit")) == 4 else ""
    if method in ("fp8", "fbgemm_fp8"):
        return "fp8"
    if method == "modelopt":
        return {"FP8": "fp8", "NVFP4": "nvfp4"}.get(str(q.get("quant_algo", "")).upper(), "")
    if method == "compressed-tensors":
        groups = q.get("config_groups")
        schemes = {_group_format(g) for g in (groups.values() if isinstance(groups, dict) else ())}
        return schemes.pop() if len(schemes) == 1 else ""
    return ""


def _group_format(group: object) -> str:
    """One compressed-tensors config group's format: fp8 weights; int4 weights, 16-bit activations;
    fp4 weights and activations in groups of 16 (NVFP4). "" for anything else."""
    if not isinstance(group, dict) or not isinstance(group.get("weights"), dict):
        return ""
    w, a = group["weights"], group.get("input_activations")
    kind = (w.get("type"), w.get("num_bits"))
    if kind == ("float", 8):
        return "fp8"
    if kind == ("int", 4) and a is None:
        return "int4"
    if kind == ("float", 4) and w.get("group_size") == 16 and isinstance(a, dict) and a.get("num_bits") == 4:
        return "nvfp4"
    return ""


def _brief(q: dict) -> str:
    """A quantisation config in a few words: its method, bits and algorithm."""
    return ", ".join(f"{k} {q[k]!r}" for k in ("quant_method", "bits", "quant_algo") if k in q) or "without quant_method"
