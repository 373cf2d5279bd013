"""Parked requests (P/D wait): out of the decode batch, holding their KV, generating nothing, and
still in the running queue, so a preemption takes one as vLLM would (V1: the last admitted; vLLM
0.2: the last arrived)."""

from __future__ import annotations

import pytest
import simpy
from conftest import TOY_COST, toy_config
from test_engine_v1 import TINY, tiny

from llumverify.requests import RequestSpec
from llumverify.sim.costmodel import CostModel
from llumverify.sim.engine_v1 import V1Instance
from llumverify.sim.instance import Instance, Request


def parked_then_preempted(engine: str, fast: bool, times: tuple[int, ...]) -> tuple[list[Request], dict[int, dict]]:
    """One instance of 4 blocks of 4 tokens: R (4-token prompt, 12 tokens) arrives at 0, X (8, 5) at
    1 ns; X is parked at its first token (as after a refused hand-off) and R decodes on."""
    env = simpy.Environment()
    if engine == "vllm-v1":
        cfg = tiny(blocks=4, caching=False, fast=fast).engine
        inst: Instance = V1Instance(env, 0, cfg, TINY, fast)
    else:
        cfg = toy_config(num_blocks=4, fast=fast).engine
        inst = Instance(env, 0, cfg, CostModel(TOY_COST), fast)
    r, x = Request(RequestSpec(0, 0.0, 4, 12), 0), Request(RequestSpec(1, 1e-9, 8, 5), 1)

    def first_token(req: Request) -> None:
        if req is x and not req.preemptions:
            inst.at_next_boundary(lambda i: i.park(req))
    inst.on_first_token = first_token
    seen: dict[int, dict] = {}

    def probe(t: int) -> None:
        seen[t] = {"parked": sorted(inst.parked), "waiting": [q.id for q in inst.waiting], "free": inst.free_blocks(),
                   "running": inst.snapshot().num_running, "x_generated": x.generated, "x_preemptions": x.preemptions}
    for req in (r, x):
        env.timeout(req.arrival_ns).callbacks.append(lambda _ev, req=req: inst.enqueue(req))
    for t in times:
        env.timeout(t).callbacks.append(lambda _ev, t=t: probe(t))
    env.run()
    assert inst.held == inst.recount_held() == 0 and inst.free == 4
    return [r, x], seen


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "step"])
def test_a_parked_request_is_preempted_as_the_last_admitted_of_vllm_v1s_running_queue(fast):
    # R prefilled 0-14; X admitted at 14 with R's first decode, 14-33: R 2 blocks, X 2, none free.
    # X parked at 33; R decodes 33-66 without a new block; at 66 R needs its 3rd block: the last
    # admitted, X, is preempted (2 blocks freed); R finishes at 143, X recomputes 9 tokens 143-162
    # and decodes 162-195
    (r, x), seen = parked_then_preempted("vllm-v1", fast, (50, 70))
    assert seen[50] == {"parked": [1], "waiting": [], "free": 0, "running": 2, "x_generated": 1, "x_preemptions": 0}
    assert seen[70] == {"parked": [], "waiting": [1], "free": 1, "running": 1, "x_generated": 1, "x_preemptions": 1}
    assert (r.finish_ns, r.preemptions) == (143, 0)
    assert (x.first_token_ns, x.finish_ns, x.preemptions, x.preempt_loss_ns) == (33, 195, 1, 162 - 66)


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "step"])
def test_a_parked_request_is_preempted_by_arrival_order_on_vllm_0_2(fast):
    # prefill steps 100 ns, decode steps 10 ns: R prefilled 0-100, X 100-200 and parked; R decodes
    # 200-240 (a 2nd block at 200), needs its 3rd at 240: X arrived last and is preempted; R ends
    # at 310, X recomputes 310-410 and decodes 410-440
    (r, x), seen = parked_then_preempted("vllm-0.2", fast, (230, 245))
    assert seen[230] == {"parked": [1], "waiting": [], "free": 0, "running": 2, "x_generated": 1, "x_preemptions": 0}
    assert seen[245] == {"parked": [], "waiting": [1], "free": 1, "running": 1, "x_generated": 1, "x_preemptions": 1}
    assert (r.finish_ns, r.preemptions) == (310, 0)
    assert (x.first_token_ns, x.finish_ns, x.preemptions, x.preempt_loss_ns) == (200, 440, 1, 410 - 240)
