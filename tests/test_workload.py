"""Synthetic workloads: Table-1 fits, the power-law generator, arrival processes, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from llumverify.errors import UserError
from llumverify.requests import HIGH, NORMAL
from llumverify.sim.workload import (
    AE_TAILS, ARRIVALS, LENGTHS, TABLE1, ZIPF_CAP, arrival_times, generate, sample_lengths, table_fit,
)


@pytest.mark.parametrize("family", sorted(TABLE1))
def test_table1_fit_quantiles_and_mean(family: str) -> None:
    prompt, output = sample_lengths(100_000, family, np.random.default_rng(7))
    for sample, (mean, *quantiles) in zip((prompt, output), TABLE1[family]):
        got = np.percentile(sample, [50, 80, 95, 99])
        assert np.all(np.abs(got - quantiles) <= 0.10 * np.array(quantiles)), (got, quantiles)
        assert abs(sample.mean() - mean) <= 0.05 * mean
        assert sample.min() >= 1 and sample.dtype == np.int64


@pytest.mark.parametrize("family", sorted(TABLE1))
def test_table1_fit_cap_extends_the_tail(family: str) -> None:
    for which in (0, 1):
        knots, gamma, b = table_fit(family, which)
        assert knots[:4] == tuple(map(float, TABLE1[family][which][1:]))
        assert knots[3] < knots[4] < 1.5 * knots[3] and gamma > 0 and b == 0


@pytest.mark.parametrize("lengths", sorted(AE_TAILS))
def test_ae_stream_keeps_table1_up_to_p99_and_goes_on_as_a_power_law_to_its_bound(lengths: str) -> None:
    family, bound = AE_TAILS[lengths]
    draws = sample_lengths(400_000, lengths, np.random.default_rng(11))
    for which, sample in enumerate(draws):
        mean, *quantiles = TABLE1[family][which]
        got = np.percentile(sample, [50, 80, 95, 99])
        assert np.all(np.abs(got - quantiles) <= 0.05 * np.array(quantiles)), (got, quantiles)
        assert sample.max() <= bound and sample.min() >= 1
        # the power law through P95 and P99: P(x > 1.5 P99) = 1 % x 1.5^(-1/b), beyond the fit's P100
        b = table_fit(lengths, which)[2]
        share = (sample > 1.5 * quantiles[3]).mean()
        assert share == pytest.approx(0.01 * 1.5 ** (-1 / b), rel=0.15)
        assert table_fit(family, which)[0][4] < 1.5 * quantiles[3]  # the family's own fit has none there
        if lengths == "sharegpt-ae" and which == 0:
            assert sample.mean() > 1.05 * mean  # the tail alone passes Table 1's mean: the bottom curve is kept
        else:
            assert sample.mean() == pytest.approx(mean, rel=0.02)


def test_sharegpt_ae_prompts_are_sharegpts_below_p99_and_longer_above() -> None:
    """Same draws, same curve up to P99 (the bottom curve is kept): only the tail differs."""
    fitted = sample_lengths(20_000, "sharegpt", np.random.default_rng(5))[0]
    ae = sample_lengths(20_000, "sharegpt-ae", np.random.default_rng(5))[0]
    below = fitted < TABLE1["sharegpt"][0][4]
    assert np.array_equal(fitted[below], ae[below])
    assert np.all(ae[~below] >= fitted[~below]) and ae.max() > 2 * fitted.max()


@pytest.mark.parametrize("family,mean", [("S", 128), ("M", 256), ("L", 512), ("XL", 1024)])
def test_power_law_properties(family: str, mean: int) -> None:
    prompt, output = sample_lengths(50_000, family, np.random.default_rng(3))
    for sample in (prompt, output):
        assert sample.dtype == np.int64 and sample.min() >= 1 and sample.max() <= ZIPF_CAP
        # ceil adds < 1 token per draw; only the 6,144 cap (hit by XL) pulls the mean below target
        assert mean * 0.95 <= sample.mean() <= mean + 1


def test_power_law_matches_table1_shape() -> None:
    """The generator defines Table 1's S/M/L rows; medians and P80 agree within 15 % on 10k draws."""
    table = {"S": (38, 113), "M": (32, 173), "L": (55, 582)}
    for family, (p50, p80) in table.items():
        got = np.percentile(sample_lengths(10_000, family, np.random.default_rng(0))[0], [50, 80])
        assert np.all(np.abs(got - (p50, p80)) <= 0.15 * np.array((p50, p80))), (family, got)


def test_pair_takes_input_and_output_families() -> None:
    a_in, _ = sample_lengths(1000, "S", np.random.default_rng(1))
    b_in, b_out = sample_lengths(1000, "S-L", np.random.default_rng(1))
    assert np.array_equal(a_in, b_in)  # inputs drawn first, from the same stream position
    assert b_out.mean() > 3 * b_in.mean()
    assert {"S-S", "M-M", "L-L", "S-L", "L-S", "sharegpt", "burstgpt"} <= set(LENGTHS)


@pytest.mark.parametrize("arrival,cv", [("poisson", 1.0), ("gamma", 0.5), ("gamma", 2.0), ("gamma", 6.0)])
def test_arrival_rate_and_cv(arrival: str, cv: float) -> None:
    times = arrival_times(200_000, 4.0, np.random.default_rng(11), arrival, cv)
    gaps = np.diff(np.concatenate(([0.0], times)))
    assert times[0] > 0 and np.all(gaps >= 0)
    assert abs(len(times) / times[-1] - 4.0) <= 0.04 * 4.0
    assert abs(gaps.std() / gaps.mean() - cv) <= 0.05 * cv
    assert arrival in ARRIVALS


def test_generate_is_deterministic_and_ordered() -> None:
    a = generate(2000, 8.0, "burstgpt", seed=5, high_priority_frac=0.1)
    assert a == generate(2000, 8.0, "burstgpt", seed=5, high_priority_frac=0.1)
    assert a != generate(2000, 8.0, "burstgpt", seed=6, high_priority_frac=0.1)
    assert [r.id for r in a] == list(range(2000))
    assert all(x.arrival_s <= y.arrival_s for x, y in zip(a, a[1:]))
    assert all(type(r.prompt_tokens) is int and type(r.arrival_s) is float for r in a)


def test_high_priority_fraction_is_exact_and_last_in_stream() -> None:
    reqs = generate(1000, 26.0, "S-S", "gamma", 4.0, seed=2, high_priority_frac=0.1)
    assert sum(r.priority == HIGH for r in reqs) == 100
    plain = generate(1000, 26.0, "S-S", "gamma", 4.0, seed=2)
    assert all(r.priority == NORMAL for r in plain)
    assert [(r.arrival_s, r.prompt_tokens) for r in plain] == [(r.arrival_s, r.prompt_tokens) for r in reqs]


@pytest.mark.parametrize("kwargs,needle", [
    ({"rate": 0.0}, "rate must be a positive number"),
    ({"rate": 1.0, "lengths": "XXL"}, "unknown length distribution"),
    ({"rate": 1.0, "arrival": "uniform"}, "unknown arrival process"),
    ({"rate": 1.0, "cv": 2.0}, "Poisson process has cv 1"),
    ({"rate": 1.0, "arrival": "gamma", "cv": 0.0}, "cv must be positive"),
    ({"rate": 1.0, "high_priority_frac": 1.5}, "high_priority_frac"),
])
def test_bad_arguments(kwargs: dict, needle: str) -> None:
    with pytest.raises(UserError, match=needle):
        generate(10, **kwargs)


def test_zero_requests() -> None:
    assert generate(0, 1.0, "S") == []
    with pytest.raises(UserError, match="non-negative integer"):
        generate(-1, 1.0)


def _artifact_lengths(rs: np.random.RandomState, mean: int, alpha: float, n: int) -> np.ndarray:
    """The artifact's gen_random_response_lens('zipf', mean, 6144, n) (benchmark_throughput.py:752-770),
    written out with NumPy's own RandomState.choice: an oracle independent of sim/workload.py."""
    rank = np.arange(1, mean * 2)
    p = rank.astype(np.float64) ** -alpha
    lens = rs.choice(rank, size=n, p=p / p.sum())
    lens = np.ceil(lens * (mean / np.mean(lens))).astype(int)
    return np.minimum(lens, 6144)


def test_artifact_stream_replays_the_papers_benchmark_draws() -> None:
    """stream="artifact" draws what the artifact's benchmark draws after np.random.seed(0xCADE):
    inputs, outputs, then one exponential gap per request, the first request sent at t = 0."""
    n, rate = 3000, 2.8
    got = generate(n, rate, "M-L", seed=0xCADE, stream="artifact")
    rs = np.random.RandomState(0xCADE)
    prompts, outputs = _artifact_lengths(rs, 256, 1.5, n), _artifact_lengths(rs, 512, 1.15, n)
    sent, times = 0.0, []
    for _ in range(n):  # async_request_gen: yield the request, then sleep one gap
        times.append(sent)
        sent += rs.exponential(1.0 / rate)
    assert [r.prompt_tokens for r in got] == prompts.tolist()
    assert [r.output_tokens for r in got] == outputs.tolist()
    assert np.allclose([r.arrival_s for r in got], times, rtol=1e-12, atol=0)
    assert all(r.priority == NORMAL for r in got)


def test_artifact_stream_pins_fig11_l_l_path() -> None:
    """The first requests of Fig. 11's L-L path (seed 0xCADE), written down: a change of draw order
    or of the Zipf table would move them."""
    reqs = generate(10_000, 3.0, "L-L", seed=0xCADE, stream="artifact")
    assert [r.prompt_tokens for r in reqs[:6]] == [267, 570, 55, 7, 7, 7]
    assert [r.output_tokens for r in reqs[:6]] == [41, 1264, 1930, 4951, 6, 69]
    assert reqs[0].arrival_s == 0.0 and reqs[1].arrival_s == pytest.approx(1.0687716152532163, rel=1e-15)
    slower = generate(10_000, 1.5, "L-L", seed=0xCADE, stream="artifact")  # the paper's rates share one path
    assert [r.prompt_tokens for r in slower] == [r.prompt_tokens for r in reqs]
    assert np.allclose([r.arrival_s for r in slower], [2 * r.arrival_s for r in reqs], rtol=1e-9)
    assert generate(10_000, 3.0, "L-L", seed=0xCADE) != reqs  # our own stream is another path


@pytest.mark.parametrize("kwargs,needle", [
    ({"lengths": "sharegpt"}, "power-law families only"),
    ({"lengths": "burstgpt-ae"}, "power-law families only"),
    ({"lengths": "S", "high_priority_frac": 0.2}, "no priority classes"),
    ({"lengths": "S", "seed": -1}, r"seed in \[0, 2\*\*32\)"),
    ({"lengths": "S", "stream": "numpy"}, "unknown stream"),
])
def test_artifact_stream_bad_arguments(kwargs: dict, needle: str) -> None:
    with pytest.raises(UserError, match=needle):
        generate(10, 1.0, **{"stream": "artifact", **kwargs})


def test_the_high_priority_count_is_the_nearest_integer_to_the_fraction() -> None:
    # 0.29 x 100 is 28.999999999999996 in floating point: the count is 29, not truncated to 28
    assert sum(r.priority == HIGH for r in generate(100, 1.0, "S", seed=0, high_priority_frac=0.29)) == 29


def test_artifact_stream_draws_from_the_seed_it_is_given() -> None:
    """Another seed than the paper's gives the artifact's draws of that seed (the seed reaches RandomState)."""
    got = generate(200, 2.0, "M-L", seed=7, stream="artifact")
    rs = np.random.RandomState(7)
    assert [r.prompt_tokens for r in got] == _artifact_lengths(rs, 256, 1.5, 200).tolist()
    assert [r.output_tokens for r in got] == _artifact_lengths(rs, 512, 1.15, 200).tolist()
