"""Protocol variants as data: flags read by the shared actions, plus small action overrides.

`ae`, `v010` and `head` model llumnix-ray as written (see docs/llumnix-code-notes.md and
reports/protocol-findings.md for the code each flag comes from); `safe` is our corrected design.
Mutants (models/mutants.py) are variants too: `safe` with one flag flipped or one action replaced.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping

from llumverify.errors import UserError
from llumverify.protocol.actions import BASE_ACTIONS, Action
from llumverify.protocol.ops import Val
from llumverify.protocol.state import State


@dataclass(frozen=True, eq=False)
class Variant:
    """How one version of the handshake behaves. Every field is read by some action.

    Compared and hashed by identity (caches of Z3 encodings key on the object)."""

    name: str
    doc: str
    max_stages: int  # stages allowed (the AE always runs exactly 2)
    last_stage_blocks: int | None  # pins State.thr; None leaves it symbolic when checking
    final_at_max_stage: bool  # the last allowed stage is final (else exceeding it aborts)
    lease: bool  # D's reservations expire (lease watcher)
    fence: bool  # D disowns a freed/expired migration and refuses its later messages
    resolve_commit_timeout: bool  # on commit timeout S asks D instead of resuming blindly
    free_on_abort_src: bool  # S tells D to free the reservation on ABORTED_SRC
    free_on_abort_dst: bool  # ... and on ABORTED_DST
    later_alloc_checks_slot: bool  # later pre-allocations check D's slot is still ours
    overrides: Mapping[str, Action] = field(default_factory=lambda: MappingProxyType({}))

    def pinned(self, s: State) -> Val:
        """Constraints this variant puts on the initial constants (beyond `initial`)."""
        return True if self.last_stage_blocks is None else s.thr == self.last_stage_blocks

    @property
    def actions(self) -> tuple[Action, ...]:
        """The variant's actions: the shared ones that apply, with overrides swapped in."""
        return tuple(self.overrides.get(a.name, a) for a in BASE_ACTIONS if a.applies(self))

    def action(self, name: str) -> Action:
        for a in self.actions:
            if a.name == name:
                return a
        known = ", ".join(a.name for a in self.actions)
        raise UserError(f"variant {self.name!r} has no action {name!r} (known: {known})")

    def derive(self, name: str, doc: str, overrides: Mapping[str, Action] | None = None,
               **flags: object) -> "Variant":
        """A copy with some flags changed and some actions replaced (used for mutants)."""
        merged = dict(self.overrides) | dict(overrides or {})
        return replace(self, name=name, doc=doc, overrides=MappingProxyType(merged), **flags)


SAFE = Variant(
    name="safe",
    doc="Corrected design: fenced reservations, commit outcome resolved with D, frees on abort.",
    max_stages=3, last_stage_blocks=None, final_at_max_stage=True, lease=True, fence=True,
    resolve_commit_timeout=True, free_on_abort_src=True, free_on_abort_dst=True,
    later_alloc_checks_slot=True,
)

# Placeholders until the code notes land are replaced below by the code-faithful settings.
AE = Variant(
    name="ae", doc="The OSDI'24 artifact (osdi24ae): exactly two stages.",
    max_stages=2, last_stage_blocks=0, final_at_max_stage=True, lease=False, fence=False,
    resolve_commit_timeout=False, free_on_abort_src=True, free_on_abort_dst=False,
    later_alloc_checks_slot=False,
)
V010 = Variant(
    name="v010", doc="llumnix-ray v0.1.0.",
    max_stages=3, last_stage_blocks=None, final_at_max_stage=False, lease=False, fence=False,
    resolve_commit_timeout=False, free_on_abort_src=True, free_on_abort_dst=False,
    later_alloc_checks_slot=False,
)
HEAD = Variant(
    name="head", doc="llumnix-ray main at 3fb6c03, as written.",
    max_stages=3, last_stage_blocks=None, final_at_max_stage=False, lease=True, fence=False,
    resolve_commit_timeout=False, free_on_abort_src=True, free_on_abort_dst=False,
    later_alloc_checks_slot=False,
)

VARIANTS: Mapping[str, Variant] = MappingProxyType({v.name: v for v in (SAFE, AE, V010, HEAD)})


def get_variant(name: str) -> Variant:
    try:
        return VARIANTS[name]
    except KeyError:
        raise UserError(f"unknown variant {name!r} (known: {', '.join(VARIANTS)})") from None
