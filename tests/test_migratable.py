"""vllm-v1's migratability rule (scheduler/selection.py `migratable`) inside the simulator: every
answer the engine gives equals an oracle recounted from the requests' own pinned blocks, and a
migration never claims a block another request on its instance still uses."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llumverify.settings.config import ClusterConfig, EngineConfig, SimConfig
from llumverify.scheduler.policies import get_policy
from llumverify.scheduler.selection import migratable
from llumverify.sim import engine_v1
from llumverify.sim.cluster import Cluster
from llumverify.sim.engine_v1 import V1Instance
from llumverify.sim.workload import generate


def _pin_users(inst: V1Instance) -> Counter:
    """How many requests on the instance pin each cached block: from the requests, not `_refs`."""
    reqs = [*inst.running.values(), *(r for r, _ in inst.parked.values()), *inst._chunking]
    return Counter(key for r in reqs for key in r.pins)


class Watch:
    """Wraps the engine's migratable / claim with the oracle; counts what it saw."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.answers: Counter = Counter()
        self.claims = 0
        self.wrong: list[str] = []
        real_migratable, real_claim = V1Instance.migratable, V1Instance.claim

        def checked(inst: V1Instance, req) -> bool:
            got = real_migratable(inst, req)
            users = _pin_users(inst)
            want = all(users[k] == 1 for k in req.pins)
            self.answers[got] += 1
            if got != want:
                self.wrong.append(f"instance {inst.id} request {req.id}: migratable={got}, oracle {want}")
            return got

        def claim(inst: V1Instance, req) -> None:
            users = _pin_users(inst)
            shared = [k for k in req.pins if users[k] > 1]
            if shared:
                self.wrong.append(f"instance {inst.id} claimed request {req.id} sharing {shared}")
            self.claims += 1
            real_claim(inst, req)

        monkeypatch.setattr(V1Instance, "migratable", checked)
        monkeypatch.setattr(V1Instance, "claim", claim)


def _run(seed: int = 1, n: int = 200, groups: int = 4, shared: int = 20, blocks: int = 400,
         instances: int = 4) -> None:
    """llumnix on vllm-v1 with a shared-prefix workload: each request's first `shared` blocks
    common to its group (the migrating, preempting mix of tests/test_engine_v1.py, smaller)."""
    specs = []
    for s in generate(n, 8.0, seed=seed):
        k = s.prompt_tokens // 16
        ids = [1000 * (s.id % groups) + j for j in range(min(k, shared))]
        ids += [10**6 + 10**4 * s.id + j for j in range(k - len(ids))]
        specs.append(replace(s, hash_ids=tuple(ids), hash_block=16))
    engine = EngineConfig(generation="vllm-v1", num_blocks=blocks, max_num_batched_tokens=2048)
    Cluster(specs, get_policy("llumnix"), SimConfig(engine=engine, cluster=ClusterConfig(num_instances=instances))).run()


def test_rule_reads_each_refcount() -> None:
    assert migratable([]) and migratable([1, 1])
    assert not migratable([1, 2]) and not migratable([3])


@pytest.mark.spies
def test_engine_answers_equal_the_recounted_oracle_and_claims_are_private(monkeypatch: pytest.MonkeyPatch) -> None:
    watch = Watch(monkeypatch)
    _run()
    assert watch.wrong == []
    assert watch.answers[True] > 0 and watch.answers[False] > 0 and watch.claims > 0  # both answers, migrations


@pytest.mark.spies
def test_a_slipped_rule_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """all() written any(): the engine then offers a request sharing blocks; the oracle sees it."""
    monkeypatch.setattr(engine_v1, "migratable", lambda refs: any(n == 1 for n in refs) or not refs)
    watch = Watch(monkeypatch)
    with pytest.raises(KeyError):  # the claim then drops a key another request still holds
        _run()
    assert watch.wrong and "oracle False" in watch.wrong[0]


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**16), groups=st.integers(1, 6), shared=st.integers(1, 30), blocks=st.integers(250, 700),
       instances=st.integers(2, 4))
def test_random_shared_workloads_never_migrate_a_shared_block(seed: int, groups: int, shared: int, blocks: int,
                                                               instances: int) -> None:
    with pytest.MonkeyPatch.context() as m:
        watch = Watch(m)
        _run(seed, 120, groups, shared, blocks, instances)
        assert watch.wrong == []
