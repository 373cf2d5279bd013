"""The vLLM V1 step-time model: one formula, coefficients from a profile, first principles or a fit.

A V1 engine step runs every scheduled token through the model once: decodes (one token each)
and prefill chunks (many tokens each) share the step. Its time, in integer nanoseconds, is

    step = fixed_ns                                   the engine's own per-step time (CPU, launch)
         + linear(T)                                  token-proportional ops of every layer, T = tokens in the step
         + per_seq(S)                                 lm_head + sampler, S = sequences in the step
         + Σ_chunks [prefill_attn_ns + c·prefill_attn_ps_per_token/1e3 + ctx·prefill_attn_ps_per_ctx_token/1e3
                     + c·(ctx + (c+1)/2)·prefill_attn_fs_per_pair/1e6]
                                                      causal attention of a chunk of c tokens over ctx cached tokens
         + [n_decode > 0]·(decode_attn_ns + n_decode·decode_attn_ns_per_seq
                          + Σ decode context·decode_attn_ns_per_token)
         + [chunks and n_decode > 0]·(n_decode·mixed_decode_attn_ns_per_seq
                                     + Σ decode context·mixed_decode_attn_ns_per_token)
                                                      decodes cost more when they share a step with a
                                                      prefill chunk (one attention launch for both, as
                                                      measured in vLLM 0.19's profiles)

A step with a prefill chunk lasts at least graphless_step_ns: an engine that launches such steps
without a CUDA graph (vLLM's cudagraph_mode FULL_DECODE_ONLY) is CPU-bound below it (sim/graphless.py;
0: every step replays a graph). It is CPU time: a migration's slow-down (slow_ppm) does not stretch it.

where decode_attn_ns_per_token is decode_attn_v1_ns_per_token in a step of more than
decode_attn_v1_seqs decodes (0: never): an engine that switches decode-attention kernels with
the batch (vLLM's paged-attention V1 on ROCm, sim/roofline.py `kv_bw_v1`).

`linear` and `per_seq` are piecewise-linear tables (knots of (x, ns)), so a memory-bound flat
start followed by a compute-bound slope is represented as measured. A pure decode step of n
sequences over Σ context C is `decode_terms(n)` = (fixed, per_token) with step = fixed +
per_token·C: an exact arithmetic progression over a run of decode steps, which the instance sums
and inverts in closed form (sim/instance.py), so the decode coefficients stay whole ns.

Each StepCost says which engine, GPU and model it represents, where its numbers come from and
its measured error against real runs (README, reports/validation/).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from llumverify.settings.config import STEP_TERM_MAX_NS, CostConfig
from llumverify.errors import UserError, brief
from llumverify.files.paths import check_keys, read_toml

Knots = tuple[tuple[int, int], ...]


def interpolate(knots: Knots, x: int) -> int:
    """Piecewise-linear value at x (integer ns); linear extrapolation past either end."""
    if x <= 0:
        return 0
    if len(knots) == 1:
        x0, y0 = knots[0]
        return y0 * x // x0 if x0 else y0
    i = min(max(bisect_left(knots, (x,)), 1), len(knots) - 1)  # first knot with x_i >= x (segment i-1..i)
    (x0, y0), (x1, y1) = knots[i - 1], knots[i]
    if x < x0 and i == 1:  # before the first knot: towards the first segment's slope, floored at 0
        return max(0, y0 + (y1 - y0) * (x - x0) // (x1 - x0))
    return y0 + (y1 - y0) * (x - x0) // (x1 - x0)


# A table's ns at its largest knot may be long (405B's 16k-token step on one A10 takes 140 s from first principles); an
# hour is no real step, and a run of such steps still ends (the samplers tick once a simulated second)
KNOT_MAX = 60 * STEP_TERM_MAX_NS


@dataclass(frozen=True)
class StepCost:
    """Coefficients of the V1 step-time model (module docstring), integers, plus their provenance."""

    fixed_ns: int
    linear: Knots
    per_seq: Knots
    prefill_attn_ns: int = 0
    prefill_attn_ps_per_token: int = 0
    prefill_attn_fs_per_pair: int = 0
    decode_attn_ns: int = 0
    decode_attn_ns_per_seq: int = 0
    decode_attn_ns_per_token: int = 0
    prefill_attn_ps_per_ctx_token: int = 0
    mixed_decode_attn_ns_per_seq: int = 0
    mixed_decode_attn_ns_per_token: int = 0
    decode_attn_v1_seqs: int = 0  # above this many decodes a step reads KV at decode_attn_v1_ns_per_token (0: never)
    decode_attn_v1_ns_per_token: int = 0
    graphless_step_ns: int = 0  # floor under a step with a prefill chunk launched without a CUDA graph (0: none)
    engine: str = "vllm-v1"
    gpu: str = ""
    model: str = ""
    tp: int = 1  # GPUs of the tensor-parallel group these step costs are for
    source: str = ""  # how the coefficients were obtained (profile folder, first principles, fit)
    error: str = ""  # measured error against real runs, with the command that measured it

    def validate(self) -> None:
        if isinstance(self.tp, bool) or not isinstance(self.tp, int) or self.tp < 1:
            raise UserError(f"StepCost.tp must be an integer >= 1, got {self.tp!r}")
        for name in ("fixed_ns", "prefill_attn_ns", "prefill_attn_ps_per_token", "prefill_attn_fs_per_pair",
                     "decode_attn_ns", "decode_attn_ns_per_seq", "decode_attn_ns_per_token",
                     "prefill_attn_ps_per_ctx_token", "mixed_decode_attn_ns_per_seq",
                     "mixed_decode_attn_ns_per_token", "decode_attn_v1_seqs", "decode_attn_v1_ns_per_token",
                     "graphless_step_ns"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= STEP_TERM_MAX_NS:
                raise UserError(f"StepCost.{name} must be an integer in [0, {STEP_TERM_MAX_NS:,}] (a minute a step, "
                                f"in its unit: a larger one is a units slip, and a run of such steps never ends), "
                                f"got {value!r}")
        for name in ("linear", "per_seq"):
            knots = getattr(self, name)
            if not knots or any(len(k) != 2 for k in knots):
                raise UserError(f"StepCost.{name} must be a non-empty list of [x, ns] pairs, got {knots!r}")
            xs = [k[0] for k in knots]
            if any(isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= KNOT_MAX for k in knots for v in k):
                raise UserError(f"StepCost.{name}: every x and ns must be an integer in [0, {KNOT_MAX:,}] "
                                f"(an hour a step), got {knots!r}")
            if xs != sorted(set(xs)) or xs[0] < 1:
                raise UserError(f"StepCost.{name}: x must be >= 1 and strictly increasing, got {xs!r}")
            # knots_from_points writes them monotone: a step shrinking as it grows is none
            drop = next((i for i in range(1, len(knots)) if knots[i][1] < knots[i - 1][1]), None)
            if drop is not None:
                raise UserError(f"StepCost.{name} must not fall as x grows: {knots[drop - 1][1]} ns at x = "
                                f"{knots[drop - 1][0]}, then {knots[drop][1]} at x = {knots[drop][0]} (take the "
                                "running maximum, as calibrate does)")
        if self.fixed_ns + interpolate(self.linear, 1) + interpolate(self.per_seq, 1) <= 0:
            raise UserError("StepCost: a one-token step must take time (fixed_ns + linear(1) + per_seq(1) > 0)")

    # ------------------------------------------------------------------ the model
    def decode_ns_per_token(self, n: int) -> int:
        """KV-read cost per context token of a step of n decodes (the kernel the engine picks for n)."""
        if 0 < self.decode_attn_v1_seqs < n:
            return self.decode_attn_v1_ns_per_token
        return self.decode_attn_ns_per_token

    def decode_terms(self, n: int, slow_ppm: int = 0) -> tuple[int, int]:
        """(fixed, per_token) of a pure decode step of n sequences: step = fixed + per_token·Σcontext.

        A slow-down (migration on the source) scales both terms by (1 + ppm/1e6), each rounded down.
        """
        fixed = (self.fixed_ns + interpolate(self.linear, n) + interpolate(self.per_seq, n)
                 + self.decode_attn_ns + self.decode_attn_ns_per_seq * n)
        per_token = self.decode_ns_per_token(n)
        if slow_ppm:
            fixed = fixed * (1_000_000 + slow_ppm) // 1_000_000
            per_token = per_token * (1_000_000 + slow_ppm) // 1_000_000
        return fixed, per_token

    def chunk_ns(self, chunk: int, ctx: int) -> int:
        """Attention of one prefill chunk of `chunk` tokens over `ctx` tokens already in the KV cache."""
        pairs = chunk * (2 * ctx + chunk + 1) // 2
        return (self.prefill_attn_ns + (chunk * self.prefill_attn_ps_per_token
                                        + ctx * self.prefill_attn_ps_per_ctx_token) // 1000
                + pairs * self.prefill_attn_fs_per_pair // 1_000_000)

    def step_ns(self, chunks: Sequence[tuple[int, int]], n_decode: int, decode_ctx: int, slow_ppm: int = 0) -> int:
        """One step: prefill `chunks` as (tokens, cached context) pairs plus n_decode decodes over
        decode_ctx KV tokens. Equals decode_terms when there are no chunks."""
        if not chunks:
            fixed, per_token = self.decode_terms(n_decode, slow_ppm)
            return fixed + per_token * decode_ctx
        tokens = n_decode + sum(c for c, _ in chunks)
        seqs = n_decode + len(chunks)
        t = self.fixed_ns + interpolate(self.linear, tokens) + interpolate(self.per_seq, seqs)
        t += sum(self.chunk_ns(c, ctx) for c, ctx in chunks)
        if n_decode:
            t += (self.decode_attn_ns + (self.decode_attn_ns_per_seq + self.mixed_decode_attn_ns_per_seq) * n_decode
                  + (self.decode_ns_per_token(n_decode) + self.mixed_decode_attn_ns_per_token) * decode_ctx)
        if slow_ppm:
            t = t * (1_000_000 + slow_ppm) // 1_000_000
        return max(t, self.graphless_step_ns)

    # ------------------------------------------------------------------ files
    def to_toml(self) -> str:
        """The profile as TOML (`load_step_cost` reads it back to an equal StepCost)."""
        lines = ["# llumverify step-cost profile (sim/stepcost.py): integer ns; see the module docstring"]
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, str):
                lines.append(f"{f.name} = {_toml_str(value)}")
            elif isinstance(value, tuple):
                lines.append(f"{f.name} = [{', '.join(f'[{x}, {y}]' for x, y in value)}]")
            else:
                lines.append(f"{f.name} = {value}")
        return "\n".join(lines) + "\n"

    def describe(self) -> dict[str, object]:
        """A plain dict (summary.json, validation.json)."""
        doc = asdict(self)
        doc["linear"] = [list(k) for k in self.linear]
        doc["per_seq"] = [list(k) for k in self.per_seq]
        return doc


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


TEXT_FIELDS = frozenset(f.name for f in fields(StepCost) if f.type in (str, "str"))  # the rest are ints or knots


def load_step_cost(path: str | Path) -> StepCost:
    """A StepCost from a profile TOML (as written by StepCost.to_toml); unknown keys are errors."""
    path = Path(path)
    data = read_toml(path, "step-cost TOML file")
    check_keys(path, data, (f.name for f in fields(StepCost)))
    for key in ("fixed_ns", "linear", "per_seq"):
        if key not in data:
            raise UserError(f"{path}: missing key {key!r}")
    for key in ("linear", "per_seq"):
        value = data[key]
        if not isinstance(value, list) or not all(isinstance(k, list) and len(k) == 2 for k in value):
            raise UserError(f"{path}: {key} must be a list of [x, ns] pairs, got {value!r}")
        data[key] = tuple(tuple(k) for k in value)
    # each value's type before StepCost(**data): the compiled class refuses a wrong one with a TypeError (a bug's
    # line), not a line naming the key; validate() then checks the bounds
    for key, value in data.items():
        if key in ("linear", "per_seq"):
            continue
        text = key in TEXT_FIELDS
        if not isinstance(value, str) if text else isinstance(value, bool) or not isinstance(value, int):
            raise UserError(f"{path}: {key} must be {'a string' if text else 'an integer'}, got {brief(value)}")
    cost = StepCost(**data)
    try:
        cost.validate()
    except UserError as exc:
        raise UserError(f"{path}: {exc}") from None
    return cost


def knots_from_points(points: Sequence[tuple[float, float]], max_knots: int = 24) -> Knots:
    """Integer knots (x, ns) from measured (x, ns) points: a log-spaced subset, monotone in ns.

    Measured kernel times are noisy and sometimes dip as x grows; a step time that shrinks when a
    token is added would make the engine model prefer bigger batches for no reason, so each knot
    takes the running maximum.
    """
    pts = sorted((int(x), float(y)) for x, y in points if x >= 1)
    if not pts:
        raise UserError("no measured points with x >= 1")
    xs = sorted({x for x, _ in pts})
    if len(xs) > max_knots:
        lo, hi = math.log(xs[0]), math.log(xs[-1])
        wanted = {xs[0], xs[-1]}
        for i in range(max_knots):
            target = math.exp(lo + (hi - lo) * i / (max_knots - 1))
            wanted.add(min(xs, key=lambda v: abs(math.log(v) - math.log(target))))
        xs = sorted(wanted)
    by_x: dict[int, list[float]] = {}
    for x, y in pts:
        by_x.setdefault(x, []).append(y)
    knots, best = [], 0
    for x in xs:
        ys = sorted(by_x[x])
        best = max(best, round(ys[len(ys) // 2]))
        knots.append((x, best))
    return tuple(knots)


def from_cost_config(cost: CostConfig) -> StepCost:
    """The paper's A10/LLaMA-7B fit (CostConfig) in the V1 step form, for vllm-v1 runs given no
    other profile: per-token and per-sequence prefill/decode terms, the quadratic prefill term as
    attention pairs (Σt² ≈ 2·pairs), the larger fixed term (decode + gap) per step."""
    per_seq = max(0, cost.decode_ns_per_seq + cost.cpu_ns_per_seq - cost.prefill_ns_per_token)
    return StepCost(
        fixed_ns=cost.decode_ns + cost.gap_ns,
        linear=((1, cost.prefill_ns_per_token), (1 << 20, cost.prefill_ns_per_token << 20)),
        per_seq=((1, per_seq), (1 << 20, per_seq << 20)),
        prefill_attn_fs_per_pair=2 * cost.prefill_ps_per_token_sq * 1000,
        decode_attn_ns_per_token=cost.decode_ns_per_token,
        gpu="A10", model="LLaMA-7B",
        source="the paper's published A10 step latencies (CostConfig), rewritten in the V1 step form",
        error="not validated against a real vLLM V1 run")
