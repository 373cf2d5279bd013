"""The benchmark client's own time per request, which a harness measuring at the client adds to the
engine's TTFT and E2E: a constant (HTTP, hand-off to the engine, streaming the answer back, the
client itself) plus a time per prompt token (the API server tokenises the prompt before any engine
sees it). One place for both, so every client-measured replay adds the same thing."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from llumverify.files.inputs import finite

# Per prompt token, µs: the median of BLIS's fits of its per-input-token alpha to real vLLM 0.8.4 runs
# (inference-sim/inference-sim defaults.yaml at 1a6eb35: Llama-3.1-8B on A100-80GB and H100 at TP 1, 2, 4:
# 1.75-4.39 µs). Sourced, not fitted here; docs/engines.md, "the serving front end".
CLIENT_US_PER_TOKEN = 2.25
# Per request, ms, beside CLIENT_US_PER_TOKEN: the mean TTFT gap (measured minus simulated at the
# engine, less the per-token part) on the stages of the one calibration run whose workload is published
# as it ran (inference-sim/training's 20260217-155451 Llama-2-7B codegen run of vLLM 0.15.1 on H100;
# `python benchmarks/inference_perf_runs.py TRAINING_DIR --client-fit`), to the 0.5 ms. It also holds
# whatever TTFT bias the simulator has there; on another GPU or harness, measure and give --client-ms.
CLIENT_MS = 7.5


@dataclass(frozen=True)
class ClientTime:
    """The client's time for one request: `fixed_s` plus `per_token_s` per prompt token (0, 0: engine
    timestamps); `how`: where the two came from, for what validate prints."""

    fixed_s: float = 0.0
    per_token_s: float = 0.0
    how: str = field(default="", compare=False)

    def seconds(self, prompt_tokens: np.ndarray | float) -> np.ndarray | float:
        """Seconds added to the TTFT and E2E of requests of `prompt_tokens` prompt tokens."""
        return self.fixed_s + self.per_token_s * prompt_tokens

    def terms(self) -> str:
        """The two terms in words."""
        return f"{self.fixed_s * 1e3:g} ms per request + {self.per_token_s * 1e6:g} µs per prompt token"

    def describe(self) -> str:
        """The line validate prints of it."""
        return f"client: {self.terms()} added to the simulated TTFT and E2E ({self.how})"


def client_time(client_ms: float | None = None, client_us_per_token: float | None = None) -> ClientTime:
    """The client time from --client-ms and --client-us-per-token, each defaulting to the shipped value."""
    fixed = CLIENT_MS if client_ms is None else finite(client_ms, "--client-ms", ge=0)
    per_token = CLIENT_US_PER_TOKEN if client_us_per_token is None else finite(client_us_per_token,
                                                                               "--client-us-per-token", ge=0)
    sources = {"--client-ms": (client_ms, "per request from a vLLM v0.15.1 H100 run"),
               "--client-us-per-token": (client_us_per_token, "per token from BLIS's vLLM fits")}
    how = [", ".join(flag for flag, (given, _) in sources.items() if given is not None)]
    if shipped := [f"{why} ({flag})" for flag, (given, why) in sources.items() if given is None]:
        how.append(f"shipped: {', '.join(shipped)}, docs/engines.md")
    return ClientTime(fixed / 1e3, per_token / 1e6, "; ".join(h for h in how if h))
