"""Liveness: what must eventually happen once failures stop, under weak fairness.

Each property is a predicate Q over `State` that must eventually hold for good (<>[]Q) on every
fair execution whose failures stop. Defined once, here, over the ops facade: the explicit state
graph (models/liveness.py) evaluates them on concrete states, the ranking proof on Z3 terms.

Fairness (weak, per process): S's coordinator, D's message handler and D's lease watcher each
take a step if one of their actions stays enabled. Failures (crashes,
spurious RPC timeouts, a transfer error while the pull could succeed) may happen any number of
times, then stop. The rest of the world (decoding, finishing, preemption and re-admission, other
load taking free blocks or D's migration slot and giving the slot back, the request finishing
on D) may go on or stop as it likes: it is neither fair nor excluded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from llumverify.protocol.ops import Val, and_, not_, or_
from llumverify.protocol.state import Mig, Req, Slot, State
from llumverify.protocol.variants import Variant

Predicate = Callable[[State], Val]

# Always failures (`d_commit_fail` is enabled only where `d_commit` is); `d_copy_fail` is one only
# while the pull could succeed (d_copy enabled): on a fenced migration, or with S dead, it is D's
# answer and the handler must give it.
FAILURES: frozenset[str] = frozenset({"crash_s", "crash_d", "timeout_alloc", "timeout_copy",
                                      "timeout_commit", "d_commit_fail"})
FAILURE_UNLESS_DISABLED: Mapping[str, str] = {"d_copy_fail": "d_copy"}
FAIR_ENV: tuple[str, ...] = ("lease_expire",)


def fair_groups(v: Variant) -> dict[str, tuple[str, ...]]:
    """Weakly fair processes of a variant and their actions."""
    groups = {"S": tuple(a.name for a in v.actions if a.kind == "S"),
              "D": tuple(a.name for a in v.actions if a.kind == "D")}
    names = {a.name for a in v.actions}
    groups.update({n: (n,) for n in FAIR_ENV if n in names})
    return groups


def coordinating(s: State) -> Val:
    return and_(s.s_alive, s.status == Mig.RUNNING)


def migration_terminates(s: State) -> Val:
    """Every started migration ends: S's coordinator commits or aborts (or S crashed)."""
    return not_(coordinating(s))


def no_stuck_pause(s: State) -> Val:
    """No request stays paused for ever on a live S: it is resumed or handed over."""
    return not_(and_(s.s_alive, s.req == Req.PAUSED))


def reservation_freed(s: State) -> Val:
    """Every block a live D reserved for the migration is eventually released (committed into
    the request, or freed)."""
    return or_(not_(s.d_alive), s.d_res == 0)


def slot_freed(s: State) -> Val:
    """A live D's migration slot is eventually released."""
    return or_(not_(s.d_alive), s.d_slot != Slot.OURS)


def messages_handled(s: State) -> Val:
    """Every message of the migration to a live D is eventually taken off the channel (D
    answers it, or it is moot): none stays in flight for ever."""
    return or_(not_(s.d_alive), not_(or_(s.m_alloc, s.m_copy, s.m_commit, s.m_free, s.m_fence)))


drained = messages_handled


@dataclass(frozen=True)
class Liveness:
    name: str
    predicate: Predicate  # must eventually hold for good
    doc: str


LIVENESS: Mapping[str, Liveness] = {
    f.__name__: Liveness(f.__name__, f, " ".join((f.__doc__ or "").split()))
    for f in (migration_terminates, no_stuck_pause, reservation_freed, slot_freed,
              messages_handled)
}


def quiescent(s: State) -> Val:
    """Every liveness goal holds (so nothing is left in flight): stable once failures stop."""
    return and_(*(p.predicate(s) for p in LIVENESS.values()))
