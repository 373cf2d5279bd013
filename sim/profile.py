"""A StepCost from a per-layer vLLM kernel profile (LLMServingSim's profiler format).

Layout: `<dir>/meta.yaml` and `<dir>/tp1/{dense,attention,per_sequence}.csv`, measured in eager
mode on a model cut to ONE decoder layer, so a whole-model step is

    embedding + L x (per-layer dense ops + attention) + final_layernorm + lm_head + sampler

with L the real model's layer count. The engine's own CPU time per step is invisible to such a
profile: it is `fixed_ns`, which the caller fits against real runs.

How the CSVs were produced matters (LLMServingSim profiler + vLLM `layerwise_profile`):
- vLLM's summary tree merges modules with the same repr at the same place and counts their
  invocations; the profiler divides by that count. A Llama/Qwen3 decoder layer's
  input_layernorm and post_attention_layernorm are both `RMSNorm(hidden_size=H)`, so the
  `layernorm` row is the mean of ONE call and a layer makes TWO (upstream's llama.yaml lists
  layernorm in pre_attn and in post_attn). Qwen3's q_norm and k_norm likewise share one repr:
  `qk_norm` is one call's mean and a layer makes two. Both are counted twice here.
- attention.csv's `kv_decode` is the KV length of EACH decode (the profiler gives every decode
  of a shot the same length; the data scale with n_decode x kv_decode), so a row's decode
  context is n_decode x kv_decode.
- An MoE model's profile has no MLP rows in dense.csv: its sparse block (router and experts, one
  unit) is `moe.csv`, `tokens,activated_experts,time_us`, one layer's time for a step of T tokens
  routed to A distinct experts. A step of T tokens is charged the block at A = E·(1 − (1 − k/E)^T)
  (uniform routing, as first principles assume: sim/roofline.py), interpolated linearly in A at
  the profiled token counts around T (expert weights are read per activated expert), then
  linearly in T.

Attention is fitted in three parts, each a non-negative least squares on relative error:
prefill-only rows give the per-chunk terms (fixed, per token, per cached-context token, per
pair), decode-only rows the decode terms, and what mixed rows take beyond those two the extra
decode cost of a step shared with a prefill chunk (per decode sequence, per decode KV token).
`attention_fit_errors` measures the result exactly as StepCost.step_ns charges it.
"""

from __future__ import annotations

import csv
import itertools
import math
from pathlib import Path

import numpy as np

from llumverify.errors import UserError
from llumverify.files.inputs import regular_file
from llumverify.settings.config import STEP_TERM_MAX_NS
from llumverify.sim.stepcost import StepCost, knots_from_points

_ONCE_PER_STEP = {"embedding", "final_layernorm"}  # outside the decoder layers
_CALLS_PER_LAYER = {"layernorm": 2, "qk_norm": 2}  # per-call means of ops a layer calls twice
_ATTN_COLS = ("prefill_chunk", "kv_prefill", "n_decode", "kv_decode", "time_us")


def _read_text(path: Path) -> str:
    try:
        return regular_file(path, "file").read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise UserError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, expected a file") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except OSError as exc:
        raise UserError(f"{path}: {exc.strerror or exc}") from None


def _folder(folder: str | Path) -> Path:
    path = Path(folder)
    if not path.is_dir():
        raise UserError(f"{path}: profile folder not found")
    return path


def profile_meta(folder: str | Path) -> dict[str, str]:
    """The top-level `key: value` scalars of meta.yaml (nested blocks skipped, quotes removed).

    A line parser rather than a YAML dependency: provenance needs only a few flat fields. What it
    could only skip or misread is refused: a top-level line that is not `key: value`, a key given
    twice (which one is the profile's?), a value opening a quote or bracket it does not close.
    """
    path = _folder(folder) / "meta.yaml"
    meta: dict[str, str] = {}
    seen: set[str] = set()
    for number, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip() or line[0] in " \t#-" or line.rstrip() == "...":
            continue
        key, colon, value = line.partition(":")
        key, value = key.strip(), value.split(" #", 1)[0].strip()
        closing = {"'": "'", '"': '"', "[": "]", "{": "}"}.get(value[:1])
        if not colon:  # a line this parser would skip is a line whose key the profile lost
            raise UserError(f"{path}:{number}: expected a top-level `key: value` line, got {line.strip()[:60]!r}")
        if key in seen:
            raise UserError(f"{path}:{number}: key {key!r} given twice")
        if closing and (len(value) < 2 or value[-1] != closing):
            raise UserError(f"{path}:{number}: {key}: unclosed {value[0]} in {value[:60]!r}")
        seen.add(key)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        if value:
            meta[key] = value
    if meta.get("hardware") and meta.get("gpu"):  # the label and the device the profiler saw: one GPU
        from llumverify.sim.catalog import get_gpu

        try:
            label, device = get_gpu(meta["hardware"]).name, get_gpu(meta["gpu"]).name
        except UserError:  # a GPU the catalog lacks: nothing to compare the names by
            label = device = ""
        if label != device:
            raise UserError(f"{path}: hardware {meta['hardware']!r} is the {label} but gpu {meta['gpu']!r} is the "
                            f"{device}: which GPU was profiled?")
    return meta


def _rows(path: Path, columns: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    """(line number, row) of a CSV whose header has `columns` (extra columns are ignored)."""
    reader = csv.reader(_read_text(path).splitlines())
    header = next(reader, None)
    if not header:
        raise UserError(f"{path}: empty file, expected a header with {', '.join(columns)}")
    header = [h.strip() for h in header]
    for col in columns:
        if col not in header:
            raise UserError(f"{path}:1: missing column {col!r} (header: {', '.join(header)})")
    out = []
    for fields in reader:
        if not fields or all(not f.strip() for f in fields):
            continue
        if len(fields) != len(header):
            raise UserError(f"{path}:{reader.line_num}: expected {len(header)} fields, got {len(fields)}")
        out.append((reader.line_num, {h: f.strip() for h, f in zip(header, fields)}))
    if not out:
        raise UserError(f"{path}: no data rows")
    return out


def _int(path: Path, line: int, row: dict[str, str], col: str, lo: int) -> int:
    try:
        value = int(row[col])
    except ValueError:
        raise UserError(f"{path}:{line}: {col} must be an integer, got {row[col]!r}") from None
    if value < lo:
        raise UserError(f"{path}:{line}: {col} must be >= {lo}, got {value}")
    return value


def _us(path: Path, line: int, row: dict[str, str]) -> float:
    """A measured time in µs, at most a minute (the cap of every step-cost term: a larger one is a units slip, which
    the attention fit, weighting rows by 1/time, would otherwise pass over unseen)."""
    try:
        value = float(row["time_us"])
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not 0 <= value <= STEP_TERM_MAX_NS / 1000:
        raise UserError(f"{path}:{line}: time_us must be a number in [0, {STEP_TERM_MAX_NS // 1000:,}] µs (a minute), "
                        f"got {row['time_us']!r}")
    return value


def read_per_x(path: Path, x_col: str) -> dict[int, dict[str, float]]:
    """{x: {layer: us}} of dense.csv / per_sequence.csv; every x must have every layer."""
    table: dict[int, dict[str, float]] = {}
    first: dict[str, int] = {}  # layer -> the line it first appears on
    for line, row in _rows(path, ("layer", x_col, "time_us")):
        x, layer = _int(path, line, row, x_col, 1), row["layer"]
        if layer in table.setdefault(x, {}):
            raise UserError(f"{path}:{line}: duplicate row for layer {layer!r} at {x_col}={x}")
        table[x][layer] = _us(path, line, row)
        first.setdefault(layer, line)
    seen = {layer: sum(layer in ops for ops in table.values()) for layer in first}
    for x, ops in sorted(table.items()):
        if missing := seen.keys() - ops.keys():
            rare = min(seen, key=lambda layer: (seen[layer], first[layer]))
            if 2 * seen[rare] < len(table):  # at a few x only: a misspelt name, not rows missing everywhere else
                at = next(v for v, row in sorted(table.items()) if rare in row)
                lacks = ", ".join(repr(k) for k in sorted(seen.keys() - table[at].keys())) or "no other layer"
                raise UserError(f"{path}:{first[rare]}: layer {rare!r} is at {seen[rare]} of the {len(table)} {x_col} "
                                f"values only ({x_col}={at}, which lacks {lacks}): misspelt?")
            raise UserError(f"{path}: {x_col}={x} has no row for {', '.join(sorted(missing))}")
    return table


def read_moe(folder: Path) -> dict[int, list[tuple[int, float]]] | None:
    """moe.csv as {tokens: [(activated experts, ns), ...] sorted}, None when the profile has none."""
    path = folder / "tp1" / "moe.csv"
    if not path.exists():
        return None
    table: dict[int, dict[int, float]] = {}
    for line, row in _rows(path, ("tokens", "activated_experts", "time_us")):
        t, a = _int(path, line, row, "tokens", 1), _int(path, line, row, "activated_experts", 1)
        if a in table.setdefault(t, {}):
            raise UserError(f"{path}:{line}: duplicate row for tokens={t}, activated_experts={a}")
        table[t][a] = 1000.0 * _us(path, line, row)
    return {t: sorted(row.items()) for t, row in sorted(table.items())}


def _linear(points: list[tuple[int, float]], x: float) -> float:
    """The line through the two points nearest x (extrapolated beyond the ends; one point: constant)."""
    if len(points) == 1:
        return points[0][1]
    i = min(max(np.searchsorted([p[0] for p in points], x), 1), len(points) - 1)
    (x0, y0), (x1, y1) = points[i - 1], points[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def moe_block_ns(table: dict[int, list[tuple[int, float]]], tokens: int, experts: int, per_token: int,
                 ranks: int = 1) -> float:
    """One layer's sparse MoE block for a step of `tokens` tokens under uniform routing (module
    docstring). ranks: expert-parallel data-parallel ranks, each holding 1/ranks of the experts and
    running them on every rank's tokens (about as many expert rows as its own T tokens would make
    on one GPU, over the experts all ranks' tokens activate, its share of them)."""
    share = math.ceil(experts / ranks) / experts  # the busiest rank's (vLLM gives the first E mod N one more)
    active = experts * (1.0 - (1.0 - per_token / experts) ** (tokens * ranks)) * share
    rows = [(t, _linear(points, active)) for t, points in table.items()]
    return max(_linear(rows, tokens), 0.0)


def _dense_ns(ops: dict[str, float], num_layers: int) -> float:
    """Whole-model token-proportional time (ns) from one step's per-op times (us)."""
    once = sum(us for op, us in ops.items() if op in _ONCE_PER_STEP)
    layer = sum(us * _CALLS_PER_LAYER.get(op, 1) for op, us in ops.items() if op not in _ONCE_PER_STEP)
    return 1000.0 * (once + num_layers * layer)


def read_attention(folder: Path) -> np.ndarray:
    """attention.csv as a float array with columns _ATTN_COLS (time in us)."""
    path = folder / "tp1" / "attention.csv"
    rows = []
    for line, row in _rows(path, _ATTN_COLS):
        rows.append([*(_int(path, line, row, c, 0) for c in _ATTN_COLS[:4]), _us(path, line, row)])
    return np.array(rows, dtype=float)


def nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """min |a x - b| subject to x >= 0, exactly, by trying every support (a has a few columns; the
    fits of profiles here and of first principles, sim/roofline.py, share it).

    The optimum is the unconstrained fit on its own support, so the best feasible one wins.
    """
    best, best_res = np.zeros(a.shape[1]), float(b @ b)
    for k in range(1, a.shape[1] + 1):
        for cols in itertools.combinations(range(a.shape[1]), k):
            sol = np.linalg.lstsq(a[:, cols], b, rcond=None)[0]
            if (sol < 0).any():
                continue
            x = np.zeros(a.shape[1])
            x[list(cols)] = sol
            res = float(np.sum((a @ x - b) ** 2))
            if res < best_res:
                best, best_res = x, res
    return best


def _features(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-row features as StepCost sums them: prefill ([c>0], c, ctx, pairs), decode ([n>0], n, n*kv)
    and the extra decode cost of a mixed step ([c>0] n, [c>0] n*kv); a row holds at most one chunk."""
    c, ctx, n, kv = rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3]
    has_chunk = (c > 0).astype(float)
    prefill = np.column_stack([has_chunk, c, has_chunk * ctx, c * (2 * ctx + c + 1) / 2])
    decode = np.column_stack([n > 0, n, n * kv]).astype(float)
    mixed = has_chunk[:, None] * np.column_stack([n, n * kv])
    return prefill, decode, mixed


def _fit_attention(rows: np.ndarray, path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-layer coefficients in ns: prefill (per chunk, per token, per context token, per pair),
    decode (per step, per sequence, per KV token) and the mixed-step extra (per decode sequence,
    per decode KV token).

    Prefill from the prefill-only rows, decode from the decode-only rows, then the mixed extra
    from what the mixed rows take beyond those two parts. Each is a non-negative least squares on
    relative error (rows weighted by 1/measured): the grid spans 8 us to 20 ms and small steps are
    as common in serving as large ones. Without mixed rows the mixed extra is 0.
    """
    prefill, decode, mixed = _features(rows)
    y = rows[:, 4] * 1000.0
    w = 1.0 / np.maximum(y, 1.0)
    pre, dec = (rows[:, 2] == 0) & (rows[:, 0] > 0), (rows[:, 0] == 0) & (rows[:, 2] > 0)
    mix = (rows[:, 0] > 0) & (rows[:, 2] > 0)
    for mask, what in ((pre, "prefill-only (n_decode = 0)"), (dec, "decode-only (prefill_chunk = 0)")):
        if mask.sum() < 3:
            raise UserError(f"{path}: needs at least 3 {what} rows to fit attention, has {int(mask.sum())}")
    p = nnls(prefill[pre] * w[pre, None], y[pre] * w[pre])
    d = nnls(decode[dec] * w[dec, None], y[dec] * w[dec])
    residual = y - prefill @ p - decode @ d
    m = nnls(mixed[mix] * w[mix, None], residual[mix] * w[mix]) if mix.any() else np.zeros(2)
    return p, d, m


def _attention_fields(rows: np.ndarray, path: Path, num_layers: int) -> dict[str, int]:
    """The StepCost attention coefficients (whole model: per-layer fit x num_layers, integers)."""
    p, d, m = (coef * num_layers for coef in _fit_attention(rows, path))
    return dict(prefill_attn_ns=round(p[0]), prefill_attn_ps_per_token=round(p[1] * 1e3),
                prefill_attn_ps_per_ctx_token=round(p[2] * 1e3), prefill_attn_fs_per_pair=round(p[3] * 1e6),
                decode_attn_ns=round(d[0]), decode_attn_ns_per_seq=round(d[1]),
                decode_attn_ns_per_token=round(d[2]),
                mixed_decode_attn_ns_per_seq=round(m[0]), mixed_decode_attn_ns_per_token=round(m[1]))


def _check_layers(num_layers: object) -> None:
    if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 1:
        raise UserError(f"num_layers must be an integer >= 1, got {num_layers!r}")


def step_cost_from_profile(folder: str | Path, num_layers: int, fixed_ns: int = 0,
                           routing: tuple[int, int] = (0, 0), ranks: int = 1) -> StepCost:
    """The StepCost of a model with `num_layers` decoder layers from its one-layer profile;
    routing: (experts, experts per token) of an MoE model, whose profile has moe.csv; ranks: the
    expert-parallel ranks its experts are spread over (moe_block_ns; the exchange is the caller's)."""
    _check_layers(num_layers)
    if isinstance(fixed_ns, bool) or not isinstance(fixed_ns, int) or fixed_ns < 0:
        raise UserError(f"fixed_ns must be an integer >= 0, got {fixed_ns!r}")
    root = _folder(folder)
    meta = profile_meta(root)
    for key in ("hardware", "model"):
        if key not in meta:
            raise UserError(f"{root / 'meta.yaml'}: missing key {key!r}")
    dense = read_per_x(root / "tp1" / "dense.csv", "tokens")
    moe = read_moe(root)
    if (moe is None) == bool(routing[0]):
        raise UserError(f"{root}: tp1/moe.csv {'missing' if moe is None else 'present'}, but {meta['model']} is "
                        f"{'an MoE' if routing[0] else 'a dense'} model in the catalog")
    block = (lambda t: num_layers * moe_block_ns(moe, t, *routing, ranks)) if moe else (lambda t: 0.0)
    per_seq = read_per_x(root / "tp1" / "per_sequence.csv", "sequences")
    attention = _attention_fields(read_attention(root), root / "tp1" / "attention.csv", num_layers)
    cost = StepCost(
        fixed_ns=fixed_ns,
        linear=knots_from_points([(x, _dense_ns(ops, num_layers) + block(x)) for x, ops in dense.items()]),
        per_seq=knots_from_points([(x, 1000.0 * sum(ops.values())) for x, ops in per_seq.items()]),
        **attention,
        engine="vllm-v1", gpu=meta["hardware"], model=meta["model"],
        source=(f"profile {folder} (vLLM {meta.get('vllm_version', '?')}, eager, "
                f"per-layer kernels x {num_layers} layers)"))
    cost.validate()
    return cost


def attention_fit_rows(folder: str | Path, num_layers: int) -> list[tuple[int, int, int, int, float, float, float]]:
    """Every attention.csv row as (prefill_chunk, kv_prefill, n_decode, kv_decode, measured_us,
    fitted_us, relative error).

    fitted_us is exactly the attention part of what the simulator charges: StepCost.step_ns, with
    the integer coefficients step_cost_from_profile gives for `num_layers` layers and nothing but
    attention, of a step holding that row's chunk (if any) and its decodes, divided by num_layers.
    """
    _check_layers(num_layers)
    root = _folder(folder)
    rows = read_attention(root)
    attention = StepCost(fixed_ns=0, linear=((1, 0),), per_seq=((1, 0),),
                         **_attention_fields(rows, root / "tp1" / "attention.csv", num_layers))
    out = []
    for r in rows:
        c, ctx, n, kv = (int(v) for v in r[:4])
        fitted = attention.step_ns([(c, ctx)] if c else [], n, n * kv) / num_layers / 1000.0 if c or n else 0.0
        measured = float(r[4])
        out.append((c, ctx, n, kv, measured, fitted,
                    (fitted - measured) / measured if measured > 0 else math.inf))
    return out


def attention_fit_errors(folder: str | Path, num_layers: int) -> dict[str, float]:
    """Median and p90 absolute relative error of the fitted attention (attention_fit_rows), per
    kind of row: prefill-only, decode-only, mixed."""
    out: dict[str, float] = {}
    rows = attention_fit_rows(folder, num_layers)
    kinds = {"prefill": lambda r: r[0] and not r[2], "decode": lambda r: r[2] and not r[0],
             "mixed": lambda r: r[0] and r[2]}
    for kind, keep in kinds.items():
        ape = np.array([abs(r[6]) for r in rows if keep(r)])
        out[f"{kind}_median_ape"] = float(np.median(ape)) if ape.size else math.nan
        out[f"{kind}_p90_ape"] = float(np.percentile(ape, 90)) if ape.size else math.nan
        out[f"{kind}_rows"] = float(ape.size)
    out["n_rows"] = float(len(rows))
    return out
