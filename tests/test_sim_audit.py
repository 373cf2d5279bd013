"""Each audit fires on a deliberately corrupted state (and stays quiet on honest runs)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import TOY_COST, specs_of, toy_config

from llumverify.settings.config import EngineConfig, FailureConfig
from llumverify.requests import RequestSpec
from llumverify.scheduler.policies import get_policy
from llumverify.sim import audit
from llumverify.sim.audit import AuditError
from llumverify.sim.cluster import Cluster
from llumverify.sim.costmodel import CostModel
from llumverify.sim.instance import Instance, Request
from llumverify.sim.records import Ledger
from llumverify.sim.waits import Environment

ENGINE = EngineConfig(num_blocks=16, block_size=4, watermark_frac=0.0)


def _instance(fast: bool = True) -> tuple[Environment, Instance]:
    env = Environment()
    return env, Instance(env, 0, ENGINE, CostModel(TOY_COST), fast)


def _request(i: int = 0, prompt: int = 5, output: int = 40) -> Request:
    return Request(RequestSpec(i, 0.0, prompt, output), 0)


def test_blocks_audit_fires_when_free_blocks_leak():
    env, inst = _instance()
    inst.free -= 1  # a block vanished
    inst.enqueue(_request())
    with pytest.raises(AuditError, match="'blocks'"):
        env.run()


def test_blocks_audit_fires_when_free_exceeds_capacity():
    with pytest.raises(AuditError, match="'blocks'"):
        audit.check_blocks("x", free=17, held=0, reserved=0, capacity=16)
    with pytest.raises(AuditError, match="'blocks'"):
        audit.check_blocks("x", free=-1, held=17, reserved=0, capacity=16)


def test_recount_audit_fires_when_a_kv_length_drifts_from_the_held_counter():
    env, inst = _instance(fast=False)
    req = _request()
    inst.enqueue(req)
    env.run(until=150)  # prefill ended at 100; decoding
    req.base += 4 * ENGINE.block_size  # the request now claims 4 more blocks than were allocated
    with pytest.raises(AuditError, match="held counter"):
        env.run()


def test_clock_audit_fires_when_time_runs_backwards():
    env, inst = _instance()
    inst._last_ns = 10**12  # the instance believes it already lived at t = 1000 s
    inst.enqueue(_request())
    with pytest.raises(AuditError, match="'clock'"):
        env.run()


def test_accounting_audit_fires_on_a_lost_double_ended_or_double_recorded_request():
    ledger = Ledger(2)
    done, lost = _request(0), _request(1)
    ledger.arrive(done)
    ledger.arrive(lost)
    done.end("finished", 10)
    ledger.end(done)
    with pytest.raises(AuditError, match="2 requests arrived but 1 ended"):
        ledger.close(2)  # `lost` never ended
    with pytest.raises(AuditError, match="ended twice"):
        done.end("finished", 20)
    with pytest.raises(AuditError, match="recorded twice"):
        ledger.end(done)
    with pytest.raises(AuditError, match="request 0 arrived twice, or is not one of the workload's ids 0..1"):
        ledger.arrive(_request(0))
    with pytest.raises(AuditError, match="request 2 arrived twice, or is not one"):
        ledger.arrive(_request(2))
    bad = Ledger(1)
    r = _rejected_without_reason()
    bad.arrive(r)
    with pytest.raises(AuditError, match="'accounting'.*status 'rejected:'"):
        bad.end(r)


def _rejected_without_reason() -> Request:
    r = _request()
    r.end("rejected:", 0)
    return r


def test_littles_law_audit_fires_when_in_system_time_is_lost():
    cluster = Cluster(specs_of((0.0, 5, 30), (1e-7, 9, 12)), get_policy("round-robin"), toy_config())
    cluster.run()  # honest: passes
    cluster.instances[0].in_system_integral -= cluster.instances[0].in_system_integral // 10
    with pytest.raises(AuditError, match="'littles_law'"):
        cluster._audit_end()


def test_accounting_audit_fires_when_a_request_can_never_end():
    cluster = Cluster(specs_of((0.0, 5, 3)), get_policy("round-robin"), toy_config())
    assert cluster.instances[0].reserve(16)  # a reservation nobody releases: the request starves
    with pytest.raises(AuditError, match=r"stalled at \d+ ns with 1 requests not ended: nothing left to happen "
                                         r"\(instance 0 is idle with requests \[0\] waiting; its head, request 0 "):
        cluster.run()


def _starved(policy: str, failures: FailureConfig = FailureConfig()) -> Cluster:
    """Two 16-block instances, every block of both set aside by a reservation nobody releases: request 0 (5 + 3
    tokens) can never be admitted. A watchdog at 2 ms fails the test rather than let a livelock hang it."""
    cluster = Cluster(specs_of((0.0, 5, 3)), get_policy(policy), replace(toy_config(instances=2), failures=failures),
                      keep_records=True)
    assert cluster.instances[0].reserve(16) and cluster.instances[1].reserve(16)
    cluster.env.timeout(2_000_000).callbacks.append(lambda _ev: pytest.fail("the stalled run went on for 2 ms"))
    return cluster


def test_migration_rounds_on_a_stalled_cluster_end_in_the_stalled_audit_naming_the_stuck_request():
    """The stall guard: llumnix's rounds pair the starving instance for ever (each migration is cancelled, nothing
    runs to move), so the run never ended; it must fail at once, naming the instance, the request and its need."""
    cluster = _starved("llumnix")
    with pytest.raises(AuditError, match=r"stalled at \d+ ns with 1 requests not ended: no progress can be made, "
                                         r"only migration rounds that find nothing to move \(instance 0 is idle with "
                                         r"requests \[0\] waiting; its head, request 0 \(5 prompt \+ 0 generated "
                                         r"tokens of 3\), needs 2 blocks, 0 of 16 free\)"):
        cluster.run()
    assert cluster.env.now < 1000


def test_the_stall_guard_waits_for_a_crash_still_to_come():
    """A run stalled until a scheduled crash ends its starving request is not stuck: the guard must not fire
    while the crash is due (the request then fails with its instance and the run ends)."""
    cluster = _starved("llumnix", FailureConfig(at=((0, 1e-6), (1, 1e-6))))
    cluster.run()
    assert [(r.status, r.finish_ns) for r in cluster.records] == [("failed:instance_crash", 1000)]


def test_audit_error_survives_pickling_so_a_sweep_worker_can_report_it():
    import pickle

    err = pickle.loads(pickle.dumps(AuditError("protocol", "migration 3: lost")))
    assert (err.name, err.detail, str(err)) == ("protocol", "migration 3: lost", "audit 'protocol' failed: migration 3: lost")
