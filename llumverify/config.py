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
