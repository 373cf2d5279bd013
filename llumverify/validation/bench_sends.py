"""When a `vllm bench serve` result without `start_times` sent its requests, redrawn as vLLM drew them.

vLLM's serving benchmark wrote no per-request send times until its late-2025 versions, so most
published result files lack them. Their sends are not random to us: the benchmark seeds numpy's
global generator (`np.random.seed(args.seed)`, default 0) and, with a finite `request_rate`, draws
each gap as `np.random.gamma(burstiness, 1 / (request_rate * burstiness))`, one per request in file
order. Two rules turned the gaps into sends:
- before vLLM 0.10 (benchmarks/benchmark_serving.py `get_request`): request 0 at once, each next one
  a gap after the previous; the generator sleeps the last gap too before the run's clock stops;
- from vLLM 0.10 (PR #21108, `vllm bench serve`): request i at the sum of gaps 0..i, rescaled so the
  last is sent at num_prompts / request_rate.
With `request_rate` inf every request is sent at once (no seed used). The file does not say which
rule or seed ran, so each rule is checked against what the file does record: the run's `duration`
can be no shorter than the latest (send + measured E2E) or the client's last sleep, and is longer
only by the client's lag (asyncio sleeps overshoot). A rule whose sends end the run after its
recorded duration, or well before it, did not run. A file without `burstiness` predates vLLM 0.6.4,
so only the first rule applies; where both rules fit, the file cannot say which ran and the user
names it (--bench-rule); where none fits, the file is refused (wrong seed, or the `random` dataset,
whose sampling drew from numpy's generator first in vLLM 0.8).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from llumverify.errors import UserError
from llumverify.files.inputs import finite

PRE_010, FROM_010, BURST = "pre-0.10", "0.10", "burst"
RULES = {PRE_010: "vLLM < 0.10 (each gap after the previous send)",
         FROM_010: "vLLM >= 0.10 (gaps rescaled to num_prompts / rate)",
         BURST: "request_rate inf (all at once)"}
MAX_SEED = (1 << 32) - 1  # numpy's legacy seeding takes 32 bits


@dataclass(frozen=True)
class Schedule:
    """One rule's sends (s from the first possible send, file order) and when the client stopped
    sleeping (the pre-0.10 generator sleeps its last gap before the run's clock stops)."""

    sends: np.ndarray
    idle_until: float


@dataclass(frozen=True)
class Redraw:
    """--bench-seed and --bench-rule: how to redraw a result's missing sends (None: vLLM's default
    seed 0; whichever rule fits)."""

    seed: int | None = None
    rule: str | None = None

    def given(self) -> str:
        """The options given, as the user typed them ("" if none)."""
        return " and ".join(o for o, v in (("--bench-seed", self.seed), ("--bench-rule", self.rule)) if v is not None)


def lag_allowed(duration: float) -> float:
    """Seconds the recorded duration may exceed the redrawn end: the client's accumulated sleep
    overshoot (0.14 s over 200 sends in surajssd/llm-k8s's vLLM 0.8.3 runs) with room to spare."""
    return max(1.0, 0.01 * duration)


def schedules(n: int, rate: float, burstiness: float, seed: int) -> dict[str, Schedule]:
    """Each rule's schedule of n requests (a burst: one; burstiness inf: vLLM 0.10's constant gaps only)."""
    if math.isinf(rate):
        return {BURST: Schedule(np.zeros(n), 0.0)}
    if math.isinf(burstiness):
        ends = np.arange(1, n + 1) / rate
        return {FROM_010: Schedule(ends, float(ends[-1]))}
    with np.errstate(over="ignore"):  # a rate of 1e-300: gaps of inf, refused by the duration check
        ends = np.cumsum(np.random.RandomState(seed).gamma(burstiness, 1.0 / (rate * burstiness), n))
    scaled = ends * (n / rate) / ends[-1] if ends[-1] > 0 else ends  # vLLM skips the rescale of all-zero gaps
    return {PRE_010: Schedule(np.concatenate(([0.0], ends[:-1])), float(ends[-1])),
            FROM_010: Schedule(scaled, float(scaled[-1]))}


def _traffic(doc: dict, path: Path) -> tuple[float, float]:
    """(request_rate, burstiness) as the file records them; what stops a redraw is refused."""
    if "request_rate" not in doc:
        raise UserError(f"{path}: no start_times and no request_rate: the sends cannot be known (write the result with "
                        "a vLLM that records start_times)")
    for key in ("max_concurrency", "ramp_up_strategy"):
        if doc.get(key) not in (None, 0):  # vLLM: max_concurrency 0 holds nothing back
            raise UserError(f"{path}: no start_times, and {key} {doc[key]!r}: the client held or paced its sends in a way "
                            "that cannot be redrawn (write the result with a vLLM that records start_times)")

    def positive(key: str, default: object) -> float:
        raw = doc.get(key, default)
        if raw in ("inf", "Infinity") or (isinstance(raw, float) and raw == math.inf):
            return math.inf
        return finite(raw, f"{path}: {key}", gt=0)

    return positive("request_rate", None), positive("burstiness", 1.0)


def redrawn_sends(doc: dict, path: Path, e2e: np.ndarray, redraw: Redraw) -> tuple[np.ndarray, str]:
    """Send times (s, file order) of a result without start_times, and a line saying how they were drawn."""
    seed, rule = redraw.seed, redraw.rule
    if seed is not None and not 0 <= seed <= MAX_SEED:
        raise UserError(f"--bench-seed must be in [0, {MAX_SEED}] (numpy's legacy seed), got {seed}")
    rate, burstiness = _traffic(doc, path)
    if "duration" not in doc:
        raise UserError(f"{path}: no start_times and no duration: redrawn sends could not be checked against the run")
    duration = finite(doc["duration"], f"{path}: duration", gt=0)
    found = schedules(len(e2e), rate, burstiness, 0 if seed is None else seed)
    if BURST in found and seed is not None:
        raise UserError(f"{path}: request_rate inf sends every request at once: there are no gaps for --bench-seed to draw")
    if "burstiness" not in doc:  # written before vLLM 0.6.4: its one rule
        found.pop(FROM_010, None)
    if rule is not None:
        if rule not in found:
            raise UserError(f"{path}: --bench-rule {rule} does not apply to this file (request_rate {rate:g}"
                            + (", no burstiness: vLLM < 0.6.4" if "burstiness" not in doc else "") + ")")
        found = {rule: found[rule]}
    ends = {r: max(float(np.max(s.sends + e2e)), s.idle_until) for r, s in found.items()}
    fits = {r: duration - end for r, end in ends.items() if -1e-3 <= duration - end <= lag_allowed(duration)}
    drawn = "" if BURST in found else f" with seed {0 if seed is None else seed}"
    if not fits:
        tried = "; ".join(f"{RULES[r]}: {end:.4g} s" for r, end in ends.items())
        raise UserError(f"{path}: no start_times, and the sends redrawn{drawn} (request_rate {rate:g}, burstiness "
                        f"{burstiness:g}) do not end the run at its recorded duration {duration:.4g} s ({tried}): give the "
                        "seed it ran with (--bench-seed), or a result with start_times (a `random`-dataset run of vLLM "
                        "0.8 drew from numpy's generator before its gaps)")
    if len(fits) > 1:
        margins = ", ".join(f"{RULES[r]}: {m:.3g} s" for r, m in fits.items())
        raise UserError(f"{path}: no start_times, and both of vLLM's send rules end the run within its recorded duration "
                        f"{duration:.4g} s ({margins} before it): say which vLLM wrote the file with --bench-rule "
                        f"{PRE_010} or {FROM_010}")
    (chosen, margin), = fits.items()
    how = "" if BURST in found else f", seed {0 if seed is None else seed} (--bench-seed)"
    note = (f"arrivals: not in the file (no start_times); redrawn as vLLM's benchmark drew them{how}, {RULES[chosen]}: "
            f"they end the run {margin:.3g} s before its recorded duration {duration:.4g} s (the client's lag)")
    return found[chosen].sends, note
