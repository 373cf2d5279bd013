"""Live migrations executed as the shared protocol's actions (llumverify/protocol).

Each migration keeps one protocol `State` of Python values. Every simulated happening is the
protocol action it is: S begins a stage at its step boundary (`begin_stage`; the final one takes
the request out of S's batch, `begin_final`), D reserves (`d_alloc_ok`, a real reservation on D),
D pulls the blocks (`d_copy`, after the copy time), D commits at its boundary (`d_commit`, the
request joins D's batch), S frees (`s_commit_ok`); finishing, preemption, crashes, refusals,
timeouts and leases are their actions too. Before applying an action the executor checks its
guard: a false guard means the simulator did something the protocol does not allow, an
AuditError. The effect's new state is then mirrored onto the instances.

Fields that other requests change (free and other blocks on S and D) are re-read from the
instances before each action: that is the environment's havoc, which the protocol abstracts as
`d_oom` and the unconstrained pools. Decode steps of the migrating request are applied as a batch
of `decode` actions whenever the coordinator next acts (a handful per stage).

Driving: S's coordinator is one generator per migration (`_coordinate`), run as a `Task`
(sim/waits.py: a SimPy Process's work, done by plain callbacks). Each call it makes to D waits
on "reply or RPC timeout" (`FirstOf`); actions at S's step boundary run in the boundary hook
(batch changes are allowed only there) and the coordinator resumes after it. A crash applies
`crash_s` / `crash_d` at once and interrupts the task: S's crash ends it. D's handlers are
callbacks on the messages that reach D. Replies and timeouts nobody waits for any more simply
have no listener: there are no stale-timer counters. The waits resume exactly where callbacks on
the same events would run, so the event order does not depend on this structure.

Timing: control RPCs (pre-allocate, commit, free) take rpc_ns round trip (half each way); a
stage's copy takes `CostModel.copy_stage_ns`; a reply that does not come within rpc_timeout_s
is `s_d_dead` if D died, else the protocol's spurious timeout of that call; D's lease watcher
checks every lease_check_s and frees reservations older than lease_s. Downtime is the time the
request spends out of any batch (paused on S until D runs it).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import simpy

from llumverify.settings.config import MigrationConfig
from llumverify.protocol import api, compiled
from llumverify.protocol.state import Ack, DReq, Mig, Pc, Req, State
from llumverify.protocol.variants import MUST_PROVE, Variant, get_variant
from llumverify.scheduler.selection import Candidate, choose_request
from llumverify.sim import audit
from llumverify.sim.costmodel import CostModel
from llumverify.sim.instance import Instance, Request
from llumverify.sim.waits import Environment, FirstOf, Message, Task, Wait
from llumverify.requests import HIGH
from llumverify.properties.safety import violated

NS = 1_000_000_000
# The protocol's enumeration members compared with here, bound once: compiled, a module constant is
# a C global read, where `Req.RUNNING` looks the member up on its class at every use.
_ACK_NONE: Final = Ack.NONE
_ACK_OK: Final = Ack.OK
_DREQ_NONE: Final = DReq.NONE
_DREQ_RUNNING: Final = DReq.RUNNING
_MIG_FINISHED: Final = Mig.FINISHED
_MIG_RUNNING: Final = Mig.RUNNING
_PC_ALLOC: Final = Pc.ALLOC
_PC_COMMIT: Final = Pc.COMMIT
_PC_COPY: Final = Pc.COPY
_PC_RESOLVE: Final = Pc.RESOLVE
_REQ_MIGRATED: Final = Req.MIGRATED
_REQ_PAUSED: Final = Req.PAUSED
_REQ_RUNNING: Final = Req.RUNNING
_TIMEOUTS = {_PC_ALLOC: "timeout_alloc", _PC_COPY: "timeout_copy", _PC_COMMIT: "timeout_commit"}  # by S's wait
ABORT_CAUSES = ("finished", "preempted", "dst_refused", "dst_failure", "src_failure", "max_stages", "fenced",
                "timeout")
Transition = tuple[State, str, State]
Call = tuple[Message, simpy.Timeout | None]  # a call S sent: D's reply (once D sends it) and S's RPC timeout
T = TypeVar("T")
Waits = Generator[Wait, Any, T]  # part of S's coordinator: yields what it waits for, returns a T


@dataclass
class MigrationStats:
    """What the migrations did in one run (summary keys in sim/metrics.py)."""

    started: int = 0
    committed: int = 0
    aborted: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ABORT_CAUSES, 0))
    bytes_moved: int = 0
    downtimes_ns: list[int] = field(default_factory=list)
    violations: dict[str, int] = field(default_factory=dict)  # safety predicates broken (unsafe variants)
    paused_integral_ns: int = 0  # ∫ (requests paused mid-migration) dt, for Little's law
    busy_ns: dict[int, int] = field(default_factory=dict)  # per instance: time spent in a migration


class Migrations:
    """Every migration of a run: starts them, tracks which instances are busy, keeps the stats.

    `record` (tests) keeps every transition (pre-state, action, post-state) for conformance, in
    one list and per migration (`traces`, by migration id, each in the order it happened).
    `on_lost(req, reason)` is the cluster's callback for a request lost with a crashed source.
    """

    def __init__(self, env: Environment, cfg: MigrationConfig, cost: CostModel,
                 on_lost: Callable[[Request, str], None], selection: str, record: bool = False,
                 handoffs: bool = False, on_over: Callable[[Migration], None] | None = None,
                 crash_free: bool = False, on_forget: Callable[[Migration], None] | None = None) -> None:
        self.env = env
        self.cfg = cfg
        self.cost = cost
        self.variant = get_variant(cfg.variant)
        self.actions = compiled.actions(self.variant)  # the same actions, compiled for Python values
        self.safe = self.variant.name in MUST_PROVE  # proved: a violation in simulation is an audit failure
        # times in ns, read once (every call and lease uses them)
        self.rpc_ns, self.timeout_ns = cost.cfg.rpc_ns, round(cfg.rpc_timeout_s * NS)
        self.lease_ns, self.lease_check_ns = round(cfg.lease_s * NS), round(cfg.lease_check_s * NS)
        self.on_lost = on_lost
        self.selection = selection
        self.stats = MigrationStats()
        self.transitions: list[Transition] | None = [] if record else None
        self.traces: dict[int, list[Transition]] = {}
        self.busy: dict[int, int] = {}  # instance id -> time it became busy
        self.live: list[Migration] = []  # coordinators not yet over (for crashes)
        self._next_id = 0
        # P/D hand-offs: a given request each, any number at once per instance (no busy marks)
        self.handoffs = handoffs
        self.on_over = on_over  # told once when a coordinator is done (committed or not)
        self.on_forget = on_forget  # told once when nothing can act on a migration any more (it leaves `live`)
        # No instance can crash in this run (no failure injected): a reply D sends on delivery
        # comes rpc_ns after the call, and a copy after its copy time, so an RPC timeout longer
        # than that can never fire; it is not scheduled (a SimPy event processed only after its
        # wait is over changes nothing, and the others keep their order).
        self.crash_free = crash_free

    @property
    def inflight(self) -> int:
        return len(self.live) if self.handoffs else len(self.busy) // 2

    def start(self, src: Instance, dst: Instance, request: Request | None = None) -> None:
        """Pair (src, dst) for one migration; the request is chosen at src's next step boundary
        (or is `request`, a P/D hand-off, which does not mark the instances busy)."""
        if src.dead or dst.dead or src is dst:
            return
        if not self.handoffs:
            if src.id in self.busy or dst.id in self.busy:
                return
            self.busy[src.id] = self.busy[dst.id] = self.env.now
        m = Migration(self, self._next_id, src, dst, request)
        self._next_id += 1
        self.live.append(m)
        src.at_next_boundary(m.begin)

    def uses(self, inst: Instance) -> bool:
        """Whether a migration something can still act on names `inst` (S's coordinator, or D on a message in
        flight or a lease: `live`, which holds every busy pair): such an instance may go only by a crash its
        migrations are told of."""
        return any(inst is m.src or inst is m.dst for m in self.live)

    def release(self, m: Migration) -> None:
        """The coordinator is done with its instances: they may migrate again."""
        if self.on_over is not None:
            self.on_over(m)
        now = self.env.now
        for inst in (m.src, m.dst):
            since = self.busy.pop(inst.id, None)
            if since is not None:
                self.stats.busy_ns[inst.id] = self.stats.busy_ns.get(inst.id, 0) + now - since

    def instance_failed(self, inst: Instance) -> None:
        """Tell every migration touching `inst`, which the cluster has already crashed (Instance.fail): a request a
        migration then loses is re-dispatched to a live instance, never back onto this one."""
        for m in list(self.live):
            if inst is m.src or inst is m.dst:
                m.crashed(inst)

    def close(self) -> None:
        """End of the run: account busy time still open (only leaked or stuck migrations)."""
        for m in list(self.live):
            if m.state is not None and m.state.status == _MIG_RUNNING:
                self.release(m)


class Migration:
    """One migration over one protocol State: S's coordinator (a Task from the first stage on),
    D's handlers (callbacks on the messages that reach D) and the lease."""

    def __init__(self, owner: Migrations, mid: int, src: Instance, dst: Instance,
                 request: Request | None = None) -> None:
        self.o = owner
        self.given = request  # the request to move (P/D hand-off), else chosen at `begin`
        self.env = owner.env
        self.id = mid
        self.src = src
        self.dst = dst
        self.v: Variant = owner.variant
        self.state: State | None = None
        self.req: Request | None = None
        self.gone = ""  # "finished" / "preempted": what the watch saw happen to the request on S
        self._admit_seq = -1  # the request's place in S's batch when the migration chose it
        self.paused_ns = -1
        self.proc: Task | None = None  # S's coordinator, from the first stage on
        self._lease: simpy.Timeout | None = None  # D's watcher's next check of the lease
        self.released = False
        self._enabled: tuple[State | None, str] = (None, "")  # the last (state, action) `enabled` found true

    # ------------------------------------------------------------------ applying actions
    def apply(self, name: str) -> State:
        """Check the action's guard, apply its effect, mirror it on the instances, check safety."""
        assert self.state is not None
        action = self.o.actions.get(name)
        if action is None:
            raise audit.AuditError("protocol", f"migration {self.id}: variant {self.v.name!r} has no action {name!r}")
        pre = self.state
        checked = self._enabled[0] is pre and self._enabled[1] == name  # `enabled` just found it true
        if not checked and not action.guard(pre, self.v):
            try:
                api.Migration(self.v, pre).apply(name)  # raises the API's GuardError, naming what is enabled
            except api.GuardError as exc:
                raise audit.AuditError("protocol", f"migration {self.id} at {self.env.now} ns: {exc}; "
                                                   f"state {pre}") from None
        post = action.effect(pre, self.v)
        self.state = post
        if self.o.transitions is not None:
            self.o.transitions.append((pre, name, post))
            self.o.traces.setdefault(self.id, []).append((pre, name, post))
        self._mirror(pre, post)
        safe = self.o.safe
        # A proved variant's properties hold in every reachable state and the guard check above
        # keeps this run on reachable states, so its states are checked once the migration is
        # decided (and all of them when recording, for the tests); an unsafe variant's every state.
        if safe and post.status == _MIG_RUNNING and self.o.transitions is None:
            return post
        for prop in violated(post):
            if safe:
                raise audit.AuditError("protocol", f"migration {self.id}: {name} broke {prop} in {post}")
            self.o.stats.violations[prop] = self.o.stats.violations.get(prop, 0) + 1
        return post

    def _mirror(self, pre: State, post: State) -> None:
        """Apply the effect's changes to the instances: the request's place on S and D, the
        reservation on D, S's copy of the KV. Batch changes happen only at a step boundary (the
        callers apply those actions from `at_next_boundary` callbacks)."""
        req = self.req
        assert req is not None
        src, dst = self.src, self.dst
        if pre.s_alive and not src.dead:
            if pre.req == _REQ_RUNNING and post.req == _REQ_PAUSED:
                src.remove_running(req.id)
                self.paused_ns = self.env.now
            elif pre.req == _REQ_PAUSED and post.req == _REQ_RUNNING:
                src.insert_running(req)
                self._resumed(committed=False)
            elif pre.req == _REQ_PAUSED and post.req == _REQ_MIGRATED:
                src.release(pre.s_blocks)
        if pre.d_alive and not dst.dead:
            if pre.d_req == _DREQ_NONE and post.d_req == _DREQ_RUNNING:
                dst.insert_running(req)
                if post.status == _MIG_RUNNING and post.s_alive:  # S still waits for the answer (or the fence's)
                    dst.watch(req.id, self._on_dest_event)
                req.migrations += 1
                self.o.stats.committed += 1
                self._resumed(committed=True)
            else:
                delta = post.d_res - pre.d_res
                if delta > 0 and not dst.reserve(delta):
                    raise audit.AuditError("protocol", f"migration {self.id}: D accepted {delta} blocks it cannot reserve")
                if delta < 0:
                    dst.release(-delta)
                if delta > 0 and post.lease:
                    self._start_lease()

    def enabled(self, name: str) -> bool:
        """Whether action `name`'s guard holds now (remembered, so `apply` does not evaluate it again)."""
        action = self.o.actions.get(name)
        state = self.state
        assert state is not None
        if action is None or not action.guard(state, self.v):
            return False
        self._enabled = (state, name)
        return True

    def _havoc(self, s_freed: int = 0) -> None:
        """Re-read the pools other requests change. s_freed: the request's blocks that S already
        returned to its free pool although the protocol has not yet applied that (finish/preempt)."""
        s = self.state
        assert s is not None
        changes: dict[str, int] = {}
        if s.s_alive and s.status == _MIG_RUNNING:  # once S's coordinator is done, S's side is not tracked
            free = self.src.free_blocks() - s_freed
            other = s.s_cap - free - s.s_blocks
            if free != s.s_free or other != s.s_other:
                changes["s_free"], changes["s_other"] = free, other
        if s.d_alive and s.d_req == _DREQ_NONE:  # after the commit D's pool is no longer tracked
            free = self.dst.free_blocks()
            other = s.d_cap - free - s.d_res - s.d_blocks
            if free != s.d_free or other != s.d_other:
                changes["d_free"], changes["d_other"] = free, other
        if changes:  # else keep the state (and `enabled`'s finding)
            if min(changes.values()) < 0:
                raise audit.AuditError("protocol", f"migration {self.id}: instance pools {changes} do not fit {s}")
            self.state = s.replace(**changes)

    def _catch_up(self, kv: int, s_freed: int = 0) -> None:
        """Apply the request's decode steps on S up to KV length `kv` (tokens), then sync."""
        s = self.state
        assert s is not None and self.req is not None
        if s.req != _REQ_RUNNING or not s.s_alive or s.status != _MIG_RUNNING:
            self._havoc(s_freed)
            return
        bs = s.bs
        done = (s.nblk - 1) * bs + s.tok + 1
        if kv < done:
            raise audit.AuditError("protocol", f"migration {self.id}: request {self.req.id} KV went back "
                                               f"from {done} to {kv} tokens")
        growth = -(-kv // bs) - s.nblk
        self._havoc(s_freed)
        s = self.state
        assert s is not None
        self.state = s.replace(s_free=s.s_free + growth, s_other=s.s_other - growth)
        for _ in range(kv - done):
            self.apply("decode")

    def _sync(self) -> None:
        """Bring the protocol up to the request's current length on S and re-read the pools."""
        req = self.req
        assert req is not None
        s = self.state
        if s is not None and s.s_alive and s.status == _MIG_RUNNING and not self.gone and s.req == _REQ_RUNNING:
            self._catch_up(self.src.allocated_tokens(req))
        else:
            self._havoc()

    # ------------------------------------------------------------------ S: start and stages
    def begin(self, src: Instance) -> None:
        """At S's boundary: choose the request (LCFS/SR/LR), build the initial state, first stage;
        then S's coordinator is a Task that waits for the replies."""
        if self.dst.dead:
            self._cancel()
            return
        if self.given is not None:
            req = src.running.get(self.given.id)
            if req is None or not src.migratable(req):  # finished, preempted or sharing blocks meanwhile
                self._cancel()
                return
        else:
            cands = [Candidate(r.id, src.kv_tokens(r), r.admit_seq, r.priority == HIGH, arrival_ns=r.arrival_ns)
                     for r in src.running.values() if src.migratable(r)]
            rid = choose_request(cands, self.o.selection)
            if rid is None:
                self._cancel()
                return
            req = src.running[rid]
        src.claim(req)
        self.req = req
        self._admit_seq = req.admit_seq  # its place in S's batch: a re-admission (after a preemption) changes it
        kv = src.kv_tokens(req)
        bs = src.bs
        nblk = -(-kv // bs)
        d_free = self.dst.free_blocks()
        self.state = api.start_migration(
            blocks=nblk, tokens_in_last_block=(kv - 1) % bs, src_free=src.free,
            src_other=src.capacity - src.free - nblk, dst_free=d_free, dst_other=self.dst.capacity - d_free,
            variant=self.v, block_size=bs, watermark=self.dst.watermark,
            last_stage_blocks=self.o.cfg.last_stage_blocks).state
        if not self.v.pinned(self.state):  # start_migration checked `initial` itself
            raise audit.AuditError("protocol", f"migration {self.id}: not an initial state: {self.state}")
        self.o.stats.started += 1
        src.watch(req.id, self._on_source_event)
        if self.o.cfg.slowdown_ppm:
            src.set_slowdown(self.o.cfg.slowdown_ppm)
        alloc = self._stage_point(src)
        if alloc is not None:
            self.proc = Task(self.env, self._coordinate(alloc))

    def _cancel(self) -> None:
        self.o.live.remove(self)
        self.o.release(self)
        self.released = True

    def _on_dest_event(self, what: str, req: Request) -> None:
        """The committed request finished on D (`d_finish`) while S has not yet learnt the
        commit's outcome: the fence's answer must see it. Once S knows, D is not tracked."""
        s = self.state
        if what == "finished" and s is not None and s.status == _MIG_RUNNING and s.s_alive and s.d_alive \
                and s.d_req == _DREQ_RUNNING:
            self.apply("d_finish")

    def _on_source_event(self, what: str, req: Request) -> None:
        """The request finished or was preempted on S: the protocol's `finish` / `preempt`."""
        s = self.state
        assert s is not None
        self.gone = what
        if s.req != _REQ_RUNNING or not s.s_alive or s.status != _MIG_RUNNING:
            return
        kv = req.prompt + req.generated - 1
        self._catch_up(kv, s_freed=-(-kv // self.src.bs))
        self.apply("finish" if what == "finished" else "preempt")

    def _stage_point(self, src: Instance) -> Call | None:
        """At S's boundary with pc == STAGE: abort, or begin the next (possibly final) stage and
        send the pre-allocation (None: the migration ended here)."""
        self._sync()
        if self.gone:
            # a finished or preempted request is not paused (v0.1.0: one its post-copy check
            # missed makes the stage raise, `abort_src_raise`)
            self._end_now("abort_src" if self.enabled("abort_src") else "abort_src_raise", self.gone)
            return None
        req = self.req
        assert req is not None
        if not src.dead and (src.running.get(req.id) is not req or req.admit_seq != self._admit_seq):
            # preempted (and maybe re-admitted) with no word from S's watch: its KV was freed, and a later stage
            # would copy blocks other requests may have overwritten (the protocol's `preempt` was never applied)
            raise audit.AuditError("protocol", f"migration {self.id}: request {req.id} left S's batch since the "
                                               f"migration began and the migration was not told")
        if self.enabled("begin_final"):
            self.apply("begin_final")  # the request leaves S's batch: downtime starts
        elif self.enabled("begin_stage"):
            self.apply("begin_stage")
        else:
            self._end_now("abort_stages", "max_stages")
            return None
        return self._call(self.d_alloc, replies_on_delivery=True)

    def _call(self, handler: Callable[[Message], None], replies_on_delivery: bool = False) -> Call:
        """S sends a call to D (it arrives half an RPC later) and starts its RPC timeout. The
        reply is a Message that D's handler sends; S's coordinator waits for it or the timeout
        (None: one that cannot fire, `Migrations.crash_free`)."""
        reply = Message(self.env)
        self.env.timeout(self.o.rpc_ns // 2).callbacks.append(lambda _ev: handler(reply))
        return reply, self._timeout(self.o.rpc_ns if replies_on_delivery else None)

    def _timeout(self, due_in: int | None) -> simpy.Timeout | None:
        """S's RPC timeout for a wait that ends `due_in` ns from now unless D crashes (None: not
        known in advance); not scheduled when it cannot fire."""
        if self.o.crash_free and due_in is not None and due_in < self.o.timeout_ns:
            return None
        return self.env.timeout(self.o.timeout_ns)

    def _after(self, delay: int, fn: Callable[[], None]) -> None:
        self.env.timeout(delay).callbacks.append(lambda _ev: fn())

    def _reply(self, reply: Message) -> None:
        """D's reply reaches S half an RPC later."""
        reply.send(delay=self.o.rpc_ns - self.o.rpc_ns // 2)

    # ------------------------------------------------------------------ S's coordinator (a Task)
    def _coordinate(self, alloc: Call) -> Waits[None]:
        """S's coordinator, stage after stage, from the first pre-allocation to its end: each
        call to D waits for D's reply or the RPC timeout (`_await`). A crash of S interrupts it
        (`crashed` has applied `crash_s`): nothing of S acts any more."""
        try:
            call: Call | None = alloc
            while call is not None:
                reply, timeout = call
                if not (yield from self._await((reply,), timeout)):
                    return
                s = self.state
                assert s is not None
                self._sync()
                if not self.enabled("s_alloc_ok"):
                    synced = self.state
                    assert synced is not None
                    if synced.ack == _ACK_OK and self.gone:  # D reserved, but the request is gone: ABORTED_SRC
                        yield from self._end("abort_src", self.gone)
                    else:
                        yield from self._end("s_alloc_fail", "dst_refused")
                    return
                post = self.apply("s_alloc_ok")
                copy_ns = self.o.cost.copy_stage_ns(s.n, s.bs, self.o.inflight if self.o.cfg.shared_copies else 1)
                copy = self.env.timeout(copy_ns)
                if post.status == _MIG_FINISHED:  # the AE's stage 1: S handed the request over already
                    copy.callbacks.append(self.d_copy)
                    self._over()
                    return
                timeout = self._timeout(copy_ns)
                copy.callbacks.append(self.d_copy)  # before S's wait: S learns right after D's pull
                if not (yield from self._await((copy,), timeout)):
                    return
                s = self.state
                assert s is not None
                if not s.d_alive and not (yield from self._await((), timeout)):
                    # D died before its pull: S's call fails at its timeout, or now if that has
                    # passed (a variant without timeouts; the callback design never woke again)
                    return
                self._sync()
                if self.enabled("s_copy_done"):
                    self.apply("s_copy_done")
                    call = yield from self._sleep(self._at_boundary(self.src, self._stage_point))
                elif self.enabled("s_send_commit"):
                    self.apply("s_send_commit")
                    yield from self._commit()
                    return
                else:
                    yield from self._end("s_copy_fail", "fenced")
                    return
        except simpy.Interrupt:
            return

    def _commit(self) -> Waits[None]:
        """S sends the commit and waits for D's answer (or the fence's, after a commit timeout)."""
        reply, timeout = self._call(self.d_commit)
        if not (yield from self._await((reply,), timeout)):
            return
        self._sync()
        if self.enabled("s_commit_ok"):
            self.apply("s_commit_ok")
            self._over()
        else:
            yield from self._end("s_commit_fail", "fenced")

    def _await(self, replies: tuple[Wait, ...], timeout: simpy.Event | None) -> Waits[bool]:
        """Wait for the first of `replies` or the RPC timeout. True: a reply came. At the
        timeout, a dead D: S learns it (`s_d_dead`). A live D whose reply is merely late (a copy
        slower than the timeout, a slow RPC): the protocol's spurious timeout of the call S waits
        on; the call itself stays in flight and D may still act on it. A variant without
        timeouts (the AE, v0.1.0) keeps waiting, as that code does. False: the migration ended."""
        while True:
            if timeout is None:
                wait = replies[0] if len(replies) == 1 else FirstOf(replies)
            else:
                wait = FirstOf((*replies, timeout)) if replies else timeout
            got = yield from self._sleep(wait)
            fired = got if isinstance(wait, FirstOf) else wait
            if fired is not timeout:
                s = self.state
                if len(replies) > 1 and s is not None and s.pc == _PC_RESOLVE and s.ack == _ACK_NONE:
                    # the commit's own answer, sent before S's timeout, which cleared it: the
                    # protocol waits for the fence's (D may have died before giving it)
                    replies = tuple(r for r in replies if r is not fired)
                    continue
                return True
            timeout = None
            s = self.state
            assert s is not None
            if not s.d_alive:
                yield from self._end("s_d_dead", "dst_failure")
                return False
            action = _TIMEOUTS.get(Pc(s.pc))
            if action is None or not self.enabled(action):
                continue  # no timeout any more: wait for the reply itself
            if action != "timeout_commit" or not self.v.resolve_commit_timeout:
                yield from self._end(action, "timeout")  # ABORTED_DST: a paused request resumes on S (HEAD even after a commit)
                return False
            self.apply(action)  # the safe design asks D whether it committed, and fences it if not
            fence, timeout = self._call(self.d_fence)
            replies = (*replies, fence)  # either answer settles it

    def _sleep(self, event: Wait) -> Waits[Any]:
        """Wait for `event`. D's crash interrupts the wait, but S cannot tell (its call fails only
        at the RPC timeout), so it waits on; S's crash ends the coordinator (the Interrupt)."""
        while True:
            try:
                return (yield event)
            except simpy.Interrupt as stop:
                if stop.cause is self.src:
                    raise

    def _at_boundary(self, inst: Instance, fn: Callable[[Instance], Any]) -> Message:
        """Run fn at inst's next step boundary (batch changes happen only there, in the hook
        itself); the coordinator resumes with its result inside the boundary, right after fn."""
        done = Message(self.env)
        inst.at_next_boundary(lambda i: done.fire(fn(i)))
        return done

    # ------------------------------------------------------------------ D
    def d_alloc(self, reply: Message) -> None:
        s = self.state
        assert s is not None
        if not s.d_alive:
            return
        self._sync()
        post = self.apply("d_alloc_ok" if self.enabled("d_alloc_ok") else "d_alloc_refuse")
        if post.d_recv and not post.s_alive:
            # the AE's final grant posted a receive from an S that died after asking: S's death
            # was counted as the migration's end, but the receive fails and installs the request
            self.o.stats.aborted["src_failure"] -= 1
            self._recv_ends()
        elif not post.s_alive:
            self._lost_if_stranded()  # a refusal to a dead S: nothing will bring the request back
        self._reply(reply)
        self._maybe_over()

    def _start_lease(self) -> None:
        """D's watcher runs every lease_check_s and frees a reservation older than lease_s. A
        renewed lease (the next stage's reservation) replaces the check of the old one."""
        if self._lease is not None and not self._lease.processed:
            self._lease.callbacks.remove(self._lease_check)
        check = self.o.lease_check_ns
        due = self.env.now + self.o.lease_ns
        self._lease = self.env.timeout(-(-due // check) * check - self.env.now)
        self._lease.callbacks.append(self._lease_check)

    def _lease_check(self, _ev: simpy.Event) -> None:
        s = self.state
        assert s is not None
        if not s.d_alive or not s.lease:
            return
        self._sync()
        self.apply("lease_expire")
        self._maybe_over()

    def d_copy(self, _copy: simpy.Event) -> None:
        """D's pull of this stage's blocks ends (S, if still waiting, learns it right after). A
        handed-over final stage (the AE) is S's send ending in the receive D posted when it
        granted the stage: the receive's done-callback installs the request on D, which runs
        it from D's next step boundary."""
        s = self.state
        assert s is not None
        if not s.d_alive or not s.m_copy:
            return  # S's RPC timeout finds D dead (the AE: or its receive already failed with S)
        if s.d_recv:
            self._recv_ends()
            return
        self._d_pull()

    def _recv_ends(self) -> None:
        """The AE's final receive ends (S's send arrived, or S died and the receive fails); its
        done-callback puts the request into D's batch, at D's next step boundary."""
        self.dst.at_next_boundary(lambda _dst: self._recv_done())

    def _recv_done(self) -> None:
        s = self.state
        assert s is not None
        if s.d_alive and s.d_recv:  # not already ended (S's send and S's death both end it)
            self._d_pull()

    def _d_pull(self) -> None:
        s = self.state
        assert s is not None
        self._sync()
        if self.enabled("d_copy"):
            self.apply("d_copy")
            self.o.stats.bytes_moved += s.n * s.bs * self.o.cost.cfg.kv_bytes_per_token
        else:  # fenced, or S died: the pull fails
            self.apply("d_copy_fail")
        self._maybe_over()

    def d_commit(self, reply: Message) -> None:
        """The commit message reached D: D runs it at its next step boundary."""
        if self.state is not None and self.state.d_alive:
            self.dst.at_next_boundary(lambda _dst: self._d_commit_at_boundary(reply))

    def _d_commit_at_boundary(self, reply: Message) -> None:
        self._sync()
        self.apply("d_commit" if self.enabled("d_commit") else "d_commit_refuse")
        self._lost_if_stranded()
        self._reply(reply)
        self._maybe_over()

    def _d_free(self) -> None:
        s = self.state
        assert s is not None
        if not s.d_alive or not s.m_free:
            return
        self._sync()
        self.apply("d_free_res")
        self._maybe_over()

    def d_fence(self, reply: Message) -> None:
        """The fence reached D: it answers at its next boundary (where commits also happen)."""
        if self.state is not None and self.state.d_alive:
            self.dst.at_next_boundary(lambda _dst: self._d_fence_at_boundary(reply))

    def _d_fence_at_boundary(self, reply: Message) -> None:
        s = self.state
        assert s is not None
        if not s.m_fence:
            return
        self._sync()
        self.apply("d_fence")
        self._reply(reply)
        self._maybe_over()

    # ------------------------------------------------------------------ ending
    def _end(self, name: str, cause: str) -> Waits[None]:
        """Apply an aborting action; one that touches a paused request waits for S's boundary."""
        s = self.state
        assert s is not None
        if s.req == _REQ_PAUSED:
            yield from self._sleep(self._at_boundary(self.src, lambda _src: self._end_now(name, cause)))
        else:
            self._end_now(name, cause)

    def _end_now(self, name: str, cause: str) -> None:
        self._sync()
        self.apply(name)
        self.o.stats.aborted[cause] += 1
        self._lost_if_stranded()
        if self.state is not None and self.state.m_free:
            self._after(self.o.rpc_ns // 2, self._d_free)
        self._over()

    def _resumed(self, committed: bool) -> None:
        """The paused request is in a batch again (D's after a commit, S's after an abort)."""
        if self.paused_ns >= 0:
            assert self.req is not None
            down = self.env.now - self.paused_ns
            self.req.downtime_ns += down
            self.o.stats.paused_integral_ns += down
            if committed:
                self.o.stats.downtimes_ns.append(down)
            self.paused_ns = -1

    def _over(self) -> None:
        """S's coordinator is done: the instances are free to migrate again."""
        if not self.released:
            self.released = True
            self.o.release(self)
            if self.src.slow_ppm and not self.src.dead:
                self.src.set_slowdown(0)
            if not self.src.dead and self.req is not None:
                self.src.unwatch(self.req.id, self._on_source_event)
            if not self.dst.dead and self.req is not None:
                self.dst.unwatch(self.req.id, self._on_dest_event)  # S knows the outcome: D's finish no longer matters here
        self._maybe_over()

    def pending(self) -> bool:
        """Something can still act on this migration: S's coordinator, or D on a message or lease."""
        s = self.state
        if s is None:
            return not self.released
        if s.status == _MIG_RUNNING and s.s_alive:
            return True
        return bool(s.d_alive and (s.m_alloc or s.m_copy or s.m_commit or s.m_free or s.m_fence or s.lease
                                   or s.d_recv))

    def _maybe_over(self) -> None:
        """Forget the migration once nothing can act on it any more."""
        if not self.pending() and self in self.o.live:
            self.o.live.remove(self)
            if self.o.on_forget is not None:
                self.o.on_forget(self)

    def _lost_if_stranded(self) -> None:
        """A request out of every batch that nothing will bring back is lost: paused on a dead S
        with no commit in flight, paused after an abort that did not resume it (the AE), or
        handed over to a D that refused or died."""
        s = self.state
        assert s is not None and self.req is not None
        if self.req.at >= 0 or self.req.status or s.d_req != _DREQ_NONE:
            return
        alive_holder = s.s_alive and (s.status == _MIG_RUNNING or s.req == _REQ_RUNNING)
        # D may still put it into its batch: on S's commit, by the end of the receive D posted
        # at its grant (the AE), or by the end of the receive that D's grant of a final
        # pre-allocation still in flight would post
        arms = s.m_alloc and s.final and self.o.actions["d_alloc_ok"].effect(s, self.v).d_recv
        d_may_commit = s.d_alive and (s.m_commit or s.d_recv or arms) and not s.fenced
        if s.req in (_REQ_PAUSED, _REQ_MIGRATED) and not alive_holder and not d_may_commit:
            if self.paused_ns >= 0:
                self.o.stats.paused_integral_ns += self.env.now - self.paused_ns
                self.paused_ns = -1
            self.o.on_lost(self.req, "failed:lost_in_migration")

    def crashed(self, inst: Instance) -> None:
        """`inst` (S or D) crashes: `crash_s` / `crash_d`, applied now; then S's coordinator, if
        it is still waiting, is interrupted (it ends with S; D's crash it cannot see)."""
        s = self.state
        if s is None:  # not begun yet: the begin hook dies with S, or finds D dead
            if inst is self.src:
                self._cancel()
            return
        if inst is self.src and s.s_alive:
            self.apply("crash_s")  # pools are not re-read: the crashed instance has none left
            if s.d_recv and s.d_alive:  # the AE's final receive fails with its peer and installs
                self._recv_ends()
            elif s.status == _MIG_RUNNING and s.d_req == _DREQ_NONE:
                self.o.stats.aborted["src_failure"] += 1
            self._over()
        elif inst is self.dst and s.d_alive:
            self.apply("crash_d")
        else:
            return
        self._lost_if_stranded()
        self._maybe_over()
        if self.proc is not None and self.proc.is_alive:
            self.proc.interrupt(inst)
