"""Two SimPy events for the migration processes (sim/migration.py), built so that a process waiting
on them resumes exactly where a plain callback on the awaited event would have run.

That keeps the simulator's event order, hence its outputs, independent of how a migration's
control flow is written: SimPy resumes a process waiting on a condition only when the condition
is processed, and `AnyOf` schedules itself NORMAL, behind every other event due at that instant.
`FirstOf` schedules itself URGENT instead: when its first event (a NORMAL one) is processed,
nothing else is due before it, so the process runs next. Both set the two fields SimPy's own
Timeout sets and schedule through the public `Environment.schedule` (as sim/instance.py's
_Wake does; pyproject pins simpy below 5).
"""

from __future__ import annotations

from typing import Any

import simpy
from simpy.core import NORMAL, URGENT


class Message(simpy.Event):
    """An event created before it is due (a reply S waits for, a boundary's result): `send`
    schedules it `delay` ns from now, so its place among same-time events is fixed at sending."""

    def send(self, value: Any = None, delay: int = 0, priority: int = NORMAL) -> None:
        self._ok = True
        self._value = value
        self.env.schedule(self, priority, delay)


class FirstOf(simpy.AnyOf):
    """`AnyOf` processed as soon as its first event is: the process resumes right after that
    event's own callbacks, before anything they scheduled (see the module docstring)."""

    def succeed(self, value: Any = None) -> FirstOf:
        self._ok = True
        self._value = value
        self.env.schedule(self, URGENT)
        return self
