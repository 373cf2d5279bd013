"""The simulator-facing API: run one migration through the protocol's own actions.

    m = start_migration(blocks=40, tokens_in_last_block=3, src_free=100, dst_free=300,
                        variant="safe")
    while m.status is Mig.RUNNING:
        m = m.apply(m.enabled()[0])        # or pick the event the simulation produces
    m.blocks_held()                        # {'src': ..., 'dst_reserved': ..., 'dst_owned': ...}

A Migration is immutable: `apply` returns the next one. The simulator decides which enabled
action happens (and when); the protocol decides what it does.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

from llumverify.errors import UserError
from llumverify.protocol import compiled
from llumverify.protocol.actions import Action
from llumverify.protocol.state import Ack, DReq, Mig, Pc, Req, Slot, State, initial
from llumverify.protocol.variants import Variant, get_variant


class GuardError(Exception):
    """An action was applied whose guard is false in the current state."""


@functools.cache
def _compiled_initial() -> Callable[[State], bool]:
    return compiled.predicate(initial)


def _initial(s: State) -> bool:
    """`initial` (state.py) on a concrete state, compiled (built on first use)."""
    return _compiled_initial()(s)


@functools.lru_cache(maxsize=None)
def _actions(variant: Variant) -> dict[str, Action]:
    """A variant's actions by name (variants hash by identity and never change)."""
    return {a.name: a for a in variant.actions}


@dataclass(frozen=True)
class Migration:
    variant: Variant
    state: State

    @property
    def status(self) -> Mig:
        return Mig(self.state.status)

    @property
    def request(self) -> Req:
        return Req(self.state.req)

    def enabled(self) -> list[str]:
        """Names of the actions whose guard holds now."""
        return [a.name for a in self.variant.actions if a.guard(self.state, self.variant)]

    def apply(self, name: str) -> "Migration":
        """The migration after action `name`; GuardError if it cannot happen now."""
        action = _actions(self.variant).get(name) or self.variant.action(name)  # the latter names the choices
        if not action.guard(self.state, self.variant):
            raise GuardError(f"{name} is not enabled (enabled: {', '.join(self.enabled())})")
        return Migration(self.variant, action.effect(self.state, self.variant))

    def blocks_held(self) -> dict[str, int]:
        """Where the request's KV blocks are: held by S, reserved on D, owned by D."""
        s = self.state
        return {"src": s.s_blocks, "dst_reserved": s.d_res, "dst_owned": s.d_blocks}


# What every start has in common (the sizes are filled in by start_migration).
_START = State(
    bs=1, wm=0, s_cap=1, d_cap=0, thr=0,
    req=Req.RUNNING, preempted=False, late_preempt=False, nblk=1, tok=0, s_blocks=1, s_shared=0, s_free=0, s_other=0, s_alive=True,
    kv_pending=False,
    d_req=DReq.NONE, d_nblk=0, d_blocks=0, d_full=0, d_tail=0, d_res=0, d_free=0, d_other=0,
    d_alive=True, d_slot=Slot.FREE, lease=False,
    fenced=False, d_recv=False, status=Mig.RUNNING, pc=Pc.STAGE, stage=0, final=False, n=0, copied=0,
    p_nblk=0, p_tok=0, c_sent=False, aborted=False, m_alloc=False, m_copy=False, m_commit=False, m_free=False,
    m_fence=False, ack=Ack.NONE,
)


def start_migration(blocks: int, src_free: int, dst_free: int, variant: str | Variant = "safe",
                    tokens_in_last_block: int = 0, block_size: int = 16, watermark: int = 0,
                    last_stage_blocks: int = 16, src_other: int = 0, dst_other: int = 0,
                    dst_slot_taken: bool = False, prefill_running: bool = False,
                    shared_blocks: int = 0) -> Migration:
    """A migration of a running request with `blocks` KV blocks on S, D having `dst_free`
    (`prefill_running`: the request's prefill has not ended yet; only a variant whose selection
    may pick such a request, `picks_in_prefill`, starts so; `shared_blocks`: how many of its full
    blocks other requests also reference)."""
    v = get_variant(variant) if isinstance(variant, str) else variant
    if prefill_running and not v.picks_in_prefill:
        raise UserError(f"variant {v.name!r} never picks a request whose prefill is still running")
    thr = v.last_stage_blocks if v.last_stage_blocks is not None else last_stage_blocks
    s = _START.replace(
        bs=block_size, wm=watermark, s_cap=src_free + src_other + blocks,
        d_cap=dst_free + dst_other, thr=thr, nblk=blocks, tok=tokens_in_last_block,
        s_blocks=blocks, s_shared=shared_blocks, s_free=src_free, s_other=src_other, d_free=dst_free, d_other=dst_other,
        d_slot=Slot.OTHER if dst_slot_taken else Slot.FREE, kv_pending=prefill_running,
    )
    if not _initial(s.replace(d_slot=Slot.FREE)):
        raise UserError(f"not a valid migration start: blocks={blocks} (>= 1), "
                        f"tokens_in_last_block={tokens_in_last_block} (< block_size), "
                        f"shared_blocks={shared_blocks} (< blocks), "
                        f"free/other/watermark must be >= 0")
    return Migration(v, s)
