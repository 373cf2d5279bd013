"""Two SimPy events for the migration processes (sim/migration.py), built so that a process waiting
on them resumes exactly where a plain callback on the awaited event would run.

That keeps the simulator's event order, hence its outputs, independent of how a migration's
control flow is written. SimPy resumes a process when the event it waits for is processed;
`AnyOf` is processed only after every other event due at that instant (it schedules itself
NORMAL once its first event is processed). `FirstOf` is processed inside the processing of its
first event instead, as `Environment.step` processes an event (run its callbacks, mark it
processed), so the waiting process runs as that event's callback would, and costs no event. A
boundary's result (`Message.fire`) is handed over the same way. `Message.send` schedules a reply
the way SimPy's own Timeout schedules itself (the two fields it sets, then the public
`Environment.schedule`, as sim/instance.py's _Wake does; pyproject pins simpy below 5).
"""

from __future__ import annotations

from typing import Any

import simpy
from simpy.core import NORMAL
from simpy.events import PENDING


class Message(simpy.Event):
    """An event made before its value is known: a reply S waits for, a boundary's result."""

    def send(self, value: Any = None, delay: int = 0) -> None:
        """Schedule it `delay` ns from now: its place among same-time events is fixed now."""
        self._ok = True
        self._value = value
        self.env.schedule(self, NORMAL, delay)

    def fire(self, value: Any = None) -> None:
        """Process it now, inside the caller: its callbacks (the waiting process) run here."""
        self._ok = True
        self._value = value
        callbacks, self.callbacks = self.callbacks, None
        for callback in callbacks:
            callback(self)


class FirstOf(Message):
    """The first of `events` to be processed (its value), processed inside that event's
    processing, after the callbacks the event had before this wait was made. The later events
    keep a callback that finds it decided: cheaper than unhooking it, as every wait does this."""

    def __init__(self, env: simpy.Environment, events: tuple[simpy.Event, ...]) -> None:
        super().__init__(env)
        for event in events:
            event.callbacks.append(self._first)

    def _first(self, event: simpy.Event) -> None:
        if self._value is PENDING:
            self.fire(event)
