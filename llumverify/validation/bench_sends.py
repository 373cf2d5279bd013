"""When a `vllm bench serve` result without `start_times` sent its requests, redrawn as vLLM drew them.

vLLM's serving benchmark wrote no per-request send times until its late-2025 versions, so most
published result files lack them. Their sends are not random to us: the benchmark seeds numpy's
global generator (`np.random.seed(args.seed)`, default 0) and, with a finite `request_rate`, draws
each gap as `np.random.gamma(burstiness, 1 / (request_rate * burstiness))`, one per request in file
order. Two rules turned the gaps into sends:
- before vLLM 0.10 (benchmarks/benchmark_serving.py `get_request`): request 0 at once, each next one
  a gap after the previous (the last gap is drawn and unused);
- from vLLM 0.10 (PR #21108, `vllm bench serve`): request i at the sum of gaps 0..i, rescaled so the
  last is sent at num_prompts / request_rate.
With `request_rate` inf every request is sent at once. The file does not say which rule or seed ran,
so each rule is checked against what the file does record: the run's `duration` can be no shorter
than the latest (send + measured E2E), and is longer only by the client's lag (asyncio sleeps
overshoot). A rule whose sends end the run after its recorded duration, or well before it, did not
run; if no rule fits, the file is refused (wrong seed, or a dataset whose sampling drew from numpy's
generator first, as the `random` dataset of some versions did).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from llumverify.errors import UserError
from llumverify.files.inputs import finite

RULES = ("vLLM < 0.10 (each gap after the previous send)", "vLLM >= 0.10 (gaps rescaled to num_prompts / rate)")
MAX_SEED = (1 << 32) - 1  # numpy's legacy seeding takes 32 bits


def lag_allowed(duration: float) -> float:
    """Seconds the recorded duration may exceed the redrawn end: the client's accumulated sleep
    overshoot (0.14 s over 200 sends in surajssd/llm-k8s's vLLM 0.8.3 runs) with room to spare."""
    return max(1.0, 0.01 * duration)


def schedules(n: int, rate: float, burstiness: float, seed: int) -> dict[str, np.ndarray]:
    """Each rule's send times (s from the first possible send) of n requests."""
    if math.isinf(rate):
        return {"request_rate inf (all at once)": np.zeros(n)}
    gaps = np.random.RandomState(seed).gamma(burstiness, 1.0 / (rate * burstiness), n)
    ends = np.cumsum(gaps)
    return {RULES[0]: np.concatenate(([0.0], ends[:-1])), RULES[1]: ends * (n / rate) / ends[-1]}


def _traffic(doc: dict, path: Path) -> tuple[float, float]:
    """(request_rate, burstiness) as the file records them; what stops a redraw is refused."""
    if "request_rate" not in doc:
        raise UserError(f"{path}: no start_times and no request_rate: the sends cannot be known (write the result with "
                        "a vLLM that records start_times)")
    for key in ("max_concurrency", "ramp_up_strategy"):
        if doc.get(key) is not None:
            raise UserError(f"{path}: no start_times, and {key} {doc[key]!r}: the client held or paced its sends in a way "
                            "that cannot be redrawn (write the result with a vLLM that records start_times)")
    raw = doc["request_rate"]
    rate = math.inf if raw in ("inf", "Infinity") else finite(raw, f"{path}: request_rate", gt=0)
    burstiness = finite(doc.get("burstiness", 1.0), f"{path}: burstiness", gt=0)
    return rate, burstiness


def redrawn_sends(doc: dict, path: Path, e2e: np.ndarray, seed: int) -> tuple[np.ndarray, str]:
    """Send times (s, file order) of a result without start_times, and a line saying how they were drawn."""
    if not 0 <= seed <= MAX_SEED:
        raise UserError(f"--bench-seed must be in [0, {MAX_SEED}] (numpy's legacy seed), got {seed}")
    rate, burstiness = _traffic(doc, path)
    if "duration" not in doc:
        raise UserError(f"{path}: no start_times and no duration: redrawn sends could not be checked against the run")
    duration = finite(doc["duration"], f"{path}: duration", gt=0)
    found = schedules(len(e2e), rate, burstiness, seed)
    ends = {rule: float(np.max(sends + e2e)) for rule, sends in found.items()}
    fits = {rule: duration - end for rule, end in ends.items() if -1e-3 <= duration - end <= lag_allowed(duration)}
    if not fits:
        tried = "; ".join(f"{rule}: {end:.2f} s" for rule, end in ends.items())
        raise UserError(f"{path}: no start_times, and the sends redrawn with seed {seed} (request_rate {rate:g}, burstiness "
                        f"{burstiness:g}) do not end the run at its recorded duration {duration:.2f} s ({tried}): give the "
                        "seed it ran with (--bench-seed) or a result with start_times")
    rule = min(fits, key=lambda r: fits[r])
    note = (f"arrivals: not in the file (no start_times); redrawn as vLLM's benchmark drew them, seed {seed} "
            f"(--bench-seed), {rule}: they end the run {fits[rule]:.2f} s before its recorded duration "
            f"{duration:.2f} s (the client's lag)")
    return found[rule], note
