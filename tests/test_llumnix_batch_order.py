"""The running batch is ordered by arrival, as vLLM 0.2 in the paper's artifact orders it.

The artifact's engine re-sorts its running batch by arrival (FCFS) before every decode step
(docs/llumnix-code-notes.md §4.1 and H-AE-6), preempts from the tail and LCFS migrates the tail.
So the victim of a preemption and the LCFS migrant are the running request that *arrived* last,
not the one that joined the batch last. Ordering by admission instead made every request that was
just migrated in (or re-admitted after a preemption) the destination's next preemption victim and
its next LCFS migrant: on L-L 2.8 req/s seed 0, 89 of the 131 preempted requests had been migrated
and one request was migrated 17 times.
"""

from __future__ import annotations

import pytest
from conftest import TOY_COST

from llumverify.settings.config import EngineConfig
from llumverify.requests import RequestSpec
from llumverify.scheduler.selection import Candidate, choose_request
from llumverify.sim.costmodel import CostModel
from llumverify.sim.instance import Instance, Request
from llumverify.sim.waits import Environment

ENGINE = EngineConfig(num_blocks=16, block_size=4, watermark_frac=0.0)


def _migrated_in_then_out_of_memory(fast: bool) -> tuple[Request, Request]:
    """E (arrived first) decodes on S and is moved into D, which runs L (arrived later); the two
    together outgrow D's 16 blocks, so D must preempt one of them."""
    env = Environment()
    cost = CostModel(TOY_COST)
    src, dst = Instance(env, 0, ENGINE, cost, fast), Instance(env, 1, ENGINE, cost, fast)
    early = Request(RequestSpec(0, 0.0, 12, 30), 0)  # at most 41 KV tokens: 11 blocks
    late = Request(RequestSpec(1, 5e-9, 40, 20), 5)  # at most 59 KV tokens: 15 blocks
    src.enqueue(early)
    env.run(until=5)  # D steps 5 ns out of phase with S: no two boundaries at the same instant
    dst.enqueue(late)

    def move(s: Instance) -> None:
        blocks = -(-s.kv_tokens(early) // ENGINE.block_size)
        moved = s.remove_running(early.id)
        assert dst.reserve(blocks)
        dst.at_next_boundary(lambda d: d.insert_running(moved))
        s.release(blocks)

    env.run(until=107)  # E prefilled on S at 100, L on D at 105
    src.at_next_boundary(move)
    env.run()
    assert early.status == late.status == "finished"
    return early, late


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "step"])
def test_a_migrated_in_request_is_not_the_victim_when_a_later_arrival_runs(fast):
    early, late = _migrated_in_then_out_of_memory(fast)
    assert early.instance == 1 and early.migrations == 0  # moved by hand, not by a migration
    assert early.preemptions == 0  # joined D's batch last, but arrived first
    assert late.preemptions >= 1


def test_both_paths_agree_on_the_arrival_ordered_victim():
    fast = _migrated_in_then_out_of_memory(True)
    step = _migrated_in_then_out_of_memory(False)
    assert [(r.finish_ns, r.preemptions) for r in fast] == [(r.finish_ns, r.preemptions) for r in step]


def test_lcfs_migrates_the_last_arrival_not_the_last_admitted():
    cands = [
        Candidate(request=5, kv_tokens=300, admitted_seq=1, arrival_ns=900),  # arrived last
        Candidate(request=2, kv_tokens=100, admitted_seq=7, arrival_ns=100),  # migrated in / re-admitted
        Candidate(request=9, kv_tokens=50, admitted_seq=8, arrival_ns=950, high_priority=True),
    ]
    assert choose_request(cands, "lcfs") == 5
    assert choose_request(cands[1:], "lcfs") == 2
    assert choose_request(cands, "sr") == 2 and choose_request(cands, "lr") == 5
