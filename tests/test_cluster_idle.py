"""Idle gaps: the sampler writes the samples of a gap at once, and they equal one sample per tick."""

from __future__ import annotations

import pytest
from conftest import EventCounter

from llumverify.settings.config import ClusterConfig, FailureConfig, SimConfig
from llumverify.requests import RequestSpec
from llumverify.scheduler.policies import get_policy
from llumverify.sim.cluster import NS, Cluster
from llumverify.sim.workload import generate


class TickingCluster(Cluster):
    """The reference: one sampler event and one read of every load per period, idle or not."""

    def _sampler(self):
        period = round(self.cfg.sample_interval_s * NS)
        while not self._stalled():
            yield self.env.timeout(period)
            self._sample()


def _run(cls: type[Cluster], specs: list[RequestSpec], policy: str, cfg: SimConfig) -> Cluster:
    cluster = cls(specs, get_policy(policy), cfg)
    cluster.run()
    return cluster


@pytest.mark.parametrize("policy", ["least-loaded", "llumnix"])
@pytest.mark.spies
def test_samples_over_idle_gaps_equal_ticking_through_them(policy):
    specs = generate(30, 0.01, seed=4) + [RequestSpec(30, 5000.0, 300, 50), RequestSpec(31, 5000.0, 20, 400)]
    cfg = SimConfig(cluster=ClusterConfig(num_instances=4), sample_interval_s=0.7,
                    failures=FailureConfig(at=((2, 1234.5),)))
    fast, ref = _run(Cluster, specs, policy, cfg), _run(TickingCluster, specs, policy, cfg)
    assert fast.series == ref.series
    assert fast.frag_samples == ref.frag_samples
    assert len(fast.series["t_s"]) > 7000


@pytest.mark.spies
def test_an_arrival_on_a_sampling_tick_is_in_that_ticks_sample():
    """An idle gap's samples are those strictly before the next event: the tick at the event's own
    time is sampled when it comes, after the arrival, as ticking through the gap samples it."""
    specs = [RequestSpec(0, 0.0, 100, 20), RequestSpec(1, 10.0, 2000, 20), RequestSpec(2, 20.0, 100, 20)]
    cfg = SimConfig(cluster=ClusterConfig(num_instances=2), sample_interval_s=1.0)  # arrivals on ticks 10 and 20
    fast, ref = _run(Cluster, specs, "least-loaded", cfg), _run(TickingCluster, specs, "least-loaded", cfg)
    # the check below is not vacuous: the tick at 10 s sees request 1
    assert list(ref.series["t_s"])[9] == 10.0 and list(ref.series["kv_util_mean"])[9] > 0
    assert fast.series == ref.series
    assert fast.frag_samples == ref.frag_samples


def test_a_long_gap_costs_no_events():
    cluster = Cluster([RequestSpec(0, 0.0, 100, 20), RequestSpec(1, 1e6, 100, 20)], get_policy("least-loaded"),
                      SimConfig())
    counter = EventCounter(cluster.env)
    cluster.run()
    assert len(cluster.series["t_s"]) == 1_000_000
    assert counter.events < 100
    # ... and no memory: the gap's samples are one run per series (sim/samples.py)
    assert len(cluster.frag_samples.counts) < 100
    assert all(len(getattr(v, "counts", getattr(v, "runs", ()))) < 100 for v in cluster.series.values())
    assert cluster.series["t_s"][-1] == list(cluster.series["t_s"])[-1] > 1e6 - 1


def test_sample_runs_read_as_the_lists_they_replace():
    """Repeats and Ticks equal the plain lists the sampler used to build, float for float, and the
    fragmentation mean is np.mean of that list (bit for bit)."""
    import numpy as np

    from llumverify.sim.samples import Repeats, Ticks

    vals, ref = Repeats(), []
    for x, n in [(0.1, 0), (0.7, 3), (1 / 3, 0), (0.2, 5)]:
        vals.append(x)
        vals.repeat(n)
        ref += [x] * (n + 1)
    assert vals == ref and len(vals) == len(ref) == 12 and vals[-1] == 0.2 and vals[3] == 0.7
    assert vals.mean() == float(np.mean(ref))
    ticks, tref = Ticks(), []
    ticks.append_ns(700_000_000)
    ticks.extend_ns(1_400_000_000, 700_000_000, 4)
    tref = [(700_000_000 + i * 700_000_000) / NS for i in range(5)]
    assert ticks == tref and list(ticks) == [0.7, 1.4, 2.1, 2.8, 3.5]
