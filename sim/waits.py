"""The simulator's SimPy layer: an Environment whose Urgent timeouts precede same-time events,
and two SimPy events for the migration processes (sim/migration.py), built so that a process
waiting on them resumes exactly where a plain callback on the awaited event would run.

Step boundaries precede every ordinary event at their time. SimPy orders same-time events by
priority, then by when they were scheduled; its Timeout schedules itself NORMAL. `Urgent` is a
Timeout that `Environment` (overriding the public `schedule`) schedules URGENT instead: where
SimPy puts a process's start and an interrupt.

The waits keep the simulator's event order, hence its outputs, independent of how a migration's
control flow is written. SimPy resumes a process when the event it waits for is processed;
`AnyOf` is processed only after every other event due at that instant (it schedules itself
NORMAL once its first event is processed). `FirstOf` is processed inside the processing of its
first event instead, as `Environment.step` processes an event (run its callbacks, mark it
processed), so the waiting process runs as that event's callback would, and costs no event. A
boundary's result (`Message.fire`) is handed over the same way. `Message.send` schedules a reply
the way SimPy's own Timeout schedules itself (the two fields it sets, then the public
`Environment.schedule`; pyproject pins simpy below 5).
"""

from __future__ import annotations

from types import MethodType
from typing import Any

import simpy
from simpy.events import PENDING

# SimPy's documented priorities (simpy.events.URGENT, NORMAL; lower first among same-time
# events). tests/test_waits.py checks that Urgent ties with a process start and precedes an
# earlier Timeout due at the same time, i.e. that URGENT is SimPy's.
URGENT, NORMAL = 0, 1


class Urgent(simpy.Timeout):
    """A timeout processed before same-time NORMAL events (on an `Environment`)."""


class Environment(simpy.Environment):
    """SimPy's Environment, scheduling `Urgent` timeouts URGENT."""

    def __init__(self, initial_time: int | float = 0) -> None:
        super().__init__(initial_time)
        # SimPy binds these to the instance only when they are in its class's own __dict__; in a
        # subclass each `env.timeout` would make a bound method through a Python descriptor
        for name, cls in (("event", simpy.Event), ("timeout", simpy.Timeout), ("process", simpy.Process),
                          ("all_of", simpy.AllOf), ("any_of", simpy.AnyOf)):
            setattr(self, name, MethodType(cls, self))

    def schedule(self, event: simpy.Event, priority: int = NORMAL, delay: int | float = 0) -> None:
        simpy.Environment.schedule(self, event, URGENT if type(event) is Urgent else priority, delay)


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
