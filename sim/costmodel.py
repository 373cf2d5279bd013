"""How long an engine step and a migration copy stage take, in integer nanoseconds.

Integer coefficients keep simulated time exact, so a run of decode steps is an arithmetic
progression the instance can sum and invert in closed form (sim/instance.py).
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from llumverify.settings.config import CostConfig
from llumverify.errors import UserError
from llumverify.files.paths import check_keys, read_toml

PPM = 1_000_000  # slow-down factors are integer parts per million: 1 + ppm / 1e6

# LLUMNIX.md §1: published step latencies of LLaMA-7B on an A10, in ms.
PUBLISHED_PREFILL_MS = {256: 58.0, 2048: 436.0, 8192: 1995.0}
PUBLISHED_DECODE_MS = (43.0, 53.0)  # a decode step with about 8k tokens in the batch
DECODE_CALIBRATION_BATCH = (32, 256)  # 32 sequences x 256 KV tokens = 8,192 tokens


class CostModel:
    """Step times from a CostConfig; methods are on the hot path, so they stay tiny."""

    __slots__ = ("cfg", "_pa", "_pb", "_pc", "_gap", "_da", "_db", "_dc", "_cpu", "_out")

    def __init__(self, cfg: CostConfig) -> None:
        cfg.validate()
        self.cfg = cfg
        self._pa, self._pb, self._pc = cfg.prefill_ns_per_token, cfg.prefill_ps_per_token_sq, cfg.prefill_ns
        self._da, self._db, self._dc = cfg.decode_ns_per_seq, cfg.decode_ns_per_token, cfg.decode_ns
        self._gap = cfg.gap_ns
        self._cpu = cfg.cpu_ns_per_seq
        self._out = cfg.cpu_ns_per_output_token

    def prefill_ns(self, tokens: int, tokens_sq: int) -> int:
        """A prefill-only step over prompts with Σt = tokens and Σt² = tokens_sq (gap included).

        The quadratic term is per sequence (attention is quadratic in each prompt, not in the batch).
        """
        return self._pa * tokens + self._pb * tokens_sq // 1000 + self._pc + self._gap

    def decode_terms(self, batch: int, slow_ppm: int = 0) -> tuple[int, int]:
        """(fixed, per_token) such that a decode step over Σ KV tokens C takes fixed + per_token·C.

        A slow-down scales the GPU coefficients (each rounded down to whole ns), not the step time
        nor the engine's CPU time per sequence, so consecutive steps of a run stay an exact
        arithmetic progression.
        """
        if slow_ppm:
            scale = PPM + slow_ppm
            return (self._gap + self._cpu * batch + (self._da * batch + self._dc) * scale // PPM,
                    self._db * scale // PPM)
        return self._gap + (self._cpu + self._da) * batch + self._dc, self._db

    def decode_run_terms(self, batch: int, context: int, outputs: int, slow_ppm: int = 0) -> tuple[int, int]:
        """(first, growth): a run of decode steps over `batch` sequences that hold `context` KV
        tokens, `outputs` of them output tokens, takes first + growth·j for its step j; each step
        adds one token of each kind per sequence."""
        fixed, per_token = self.decode_terms(batch, slow_ppm)
        return fixed + per_token * context + self._out * outputs, (per_token + self._out) * batch

    def decode_ns(self, batch: int, context: int, slow_ppm: int = 0) -> int:
        """One decode step of `batch` sequences holding `context` KV tokens in total (gap included)."""
        fixed, per_token = self.decode_terms(batch, slow_ppm)
        return fixed + per_token * context

    def copy_stage_ns(self, blocks: int, block_size: int, sharers: int = 1) -> int:
        """One migration stage copying `blocks` KV blocks over the network, plus its RPC latency;
        `sharers` copies share the bandwidth (MigrationConfig.shared_copies)."""
        bits = blocks * block_size * self.cfg.kv_bytes_per_token * 8 * sharers
        return -(-bits * 1_000_000_000 // self.cfg.bandwidth_bps) + self.cfg.rpc_ns


def load_cost_config(path: str | Path) -> CostConfig:
    """A CostConfig from a TOML file of top-level `name = integer` pairs; unknown keys are errors."""
    path = Path(path)
    data = read_toml(path, "cost-model TOML file", "--cost-config")
    check_keys(path, data, (f.name for f in fields(CostConfig)), "--cost-config", empty_ok=False)
    cfg = CostConfig(**data)
    try:
        cfg.validate()
    except UserError as exc:  # name the file: the message alone names only the field
        raise UserError(f"--cost-config {path}: {exc}") from None
    return cfg


def calibration(cost: CostModel) -> list[tuple[str, float, float]]:
    """(point, published ms, fitted ms) for every published step latency the defaults target.

    Fitted values exclude the scheduling gap and the engine's CPU time per sequence: the published
    numbers are GPU step latencies and the gap is the AE simulator's addition. For the decode range
    the published value is its midpoint.
    """
    gap = cost.cfg.gap_ns
    rows = [(f"prefill {t} tokens", ms, (cost.prefill_ns(t, t * t) - gap) / 1e6)
            for t, ms in PUBLISHED_PREFILL_MS.items()]
    batch, tokens = DECODE_CALIBRATION_BATCH
    mid = sum(PUBLISHED_DECODE_MS) / 2
    gpu = cost.decode_ns(batch, batch * tokens) - gap - cost.cfg.cpu_ns_per_seq * batch
    rows.append((f"decode {batch} seqs x {tokens} tokens", mid, gpu / 1e6))
    return rows
