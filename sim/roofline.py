"""A first-principles StepCost: datasheet peaks (sim/catalog) × efficiencies fitted once on kernels.

Every op is timed from the bytes it moves and the FLOPs it does on one GPU of a tp-way group:

- a GEMM with P weights over T tokens: memory time m = P·dtype/(BW·gemm_bw), compute time
  c = 2·P·T/(FLOPS·gemm_flops), joined as the p-norm (m^p + c^p)^(1/p): the roofline's max,
  rounded at the knee where measured GEMMs are slower than either bound;
- a small op (norm, rotary, activation, embedding): small_op_ns + T·bytes/(BW·elementwise_bw);
- prefill attention of a chunk of c tokens over ctx cached ones: attn_chunk_ns + the chunk's
  q/o/k/v traffic + pairs·4·heads·head_dim/(FLOPS·attn_flops), pairs = c·(2ctx + c + 1)/2;
- decode attention: decode_ns + n·decode_seq_ns + Σcontext·2·kv_heads·head_dim·dtype/(BW·kv_bw);
- lm_head as a GEMM of vocab×hidden weights over S sequences; sampler: sampler_ns +
  S·vocab·4 bytes (fp32 logits)/(BW·sampler_bw);
- tensor parallelism divides weights, heads and FLOPs by tp and adds 2 all-reduces per layer
  plus 1 after the embedding, each of T·hidden·dtype bytes, as a ring:
  allreduce_ns + 2·(tp−1)/tp · bytes/(link_bw·link_eff); the logits are gathered once per step:
  allreduce_ns + (tp−1)/tp · S·vocab·dtype/(link_bw·link_eff).

The efficiencies (sim/efficiency.toml) are fitted by `fit_efficiency` on per-layer kernel
profiles and reused for every model and GPU; `profile_errors` measures a profile against them.
"""

from __future__ import annotations

import csv
import math
import tomllib
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import numpy as np

from llumverify.errors import UserError
from llumverify.sim.catalog import GPU, Model, get_gpu, get_model
from llumverify.sim.stepcost import StepCost

EFFICIENCY_TOML = Path(__file__).resolve().parent / "efficiency.toml"
# Non-KV, non-weight memory per GPU (activation peak of vLLM's profiling pass, CUDA graphs,
# workspaces, driver-reserved memory): one constant, the mean of the reserves implied by the two
# published capacities (kv_capacity_blocks docstring); their errors are in tests/test_roofline.py.
DEFAULT_ACTIVATION_RESERVE_BYTES = int(1.3 * 2**30)
GEMMS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
LOGIT_BYTES = 4  # the sampler works on fp32 logits
FIT_SUMMARY = ("dense_layer", "attention_prefill", "attention_decode", "lm_head", "sampler")


@dataclass(frozen=True)
class Efficiency:
    """Fractions of datasheet peaks (and fixed kernel times) that real kernels reach."""

    gemm_bw: float
    gemm_flops: float
    gemm_p: float
    small_op_ns: float
    elementwise_bw: float
    attn_flops: float
    attn_chunk_ns: float
    kv_bw: float
    decode_ns: float
    decode_seq_ns: float
    sampler_ns: float
    sampler_bw: float
    # priors, not fitted (kernel profiles of one GPU see neither engine CPU time nor links)
    fixed_ns: int = 0
    allreduce_ns: float = 10_000.0
    link_eff: float = 0.7
    fitted_on: tuple[str, ...] = ()
    fit_error: str = ""


def load_efficiency(path: str | Path = EFFICIENCY_TOML) -> Efficiency:
    """The efficiency factors from a TOML file (default: the packaged sim/efficiency.toml)."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"{path}: {str(exc).splitlines()[0]}") from None
    values = {**data.get("factors", {}), **data.get("priors", {}), **data.get("fit", {})}
    known = {f.name for f in fields(Efficiency)}
    unknown = set(values) - known - {"errors"}
    if unknown:
        raise UserError(f"{path}: unknown keys {sorted(unknown)} (known: {', '.join(sorted(known))})")
    values.pop("errors", None)
    values["fitted_on"] = tuple(values.get("fitted_on", ()))
    return Efficiency(**values)


def efficiency_toml(eff: Efficiency, errors: dict[str, dict[str, dict[str, float]]] | None = None) -> str:
    """sim/efficiency.toml text for `eff`, with an error table per fitted profile if given."""
    prior = ("fixed_ns", "allreduce_ns", "link_eff")
    lines = ["# Efficiency factors of the first-principles step cost (sim/roofline.py): fractions of the",
             "# datasheet peaks (sim/catalog/gpus.toml) that kernels reach, and fixed kernel times in ns.",
             "# Written by roofline.write_efficiency (re-run by `llumverify calibrate`); do not edit by hand.",
             "", "[factors]"]
    lines += [f"{f.name} = {getattr(eff, f.name)!r}" for f in fields(Efficiency)
              if f.name not in prior and f.name not in ("fitted_on", "fit_error")]
    lines += ["", "# Not fitted: per-layer kernel profiles of one GPU see neither the engine's CPU time per",
              "# step (fixed_ns) nor GPU links (all-reduce latency in ns, fraction of link peak).", "[priors]"]
    lines += [f"{name} = {getattr(eff, name)!r}" for name in prior]
    lines += ["", "[fit]", f"fitted_on = [{', '.join(_q(s) for s in eff.fitted_on)}]",
              f"fit_error = {_q(eff.fit_error)}"]
    for name, groups in (errors or {}).items():
        lines += ["", f"# absolute percentage error of each op group on {name} (in-sample if fitted on it)",
                  f"[fit.errors.{_q(name)}]"]
        lines += [f"{k} = {{ median_ape = {v['median_ape']}, p90_ape = {v['p90_ape']}, rows = {v['rows']} }}"
                  for k, v in groups.items()]
    return "\n".join(lines) + "\n"


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


# ---------------------------------------------------------------------------------- op times (ns)
def _div(n: int, tp: int) -> int:
    return max(1, n // tp)


def gemm_params(model: Model, tp: int = 1) -> dict[str, int]:
    """Weights of each projection of one layer on one GPU."""
    h, kv_dim = model.hidden, _div(model.kv_heads, tp) * model.head_dim
    q_dim = model.q_dim // tp
    return {"qkv_proj": h * (q_dim + 2 * kv_dim), "o_proj": q_dim * h,
            "gate_up_proj": h * 2 * (model.intermediate // tp), "down_proj": (model.intermediate // tp) * h}


def small_op_elements(model: Model, op: str, tp: int = 1) -> int:
    """Elements an elementwise op reads plus writes per token (fused add+RMSNorm reads and writes
    both the hidden state and the residual; SiLU·mul reads 2·I and writes I)."""
    q_dim, kv_dim = model.q_dim // tp, _div(model.kv_heads, tp) * model.head_dim
    return {"embedding": 2 * model.hidden, "layernorm": 4 * model.hidden, "final_layernorm": 4 * model.hidden,
            "rotary_emb": 2 * (q_dim + kv_dim), "qk_norm": 2 * (q_dim + kv_dim),
            "act_fn": 3 * (model.intermediate // tp)}[op]


def gemm_ns(params: float, tokens: float, dtype_bytes: int, gpu: GPU, eff: Efficiency) -> float:
    """A GEMM streaming `params` weights for `tokens` rows: the p-norm of memory and compute time."""
    mem = params * dtype_bytes / (gpu.mem_bw * eff.gemm_bw) * 1e9
    comp = 2.0 * params * tokens / (gpu.flops * eff.gemm_flops) * 1e9
    p = eff.gemm_p
    return (mem**p + comp**p) ** (1.0 / p)


def small_op_ns(model: Model, op: str, tokens: float, gpu: GPU, eff: Efficiency, tp: int = 1) -> float:
    """A small memory-bound op: a fixed kernel time plus its activation traffic."""
    traffic = tokens * small_op_elements(model, op, tp) * model.dtype_bytes
    return eff.small_op_ns + traffic / (gpu.mem_bw * eff.elementwise_bw) * 1e9


def layer_small_ops(model: Model) -> tuple[str, ...]:
    """The small ops one real decoder layer runs (two norms, rotary, activation, optional qk-norm)."""
    return ("layernorm", "layernorm", "rotary_emb", "act_fn") + (("qk_norm",) if model.qk_norm else ())


def layer_dense_ns(model: Model, tokens: float, gpu: GPU, eff: Efficiency, tp: int = 1) -> float:
    """All token-proportional ops of one decoder layer (GEMMs and small ops), attention excluded."""
    t = sum(gemm_ns(p, tokens, model.dtype_bytes, gpu, eff) for p in gemm_params(model, tp).values())
    return t + sum(small_op_ns(model, op, tokens, gpu, eff, tp) for op in layer_small_ops(model))


def attn_token_bytes(model: Model, tp: int = 1) -> int:
    """Per chunk token and layer: read q, write o, write k and v into the cache."""
    q_dim, kv_dim = model.q_dim // tp, _div(model.kv_heads, tp) * model.head_dim
    return 2 * (q_dim + kv_dim) * model.dtype_bytes


def prefill_attn_ns(model: Model, chunk: float, ctx: float, gpu: GPU, eff: Efficiency, tp: int = 1) -> float:
    """One layer's causal attention of a chunk over ctx cached tokens."""
    pairs = chunk * (2 * ctx + chunk + 1) / 2
    flops = pairs * 4 * (model.heads // tp) * model.head_dim
    return (eff.attn_chunk_ns + chunk * attn_token_bytes(model, tp) / (gpu.mem_bw * eff.elementwise_bw) * 1e9
            + flops / (gpu.flops * eff.attn_flops) * 1e9)


def decode_attn_ns(model: Model, n: float, context: float, gpu: GPU, eff: Efficiency, tp: int = 1) -> float:
    """One layer's attention of n decoding sequences holding `context` KV tokens in total."""
    kv_bytes = 2 * _div(model.kv_heads, tp) * model.head_dim * model.dtype_bytes
    return eff.decode_ns + n * eff.decode_seq_ns + context * kv_bytes / (gpu.mem_bw * eff.kv_bw) * 1e9


def lm_head_ns(model: Model, seqs: float, gpu: GPU, eff: Efficiency, tp: int = 1) -> float:
    return gemm_ns(model.vocab // tp * model.hidden, seqs, model.dtype_bytes, gpu, eff)


def sampler_ns(model: Model, seqs: float, gpu: GPU, eff: Efficiency) -> float:
    return eff.sampler_ns + seqs * model.vocab * LOGIT_BYTES / (gpu.mem_bw * eff.sampler_bw) * 1e9


def allreduce_ns(nbytes: float, tp: int, gpu: GPU, eff: Efficiency, ring_factor: float = 2.0) -> float:
    """A ring all-reduce (ring_factor 2) or gather (1) of nbytes over tp GPUs; 0 without TP."""
    if tp <= 1:
        return 0.0
    return eff.allreduce_ns + ring_factor * (tp - 1) / tp * nbytes / (gpu.link_bw * eff.link_eff) * 1e9


# ---------------------------------------------------------------------------------- StepCost
def _knots(limit: int) -> list[int]:
    """1, 2, 3, 4, 6, 8, 12, ... up to limit: two knots per octave keep chords within ~1 %."""
    xs, k = {1}, 1
    while k <= limit:
        xs.update((k, k + k // 2))
        k *= 2
    return sorted(x for x in xs if x <= limit)


def step_cost_first_principles(model: str | Model, gpu: str | GPU, tp: int = 1, eff: Efficiency | None = None,
                               fixed_ns: int | None = None, max_tokens: int = 16_384,
                               max_seqs: int = 1_024) -> StepCost:
    """The StepCost of `model` on `gpu` (tp GPUs) from FLOPs, bytes and the efficiency factors."""
    model, gpu = get_model(model), get_gpu(gpu)
    eff = eff or load_efficiency()
    if tp < 1 or model.heads % tp or model.intermediate % tp:
        raise UserError(f"tp={tp} must be >= 1 and divide {model.name}'s {model.heads} heads and intermediate size")
    hidden_bytes = model.hidden * model.dtype_bytes

    def linear(t: int) -> int:
        once = small_op_ns(model, "embedding", t, gpu, eff, tp) + small_op_ns(model, "final_layernorm", t, gpu, eff, tp)
        comm = (2 * model.layers + 1) * allreduce_ns(t * hidden_bytes, tp, gpu, eff)
        return round(model.layers * layer_dense_ns(model, t, gpu, eff, tp) + once + comm)

    def per_seq(s: int) -> int:
        gather = allreduce_ns(s * model.vocab * model.dtype_bytes, tp, gpu, eff, ring_factor=1.0)
        return round(lm_head_ns(model, s, gpu, eff, tp) + sampler_ns(model, s, gpu, eff) + gather)

    L = model.layers
    kv_bytes = 2 * _div(model.kv_heads, tp) * model.head_dim * model.dtype_bytes
    cost = StepCost(
        fixed_ns=eff.fixed_ns if fixed_ns is None else fixed_ns,
        linear=tuple((t, linear(t)) for t in _knots(max_tokens)),
        per_seq=tuple((s, per_seq(s)) for s in _knots(max_seqs)),
        prefill_attn_ns=round(L * eff.attn_chunk_ns),
        prefill_attn_ps_per_token=round(L * attn_token_bytes(model, tp) / (gpu.mem_bw * eff.elementwise_bw) * 1e12),
        prefill_attn_fs_per_pair=round(L * 4 * (model.heads // tp) * model.head_dim / (gpu.flops * eff.attn_flops) * 1e15),
        decode_attn_ns=round(L * eff.decode_ns),
        decode_attn_ns_per_seq=round(L * eff.decode_seq_ns),
        decode_attn_ns_per_token=round(L * kv_bytes / (gpu.mem_bw * eff.kv_bw) * 1e9),
        gpu=gpu.name, model=model.name,
        source=(f"first principles (sim/roofline.py): {gpu.name} datasheet peaks, {model.name} shapes, tp={tp}, "
                f"efficiencies fitted on {', '.join(eff.fitted_on) or 'nothing'} (sim/efficiency.toml)"),
    )
    cost.validate()
    return cost


def kv_capacity_blocks(model: str | Model, gpu: str | GPU, tp: int = 1, gpu_memory_utilization: float = 0.9,
                       block_size: int = 16,
                       activation_reserve_bytes: int = DEFAULT_ACTIVATION_RESERVE_BYTES) -> int:
    """KV blocks per GPU as vLLM sizes them: (memory × utilization − weights − reserve) / block bytes.

    Memory is what the driver reports (catalog visible_memory_bytes, else the datasheet size).
    The reserve stands for everything else vLLM keeps outside the KV cache; no formula of ours
    predicted it well (it depends on the vLLM version's profiling pass), so it is one constant:
    the mean of the reserves the two published capacities imply, 1.58 GiB (RTX 4090, Llama-3.1-8B,
    vLLM 0.19, 2,588 blocks) and 1.04 GiB (A10, LLaMA-7B, vLLM 0.2, 851 blocks).
    """
    model, gpu = get_model(model), get_gpu(gpu)
    weights = model.weight_bytes // tp
    free = gpu.usable_memory_bytes * gpu_memory_utilization - weights - activation_reserve_bytes
    blocks = int(free // (block_size * model.kv_bytes_per_token(tp)))
    if blocks <= 0:
        raise UserError(f"{model.name} does not fit on {tp} × {gpu.name} at gpu_memory_utilization "
                        f"{gpu_memory_utilization}: {free / 2**30:.2f} GiB left for the KV cache")
    return blocks


# ---------------------------------------------------------------------------------- profiles
@dataclass(frozen=True)
class Profile:
    """One llmservingsim per-layer kernel profile (tp1) of a model on a GPU, times in ns."""

    name: str
    model: Model
    gpu: GPU
    dense: dict[str, dict[int, float]]  # op -> tokens -> ns
    attention: tuple[tuple[int, int, int, int, float], ...]  # chunk, kv_prefill, n_decode, kv_decode, ns
    per_seq: dict[str, dict[int, float]]  # lm_head / sampler -> sequences -> ns


def _meta(path: Path) -> dict[str, str]:
    """Top-level `key: value` lines of meta.yaml (all we need; no YAML dependency)."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line and not line[0].isspace() and ":" in line:
            key, _, value = line.partition(":")
            out[key.strip()] = value.strip().strip("'\"")
    return out


def load_profile(folder: str | Path) -> Profile:
    """A profile folder <GPU>/<model>/ holding meta.yaml and tp1/{dense,attention,per_sequence}.csv."""
    folder = Path(folder)
    if not (folder / "tp1" / "dense.csv").is_file():
        raise UserError(f"{folder}: not a profile folder (no tp1/dense.csv)")
    meta = _meta(folder / "meta.yaml") if (folder / "meta.yaml").is_file() else {}
    model = get_model(meta.get("model", folder.name))
    gpu = get_gpu(meta.get("hardware", folder.parent.name))
    dense: dict[str, dict[int, float]] = defaultdict(dict)
    for r in csv.DictReader(open(folder / "tp1" / "dense.csv", encoding="utf-8")):
        dense[r["layer"]][int(r["tokens"])] = float(r["time_us"]) * 1e3
    per_seq: dict[str, dict[int, float]] = defaultdict(dict)
    for r in csv.DictReader(open(folder / "tp1" / "per_sequence.csv", encoding="utf-8")):
        per_seq[r["layer"]][int(r["sequences"])] = float(r["time_us"]) * 1e3
    attn = tuple((int(r["prefill_chunk"]), int(r["kv_prefill"]), int(r["n_decode"]), int(r["kv_decode"]),
                  float(r["time_us"]) * 1e3)
                 for r in csv.DictReader(open(folder / "tp1" / "attention.csv", encoding="utf-8")))
    return Profile(f"{folder.parent.name}/{folder.name}", model, gpu, dict(dense), attn, dict(per_seq))


def attention_rows(profile: Profile, kind: str) -> list[tuple[int, int, int, int, float]]:
    """Attention rows of one kind: 'prefill' (chunk >= 128 only), 'prefill_small' (chunk < 128),
    'decode' or 'mixed'. kv_decode is per sequence (the data show it: 256 × 16k tokens take 18 ms
    on an RTX 4090, the time to read 17 GB, not 67 MB)."""
    rows = profile.attention
    return {"prefill": [r for r in rows if r[0] >= 128 and r[2] == 0],
            "prefill_small": [r for r in rows if 0 < r[0] < 128 and r[2] == 0],
            "decode": [r for r in rows if r[0] == 0 and r[2] > 0],
            "mixed": [r for r in rows if r[0] > 0 and r[2] > 0]}[kind]


def predict_attention(p: Profile, row: Sequence[float], eff: Efficiency) -> float:
    chunk, kvp, n, kvd = row[:4]
    t = prefill_attn_ns(p.model, chunk, kvp, p.gpu, eff) if chunk else 0.0
    return t + (decode_attn_ns(p.model, n, n * kvd, p.gpu, eff) if n else 0.0)


def predict_profile_layer(p: Profile, tokens: int, eff: Efficiency) -> float:
    """One profiled layer's dense total as the profiler records it (its ops, one layernorm entry,
    plus embedding and final norm)."""
    ops = [op for op in p.dense if op not in GEMMS]
    gp = gemm_params(p.model)
    return (sum(gemm_ns(gp[op], tokens, p.model.dtype_bytes, p.gpu, eff) for op in GEMMS if op in p.dense)
            + sum(small_op_ns(p.model, op, tokens, p.gpu, eff) for op in ops))


# ---------------------------------------------------------------------------------- fitting
def _rel_lstsq(columns: Sequence[np.ndarray], y: np.ndarray) -> np.ndarray:
    """β minimizing Σ((Xβ − y)/y)², clipped at >= 0 by refitting without negative coefficients."""
    X = np.column_stack(columns) / y[:, None]
    active = list(range(X.shape[1]))
    while True:
        beta_a, *_ = np.linalg.lstsq(X[:, active], np.ones(len(y)), rcond=None)
        if (beta_a >= 0).all():
            beta = np.zeros(X.shape[1])
            beta[active] = beta_a
            return beta
        active.pop(int(np.argmin(beta_a)))


def _grid_min(loss: Callable[[np.ndarray], float], lo: Sequence[float], hi: Sequence[float],
              points: int = 21, rounds: int = 6) -> np.ndarray:
    """Deterministic coarse-to-fine grid search of a box (same input, same answer)."""
    lo, hi = np.array(lo, float), np.array(hi, float)
    best = (lo + hi) / 2
    for _ in range(rounds):
        axes = [np.linspace(a, b, points) for a, b in zip(lo, hi)]
        grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, len(lo))
        values = np.array([loss(x) for x in grid])
        best = grid[int(np.argmin(values))]
        span = (hi - lo) / (points - 1) * 2
        lo, hi = np.maximum(lo, best - span), np.minimum(hi, best + span)
    return best


def _ape_stats(pred: Iterable[float], meas: Iterable[float]) -> dict[str, float]:
    ape = np.abs(np.array(list(pred)) / np.array(list(meas)) - 1) * 100
    return {"median_ape": round(float(np.median(ape)), 1), "p90_ape": round(float(np.percentile(ape, 90)), 1),
            "rows": int(ape.size)}


def _fit_gemm(profiles: Sequence[Profile]) -> tuple[float, float, float]:
    """(gemm_bw, gemm_flops, gemm_p) by least squared log error over every GEMM and token count."""
    rows = [(gemm_params(p.model)[op] * p.model.dtype_bytes / p.gpu.mem_bw * 1e9,
             2.0 * gemm_params(p.model)[op] * t / p.gpu.flops * 1e9, ns)
            for p in profiles for op in GEMMS for t, ns in p.dense[op].items()]
    mem, comp, y = (np.array(c) for c in zip(*rows))
    logy = np.log(y)

    def loss(x: np.ndarray) -> float:
        bw, fl, pw = x
        return float(np.mean((np.log(((mem / bw) ** pw + (comp / fl) ** pw) ** (1 / pw)) - logy) ** 2))

    bw, fl, pw = _grid_min(loss, (0.3, 0.3, 1.0), (1.2, 1.2, 8.0))
    return round(float(bw), 4), round(float(fl), 4), round(float(pw), 3)


def fit_efficiency(profile_dirs: Sequence[str | Path], base: Efficiency | None = None) -> Efficiency:
    """Fit every kernel efficiency on the given profile folders; priors are kept from `base`.

    Each op group is fitted on its own rows, by relative least squares where the model is linear
    in its unknowns and by a deterministic grid search for the GEMM p-norm, so the same profiles
    always give the same factors.
    """
    profiles = [load_profile(d) for d in profile_dirs]
    if not profiles:
        raise UserError("fit_efficiency: no profile folders given")
    gemm_bw, gemm_flops, gemm_p = _fit_gemm(profiles)
    # small ops: a fixed kernel time plus traffic / bandwidth
    small = [(t * small_op_elements(p.model, op) * p.model.dtype_bytes / p.gpu.mem_bw * 1e9, ns)
             for p in profiles for op in p.dense if op not in GEMMS for t, ns in p.dense[op].items()]
    traffic, ys = (np.array(c) for c in zip(*small))
    op_ns, inv_elem = _rel_lstsq([np.ones(len(ys)), traffic], ys)
    # prefill attention, chunks of >= 128 tokens (attention_rows)
    pre = [(p, r) for p in profiles for r in attention_rows(p, "prefill")]
    tok_ns = np.array([r[0] * attn_token_bytes(p.model) * inv_elem / p.gpu.mem_bw * 1e9 for p, r in pre])
    pair_ns = np.array([r[0] * (2 * r[1] + r[0] + 1) / 2 * 4 * p.model.q_dim / p.gpu.flops * 1e9 for p, r in pre])
    chunk_ns, inv_attn = _rel_lstsq([np.ones(len(pre)), pair_ns], np.array([r[4] for _, r in pre]) - tok_ns)
    # decode attention
    dec = [(p, r) for p in profiles for r in attention_rows(p, "decode")]
    kv_ns = np.array([r[2] * r[3] * 2 * p.model.kv_dim * p.model.dtype_bytes / p.gpu.mem_bw * 1e9 for p, r in dec])
    dec_ns, seq_ns, inv_kv = _rel_lstsq([np.ones(len(dec)), np.array([float(r[2]) for _, r in dec]), kv_ns],
                                        np.array([r[4] for _, r in dec]))
    # sampler
    smp = [(s * p.model.vocab * LOGIT_BYTES / p.gpu.mem_bw * 1e9, ns) for p in profiles
           for s, ns in p.per_seq["sampler"].items()]
    logits_ns, ys = (np.array(c) for c in zip(*smp))
    samp_ns, inv_samp = _rel_lstsq([np.ones(len(ys)), logits_ns], ys)
    base = base or Efficiency(*([1.0] * 12))
    eff = replace(base, gemm_bw=gemm_bw, gemm_flops=gemm_flops, gemm_p=gemm_p,
                  small_op_ns=round(float(op_ns), 1), elementwise_bw=round(1 / float(inv_elem), 4),
                  attn_flops=round(1 / float(inv_attn), 4), attn_chunk_ns=round(float(chunk_ns), 1),
                  kv_bw=round(1 / float(inv_kv), 4), decode_ns=round(float(dec_ns), 1),
                  decode_seq_ns=round(float(seq_ns), 1), sampler_ns=round(float(samp_ns), 1),
                  sampler_bw=round(1 / float(inv_samp), 4), fitted_on=tuple(p.name for p in profiles))
    summary = "; ".join(f"{p.name}: " + ", ".join(f"{k} {v['median_ape']} %" for k, v in profile_errors(p, eff).items()
                                                  if k in FIT_SUMMARY) for p in profiles)
    return replace(eff, fit_error=f"in-sample median APE per op group: {summary}")


def write_efficiency(profile_dirs: Sequence[str | Path], path: str | Path = EFFICIENCY_TOML,
                     base: Efficiency | None = None) -> Efficiency:
    """Fit on `profile_dirs` and write the factors with their per-profile error table to `path`."""
    eff = fit_efficiency(profile_dirs, base)
    errors = {load_profile(d).name: profile_errors(d, eff) for d in profile_dirs}
    Path(path).write_text(efficiency_toml(eff, errors), encoding="utf-8")
    return eff


def profile_errors(p: Profile | str | Path, eff: Efficiency | None = None) -> dict[str, dict[str, float]]:
    """APE of the first-principles ops against one profile, per op group (median, p90, rows)."""
    p = p if isinstance(p, Profile) else load_profile(p)
    eff = eff or load_efficiency()
    gp = gemm_params(p.model)
    tokens = sorted(p.dense["qkv_proj"])
    out = {"dense_layer": _ape_stats([predict_profile_layer(p, t, eff) for t in tokens],
                                     [sum(p.dense[op][t] for op in p.dense) for t in tokens]),
           "gemm_ops": _ape_stats([gemm_ns(gp[op], t, p.model.dtype_bytes, p.gpu, eff) for op in GEMMS for t in tokens],
                                  [p.dense[op][t] for op in GEMMS for t in tokens]),
           "small_ops": _ape_stats([small_op_ns(p.model, op, t, p.gpu, eff) for op in p.dense if op not in GEMMS
                                    for t in tokens],
                                   [p.dense[op][t] for op in p.dense if op not in GEMMS for t in tokens])}
    for kind in ("prefill", "prefill_small", "decode", "mixed"):
        rows = attention_rows(p, kind)
        if rows:
            out[f"attention_{kind}"] = _ape_stats([predict_attention(p, r, eff) for r in rows], [r[4] for r in rows])
    for op, fn in (("lm_head", lm_head_ns), ("sampler", None)):
        pts = sorted(p.per_seq.get(op, {}).items())
        if pts:
            pred = [lm_head_ns(p.model, s, p.gpu, eff) if fn else sampler_ns(p.model, s, p.gpu, eff) for s, _ in pts]
            out[op] = _ape_stats(pred, [ns for _, ns in pts])
    return out
