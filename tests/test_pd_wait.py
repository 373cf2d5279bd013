"""P/D `wait` fallback (Llumnix HEAD): a request no decode instance takes is parked on its prefill
instance, holding its KV and generating nothing, and is offered again every round period until a
hand-off commits. A parked request is still in the running queue, so a preemption takes one as
vLLM would (V1: the last admitted; vLLM 0.2: the last arrived).

The hand-worked case (1 prefill + 1 decode instance, 6 blocks of 4 tokens each; a step takes 10 ns
+ 1 ns per token; control RPCs 4 ns, 2 each way; a copy of n blocks n + 4 ns; a round every 50 ns):
- A (16-token prompt, 5 tokens) arrives at 0: prefilled 0-26 (4 blocks), its hand-off starts at 26
  (D reserves 4 at 28, copy 30-38, D commits at 40, S frees at 42); on D it allocates a 5th block
  and decodes 4 steps of 11 ns, 40-84.
- B (12-token prompt, 3 tokens) arrives at 10 and waits for room: admitted at 42 when S frees A's
  blocks, prefilled 42-64 (3 blocks): first token at 64. Its hand-off starts at 64; at 66 D has 1
  block free (A holds 5), so D refuses; S learns it at 68 and B is back in S's batch.
- local: B decodes on S, 2 steps of 11 ns, 68-90.
- wait: B is parked on S at 68 holding 3 blocks, with 1 token; it is offered at 118 (68 + 50). D is
  empty since 84, so D reserves 3 at 120, copy 122-129, D commits at 131, B decodes 2 steps on D,
  131-153; S frees B's 3 blocks at 133.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import TOY_COST, toy_config
from test_engine_v1 import TINY, tiny
from test_pd import pd_cfg, run

from llumverify.cli import main as cli_main
from llumverify.settings.config import ClusterConfig, EngineConfig, FailureConfig, SimConfig
from llumverify.requests import RequestSpec
from llumverify.scheduler.policies import get_policy
from llumverify.sim.cluster import Cluster
from llumverify.sim.costmodel import CostModel
from llumverify.sim.engine_v1 import V1Instance
from llumverify.sim.instance import Instance, Request
from llumverify.sim.waits import Environment
from llumverify.sim.workload import generate, shared_prefixes

A, B = RequestSpec(0, 0.0, 16, 5), RequestSpec(1, 10e-9, 12, 3)
LINK = replace(SimConfig().cost, rpc_ns=4, kv_bytes_per_token=1, bandwidth_bps=32_000_000_000)  # n blocks: n + 4 ns


def hand_worked(fallback: str, pd: str = "1:1", fast: bool = True, **kw) -> SimConfig:
    cfg = pd_cfg(pd, blocks=6, fallback=fallback, cost=LINK, fast=fast, **kw)
    return replace(cfg, scheduler=replace(cfg.scheduler, round_period_s=50e-9))


def probed(cfg: SimConfig, times: tuple[int, ...], specs=(A, B)) -> tuple[Cluster, dict[int, dict]]:
    """Run, reading the prefill instance (0), the decode instance (last) and B at each time (ns)."""
    cluster = Cluster(list(specs), get_policy("least-loaded"), cfg, keep_records=True)
    seen: dict[int, dict] = {}

    def probe(t: int) -> None:
        p, d = cluster.instances[0], cluster.instances[-1]
        b = cluster.ledger.records[1] if len(cluster.ledger.records) > 1 else None
        snap = p.snapshot()
        seen[t] = {"parked": sorted(p.parked), "held": p.held, "free": p.free_blocks(), "snap_free": snap.free_blocks,
                   "snap_running": snap.num_running, "recount": p.recount_held(), "d_free": d.free_blocks(),
                   "b_generated": None if b is None else b.generated, "d_running": sorted(d.running)}
    for t in times:
        cluster.env.timeout(t).callbacks.append(lambda _ev, t=t: probe(t))
    cluster.run()
    return cluster, seen


def test_local_decodes_the_refused_request_on_its_prefill_instance():
    cluster = run([A, B], hand_worked("local"))
    a, b = cluster.records
    assert (a.instance, a.first_token_ns, a.finish_ns) == (1, 26, 84)
    assert (b.instance, b.first_token_ns, b.finish_ns, b.migrations) == (0, 64, 90, 0)


def test_a_refused_request_waits_parked_holding_its_blocks_and_moves_once_there_is_room():
    cluster, seen = probed(replace(hand_worked("wait"), sample_interval_s=10e-9), (70, 100, 117))
    a, b = cluster.records
    assert (a.instance, a.first_token_ns, a.finish_ns, a.migrations) == (1, 26, 84, 1)
    for t in (70, 100, 117):  # parked 68-118: 3 blocks held, 3 free, one request in the running queue
        assert seen[t] == {"parked": [1], "held": 3, "free": 3, "snap_free": 3, "snap_running": 1, "recount": 3,
                           "d_free": 1 if t == 70 else 6, "b_generated": 1, "d_running": [0] if t == 70 else []}
    assert (b.status, b.instance, b.first_token_ns, b.finish_ns, b.migrations) == ("finished", 1, 64, 153, 1)
    assert b.generated == 3 and b.preemptions == 0
    assert b.downtime_ns == (68 - 64) + (131 - 118)
    st = cluster.handoffs.stats
    assert (st.started, st.committed, st.aborted["dst_refused"], cluster.handoff_fallbacks) == (3, 2, 1, 1)
    p, d = cluster.instances
    assert p.used_integral == 4 * (42 - 0) + 3 * (133 - 42)  # B's blocks stay used while it is parked
    assert p.in_system_integral == (26 - 0) + (64 - 10) + (118 - 68)  # and B stays in the system
    assert d.in_system_integral == (84 - 40) + (153 - 131)
    assert st.paused_integral_ns == (40 - 26) + (68 - 64) + (131 - 118)
    # sampled every 10 ns until the end (parked requests keep the sampler going); KV use at 100 ns:
    # S 3 of 6 blocks, D none
    series = cluster.series
    assert [round(t * 1e9) for t in series["t_s"]] == list(range(10, 151, 10))
    assert series["kv_util_mean"][9] == (3 / 6 + 0) / 2


def test_the_wait_case_is_the_same_step_by_step():
    def records(fast: bool) -> list[tuple]:
        return [(r.id, r.instance, r.first_token_ns, r.finish_ns, r.generated, r.downtime_ns)
                for r in run([A, B], hand_worked("wait", fast=fast)).records]
    assert records(True) == records(False)


def test_a_crash_of_the_prefill_instance_loses_the_parked_request_like_a_running_one():
    cfg = hand_worked("wait", failures=FailureConfig(at=((0, 100e-9),)))
    cluster = run([A, B], cfg)
    a, b = cluster.records
    assert (a.status, a.finish_ns) == ("finished", 84)
    assert (b.status, b.finish_ns, b.instance, b.generated) == ("failed:instance_crash", 100, 0, 1)
    assert cluster.handoffs.stats.started == 2  # no offer at 118: the parking died with the instance
    assert cluster.instances[0].in_system_integral == (26 - 0) + (64 - 10) + (100 - 68)


def test_a_redispatched_parked_request_recomputes_elsewhere_and_is_handed_off():
    # 2 prefill instances: B goes to the empty one (1), prefilled 10-32 and refused (D holds A's 4
    # reserved blocks), parked at 36; instance 1 crashes at 50 and B is re-dispatched to instance 0
    # (empty since 42): it recomputes its 13 tokens (4 blocks) 50-73, which emits its 2nd token; its
    # hand-off at 73 finds D with 1 block free (A decodes until 84): parked again at 77, offered at
    # 127, copy of 4 blocks 131-139, D commits at 141 and decodes the last token 141-152
    cfg = hand_worked("wait", pd="2:1", failures=FailureConfig(at=((1, 50e-9),), on_failure="redispatch"))
    cluster = run([A, B], cfg)
    a, b = cluster.records
    assert (a.instance, a.finish_ns) == (2, 84)
    assert (b.status, b.instance, b.redispatches, b.first_token_ns, b.finish_ns) == ("finished", 2, 1, 32, 152)
    assert cluster.handoff_fallbacks == 2 and cluster.handoffs.stats.committed == 2


def test_without_a_decode_instance_left_a_refused_request_decodes_where_it_is():
    # D crashes at 30, before its pull of A; S learns it at its RPC timeout (30 + 100) and A resumes
    # on S, decoding 4 steps 130-174. B, admitted when A frees S's blocks, is prefilled 174-196 and
    # finds no decode instance: nothing could ever take it, so it is not parked but decodes, 196-218
    cfg = hand_worked("wait", failures=FailureConfig(at=((1, 30e-9),)))
    cfg = replace(cfg, migration=replace(cfg.migration, rpc_timeout_s=100e-9))
    cluster = run([A, B], cfg)
    a, b = cluster.records
    assert (a.status, a.instance, a.finish_ns, a.migrations) == ("finished", 0, 174, 0)
    assert (b.status, b.instance, b.first_token_ns, b.finish_ns, b.migrations) == ("finished", 0, 196, 218, 0)
    assert cluster.handoffs.stats.started == 1 and cluster.handoff_fallbacks == 2


def test_a_fallback_typed_without_pd_is_refused_not_ignored(capsys):
    """Without --pd no request is ever handed off, so a typed --pd-fallback (even the default) would change
    nothing: the command says so instead of running (an experiment file may set it for points that sweep pd)."""
    for fallback in ("local", "wait"):
        with pytest.raises(SystemExit) as info:
            cli_main(["simulate", "--requests", "20", "--instances", "2", "--policy", "least-loaded",
                      "--pd-fallback", fallback])
        assert info.value.code == 2
        assert capsys.readouterr().err == ("llumverify: error: --pd-fallback: applies only with --pd (prefill/decode "
                                           "roles); this run would ignore it\n")


def parked_then_preempted(engine: str, fast: bool, times: tuple[int, ...]) -> tuple[list[Request], dict[int, dict]]:
    """One instance of 4 blocks of 4 tokens: R (4-token prompt, 12 tokens) arrives at 0, X (8, 5) at
    1 ns; X is parked at its first token (as after a refused hand-off) and R decodes on."""
    env = Environment()
    if engine == "vllm-v1":
        cfg = replace(tiny(blocks=4, caching=False, fast=fast).engine, async_scheduling=False)  # X joins at 14, not 33
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


def test_a_request_parked_again_is_offered_for_its_new_parking_only():
    """Session 33's mutant hunt: an offer timer of an earlier parking offering the request's later parking (its
    check of the parking dropped) passed every test, none reaching it. Shared prefixes keep some requests decoding
    on their prefill instance (not migratable) and they preempt parked ones; with a 2 s round some preempted
    request is recomputed, refused and parked again before its first parking's offer is due: that stale timer
    offers nothing (counted), and an offer audits the parking it names. The summary's pd_stayed_on_prefill counts
    every stay, the re-parked ones too (slip: sim/metrics.py subtracting cluster.stale_offers, 0 in every other run)."""
    cfg = SimConfig(engine=EngineConfig(generation="vllm-v1", num_blocks=300, max_num_batched_tokens=2048),
                    cluster=ClusterConfig(num_instances=4, pd="2:2", pd_fallback="wait"))
    cfg = replace(cfg, scheduler=replace(cfg.scheduler, round_period_s=2.0))
    c = Cluster(shared_prefixes(generate(300, 8.0, seed=1)), get_policy("llumnix"), cfg, keep_records=True)
    c.run()
    assert c.stale_offers >= 1 and len(c.records) == 300 and all(r.status == "finished" for r in c.records)
    from llumverify.sim.metrics import summarize
    assert summarize(c, cfg.slo)["pd_stayed_on_prefill"] == c.handoff_fallbacks


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "step"])
@pytest.mark.parametrize("engine, unpark_ns, x_finish_ns", [("vllm-0.2", 205, 400), ("vllm-v1", 60, 282)])
def test_an_unparked_request_decodes_all_its_tokens_after_its_wait(engine, fast, unpark_ns, x_finish_ns):
    """Guards S17 (unpark keeping the request's admission number from before it was parked): its stale finish entry
    revives and ends it tokens short; an engineer's offered request must resume and stream every token it owes.

    R (4-token prompt, 12 tokens) and X (8, 20) on one roomy instance; X is parked at its first token and
    unparked while R, which finishes before X's pre-parking end, still decodes. vLLM 0.2 (prefill steps 100 ns,
    decode 10 ns): X parked at 200, back at the 210 boundary, 19 steps 210-400; R decodes 200-310. vLLM V1 (a
    step 10 ns + 1 ns per token): X parked at 33, back at 66; both decode 66-150 (R's last), X alone 150-282."""
    env = Environment()
    if engine == "vllm-v1":
        cfg = replace(tiny(blocks=16, caching=False, fast=fast).engine, async_scheduling=False)
        inst: Instance = V1Instance(env, 0, cfg, TINY, fast)
    else:
        inst = Instance(env, 0, toy_config(num_blocks=16, fast=fast).engine, CostModel(TOY_COST), fast)
    r, x = Request(RequestSpec(0, 0.0, 4, 12), 0), Request(RequestSpec(1, 1e-9, 8, 20), 1)

    def first_token(req: Request) -> None:
        if req is x:
            inst.at_next_boundary(lambda i: i.park(req))
    inst.on_first_token = first_token
    for req in (r, x):
        env.timeout(req.arrival_ns).callbacks.append(lambda _ev, req=req: inst.enqueue(req))
    env.timeout(unpark_ns).callbacks.append(lambda _ev: inst.at_next_boundary(lambda i: i.unpark(x)))
    env.run()
    assert (r.status, r.generated, r.finish_ns) == ("finished", 12, 310 if engine == "vllm-0.2" else 150)
    assert (x.status, x.generated, x.finish_ns, x.preemptions) == ("finished", 20, x_finish_ns, 0)
    assert inst.held == inst.recount_held() == 0 and inst.free == 16 and not inst.parked
