"""A model the catalog does not hold, read from its Hugging Face config.json.

Serving engineers run checkpoints no catalog lists; `--model path/to/config.json` (or a folder
holding one) prices them from the same shapes the catalog entries are written from. Only the
architectures the roofline models are read: decoder-only, RMSNorm, RoPE, SwiGLU, GQA (Llama,
Mistral, Qwen2/2.5/3) and their SwiGLU mixtures of experts (Mixtral, Qwen2-MoE, Qwen3-MoE).
A quantised checkpoint's format comes from its quantization_config or the side file beside it
(sim/hf_quant.py). Anything else (other activations, MLA, interleaved dense/MoE layers, nested
multimodal configs, other quantisation schemes) is a one-line UserError naming the key, not a
silently wrong price. The
reader reproduces every catalog entry whose config.json tests/hf_configs holds (test_hf_config).
"""

from __future__ import annotations

from pathlib import Path

from llumverify.errors import UserError
from llumverify.files.inputs import not_a_loop
from llumverify.files.paths import read_json_object, user_path
from llumverify.sim.checkpoint_names import split_format
from llumverify.sim.hf_quant import read_scheme

DENSE = {"llama", "mistral", "qwen2", "qwen3"}
MOE = {"mixtral", "qwen2_moe", "qwen3_moe"}
QKV_BIAS = {"qwen2", "qwen2_moe"}  # their attention has q, k, v biases whatever the config says
QK_NORM = {"qwen3", "qwen3_moe"}
# model_type -> the `architectures` classes vLLM builds it as (vLLM picks the class by `architectures`, not by
# model_type; its registry runs Mistral's checkpoints as Llama's, so those two may name either)
ARCHITECTURES = {"llama": {"LlamaForCausalLM", "LLaMAForCausalLM", "MistralForCausalLM"},
                 "mistral": {"MistralForCausalLM", "LlamaForCausalLM"}, "qwen2": {"Qwen2ForCausalLM"},
                 "qwen3": {"Qwen3ForCausalLM"}, "mixtral": {"MixtralForCausalLM"},
                 "qwen2_moe": {"Qwen2MoeForCausalLM"}, "qwen3_moe": {"Qwen3MoeForCausalLM"}}
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 2}  # vLLM's dtype auto serves a float32 checkpoint in 16 bits


def config_path(name: str) -> Path | None:
    """The config.json `name` points at, or None when `name` is a catalog name: a name ending in
    .json is that file (it must exist); a name with a "/" (or "~") is a folder when it holds a
    config.json (vLLM runs name local checkpoints so: /models/Llama-3.1-8B), else a catalog name
    or HF id as before. A bare name never is a path: a folder in the working directory that
    happens to share a catalog name does not capture it (./name reads it)."""
    name = name.strip()
    if name.lower().endswith(".json"):
        return user_path(name)
    if "/" not in name and not name.startswith("~") and name not in (".", ".."):
        return None
    path = not_a_loop(user_path(name)) / "config.json"
    return path if path.is_file() else None


def read_config(path: Path) -> dict:
    """The catalog Model fields (sim/catalog.py, all but `params`, which the catalog derives from them)
    a config.json describes; UserError naming the file and the key otherwise."""
    cfg = read_json_object(path, "model config.json")
    return _fields(cfg, str(path), _name(cfg, path))


def _name(cfg: dict, path: Path) -> str:
    """The checkpoint's name: `_name_or_path` when the file records one; in a Hugging Face cache
    (models--ORG--NAME/snapshots/REV/config.json) ORG/NAME; else its folder's name."""
    named = cfg.get("_name_or_path")
    if isinstance(named, str) and not named.strip().isprintable():  # errors and outputs name the model on one line
        raise UserError(f"model config {path}: _name_or_path must be a name on one line, got {named!r}")
    if isinstance(named, str) and named.strip() and not named.startswith(("/", ".")):
        return named.strip()
    if path.name != "config.json":
        return path.stem
    folder = path.parent
    if folder.parent.name == "snapshots" and folder.parent.parent.name.startswith("models--"):
        return folder.parent.parent.name[len("models--"):].replace("--", "/")
    return folder.name or path.stem


def _fields(cfg: dict, where: str, name: str) -> dict:
    kind = cfg.get("model_type")
    if not isinstance(kind, str) or kind not in DENSE | MOE:
        raise UserError(f"model config {where}: model_type {kind!r} is not modelled (read: "
                        f"{', '.join(sorted(DENSE | MOE))}: SwiGLU, RoPE, GQA decoders and their mixtures of experts)")
    archs = cfg.get("architectures")
    if archs is not None and (not isinstance(archs, list) or not archs
                              or any(a not in ARCHITECTURES[kind] for a in archs)):
        raise UserError(f"model config {where}: architectures {archs!r} contradict model_type {kind!r} (vLLM builds "
                        f"the model from architectures; a {kind} model is {' or '.join(sorted(ARCHITECTURES[kind]))})")
    if "text_config" in cfg:
        raise UserError(f"model config {where}: text_config is not read (a multimodal checkpoint: give its text "
                        "model's config)")
    act = cfg.get("hidden_act", "silu")
    if act != "silu":
        raise UserError(f"model config {where}: hidden_act {act!r}: only SwiGLU (silu) MLPs are modelled")
    if _bool(cfg, "mlp_bias", where):
        raise UserError(f"model config {where}: mlp_bias true is not modelled")
    layers, hidden, heads = (_int(cfg, k, where) for k in ("num_hidden_layers", "hidden_size", "num_attention_heads"))
    kv_heads = _int(cfg, "num_key_value_heads", where, default=heads)
    head_dim = _int(cfg, "head_dim", where) if cfg.get("head_dim") is not None else hidden // heads
    if heads % kv_heads or (cfg.get("head_dim") is None and hidden % heads):
        raise UserError(f"model config {where}: num_attention_heads {heads} must divide hidden_size {hidden} (no head_dim) "
                        f"and be a multiple of num_key_value_heads {kv_heads}")
    if head_dim % 8:  # FlashAttention's and FlashInfer's rule: head_dim 1 is no model vLLM serves
        derived = "" if cfg.get("head_dim") is not None else " (hidden_size / num_attention_heads)"
        raise UserError(f"model config {where}: head_dim {head_dim}{derived}: vLLM's attention kernels take a multiple of 8")
    dtype = cfg.get("torch_dtype", cfg.get("dtype", "bfloat16"))
    if not isinstance(dtype, str) or dtype not in DTYPE_BYTES:
        raise UserError(f"model config {where}: torch_dtype {dtype!r} (read: {', '.join(DTYPE_BYTES)})")
    fields = dict(layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
                  intermediate=_int(cfg, "intermediate_size", where), vocab=_int(cfg, "vocab_size", where),
                  dtype_bytes=DTYPE_BYTES[dtype], tie_embeddings=_bool(cfg, "tie_word_embeddings", where),
                  qkv_bias=kind in QKV_BIAS or _bool(cfg, "attention_bias", where), qk_norm=kind in QK_NORM)
    if kind in MOE:
        fields.update(_experts(cfg, kind, where))
        if fields["experts_per_token"] > fields["experts"]:
            raise UserError(f"model config {where}: num_experts_per_tok {fields['experts_per_token']} is more than the "
                            f"{fields['experts']} experts")
    fields.update(read_scheme(cfg, Path(where).parent, where))
    named = split_format(name)[1]
    if named and fields.get("weight_format", "bf16") != named:
        raise UserError(f"model config {where}: the checkpoint is named {name} ({named} weights), but neither its "
                        "config.json nor a quantisation file beside it says so: give the checkpoint's own files")
    notes = _unmodelled(cfg, kind, where)
    return dict(fields, name=name, hf_id=name, config_file=where,
                source=f"HF config.json {where} (model_type {kind})" + (f"; not modelled: {notes}" if notes else ""))


def _experts(cfg: dict, kind: str, where: str) -> dict:
    """The expert fields of an MoE config; every layer must be an MoE layer."""
    if kind == "mixtral":
        return dict(experts=_int(cfg, "num_local_experts", where), experts_per_token=_int(cfg, "num_experts_per_tok", where),
                    moe_intermediate=_int(cfg, "intermediate_size", where))
    if _int(cfg, "decoder_sparse_step", where, default=1) != 1 or cfg.get("mlp_only_layers"):
        raise UserError(f"model config {where}: decoder_sparse_step > 1 or mlp_only_layers: dense and MoE layers "
                        "interleaved are not modelled (every layer is one or the other)")
    shared = _int(cfg, "shared_expert_intermediate_size", where, default=0) if kind == "qwen2_moe" else 0
    return dict(experts=_int(cfg, "num_experts", where), experts_per_token=_int(cfg, "num_experts_per_tok", where),
                moe_intermediate=_int(cfg, "moe_intermediate_size", where), shared_intermediate=shared)


def _unmodelled(cfg: dict, kind: str, where: str) -> str:
    """What the config sets that the roofline does not price (said in the model's source). The keys
    read here are checked as the shapes are ("abc" or -5 would otherwise be passed over unseen);
    max_position_embeddings is read only for this: the simulator sets no context limit, so a request
    longer than it is not refused."""
    window = _int(cfg, "sliding_window", where, default=0) if cfg.get("sliding_window") is not None else 0
    longest = _int(cfg, "max_position_embeddings", where) if cfg.get("max_position_embeddings") is not None else None
    default_use = kind not in QKV_BIAS | QK_NORM
    used = default_use if cfg.get("use_sliding_window") is None else _bool(cfg, "use_sliding_window", where)
    if window > 0 and used and (longest is None or window < longest):
        return f"sliding_window {window} (attention priced over the whole context)"
    return ""


def _int(cfg: dict, key: str, where: str, default: int | None = None) -> int:
    value = cfg.get(key, default)
    if value is None:
        raise UserError(f"model config {where}: {key} is missing")
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if default == 0 else 1) or value > 1 << 24:
        raise UserError(f"model config {where}: {key} must be a positive integer, got {value!r}")
    return value


def _bool(cfg: dict, key: str, where: str) -> bool:
    value = cfg.get(key, False)
    if not isinstance(value, bool):
        raise UserError(f"model config {where}: {key} must be true or false, got {value!r}")
    return value
