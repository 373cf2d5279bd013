"""Counterexample traces: action labels plus the states they pass through, and their printed form."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from llumverify.protocol.state import CONSTANT_FIELDS, ENUM_FIELDS, FIELDS, State


@dataclass(frozen=True)
class Trace:
    """states[0] is initial; actions[i] leads from states[i] to states[i + 1]."""

    actions: tuple[str, ...]
    states: tuple[State, ...]

    def __len__(self) -> int:
        return len(self.actions)

    def changes(self, i: int) -> dict[str, Any]:
        """Fields step i changed, with their new values (enums by name)."""
        before, after = self.states[i], self.states[i + 1]
        return {f: show(f, getattr(after, f)) for f in FIELDS
                if getattr(before, f) != getattr(after, f)}

    def to_json(self) -> dict[str, Any]:
        return {
            "initial": {f: show(f, getattr(self.states[0], f)) for f in FIELDS},
            "steps": [{"action": a, "changes": self.changes(i)} for i, a in enumerate(self.actions)],
        }

    def render(self) -> str:
        """The form a user reads: the initial constants and request, then numbered actions."""
        s0 = self.states[0]
        keys = (*CONSTANT_FIELDS, "nblk", "tok", "s_free", "d_free")
        if s0.kv_pending:  # a migration that picked a request whose prefill still runs (AE)
            keys += ("kv_pending",)
        lines = ["  initial: " + " ".join(f"{k}={show(k, getattr(s0, k))}" for k in keys)]
        for i, a in enumerate(self.actions):
            delta = " ".join(f"{k}={val}" for k, val in self.changes(i).items())
            lines.append(f"  {i + 1:2d}. {a:<16} {delta}".rstrip())
        return "\n".join(lines)


def show(field: str, value: Any) -> Any:
    """An enum field's value by name; other values as they are."""
    enum: type[IntEnum] | None = ENUM_FIELDS.get(field)
    return enum(value).name if enum is not None else value
