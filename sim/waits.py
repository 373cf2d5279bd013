"""The simulator's SimPy layer, through SimPy's public API only (pyproject pins the major tested).

Two orderings the outputs depend on, and how they are had:
- Urgent timeouts. A step boundary at time t precedes every ordinary event at t. SimPy orders
  same-time events by priority, then by when they were scheduled; its Timeout schedules itself
  NORMAL. `Urgent` is a Timeout that `Environment` (overriding the public `schedule`) schedules
  URGENT instead: where SimPy puts a process's start and an interrupt.
- Inline resumes. A migration's coordinator (`Task`) resumes exactly where a plain callback on
  the awaited event would run, so the event order, hence every output, does not depend on how
  its control flow is written. SimPy's `AnyOf` would resume it behind every other event due at
  that instant, and a SimPy Process resumes only on a SimPy event being processed. A `Task` is
  resumed by its own callback on what it waits for: a SimPy event, a `Message` (a reply, fired
  by a Timeout; a boundary's result, fired in the boundary hook) or `FirstOf` several of them.
  It starts and is interrupted on Urgent events and ends as an event, as SimPy's Process does,
  so the queue holds the same events in the same order as with a Process.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from types import MethodType
from typing import Any

import simpy

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

    now: int  # SimPy's own property, declared to the compiled modules as integer ns (no delay is a float)

    def schedule(self, event: simpy.Event, priority: int = NORMAL, delay: int | float = 0) -> None:
        simpy.Environment.schedule(self, event, URGENT if type(event) is Urgent else priority,  # type: ignore[arg-type]
                                   delay)


class Signal:
    """What a Task may wait on besides SimPy events: `fire` runs its callbacks inside the caller,
    which no SimPy event offers through the public API. Its `callbacks` become None once fired,
    as a processed SimPy event's do."""

    __slots__ = ("callbacks", "value")
    callbacks: list[Callable[[Wait], None]] | None
    value: Any

    def fire(self, value: Any = None) -> None:
        """Fire it now, inside the caller: its callbacks (the waiting task) run here."""
        self.value = value
        callbacks, self.callbacks = self.callbacks, None
        for callback in callbacks:  # type: ignore[union-attr]
            callback(self)


Wait = simpy.Event | Signal  # what a Task may wait on


class Message(Signal):
    """A signal made before its value is known: a reply S waits for, a boundary's result."""

    __slots__ = ("env",)

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.callbacks: list[Callable[[Wait], None]] | None = []
        self.value: Any = None

    def send(self, value: Any = None, delay: int = 0) -> None:
        """Fire it `delay` ns from now: its place among same-time events is fixed now."""
        self.env.timeout(delay).callbacks.append(lambda _timeout: self.fire(value))


class FirstOf(Signal):
    """The first of `events` to be processed or fired (its value), fired inside that event's
    processing, after the callbacks the event had before this wait was made. The later events
    keep a callback that finds it fired: cheaper than unhooking it, as every wait does this."""

    __slots__ = ()

    def __init__(self, events: tuple[Wait, ...]) -> None:
        self.callbacks: list[Callable[[Wait], None]] | None = []
        self.value: Any = None
        for event in events:
            event.callbacks.append(self._first)  # type: ignore[union-attr]

    def _first(self, event: Wait) -> None:
        if self.callbacks is not None:
            self.fire(event)


class Task(simpy.Event):
    """A generator of waits driven by plain callbacks, as a SimPy Process drives one: it starts
    on an Urgent event now, resumes with each awaited event's value (at once if that event was
    already processed), can be interrupted, and succeeds with the generator's return value. An
    exception the generator raises propagates from the event being processed (a Process would
    fail and crash the run a step later). The SimPy events it waits on never fail."""

    def __init__(self, env: simpy.Environment, gen: Generator[Wait, Any, Any]) -> None:
        if not isinstance(env, Environment):
            raise TypeError("a Task starts on an Urgent event: it needs llumverify.sim.waits.Environment")
        super().__init__(env)
        # dropped when it ends: a compiled (mypyc) generator is invisible to the garbage collector,
        # so one kept after its end would keep its owner (it refers to it) alive for ever
        self.gen: Generator[Wait, Any, Any] | None = gen
        self.target: Wait | None = None  # what it waits on
        Urgent(env, 0).callbacks.append(self._continue)  # its value, None, starts the generator

    @property
    def is_alive(self) -> bool:
        return not self.triggered

    def _continue(self, event: Wait | None, throw: BaseException | None = None) -> None:
        """Resume the generator with `event`'s value (or throw `throw` into it) and run it to its
        next wait on a pending event, or to its end."""
        gen = self.gen
        assert gen is not None
        try:
            # Any: the test below would narrow a typed target to Signal (a SimPy event's callbacks
            # are typed never None), and the compiled loop would then refuse a processed SimPy event
            target: Any = gen.send(event.value) if throw is None else gen.throw(throw)  # type: ignore[union-attr]
            while target.callbacks is None:  # processed already: a Process goes on at once too
                target = gen.send(target.value)
        except StopIteration as stop:
            self.target = self.gen = None
            self.succeed(stop.value)
            return
        target.callbacks.append(self._continue)
        self.target = target

    def close(self) -> None:
        """Stop it where it waits, with no event (the run is over), and drop its generator."""
        if self.gen is None:
            return
        if self.target is not None and self.target.callbacks is not None:
            self.target.callbacks.remove(self._continue)
        self.gen.close()
        self.target = self.gen = None

    def interrupt(self, cause: Any = None) -> None:
        """Throw simpy.Interrupt(cause) into it on an Urgent event now, unless it has ended by
        then; what it waited on no longer resumes it (SimPy's Process.interrupt)."""
        Urgent(self.env, 0).callbacks.append(lambda _event: self._interrupted(cause))

    def _interrupted(self, cause: Any) -> None:
        if self.triggered:
            return
        assert self.target is not None and self.target.callbacks is not None
        self.target.callbacks.remove(self._continue)
        self._continue(None, simpy.Interrupt(cause))
