"""Synthetic workloads as the Llumnix paper ran them (LLUMNIX.md §2): arrivals plus prompt/output lengths.

Random-stream contract (why: same arguments must give bit-identical requests, and changing one
option must not silently reshuffle the others): `generate` makes ONE `numpy.random.default_rng(seed)`
and draws, in this order,
  1. n inter-arrival gaps (`arrival_times`),
  2. n input lengths, then 3. n output lengths (`sample_lengths`, one `rng.random()` double each),
  4. only if `high_priority_frac > 0`: which requests are HIGH (`rng.choice` without replacement).

`stream="artifact"` draws instead as the paper's benchmark does (the artifact's
benchmarks-repo/benchmark_throughput.py:734-770, 952-960, 25-34, 46-56, osdi24ae): a legacy
`numpy.random.RandomState(seed)` gives n input lengths, then n output lengths (`RandomState.choice`
with p: one `random_sample()` double each, inverse-transform), then one gap per request; request i
is sent after the first i gaps, so the first at t = 0. The paper seeds it with 0xCADE (51934) for
every run, so `--stream artifact --seed 51934` replays Fig. 11's own sample path of a generated
trace, and its five rates of a trace share lengths and standard-exponential gaps (scaled by 1/rate).
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from llumverify.settings.config import MAX_TIME_S
from llumverify.errors import UserError
from llumverify.requests import HIGH, NORMAL, RequestSpec, SpecTable

ARRIVALS = ("poisson", "gamma")
STREAMS = ("llumverify", "artifact")  # whose draw order generates the requests (module doc)
ARTIFACT_SEED = 0xCADE  # the seed of every run of the paper's benchmark
# Generated requests per run at most: the workload's columns and the run's ledger hold ~55 bytes
# per request, so a typo like 10**12 should be a one-line error, not an allocation failure.
MAX_REQUESTS = 100_000_000

# Power-law families: mean -> Zipf exponent (§2). "XL" (mean 1024) is in the artifact's generator
# but not in Table 1 of the paper.
_ZIPF: dict[str, tuple[int, float]] = {"S": (128, 2.0), "M": (256, 1.5), "L": (512, 1.15), "XL": (1024, 1.0005)}
ZIPF_CAP = 6144

# Table 1 of §2: (mean, P50, P80, P95, P99) for input and output of the two real-trace families.
TABLE1: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "sharegpt": ((306, 74, 348, 1484, 3388), (500, 487, 781, 988, 1234)),
    "burstgpt": ((830, 582, 1427, 2345, 3549), (271, 243, 434, 669, 964)),
}
_KNOT_PROBS = (0.5, 0.8, 0.95, 0.99, 1.0)
# The artifact's streams of the two Table-1 families (osdi24ae benchmarks-repo/benchmark_throughput.py,
# docs/workloads.md): Table 1 up to P99, then the power law through P95 and P99 up to the AE's bound
# instead of the fit's P100 (about 1.1 x P99). name -> (Table-1 family, the bound in tokens).
AE_TAILS: dict[str, tuple[str, int]] = {
    # sample_dataset_requests (:837-861) drops a conversation's lengths, not its prompt: the prompts
    # sent, zipped out of step with the kept lengths (:1006), include every first turn of the file's
    # first 10,001 conversations, up to what one testbed instance admits, (792 - 8 watermark) x 16
    "sharegpt-ae": ("sharegpt", 12_544),
    "burstgpt-ae": ("burstgpt", 6_144),  # sample_burstgpt_request (:863-878) caps each length at 6,144
}

LENGTHS = ("sharegpt", "burstgpt", *AE_TAILS, *_ZIPF, *(f"{a}-{b}" for a in _ZIPF for b in _ZIPF))


def arrival_times(n: int, rate: float, rng: np.random.Generator | np.random.RandomState,
                  arrival: str = "poisson", cv: float = 1.0, first_at_zero: bool = False) -> np.ndarray:
    """Absolute arrival times in seconds, sorted: the first arrival after one gap (> 0), or at 0
    with first_at_zero (the artifact's benchmark sends a request, then sleeps one gap).

    Poisson: exponential gaps of mean 1/rate (cv must be 1). Gamma: shape 1/cv², scale cv²/rate,
    so the mean gap is still 1/rate and the gaps' coefficient of variation is cv.
    """
    _check_count(n)
    if not (isinstance(rate, numbers.Real) and math.isfinite(rate) and rate > 0):
        raise UserError(f"rate must be a positive number of requests/s, got {rate!r}")
    if arrival not in ARRIVALS:
        raise UserError(f"unknown arrival process {arrival!r}: choose one of {', '.join(ARRIVALS)}")
    if not (math.isfinite(cv) and cv > 0 and math.isfinite(cv * cv)):  # the gamma shape is 1/cv²
        raise UserError(f"cv must be positive (and below 1e154), got {cv!r}")
    if arrival == "poisson":
        if cv != 1.0:
            raise UserError(f"a Poisson process has cv 1, got cv={cv!r}: use arrival='gamma' for other CVs")
        gaps = rng.exponential(1.0 / rate, n)
    else:
        gaps = rng.gamma(1.0 / cv**2, cv**2 / rate, n)
    times = np.cumsum(gaps)
    if first_at_zero and n:
        times = np.concatenate(([0.0], times[:-1]))
    if n and not times[-1] <= MAX_TIME_S:  # also catches inf and nan from extreme rates or CVs
        raise UserError(f"arrivals reach {times[-1]:.3g} s, beyond the simulator's {MAX_TIME_S:.0e} s: "
                        f"rate {rate!r} req/s{f' with cv {cv!r}' if arrival == 'gamma' else ''} "
                        f"is too low for {n} requests")
    return times


def sample_lengths(n: int, lengths: str, rng: np.random.Generator | np.random.RandomState) -> tuple[np.ndarray, np.ndarray]:
    """(prompt_tokens, output_tokens) as int64 arrays, every value >= 1; inputs drawn first, then outputs.

    "X" means "X-X"; "X-Y" takes inputs from power-law family X and outputs from Y.
    """
    _check_count(n)
    if lengths not in LENGTHS:
        raise UserError(f"unknown length distribution {lengths!r}: choose one of {', '.join(LENGTHS)}")
    if lengths in TABLE1 or lengths in AE_TAILS:
        return _table_lengths(n, lengths, 0, rng), _table_lengths(n, lengths, 1, rng)
    inp, _, out = lengths.partition("-")
    return _zipf_lengths(n, inp, rng), _zipf_lengths(n, out or inp, rng)


def generate(n: int, rate: float, lengths: str = "sharegpt", arrival: str = "poisson", cv: float = 1.0,
             seed: int = 0, high_priority_frac: float = 0.0, stream: str = "llumverify") -> SpecTable:
    """n requests with ids 0..n-1 in arrival order, from one seeded stream (order in the module doc),
    as compact columns (requests.SpecTable: 17 bytes a request)."""
    if not (0.0 <= high_priority_frac <= 1.0):
        raise UserError(f"high_priority_frac must be in [0, 1], got {high_priority_frac!r}")
    if stream not in STREAMS:
        raise UserError(f"unknown stream {stream!r}: choose one of {', '.join(STREAMS)}")
    if stream == "artifact":
        if high_priority_frac > 0:
            raise UserError("stream artifact replays the paper's serving runs, which have no priority classes: "
                            "use stream llumverify with high_priority_frac")
        if lengths in TABLE1 or lengths in AE_TAILS:
            raise UserError(f"stream artifact draws the power-law families only (the paper sampled {lengths} "
                            "from its dataset, which is not available): use stream llumverify")
        if not 0 <= seed < 2**32:
            raise UserError(f"stream artifact needs a seed in [0, 2**32) (NumPy's RandomState), got {seed}")
        legacy = np.random.RandomState(seed)
        prompt, output = sample_lengths(n, lengths, legacy)
        times = arrival_times(n, rate, legacy, arrival, cv, first_at_zero=True)
        return SpecTable(times, prompt, output, np.full(n, NORMAL, dtype=np.int64))
    rng = np.random.default_rng(seed)
    times = arrival_times(n, rate, rng, arrival, cv)
    prompt, output = sample_lengths(n, lengths, rng)
    priority = np.full(n, NORMAL, dtype=np.int64)
    if high_priority_frac > 0:
        priority[rng.choice(n, size=round(high_priority_frac * n), replace=False)] = HIGH
    return SpecTable(times, prompt, output, priority)


def _check_count(n: int) -> None:
    if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 0:
        raise UserError(f"number of requests must be a non-negative integer, got {n!r}")


@functools.cache
def _zipf_cdf(family: str) -> np.ndarray:
    mean, exponent = _ZIPF[family]
    pmf = np.arange(1, 2 * mean, dtype=np.float64) ** -exponent
    cdf = np.cumsum(pmf / pmf.sum())
    cdf[-1] = 1.0  # no draw may fall past the last rank through rounding
    return cdf


def _zipf_lengths(n: int, family: str, rng: np.random.Generator | np.random.RandomState) -> np.ndarray:
    """Artifact's power-law generator: Zipf ranks over 1..2·mean−1, rescaled to the target mean, ceil, cap."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    ranks = np.searchsorted(_zipf_cdf(family), rng.random(n), side="right") + 1  # RandomState: random_sample
    scaled = np.ceil(ranks * (_ZIPF[family][0] / ranks.mean()))
    return np.minimum(scaled, ZIPF_CAP).astype(np.int64)


@functools.cache
def table_fit(lengths: str, which: int) -> tuple[tuple[float, ...], float, float]:
    """Inverse-CDF fit of one Table-1 row: (knot values at P50, P80, P95, P99, P100), bottom-curve
    gamma, tail exponent b (0: no power-law tail).

    Between the table's knots the inverse CDF is log-linear. Above P99: for a Table-1 family, P100
    (the cap) extends the P95–P99 log-slope to u = 1; for an AE stream (AE_TAILS) x(u) = P99·(0.01 /
    (1 − u))^b, the power law through P95 and P99 (b = ln(P99/P95) / ln 5), cut at the stream's
    bound (P100). Below P50 it is log x = ln(P50)·(u/0.5)^gamma from x = 1 at u = 0, with gamma
    solved so the distribution's mean equals the table's mean (the knots stay exact); where the
    upper half alone exceeds that mean (the ShareGPT prompts' tail), gamma is the family's own.
    """
    family, bound = AE_TAILS.get(lengths, (lengths, 0))
    mean, *q = TABLE1[family][which]
    b = math.log(q[3] / q[2]) / math.log(5) if bound else 0.0
    if not b < 1:  # P99 >= 5 x P95: the tail's mean would not be finite
        raise ValueError(f"{family}: P99 / P95 >= 5 has no power-law tail with a mean")
    knots = (*map(float, q), float(bound) if bound else q[3] * (q[3] / q[2]) ** 0.25)
    upper = 0.0
    for (u0, u1), (lo_x, hi_x) in zip(zip(_KNOT_PROBS, _KNOT_PROBS[1:]), zip(knots, knots[1:])):
        if u1 == 1.0 and bound:  # ∫ min(P99·(0.01/v)^b, bound) dv over v = 1 − u in (0, 0.01)
            v_cut = 0.01 * (lo_x / hi_x) ** (1 / b)
            upper += hi_x * v_cut + lo_x * 0.01**b * (0.01 ** (1 - b) - v_cut ** (1 - b)) / (1 - b)
        else:
            upper += (u1 - u0) * (hi_x - lo_x) / math.log(hi_x / lo_x)
    need = (mean - upper) / 0.5  # required mean of x over the bottom half
    if need <= 1:  # no bottom curve from x = 1 has a mean this low
        return knots, table_fit(family, which)[1], b
    v = (np.arange(20_000) + 0.5) / 20_000
    log_p50 = math.log(knots[0])
    lo, hi = 1e-3, 1e3
    for _ in range(80):  # bottom mean falls as gamma rises: bisect in log space
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if np.exp(log_p50 * v**mid).mean() > need else (lo, mid)
    return knots, math.sqrt(lo * hi), b


def _table_lengths(n: int, lengths: str, which: int, rng: np.random.Generator) -> np.ndarray:
    knots, gamma, b = table_fit(lengths, which)
    u = rng.random(n)
    x = np.exp(math.log(knots[0]) * (np.minimum(u, 0.5) / 0.5) ** gamma)
    upper = u > 0.5
    if b:
        logx = np.interp(np.minimum(u[upper], 0.99), _KNOT_PROBS[:4], np.log(knots[:4]))
        top = u[upper] > 0.99
        logx[top] = np.minimum(math.log(knots[3]) + b * np.log(0.01 / (1 - u[upper][top])), math.log(knots[4]))
    else:
        logx = np.interp(u[upper], _KNOT_PROBS, np.log(knots))
    x[upper] = np.exp(logx)
    return np.maximum(np.rint(x), 1).astype(np.int64)


def shared_prefixes(specs: Sequence[RequestSpec], groups: int = 4, shared: int = 20) -> list[RequestSpec]:
    """The requests with chained 16-token block hashes: each prompt's first `shared` blocks common
    to its group (id mod `groups`), the rest its own, so a prefix cache has something to share
    (tests and benchmarks of the vllm-v1 engine)."""
    out = []
    for s in specs:
        n = s.prompt_tokens // 16
        k = min(n, shared)
        ids = tuple([1000 * (s.id % groups) + j for j in range(k)] + [10**6 + 10**4 * s.id + j for j in range(n - k)])
        out.append(replace(s, hash_ids=ids, hash_block=16))
    return out
