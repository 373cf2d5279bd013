"""Every setting and its default, in one place (LLaMA-7B fp16 on one A10 by default).

Frozen dataclasses so a run's configuration is a value: hashable, printable, comparable.
`validate()` raises UserError naming the bad field; the CLI turns that into one line.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from llumverify.errors import UserError


def _positive(obj: object, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if not value > 0:
            raise UserError(f"{type(obj).__name__}.{name} must be > 0, got {value!r}")


def _non_negative(obj: object, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if not value >= 0:
            raise UserError(f"{type(obj).__name__}.{name} must be >= 0, got {value!r}")


@dataclass(frozen=True)
class EngineConfig:
    """One vLLM instance (LLUMNIX.md §1): 16-token blocks, 851 blocks for 7B on an A10."""

    num_blocks: int = 851
    block_size: int = 16
    watermark_frac: float = 0.01
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 12_800

    @property
    def watermark_blocks(self) -> int:
        """vLLM's watermark: int(0.01 * blocks) blocks kept free at admission."""
        return int(self.watermark_frac * self.num_blocks)

    def validate(self) -> None:
        _positive(self, "num_blocks", "block_size", "max_num_seqs", "max_num_batched_tokens")
        if not 0 <= self.watermark_frac < 1:
            raise UserError(f"EngineConfig.watermark_frac must be in [0, 1), got {self.watermark_frac!r}")


@dataclass(frozen=True)
class SLOConfig:
    """Targets for the SLO-violation rate: a request violates if either target is missed."""

    ttft_s: float = 10.0
    per_token_s: float = 0.2

    def validate(self) -> None:
        _positive(self, "ttft_s", "per_token_s")


def describe(obj: object) -> dict[str, object]:
    """A config as a plain dict (for summary.json and reports)."""
    return {f.name: getattr(obj, f.name) for f in fields(obj)}  # type: ignore[arg-type]


def _ints(obj: object, *names: str) -> None:
    """Cost coefficients are integers so simulated time stays exact (bool is not an int here)."""
    for name in names:
        value = getattr(obj, name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise UserError(f"{type(obj).__name__}.{name} must be an integer, got {value!r}")


@dataclass(frozen=True)
class CostConfig:
    """Step-time coefficients, integers in ns (ps for the small quadratic prefill term).

    prefill(t_i) = prefill_ns_per_token·Σt_i + prefill_ps_per_token_sq·Σt_i²/1000 + prefill_ns
    decode(B, C) = decode_ns_per_seq·B + decode_ns_per_token·C + decode_ns   (C = Σ KV tokens)
    Every step adds gap_ns (the AE simulator's 4 ms). Defaults fit LLaMA-7B on an A10
    (LLUMNIX.md §1; the fit is tabulated in docs/simulator.md). Migration copy: a stage moving n
    blocks takes n·block_size·kv_bytes_per_token·8/bandwidth_bps + rpc_ns.
    """

    prefill_ns_per_token: int = 198_510
    prefill_ps_per_token_sq: int = 5_394
    prefill_ns: int = 6_827_957
    decode_ns_per_seq: int = 250_000
    decode_ns_per_token: int = 2_600
    decode_ns: int = 20_000_000
    gap_ns: int = 4_000_000
    kv_bytes_per_token: int = 524_288
    bandwidth_bps: int = 64_000_000_000
    rpc_ns: int = 1_000_000

    def validate(self) -> None:
        names = [f.name for f in fields(self)]
        _ints(self, *names)
        _non_negative(self, *names)
        _positive(self, "bandwidth_bps", "kv_bytes_per_token")
        if self.decode_ns + self.gap_ns == 0 or self.prefill_ns + self.gap_ns == 0:
            raise UserError("CostConfig: decode_ns + gap_ns and prefill_ns + gap_ns must be > 0 "
                            "(a step must take time)")


@dataclass(frozen=True)
class ClusterConfig:
    """The serving cluster: how many instances and how fresh their load reports are.

    report_interval_s = 0 means the load is refreshed every engine step (the AE); > 0 means the
    global scheduler polls every that many seconds (HEAD: 0.05), so requests dispatched since the
    last poll are invisible to load-based dispatch.
    """

    num_instances: int = 16
    report_interval_s: float = 0.0

    def validate(self) -> None:
        _positive(self, "num_instances")
        _non_negative(self, "report_interval_s")


@dataclass(frozen=True)
class SimConfig:
    """One simulation run: engine, costs, cluster, SLO targets and how the simulator executes.

    fast=False steps every decode step one by one (the reference the closed-form path must equal).
    sample_interval_s: how often the fragmentation metric samples the cluster (simulated seconds).
    """

    engine: EngineConfig = EngineConfig()
    cost: CostConfig = CostConfig()
    cluster: ClusterConfig = ClusterConfig()
    slo: SLOConfig = SLOConfig()
    fast: bool = True
    sample_interval_s: float = 1.0

    def validate(self) -> None:
        for part in (self.engine, self.cost, self.cluster, self.slo):
            part.validate()
        _positive(self, "sample_interval_s")
