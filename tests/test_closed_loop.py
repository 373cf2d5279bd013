"""Closed-loop users (cluster.users, `simulate --users N`): request k is user k mod N's and is sent
when due and once that user's previous request has ended; latencies count from the send."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llumverify.errors import UserError
from llumverify.requests import RequestSpec
from llumverify.settings.config import ClusterConfig, CostConfig, EngineConfig, FailureConfig, SimConfig
from llumverify.sim.cluster import to_ns
from llumverify.sim.run import simulate
from llumverify.sim.workload import generate


def _records(specs, policy: str, cfg: SimConfig) -> list:
    res = simulate(specs, policy, cfg, keep_records=True)
    assert len(res.records) == len(specs)
    return sorted(res.records, key=lambda r: r.id)


def _assert_release_rule(specs, recs, users: int) -> None:
    """Sent exactly at max(due, the end of the user's previous request); never two of a user's at once."""
    for k, (spec, rec) in enumerate(zip(specs, recs)):
        due = to_ns(spec.arrival_s)
        expect = due if k < users else max(due, recs[k - users].finish_ns)
        assert rec.arrival_ns == rec.sent_ns == expect, (k, rec.arrival_ns, expect)
        assert rec.status, k


def test_each_request_waits_for_its_users_previous_one_and_latency_counts_from_the_send():
    specs = list(generate(400, 20.0, seed=4))  # far more than 2 instances serve: the users bind
    cfg = SimConfig(cluster=ClusterConfig(num_instances=2, users=6))
    recs = _records(specs, "least-loaded", cfg)
    _assert_release_rule(specs, recs, 6)
    assert sum(r.arrival_ns > to_ns(s.arrival_s) for s, r in zip(specs, recs)) > 300  # most had to wait
    ends = sorted([(r.arrival_ns, 1) for r in recs] + [(r.finish_ns, -1) for r in recs], key=lambda e: (e[0], e[1]))
    live = peak = 0
    for _, d in ends:
        live += d
        peak = max(peak, live)
    assert peak <= 6
    open_loop = _records(specs, "least-loaded", SimConfig(cluster=ClusterConfig(num_instances=2)))
    mean = lambda rs: sum(r.first_token_ns - r.sent_ns for r in rs) / len(rs)  # noqa: E731
    assert mean(recs) < mean(open_loop) / 5  # the open loop queues; six users cannot


def test_as_many_users_as_requests_is_the_open_loop_bit_for_bit():
    specs = list(generate(300, 8.0, seed=1))
    base = SimConfig(cluster=ClusterConfig(num_instances=4))
    for policy in ("least-loaded", "llumnix"):
        a = simulate(specs, policy, base).summary
        b = simulate(specs, policy, dataclasses.replace(base, cluster=ClusterConfig(num_instances=4, users=300))).summary
        assert a == b, policy


def test_a_rejected_request_releases_its_users_next_one_at_once():
    """A prompt longer than the KV cache is rejected when sent: it ended, so the user's next request
    goes out when due."""
    cfg = SimConfig(cluster=ClusterConfig(num_instances=1, users=1))
    too_long = cfg.engine.num_blocks * cfg.engine.block_size + 1
    specs = [RequestSpec(0, 0.0, 100, 50), RequestSpec(1, 0.1, too_long, 10), RequestSpec(2, 0.2, 100, 50)]
    recs = _records(specs, "least-loaded", cfg)
    assert recs[1].status.startswith("rejected") and recs[2].status == "finished"
    _assert_release_rule(specs, recs, 1)
    assert recs[2].arrival_ns == recs[1].arrival_ns == recs[0].finish_ns  # both waited for request 0 only


def test_users_with_a_front_end_are_refused():
    cfg = SimConfig(cluster=ClusterConfig(users=4), cost=CostConfig(api_server_ns=1_000_000))
    with pytest.raises(UserError, match="cluster.users"):
        simulate(list(generate(5, 1.0)), "least-loaded", cfg)


@settings(max_examples=30)
@given(n=st.integers(1, 60), rate=st.floats(0.5, 40.0), users=st.integers(1, 8), seed=st.integers(0, 5),
       policy=st.sampled_from(["least-loaded", "llumnix", "round-robin"]),
       generation=st.sampled_from(["vllm-0.2", "vllm-v1"]), fast=st.booleans(), pd=st.sampled_from(["", "1:1"]),
       crash=st.sampled_from([None, "fail", "redispatch"]))
def test_the_release_rule_holds_on_every_engine_policy_and_path(n, rate, users, seed, policy, generation, fast, pd,
                                                                 crash):
    """Both engines, migration on and off, P/D hand-offs, crashes whose requests fail or are
    re-dispatched, closed-form and step-by-step: every request ends once (the simulator's own
    audits) and is sent exactly when the rule says."""
    specs = list(generate(n, rate, seed=seed))
    failures = FailureConfig(at=((0, 0.5),), on_failure=crash) if crash else FailureConfig()
    cfg = SimConfig(engine=EngineConfig(generation=generation), fast=fast, failures=failures,
                    cluster=ClusterConfig(num_instances=2, users=users, pd=pd))
    _assert_release_rule(specs, _records(specs, policy, cfg), users)


@pytest.mark.parametrize("generation", ["vllm-0.2", "vllm-v1"])
def test_closed_loop_users_give_the_same_records_step_by_step(generation):
    """The closed-form decode path ends requests (and so releases their users' next ones) at the
    nanosecond the reference path does."""
    specs = list(generate(150, 15.0, seed=2))

    def records(fast: bool) -> list[tuple]:
        cfg = SimConfig(engine=EngineConfig(generation=generation), cluster=ClusterConfig(num_instances=2, users=5),
                        fast=fast)
        return [(r.id, r.instance, r.arrival_ns, r.first_token_ns, r.finish_ns, r.status)
                for r in _records(specs, "llumnix", cfg)]
    assert records(True) == records(False)


def test_a_replayed_users_own_time_delays_its_next_request_after_a_late_answer():
    """RequestSpec.after_s: the next request arrives at max(due, previous end + after_s), whether
    the previous one ends before the next is due (held at the due time) or after it (held at the end)."""
    base = [s for s in generate(60, 4.0, seed=2)]
    after = 0.05
    specs = [dataclasses.replace(s, user=s.id % 3, after_s=after if s.id >= 3 else 0.0) for s in base]
    recs = _records(specs, "least-loaded", SimConfig(cluster=ClusterConfig(num_instances=1)))
    late = early = 0
    for k, (spec, rec) in enumerate(zip(specs, recs)):
        due = to_ns(spec.arrival_s)
        prev_end = recs[k - 3].finish_ns if k >= 3 else 0
        expect = max(due, prev_end + to_ns(spec.after_s)) if k >= 3 else due
        assert rec.arrival_ns == rec.sent_ns == expect, (k, rec.arrival_ns, expect)
        late += prev_end > due
        early += due - to_ns(after) < prev_end <= due
    assert late > 10 and early  # both ways of holding a request were taken
    plain = _records([dataclasses.replace(s, after_s=0.0) for s in specs], "least-loaded",
                     SimConfig(cluster=ClusterConfig(num_instances=1)))
    assert [r.arrival_ns for r in plain] != [r.arrival_ns for r in recs]


def test_requests_held_for_their_users_own_time_keep_the_cluster_sampled_until_they_arrive():
    """Two users' second requests are due (2 s) after their first ended and held 5 and 10 s after those
    ends: the arrivals are not over while either is held (neither when the generator ends nor when the
    first of them is sent), so the time series goes on sampling until the last arrives."""
    specs = [RequestSpec(0, 0.0, 64, 8, user=0), RequestSpec(1, 0.0, 64, 8, user=1),
             RequestSpec(2, 2.0, 64, 8, user=0, after_s=5.0), RequestSpec(3, 2.0, 64, 8, user=1, after_s=10.0)]
    res = simulate(specs, "llumnix", SimConfig(cluster=ClusterConfig(num_instances=2), sample_interval_s=0.5),
                   keep_records=True)
    recs = sorted(res.records, key=lambda r: r.id)
    assert [r.arrival_ns for r in recs[2:]] == [recs[0].finish_ns + to_ns(5.0), recs[1].finish_ns + to_ns(10.0)]
    assert res.timeseries["t_s"][-1] > recs[3].arrival_ns / 1e9 - 0.5  # the last sample before it (one period)


def test_a_chained_request_is_sent_its_users_time_after_the_previous_end_however_early_it_is_due():
    """RequestSpec.chained: user 0's second request is due at 20 s but sent 50 ms after its first ends (a client
    sending on the answer); user 1's unchained one still waits for its due time (40 s), and keeps the run going past
    the chained one's due time, when the arrivals loop must not send it again."""
    specs = [RequestSpec(0, 0.0, 64, 8, user=0), RequestSpec(1, 0.0, 64, 8, user=1),
             RequestSpec(2, 20.0, 64, 8, user=0, after_s=0.05, chained=True),
             RequestSpec(3, 40.0, 64, 8, user=1, after_s=0.05)]
    recs = _records(specs, "least-loaded", SimConfig(cluster=ClusterConfig(num_instances=1)))
    assert recs[2].arrival_ns == recs[2].sent_ns == recs[0].finish_ns + to_ns(0.05) < to_ns(1.0)
    assert recs[3].arrival_ns == to_ns(40.0)
    assert all(r.status == "finished" for r in recs)


def test_a_chain_of_requests_runs_as_a_closed_loop_whatever_their_due_times():
    """Three users, each sending its next request 10 ms after its last ends, the later requests due only at 1,000 s:
    every request after a user's first arrives exactly then, one at a time per user, long before it is due."""
    base = list(generate(45, 2.0, seed=3))
    specs = [dataclasses.replace(s, arrival_s=0.0 if s.id < 3 else 1e3, user=s.id % 3, after_s=0.01,
                                 chained=s.id >= 3) for s in base]
    recs = _records(specs, "least-loaded", SimConfig(cluster=ClusterConfig(num_instances=1)))
    for k in range(3, len(specs)):
        assert recs[k].arrival_ns == recs[k - 3].finish_ns + to_ns(0.01)
    assert max(r.finish_ns for r in recs) < to_ns(1e3)


@pytest.mark.parametrize("specs,message", [
    ([RequestSpec(0, 0.0, 8, 2, chained=True)], "request 0 is chained .* but names no user"),
    ([RequestSpec(0, 0.0, 8, 2, user=0), RequestSpec(1, 1.0, 8, 2, user=0, chained=True),
      RequestSpec(2, 2.0, 8, 2, user=0)], "request 2 of user 0 is not chained, but that user's second request is "
                                          "chained"),
    ([RequestSpec(0, 0.0, 8, 2, user=0), RequestSpec(1, 1.0, 8, 2, user=0),
      RequestSpec(2, 2.0, 8, 2, user=0, chained=True)], "request 2 of user 0 is chained, but that user's second "
                                                        "request is not"),
])
def test_a_chain_that_cannot_be_followed_is_refused(specs, message):
    """A mix within a user would let the arrivals loop and the chain both wait on one request (a front end that
    reorders sends could make them meet)."""
    with pytest.raises(UserError, match=message):
        simulate(specs, "least-loaded", SimConfig(cluster=ClusterConfig(num_instances=1)))


def test_chained_requests_are_not_also_sent_by_the_round_robin_users():
    specs = [RequestSpec(0, 0.0, 8, 2, user=0), RequestSpec(1, 1.0, 8, 2, user=0, chained=True), RequestSpec(2, 2.0, 8, 2)]
    with pytest.raises(UserError, match=r"cannot also be sent by cluster.users' round robin \(--users 2\)"):
        simulate(specs, "least-loaded", SimConfig(cluster=ClusterConfig(num_instances=1, users=2)))
