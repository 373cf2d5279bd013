"""Model and GPU catalogs: the architecture and datasheet numbers a first-principles step cost needs.

The numbers live in sim/catalog/models.toml and sim/catalog/gpus.toml (package data), each entry
with a `source` naming where it comes from, so a report can cite them. Lookups forgive case,
punctuation and an "org/" or "NVIDIA" prefix, because names arrive from HF ids, nvidia-smi and
CSV columns spelled differently; an unknown name is a UserError that lists the known ones.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, fields, replace
from functools import cache
from pathlib import Path
from typing import TypeVar

from llumverify.errors import UserError
from llumverify.sim.checkpoint_names import split_format

CATALOG_DIR = Path(__file__).resolve().parent / "catalog"
# Bytes a stored linear-layer weight takes in each quantised format, scales included (sim/quantization.py says why).
FORMAT_BYTES = {"fp8": 1.0, "int4": 0.5 + 2 / 128, "nvfp4": 0.5 + 1 / 16}


@dataclass(frozen=True)
class Model:
    """A decoder-only transformer of the Llama/Mistral/Qwen family (RMSNorm, RoPE, SwiGLU MLP, GQA);
    with `experts` > 0 every layer's MLP is a mixture of that many SwiGLU experts of width
    `moe_intermediate`, `experts_per_token` of them routed per token by a hidden x experts gate,
    plus, with `shared_intermediate` > 0, one shared SwiGLU expert of that width every token passes
    through (Llama 4, Qwen2-MoE)."""

    name: str
    hf_id: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    dtype_bytes: int
    tie_embeddings: bool
    params: int
    source: str
    qkv_bias: bool = False
    qk_norm: bool = False
    experts: int = 0
    experts_per_token: int = 0
    moe_intermediate: int = 0
    shared_intermediate: int = 0
    aliases: tuple[str, ...] = ()
    # an fp8 checkpoint whose attention projections stay 16-bit (RedHatAI's Llama 4 FP8-dynamic
    # lists every self_attn projection in its quantization_config.ignore): false
    fp8_attention: bool = True
    # how it is served (sim/quantization.py): "fp8", "int4" or "nvfp4" linear-layer weights (the
    # embedding, lm_head, router and norms stay 16-bit, as vLLM's methods leave them) and an fp8 KV
    # cache; catalog keys only for a checkpoint published quantised whose entry says how (fp8_attention above)
    weight_format: str = "bf16"
    kv_format: str = "bf16"
    # the attention kernels' time as a multiple of theirs on a 16-bit cache of the same tokens, where they
    # dequantise an fp8 KV cache as they read it (sim/kv_dequant.py); 1: kernels that read the cache's own bytes
    attention_slowdown: float = 1.0
    config_file: str = ""  # the config.json it was read from (sim/hf_config.py); "" for a catalog entry

    @property
    def moe(self) -> bool:
        return self.experts > 0

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def layer_params(self) -> int:
        """Parameters of one decoder layer (projections, biases, norms)."""
        h = self.hidden
        attn = self.attention_params() // self.layers
        if self.qkv_bias:
            attn += self.q_dim + 2 * self.kv_dim
        mlp = (self.experts * 3 * h * self.moe_intermediate + h * self.experts) if self.moe else 3 * h * self.intermediate
        mlp += 3 * h * self.shared_intermediate
        norms = 2 * h + (2 * self.head_dim if self.qk_norm else 0)
        return attn + mlp + norms

    def architecture_params(self) -> int:
        """Total parameters implied by the shapes (checked against `params` by the tests)."""
        embed = self.vocab * self.hidden
        lm_head = 0 if self.tie_embeddings else embed
        return self.layers * self.layer_params() + embed + lm_head + self.hidden

    @property
    def linear_bytes(self) -> float:
        """Bytes of one weight of a linear layer (attention and MLP projections, experts), scales included."""
        return self.op_bytes(attention=False)

    @property
    def kv_dtype_bytes(self) -> int:
        return 1 if self.kv_format == "fp8" else self.dtype_bytes

    def attention_params(self) -> int:
        """Weights of every layer's q, k, v and o projections."""
        return self.layers * (self.hidden * (self.q_dim + 2 * self.kv_dim) + self.q_dim * self.hidden)

    def linear_params(self) -> int:
        """Weights of every layer's projections and experts (what a weight format quantizes)."""
        h = self.hidden
        mlp = self.experts * 3 * h * self.moe_intermediate if self.moe else 3 * h * self.intermediate
        return self.attention_params() + self.layers * (mlp + 3 * h * self.shared_intermediate)

    def op_format(self, attention: bool) -> str:
        """The weight format of an attention projection (attention) or of an MLP or expert one."""
        return "bf16" if attention and not self.fp8_attention else self.weight_format

    def op_bytes(self, attention: bool) -> float:
        """Bytes of one weight of an attention projection (attention) or of an MLP or expert one."""
        return FORMAT_BYTES.get(self.op_format(attention), float(self.dtype_bytes))

    @property
    def weight_bytes(self) -> float:
        linear = self.linear_params()
        attn = self.attention_params()
        return ((linear - attn) * self.linear_bytes + attn * self.op_bytes(True)
                + (self.params - linear) * self.dtype_bytes)

    def expert_params(self) -> int:
        """Weights of every layer's experts (0 for a dense model)."""
        return self.layers * self.experts * 3 * self.hidden * self.moe_intermediate

    def weight_bytes_per_gpu(self, tp: int = 1, expert_share: float | None = None) -> float:
        """Weight bytes on one GPU of a tp-way group: everything split over the tp GPUs, except the
        experts of an engine whose MoE layers span several data-parallel ranks, of which this GPU
        holds `expert_share` of the bytes (sim/roofline.py MoEGroup.expert_bytes_share)."""
        if expert_share is None:
            return self.weight_bytes / tp
        experts = self.expert_params() * self.linear_bytes
        return (self.weight_bytes - experts) / tp + experts * expert_share

    def kv_bytes_per_token(self, tp: int = 1) -> int:
        """K and V of one token over all layers on one GPU of a tp-way group (KV heads are split,
        or replicated when there are fewer KV heads than GPUs)."""
        kv_heads = max(1, self.kv_heads // tp)
        return self.layers * 2 * kv_heads * self.head_dim * self.kv_dtype_bytes


@dataclass(frozen=True)
class GPU:
    """Peak numbers of one GPU from its datasheet."""

    name: str
    flops: float  # dense BF16/FP16 tensor FLOP/s
    mem_bw: float  # bytes/s
    memory_bytes: int
    memory_type: str  # HBM2, HBM3e, GDDR6X, GDDR7, ...: the efficiency transfer rule's memory family
    interconnect: str  # name of its [[interconnect]]: the link of a tensor-parallel group
    source: str
    # its tensor cores' generation (CUDA compute capability sm_XY, AMD gfx target): the compute
    # transfer rule's family (Efficiency.flops_scale)
    arch: str = ""
    visible_memory_bytes: int = 0  # 0: unknown, use memory_bytes
    # ECC bits stored in the GDDR memory itself (data-center GDDR6 boards, ECC on by default: 1/16 of the memory
    # is carved out, so nvidia-smi shows 15/16 of it); every read also fetches them, so kernels stream slower
    # (Efficiency.inline_ecc_kernels). False: no ECC, side-band ECC (HBM) or unknown
    inline_ecc: bool = False
    # streaming multiprocessors (AMD: compute units) and their maximum boost clock: the throughput a
    # latency-bound kernel (the sampler's full-vocabulary sort, sim/sampling.py) scales with; 0: unknown
    sms: int = 0
    clock_ghz: float = 0.0
    aliases: tuple[str, ...] = ()
    config_file: str = ""  # the TOML file it was read from (get_gpu); "" for a catalog entry

    @property
    def usable_memory_bytes(self) -> int:
        return self.visible_memory_bytes or self.memory_bytes

    @property
    def hbm(self) -> bool:
        return self.memory_type.upper().startswith("HBM")

    @property
    def vendor(self) -> str:
        """"amd" for a gfx target (ROCm), else "nvidia": whose engine builds and measurements apply."""
        return "amd" if self.arch.startswith("gfx") else "nvidia"

    @property
    def link(self) -> Interconnect:
        return get_interconnect(self.interconnect)


@dataclass(frozen=True)
class Interconnect:
    """The alpha-beta model of a GPU-to-GPU link: a collective costs alpha_ns plus its bytes on the
    wire at bw x bw_eff (sim/collectives.py); an all-reduce vLLM's custom kernel takes (below
    custom_max_bytes, on links with one) costs custom_alpha_ns instead of alpha_ns."""

    name: str
    alpha_ns: float  # fixed time of one NCCL (RCCL) collective
    bw: float  # peak bytes/s per direction per GPU
    bw_eff: float  # share of bw a collective reaches
    source: str
    custom_alpha_ns: float = 0.0  # fixed time of one vLLM custom all-reduce (peer-to-peer over the link)
    custom_max_bytes: int = 0  # all-reduces below this size take the custom kernel; 0: never


def normalize(name: str, kind: str) -> str:
    """Lookup key: lower case, alphanumerics only, without an "org/" prefix (models) or a leading
    "nvidia" (GPUs)."""
    key = name.strip().lower()
    if kind == "model":
        key = key.rstrip("/").rsplit("/", 1)[-1]
    key = re.sub(r"[^a-z0-9]", "", key)
    if kind == "gpu" and key.startswith("nvidia") and len(key) > 6:
        key = key[6:]
    return key


Entry = TypeVar("Entry", Model, GPU, Interconnect)


def _load(kind: str, cls: type[Entry], file: str = "") -> dict[str, Entry]:
    path = CATALOG_DIR / (file or f"{kind}s.toml")
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    known = {f.name for f in fields(cls)}
    index: dict[str, Entry] = {}
    for entry in data[kind]:
        unknown = set(entry) - known
        if unknown:
            raise ValueError(f"{path}: {entry.get('name')}: unknown keys {sorted(unknown)}")
        if "aliases" in known:
            entry = dict(entry, aliases=tuple(entry.get("aliases", ())))
        item = cls(**entry)
        names = [item.name, *getattr(item, "aliases", ())] + ([item.hf_id] if kind == "model" else [])
        for n in names:
            key = normalize(n, kind)
            if index.get(key, item) is not item:
                raise ValueError(f"{path}: name {n!r} is ambiguous ({index[key].name} and {item.name})")
            index[key] = item
    return index


@cache
def _models() -> dict[str, Model]:
    return _load("model", Model)


@cache
def _gpus() -> dict[str, GPU]:
    index = _load("gpu", GPU)
    for gpu in index.values():
        if normalize(gpu.interconnect, "interconnect") not in _interconnects():
            raise ValueError(f"{CATALOG_DIR / 'gpus.toml'}: {gpu.name}: unknown interconnect {gpu.interconnect!r}")
    return index


@cache
def _interconnects() -> dict[str, Interconnect]:
    return _load("interconnect", Interconnect, "gpus.toml")


def _get(index: dict[str, Entry], name: str, kind: str, label: str) -> Entry:
    """The entry of `index` called `name` (a name or alias, normalized as `kind`); UserError naming
    the known ones otherwise."""
    item = index.get(normalize(name, kind))
    if item is None:
        raise UserError(f"unknown {label} {name!r} (known: {', '.join(i.name for i in _unique(index))})")
    return item


def get_interconnect(name: str) -> Interconnect:
    """The catalog interconnect called `name` (NVLink3/4/5, PCIe4/5, ...)."""
    return _get(_interconnects(), name, "interconnect", "interconnect")


def _unique(index: dict[str, Entry]) -> list[Entry]:
    return list({item.name: item for item in index.values()}.values())


def models() -> list[Model]:
    """Every catalog model, in file order."""
    return _unique(_models())


def gpus() -> list[GPU]:
    """Every catalog GPU, in file order."""
    return _unique(_gpus())


def get_model(name: str | Model) -> Model:
    """The catalog model called `name` (its name, HF id or an alias); a checkpoint name ending in
    a weight format ("...-Instruct-FP8", "-FP8-dynamic") is the base model in that format
    (sim/quantization.py); the path of a config.json (or of a folder holding one) is the model it
    describes (sim/hf_config.py). A name is looked up in the catalog only, never among configs read
    before: what a name means does not depend on what else the process has read."""
    if isinstance(name, Model):
        return name
    from llumverify.sim.hf_config import config_path

    path = config_path(name)
    if path is not None:  # absolute, its links kept: a Hugging Face cache's snapshot folder names the model
        return _from_config(str(path.absolute()))
    base, fmt = split_format(name)
    if fmt and normalize(name, "model") not in _models() and normalize(base, "model") in _models():
        return replace(_models()[normalize(base, "model")], weight_format=fmt)
    try:
        return _get(_models(), name, "model", "model")
    except UserError as e:
        if name.strip().startswith(("/", ".", "~")):  # a path, not an HF id: say what is missing there
            raise UserError(f"model {name!r}: no config.json there, and no catalog model of that name") from None
        raise UserError(f"{e}; a model not listed: give the path of its HF config.json as the model") from None


@cache
def _from_config(path: str) -> Model:
    from llumverify.sim.hf_config import read_config

    model = Model(**read_config(Path(path)), params=0)
    return replace(model, params=model.architecture_params())


SHAPES = ("layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab", "dtype_bytes",
          "tie_embeddings", "qkv_bias", "qk_norm", "experts", "experts_per_token", "moe_intermediate",
          "shared_intermediate")


def same_shapes(a: Model, b: Model) -> bool:
    """Whether two entries describe the same architecture (what the roofline prices), whatever their names."""
    return all(getattr(a, f) == getattr(b, f) for f in SHAPES)


def same_model(a: str | Model, b: str | Model) -> bool:
    """Whether two names are one model: the same catalog entry, or, where one was read from a
    config.json, the same shapes (its name need not be the catalog's)."""
    a, b = get_model(a), get_model(b)
    return a.name == b.name or (bool(a.config_file or b.config_file) and same_shapes(a, b))


def gpu_file_path(name: str) -> Path | None:
    """The GPU file `name` names (a path ending in .toml), or None for a catalog name or alias."""
    if not name.strip().lower().endswith(".toml"):
        return None
    from llumverify.files.paths import user_path

    return user_path(name)


def get_gpu(name: str | GPU) -> GPU:
    """The catalog GPU called `name` (its name or an alias); a path ending in .toml is the GPU it
    describes with a catalog entry's keys (sim/gpu_file.py)."""
    if isinstance(name, GPU):
        return name
    path = gpu_file_path(name)
    if path is not None:
        from llumverify.files.paths import resolved

        return _gpu_from_file(str(resolved(path)))
    try:
        return _get(_gpus(), name, "gpu", "GPU")
    except UserError as e:
        raise UserError(f"{e}; a GPU not listed: give the path of a TOML file with a catalog entry's keys "
                        "(sim/catalog/gpus.toml)") from None


@cache
def _gpu_from_file(path: str) -> GPU:
    from llumverify.sim.gpu_file import read_gpu_file

    gpu = GPU(**read_gpu_file(Path(path)))
    where = f"GPU file {path}"
    families = sorted({g.memory_type for g in gpus()})
    if gpu.memory_type not in families:
        raise UserError(f"{where}: memory_type {gpu.memory_type!r} is not one the efficiency rule knows ({', '.join(families)})")
    try:
        link = get_interconnect(gpu.interconnect).name
    except UserError as e:
        raise UserError(f"{where}: {e}") from None
    owner = "nvidia" if link.startswith("NVLink") else "amd" if link.startswith("InfinityFabric") else gpu.vendor
    if owner != gpu.vendor:  # its collectives would be priced on another vendor's link
        raise UserError(f"{where}: interconnect {link} links {owner.upper()} GPUs, but arch "
                        f"{gpu.arch or '(none given)'} makes this an {gpu.vendor.upper()} GPU"
                        + (" (an AMD GPU needs arch = \"gfx...\")" if owner == "amd" and not gpu.arch else ""))
    if normalize(gpu.name, "gpu") in _gpus():
        raise UserError(f"{where}: name {gpu.name!r} is the catalog's {get_gpu(gpu.name).name}: give it another name")
    return gpu
