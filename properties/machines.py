"""Hypothesis state machines that drive the concrete protocol through every event.

`machine_for(variant, ...)` builds one RuleBasedStateMachine class per variant with one rule per
action of the variant (environment events included: decode, finish, preempt, out-of-memory,
crashes, spurious timeouts, lease expiry), generated from `variant.actions`. Each rule is
guarded by a precondition that is the action's own guard on the current state, applies the
action through the simulator API and checks that the concrete transition satisfies the Z3
relation of that action (conformance). For variants that claim safety, every property holds
after every step, every step property on every step, and each decision of S or D has one
enabled alternative at most (`decisive`).

A failure therefore shrinks to a readable list of action calls (`state.begin_final()`,
`state.d_alloc_ok()`, ...), and Hypothesis's statistics report each action's coverage (an
event `action NAME` per action taken; per-rule times and precondition counts with
observability). A rule `proceed` takes S's or D's next move (whichever the protocol enables
first; a note names it), so the handshake advances in runs where swarm testing switched some of
its rules off. One no-op rule, `nothing_enabled`, is enabled exactly when no action is (both
servers crashed, say), so a run can go on to its step count from a dead end.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from hypothesis import event, note, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from llumverify.models.conformance import conforms
from llumverify.protocol.actions import Action
from llumverify.protocol.api import Migration, start_migration
from llumverify.protocol.variants import Variant
from llumverify.properties.safety import PROPERTIES, decisive, violated

IDLE = "nothing_enabled"
# The world's disruptions: each run draws how many it may take (0-3). Picking uniformly among
# ~10 enabled actions, with these always among them, a run almost never got past the start of
# the handshake (no commit in 300 examples); with a budget, runs of 0 faults complete it and
# runs of 1-3 put each fault at every point of it.
BENIGN_ENV = frozenset({"decode", "readmit", "d_finish", "other_mig_in", "other_mig_out",
                        "prefill_done"})
DECODE = "decode"  # always enabled while S runs the request: budgeted too (0-5 a run), or runs
                   # spend their steps decoding


def is_fault(a: Action) -> bool:
    return (a.kind in ("env", "timeout") and a.name not in BENIGN_ENV) or \
        a.name in ("d_copy_fail", "d_commit_fail")


def _action_rule(action: Action) -> Callable[..., None]:
    """The rule of one action: enabled when its guard holds, applies it and checks the step."""
    name = action.name

    def enabled(self: Any) -> bool:
        return name in self.allowed_now()

    def act(self: Any) -> None:
        self.take(name)

    enabled.__name__ = enabled.__qualname__ = f"{name}_enabled"
    act.__name__ = act.__qualname__ = name
    act.__doc__ = action.doc
    return precondition(enabled)(rule()(act))


def machine_for(variant: Variant, check_properties: bool) -> type[RuleBasedStateMachine]:
    """A state machine class for one variant (properties checked only if it claims safety)."""
    actions = variant.actions
    faults = frozenset(a.name for a in actions if is_fault(a))

    @initialize(blocks=st.integers(1, 40), block_size=st.integers(1, 4), data=st.data(),
                src_free=st.integers(0, 6), dst_free=st.integers(0, 60),
                watermark=st.integers(0, 3), last_stage_blocks=st.integers(0, 20),
                dst_slot_taken=st.booleans(), faults=st.integers(0, 3), decodes=st.integers(0, 5))
    def start(self: Any, blocks: int, block_size: int, data: st.DataObject, src_free: int,
              dst_free: int, watermark: int, last_stage_blocks: int,
              dst_slot_taken: bool, faults: int, decodes: int) -> None:
        tok = data.draw(st.integers(0, block_size - 1), label="tokens_in_last_block")
        prefill = (data.draw(st.booleans(), label="prefill_running")
                   if variant.picks_in_prefill else False)  # no draw for the others: their runs stay
        # full blocks other requests also reference (a shared prefix): S must not free them
        shared = data.draw(st.integers(0, blocks - 1), label="shared_blocks")
        self.faults_left, self.decodes_left = faults, decodes
        self.m = start_migration(
            blocks=blocks, src_free=src_free, dst_free=dst_free, variant=variant,
            tokens_in_last_block=tok, block_size=block_size, watermark=watermark,
            last_stage_blocks=last_stage_blocks, dst_slot_taken=dst_slot_taken,
            prefill_running=prefill, shared_blocks=shared)

    def take(self: Any, name: str) -> None:
        """Apply action `name` through the API; the step conforms (and keeps the step properties)."""
        event(f"action {name}")  # statistics: the share of runs that took each action
        if name in faults:
            self.faults_left -= 1
        elif name == DECODE:
            self.decodes_left -= 1
        pre = self.m.state
        self.m = self.m.apply(name)
        assert conforms(variant, name, pre, self.m.state), f"{name} disagrees with Z3"
        if check_properties:
            broken = violated(self.m.state, pre)
            assert not broken, f"{name} violated: {broken}"

    def enabled_now(self: Any) -> frozenset[str]:
        """The actions whose guard holds in the current state (each guard evaluated once per
        state: Hypothesis asks the preconditions several times a step)."""
        if self.guards_of is not self.m:
            self.guards_of, self.guards_hold = self.m, frozenset(self.m.enabled())
        return self.guards_hold

    def allowed_now(self: Any) -> frozenset[str]:
        """The enabled actions this run may still take (faults and decodes while their budgets last)."""
        now = self.enabled_now()
        if self.faults_left <= 0:
            now = now - faults
        return now if self.decodes_left > 0 else now - {DECODE}

    def stuck(self: Any) -> bool:
        return not self.allowed_now()

    def nothing_enabled(self: Any) -> None:
        """No action is enabled: nothing happens."""

    @invariant()
    def safe(self: Any) -> None:
        if check_properties and hasattr(self, "m") and self.checked is not self.m:
            self.checked = self.m  # a no-op step leaves the (immutable) state as checked
            broken = [n for n, p in PROPERTIES.items() if not p.predicate(self.m.state)]
            assert not broken, f"violated: {broken}"
            assert decisive(self.m.state, variant, self.enabled_now()), f"not decisive: {self.m.enabled()}"

    namespace: dict[str, Any] = {"start": start, "take": take, "safe": safe,
                                 "enabled_now": enabled_now, "allowed_now": allowed_now,
                                 "guards_of": None, "checked": None, "faults_left": 0, "decodes_left": 0,
                                 "__annotations__": {"m": Migration},  # set by `start`
                                 "__doc__": f"Random runs of variant {variant.name!r}."}
    stuck.__name__ = stuck.__qualname__ = f"{IDLE}_enabled"
    namespace[IDLE] = precondition(stuck)(rule()(nothing_enabled))
    coordinators = [a.name for a in actions if a.kind in ("S", "D") and a.name not in faults]

    def proceed(self: Any) -> None:
        """S's or D's next move, whichever the protocol enables first: swarm testing switches a
        random half of the rules off in each run, so without this the 7-step handshake would
        rarely have all its rules on."""
        now = self.allowed_now()
        name = next(n for n in coordinators if n in now)
        note(f"proceed: {name}")  # printed with a falsifying example, in step order
        self.take(name)

    def can_proceed(self: Any) -> bool:
        return any(n in self.allowed_now() for n in coordinators)

    can_proceed.__name__ = can_proceed.__qualname__ = "proceed_enabled"
    namespace["proceed"] = precondition(can_proceed)(rule()(proceed))
    for a in actions:
        if a.name in namespace or hasattr(RuleBasedStateMachine, a.name):
            raise ValueError(f"action {a.name!r} of {variant.name!r} clashes with a machine attribute")
        namespace[a.name] = _action_rule(a)
    cls_name = "ProtocolMachine_" + re.sub(r"\W", "_", variant.name)
    machine = type(cls_name, (RuleBasedStateMachine,), namespace)
    machine.__module__ = __name__
    return machine
