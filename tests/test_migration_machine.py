"""A Hypothesis state machine over the simulator's real migration code (sim/migration.py,
sim/cluster.py, sim/instance.py), with oracles that do not come from the protocol.

The machine runs a toy cluster of 3 instances and 4 requests event by event. Its rules start
migrations, advance the simulation to the next handshake message (a pre-allocation reaching D,
its reply reaching S, a stage's pull completing, the commit reaching D, its answer reaching S,
a free, a fence, a lease check), and at any such boundary crash an instance (S, D or a
bystander) or make D's next reply, or the next stage's pull, slower than S's RPC timeout. After
every rule it checks, from the instances' and requests' own state only (never the protocol's
`State`, relation or properties/safety.py):

- conservation: every request is in exactly one place: one live instance's queue or batch, out
  of every batch inside a migration that is still going (paused), or ended with a reason (a
  failure only once some instance crashed);
- token continuity: a request's generated tokens never go back, and a request that leaves one
  instance's batch and joins another's (a migration) joins with exactly the tokens it had;
- block accounting: on each live instance free + blocks of its batch + reserved = capacity,
  each part >= 0, and at the end, once everything settled, every live instance is empty.

The simulator processes D's pull and S's learning of it in one event (S's coordinator resumes
inline, sim/waits.py), so "the instant a pull completes" is reached as the boundaries just
before that event (after S's `s_alloc_ok`) and just after it.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import TOY_COST, specs_of, toy_config
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant, precondition, rule,
                                 run_state_machine_as_test)

from llumverify.settings.config import MigrationConfig
from llumverify.scheduler.policies import get_policy
from llumverify.sim import migration
from llumverify.sim.cluster import Cluster
from llumverify.sim.instance import Instance
from llumverify.sim.waits import Task

MIG_COST = replace(TOY_COST, kv_bytes_per_token=1, bandwidth_bps=4_000_000_000, rpc_ns=4)
ROWS = [(0.0, 6, 120), (0.0, 9, 90), (0.0, 13, 150), (0.0, 60, 60)]  # round-robin: 0 and 3 on instance 0
INSTANCES = 3
MAX_EVENTS = 5_000  # per advance: more means the run is stuck


def _blocks(tokens: int, bs: int) -> int:
    return -(-tokens // bs)


class Handshake(RuleBasedStateMachine):
    """One toy cluster running the `safe` variant; the class-level hooks are set by `_patch`."""

    def __init__(self) -> None:
        super().__init__()
        cfg = replace(toy_config(num_blocks=64, instances=INSTANCES, cost=MIG_COST),
                      migration=MigrationConfig(variant="safe", last_stage_blocks=1, rpc_timeout_s=1e-6,
                                                lease_s=2e-6, lease_check_s=1e-6))
        self.cluster = Cluster(specs_of(*ROWS), get_policy("round-robin"), cfg, record=True, keep_records=True)
        self.cluster.migrations.crash_free = False  # this test crashes instances: S's timeouts must be armed
        self.timeout_ns = self.cluster.migrations.timeout_ns
        self.cluster.migrations.cost = _SlowCopies(self.cluster.cost, self)
        self.late_replies = 0
        self.late_ns = 0  # how late a late reply is (0: one RPC past S's timeout)
        self.slow_copies = 0
        self.crashed = 0
        self.seen_tokens: dict[int, int] = {}
        self.moves: list[str] = []  # token-continuity faults seen by the batch hooks
        self.left_at: dict[int, int] = {}  # request -> tokens when it left a batch (paused)
        self.env = self.cluster.env
        Task(self.env, self.cluster._arrivals())  # what Cluster.run starts, without its end-of-run books
        self.env.run(until=1)  # every request arrived and was dispatched
        _ACTIVE.append(self)

    def teardown(self) -> None:
        try:
            self.settle()
        finally:
            _ACTIVE.remove(self)

    # ---- rules ------------------------------------------------------------------------------
    @initialize(src=st.integers(0, INSTANCES - 1), dst=st.integers(0, INSTANCES - 1))
    def first(self, src: int, dst: int) -> None:
        self.start(src, dst)

    @rule(src=st.integers(0, INSTANCES - 1), dst=st.integers(0, INSTANCES - 1))
    def start(self, src: int, dst: int) -> None:
        insts = self.cluster.instances
        self.cluster.migrations.start(insts[src], insts[dst])

    @rule()
    def advance(self) -> None:
        """Run events until the next handshake message is handled; with no migration going, run
        50 ns of the cluster (a few decode steps). Returns early when nothing is left to run."""
        trans = self.cluster.migrations.transitions
        assert trans is not None
        seen = len(trans)
        until = self.env.now + 50
        for _ in range(MAX_EVENTS):
            if self.env.peek() == float("inf"):
                return
            if not self.cluster.migrations.live and self.env.peek() > until:
                return
            self.env.step()
            if any(not name.startswith("decode") for _, name, _ in trans[seen:]):
                return
            seen = len(trans)
        raise AssertionError(f"no handshake message in {MAX_EVENTS} events")

    @precondition(lambda self: self.crashed < 2 and any(m.state is not None for m in self.cluster.migrations.live))
    @rule(iid=st.integers(0, INSTANCES - 1))
    def crash(self, iid: int) -> None:
        if not self.cluster.instances[iid].dead:
            self.crashed += 1
            self.cluster.fail_instance(iid)

    @precondition(lambda self: self.cluster.migrations.live and not self.late_replies)
    @rule()
    def late_reply(self) -> None:
        """D's next reply (to a pre-allocation, commit or fence) arrives after S's RPC timeout."""
        self.late_replies += 1

    @precondition(lambda self: self.cluster.migrations.live and not self.slow_copies)
    @rule()
    def slow_copy(self) -> None:
        """The next stage's pull takes twice S's RPC timeout."""
        self.slow_copies += 1

    # ---- oracles ----------------------------------------------------------------------------
    def _places(self) -> dict[int, list[str]]:
        places: dict[int, list[str]] = {spec.id: [] for spec in self.cluster.specs}
        for inst in self.cluster.instances:
            if inst.dead:
                continue
            for rid in inst.running:
                places[rid].append(f"running on {inst.id}")
            for req in inst.waiting:
                places[req.id].append(f"waiting on {inst.id}")
            for rid in inst.parked:
                places[rid].append(f"parked on {inst.id}")
        for m in self.cluster.migrations.live:  # a migration something can still act on
            req = m.req
            if req is not None and req.at == -1 and not req.status:  # out of every batch and queue
                places[req.id].append(f"paused in migration {m.id}")
        for req in self.cluster.records:  # every request that arrived (keep_records)
            if req.status:
                places[req.id].append(f"ended {req.status}")
        return places

    @invariant()
    def conservation(self) -> None:
        for rid, where in self._places().items():
            assert len(where) == 1, f"request {rid} at t={self.env.now}: {where or 'nowhere'}"
            if where[0].startswith("ended failed"):
                assert self.crashed, f"request {rid} {where[0]} though no instance crashed"

    @invariant()
    def token_continuity(self) -> None:
        assert not self.moves, self.moves
        for req in self._requests():
            last = self.seen_tokens.get(req.id, 0)
            assert req.generated >= last, f"request {req.id}: generated went back from {last} to {req.generated}"
            self.seen_tokens[req.id] = req.generated
            if req.status == "finished":
                assert req.generated == req.output, f"request {req.id} finished with {req.generated} of {req.output}"

    def _requests(self) -> list:
        reqs = {r.id: r for r in self.cluster.records}
        for inst in self.cluster.instances:
            if not inst.dead:
                reqs.update({r.id: r for r in [*inst.running.values(), *inst.waiting]})
        reqs.update({m.req.id: m.req for m in self.cluster.migrations.live if m.req is not None})
        return list(reqs.values())

    @invariant()
    def block_accounting(self) -> None:
        for inst in self.cluster.instances:
            if inst.dead:
                continue
            free, bs = inst.free_blocks(), inst.bs
            batch = sum(_blocks(inst.allocated_tokens(r), bs) for r in inst.running.values()
                        if r not in inst._prefilling)
            batch += sum(_blocks(r.prompt + r.generated, bs) for r in inst._prefilling)
            assert free >= 0 and inst.reserved >= 0 and batch >= 0
            assert free + batch + inst.reserved == inst.capacity, \
                f"instance {inst.id} at t={self.env.now}: free {free} + batch {batch} + reserved " \
                f"{inst.reserved} != {inst.capacity}"

    def settle(self) -> None:
        """Run to the end: every request ended, every live instance empty (no leaked reservation)."""
        for _ in range(50 * MAX_EVENTS):
            if self.env.peek() == float("inf"):
                break
            self.env.step()
        self.conservation()
        assert all(where[0].startswith("ended") for where in self._places().values()), self._places()
        for inst in self.cluster.instances:
            if not inst.dead:
                assert inst.free_blocks() == inst.capacity and inst.reserved == 0, \
                    f"instance {inst.id}: free {inst.free_blocks()}, reserved {inst.reserved}"


_ACTIVE: list[Handshake] = []


class _SlowCopies:
    """The cost model, with the next `slow_copies` stages' pulls slower than the RPC timeout."""

    def __init__(self, cost, machine: Handshake) -> None:
        self._cost, self._m = cost, machine

    def __getattr__(self, name: str):
        return getattr(self._cost, name)

    def copy_stage_ns(self, blocks: int, bs: int, sharers: int = 1) -> int:
        if self._m.slow_copies:
            self._m.slow_copies -= 1
            return 2 * self._m.timeout_ns
        return self._cost.copy_stage_ns(blocks, bs, sharers)


def _patch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Class-level hooks: late replies, and token continuity across leaving and joining a batch."""
    real_reply, real_remove, real_insert = migration.Migration._reply, Instance.remove_running, Instance.insert_running

    def reply(m: migration.Migration, msg) -> None:
        machine = _ACTIVE[-1]
        if machine.late_replies:
            machine.late_replies -= 1
            msg.send(delay=machine.late_ns or machine.timeout_ns + m.o.rpc_ns)
            return
        real_reply(m, msg)

    def remove(inst: Instance, req_id: int):
        req = real_remove(inst, req_id)
        _ACTIVE[-1].left_at[req_id] = req.generated
        return req

    def insert(inst: Instance, req) -> None:
        machine = _ACTIVE[-1]
        left = machine.left_at.pop(req.id, None)
        if left is not None and req.generated != left:
            machine.moves.append(f"request {req.id} left a batch with {left} tokens, joined {inst.id}'s "
                                 f"with {req.generated}")
        real_insert(inst, req)

    monkeypatch.setattr(migration.Migration, "_reply", reply)
    monkeypatch.setattr(Instance, "remove_running", remove)
    monkeypatch.setattr(Instance, "insert_running", insert)


def run_machine(monkeypatch: pytest.MonkeyPatch, examples: int) -> None:
    _patch(monkeypatch)
    run_state_machine_as_test(Handshake, settings=settings(max_examples=examples, stateful_step_count=50,
                                                           deadline=None))


def check_all(m: Handshake) -> None:
    m.conservation()
    m.token_continuity()
    m.block_accounting()


FAULTS = ("crash S", "crash D", "crash bystander", "late reply", "slow copy")


def _inject(m: Handshake, fault: str) -> None:
    if fault.startswith("crash"):
        m.crashed += 1
        m.cluster.fail_instance({"crash S": 0, "crash D": 1, "crash bystander": 2}[fault])
    elif fault == "late reply":
        m.late_replies += 1
    else:
        m.slow_copies += 1


def drive(k: int, fault: str | None, then: tuple[int, str] | None = None) -> tuple[list[str], int]:
    """Migrate request 3 (LCFS on instance 0) to instance 1; at its k-th handshake boundary (0:
    before it begins) inject `fault` (and `then`'s fault at its boundary, a later one); run to the
    end, checking the oracles at every boundary. (the messages handled, the boundaries passed)."""
    faults = {k: fault} if fault is not None else {}
    if then is not None:
        faults[then[0]] = then[1]
    last = max([k, *faults])
    m = Handshake()
    try:
        m.start(0, 1)
        step = 0
        while (m.cluster.migrations.live or step <= last) and m.env.peek() != float("inf"):  # settle() judges a stuck one
            if step in faults:
                _inject(m, faults[step])
                check_all(m)
            m.advance()
            check_all(m)
            step += 1
        trans = m.cluster.migrations.transitions
        assert trans is not None
        return [name for _, name, _ in trans if not name.startswith("decode")], step
    finally:
        m.teardown()


@pytest.mark.spies
def test_every_fault_at_every_handshake_boundary(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deterministic sweep: each fault at each boundary of one full 3-stage migration."""
    _patch(monkeypatch)
    clean, boundaries = drive(0, None)
    assert clean[-3:] == ["s_send_commit", "d_commit", "s_commit_ok"] and clean.count("d_copy") == 3
    seen: set[str] = set()
    for k in range(boundaries + 1):
        for fault in FAULTS:
            names, _ = drive(k, fault)
            seen.update(names)
            if 1 <= k < boundaries and fault in ("crash S", "crash D"):  # the migration is going
                assert ("crash_s" if fault == "crash S" else "crash_d") in names, (k, fault, names)
    # d_finish: the request finished on D before S learnt the commit's outcome; the fence must say
    # committed (P04 slip: a finished request read as not committed is resumed on S, run twice)
    assert {"timeout_alloc", "timeout_copy", "timeout_commit", "d_fence", "s_d_dead", "lease_expire",
            "d_copy_fail", "d_finish"} <= seen, seen


@pytest.mark.spies
def test_handshake_machine_keeps_requests_tokens_and_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    run_machine(monkeypatch, 25)


@pytest.mark.slow
@pytest.mark.spies
def test_handshake_machine_longer(monkeypatch: pytest.MonkeyPatch) -> None:  # ~15 s
    run_machine(monkeypatch, 400)


@pytest.mark.spies
def test_the_oracles_catch_a_request_stranded_by_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-line slip: the migration never declares a request lost when nothing can bring it
    back (`_lost_if_stranded` does nothing). S crashing during the final stage then leaves
    request 3 out of every batch, not ended, its migration over: conservation finds it nowhere."""
    _patch(monkeypatch)
    monkeypatch.setattr(migration.Migration, "_lost_if_stranded", lambda self: None)
    drive(11, "crash D")  # no loss here: S resumes the request itself
    with pytest.raises(AssertionError, match="request 3 .*nowhere"):
        drive(11, "crash S")


@pytest.mark.spies
def test_a_late_answer_then_a_crash_at_every_later_boundary(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two faults, where the one-fault sweep stops: D's reply at boundary k arrives after S's RPC
    timeout, then S or D crashes at a later boundary. A late answer to the commit makes S ask D
    through the fence; D dying before that answer must end the request once, on D (lost with it).
    P03 slip: S resumes it (`_d_dead` forgets RESOLVE), so it runs on S and failed on D."""
    _patch(monkeypatch)
    _, boundaries = drive(0, None)
    seen: set[str] = set()
    for k in range(boundaries):
        _, late = drive(k, "late reply")  # the boundaries of that run (a timeout may add some)
        for later in range(k + 1, late + 1):
            for fault in ("crash S", "crash D"):
                names, _ = drive(k, "late reply", (later, fault))
                seen.update(names)
    assert {"timeout_commit", "d_fence", "s_d_dead"} <= seen, seen


def _names(m: Handshake) -> list[str]:
    trans = m.cluster.migrations.transitions
    assert trans is not None
    return [name for _, name, _ in trans if not name.startswith("decode")]


def _advance_past(m: Handshake, name: str) -> None:
    """Advance handshake message by message until the action `name` was applied."""
    for _ in range(40):
        if name in _names(m):
            return
        m.advance()
        check_all(m)
    raise AssertionError(f"no {name} in {_names(m)}")


@pytest.mark.spies
def test_a_preemption_on_d_before_s_learns_the_commit_is_no_finish(monkeypatch: pytest.MonkeyPatch) -> None:
    """Request 3 commits on D, D's answer is late (S times out and asks D through the fence), and
    meanwhile other load takes D's free blocks, so D's next step preempts request 3 (the last to
    arrive) back into D's queue. It is still committed on D: the protocol has no D-side preemption,
    and the migration's record must not say it finished there (`d_finish`) while it waits on D for
    its recompute; once the load leaves, it finishes on D, exactly once, with all its tokens.
    S4 slip: `_on_dest_event` applies `d_finish` on "preempted" too. Every instance and request
    ends the same either way (the fence answers committed for a running and a finished request
    alike, and D's pool is no longer tracked after the commit), so this checks the record
    against the request's real state."""
    _patch(monkeypatch)
    m = Handshake()
    try:
        m.start(0, 1)
        _advance_past(m, "s_send_commit")
        m.late_replies = 1  # the commit's answer
        _advance_past(m, "d_commit")
        req, dst = m.cluster.instances[1].running[3], m.cluster.instances[1]
        load = dst.free_blocks()
        assert dst.reserve(load)  # other load on D (the protocol's d_oom)
        for _ in range(MAX_EVENTS):
            if req.preemptions:
                break
            m.env.step()
            check_all(m)
        names = _names(m)
        dst.release(load)  # the load leaves: request 3 may come back into D's batch
        assert req.preemptions == 1 and req in dst.waiting, "D did not preempt request 3"
        assert "s_commit_ok" not in names, f"S learnt the outcome before D's preemption: {names}"
        assert not req.status and req.generated < req.output
        assert "d_finish" not in names, \
            f"request 3 is waiting on D, not finished, yet the record says d_finish: {names}"
        m.settle()
        assert req.status == "finished" and req.generated == req.output and req.migrations == 1
        assert _names(m).count("s_commit_ok") == 1
    finally:
        m.teardown()


@pytest.mark.spies
def test_s_learns_the_commit_from_the_fence_when_its_answer_comes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """D's answer to the commit is very late (five RPC timeouts): S times out, asks D through the
    fence, and the fence's answer (committed) reaches S long before the commit's own. S must act
    on it: within one RPC of D's fence answer S has dropped its copy of request 3 (its reserved
    blocks back in its free pool) and the migration no longer holds S and D; the commit's stale
    answer, arriving later, changes nothing. S6 slip: the guard that drops the commit's own
    answer while S waits for the fence's loses `s.ack == _ACK_NONE`, so S throws away the fence's
    answer and holds the copy (and both instances) until the commit's answer, ~4 us later."""
    _patch(monkeypatch)
    m = Handshake()
    try:
        m.late_ns = 5 * m.timeout_ns
        m.start(0, 1)
        _advance_past(m, "s_send_commit")
        m.late_replies = 1  # the commit's answer
        _advance_past(m, "d_fence")
        names = _names(m)
        assert names.index("d_commit") < names.index("timeout_commit") < names.index("d_fence"), names
        assert "s_commit_ok" not in names, names  # (request 3 may have finished on D meanwhile: d_finish)
        src = m.cluster.instances[0]
        assert src.reserved > 0  # request 3's KV, paused on S
        due = m.env.now + m.cluster.migrations.rpc_ns
        while m.env.peek() <= due:
            m.env.step()
            check_all(m)
        assert src.reserved == 0, \
            f"S still holds {src.reserved} blocks of request 3's copy one RPC after the fence's answer"
        assert not m.cluster.migrations.live, "the migration still holds S and D after the fence's answer"
        m.settle()
        assert _names(m).count("s_commit_ok") == 1
        req = next(r for r in m.cluster.records if r.id == 3)
        assert req.status == "finished" and req.generated == req.output
    finally:
        m.teardown()
