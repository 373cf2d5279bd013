"""The instance hooks the next issue's live migration is built on, exercised by hand."""

from __future__ import annotations

import pytest
from conftest import TOY_COST

from llumverify.settings.config import EngineConfig
from llumverify.requests import RequestSpec
from llumverify.sim.costmodel import CostModel
from llumverify.sim.instance import Instance, Request
from llumverify.sim.waits import Environment

ENGINE = EngineConfig(num_blocks=16, block_size=4, watermark_frac=0.0)


def _pair(fast: bool) -> tuple[Environment, Instance, Instance, list[Request]]:
    env = Environment()
    done: list[Request] = []
    cost = CostModel(TOY_COST)
    return env, Instance(env, 0, ENGINE, cost, fast, done.append), Instance(env, 1, ENGINE, cost, fast, done.append), done


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "step"])
def test_move_a_running_request_between_instances_at_a_step_boundary(fast):
    env, src, dst, done = _pair(fast)
    req = Request(RequestSpec(0, 0.0, 6, 20), 0)
    src.enqueue(req)
    events: list[tuple[str, int]] = []
    dst.watch(0, lambda what, r: events.append((what, r.instance)))

    def move(s: Instance) -> None:
        kv = s.kv_tokens(req)
        moved = s.remove_running(0)
        blocks = -(-kv // ENGINE.block_size)
        assert s.snapshot().free_blocks == 16 - blocks and s.reserved == blocks  # KV kept on S
        assert dst.reserve(blocks)
        dst.at_next_boundary(lambda d: d.insert_running(moved))
        s.release(blocks)

    env.run(until=135)  # prefill 0-100, decode steps end at 110, 120, 130, 140
    src.at_next_boundary(move)
    env.run()
    # moved at 140 after 4 decode steps (5 tokens); 15 more decode steps on D
    assert req.instance == 1 and req.finish_ns == 140 + 15 * 10
    assert done == [req] and events == [("finished", 1)]
    assert src.free == dst.free == 16 and src.reserved == dst.reserved == 0
    assert src.in_system_integral + dst.in_system_integral == req.finish_ns - req.arrival_ns


def test_reserved_blocks_count_as_used_and_hold_back_admission():
    env, inst, _, _ = _pair(True)
    assert inst.reserve(14) and not inst.reserve(3)
    req = Request(RequestSpec(0, 0.0, 12, 2), 0)  # needs 3 blocks, only 2 free
    inst.enqueue(req)
    env.run(until=1000)
    assert req.admitted_ns == -1 and inst.snapshot().free_blocks == 2
    inst.release(14)
    env.run()
    assert req.admitted_ns == 1000 and req.finish_ns == 1110


def test_watch_reports_a_preemption():
    env, inst, _, _ = _pair(True)
    a, b = Request(RequestSpec(0, 0.0, 4, 40), 0), Request(RequestSpec(1, 0.0, 4, 40), 0)
    seen: list[str] = []
    inst.watch(1, lambda what, r: seen.append(f"{what} {r.id} {r.generated}"))
    inst.enqueue(a)
    inst.enqueue(b)
    env.run()
    assert seen[0].startswith("preempted 1")


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "step"])
def test_slowdown_applies_from_the_next_boundary(fast):
    env, inst, _, _ = _pair(fast)
    req = Request(RequestSpec(0, 0.0, 4, 5), 0)
    inst.enqueue(req)
    env.run(until=105)
    inst.set_slowdown(500_000)  # 1.5x: decode steps of 10 ns become 15 ns from t=110
    env.run()
    assert req.finish_ns == 110 + 3 * 15
