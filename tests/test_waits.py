"""sim/waits.py: the orderings the simulator's outputs rest on, had through SimPy's public API.

Urgent timeouts take SimPy's URGENT place (with a process's start, before same-time NORMAL
events); a Task runs a generator exactly as a SimPy Process would, except that FirstOf and
Message resume it inside the event that decides them.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import pytest
import simpy
from conftest import TOY_COST

from llumverify.settings.config import EngineConfig
from llumverify.sim.costmodel import CostModel
from llumverify.sim.instance import Instance
from llumverify.sim.waits import Environment, FirstOf, Message, Task, Urgent

Log = list[tuple[int, str]]


def _note(env: simpy.Environment, log: Log, what: str) -> Callable[[Any], None]:
    return lambda _event: log.append((env.now, what))


def test_urgent_takes_the_place_of_a_process_start() -> None:
    env, log = Environment(), []
    env.timeout(5).callbacks.append(_note(env, log, "timeout made first"))
    Urgent(env, 5).callbacks.append(_note(env, log, "urgent made later"))
    Urgent(env, 0).callbacks.append(_note(env, log, "urgent before the start"))

    def started() -> Generator[simpy.Event, Any, None]:
        log.append((env.now, "process start"))
        yield env.timeout(0)

    env.timeout(0).callbacks.append(_note(env, log, "timeout at 0"))
    env.process(started())
    Urgent(env, 0).callbacks.append(_note(env, log, "urgent after the start"))
    env.run()
    assert log == [(0, "urgent before the start"), (0, "process start"), (0, "urgent after the start"),
                   (0, "timeout at 0"), (5, "urgent made later"), (5, "timeout made first")]


def _scenario(start: Callable[[simpy.Environment, Generator[Any, Any, Any]], Any]) -> Log:
    """A generator that waits on timeouts, on an event processed already, is interrupted (and
    waits again on the same event), then returns; other callbacks share its events."""
    env, log = Environment(), []
    done = env.timeout(1)
    done.callbacks.append(_note(env, log, "done's own callback"))

    def gen() -> Generator[simpy.Event, Any, str]:
        log.append((env.now, "start"))
        got = yield env.timeout(2, "two")
        log.append((env.now, f"got {got}"))
        yield done  # processed at 1: goes on at once
        log.append((env.now, "past done"))
        late = env.timeout(10)
        while True:
            try:
                yield late
                break
            except simpy.Interrupt as stop:
                log.append((env.now, f"interrupted by {stop.cause}"))
        return "end"

    proc = start(env, gen())
    env.timeout(3).callbacks.append(lambda _e: proc.interrupt("crash"))
    env.timeout(3).callbacks.append(_note(env, log, "same-time timeout"))
    proc.callbacks.append(lambda e: log.append((env.now, f"ended: {e.value}")))
    for t in (12, 13):
        env.timeout(t).callbacks.append(lambda _e: log.append((env.now, f"alive {proc.is_alive}")))
    env.run()
    return log


def test_a_task_runs_a_generator_as_a_process_does() -> None:
    assert _scenario(Task) == _scenario(simpy.Process) == [
        (0, "start"), (1, "done's own callback"), (2, "got two"), (2, "past done"), (3, "interrupted by crash"),
        (3, "same-time timeout"), (12, "alive True"), (12, "ended: end"), (13, "alive False")]


def test_first_of_resumes_inside_the_deciding_event() -> None:
    """A waiter on FirstOf runs right after the event's earlier callbacks, before a same-time
    event made after it; SimPy's AnyOf would resume it behind that event."""
    env, log = Environment(), []
    reply, timeout = Message(env), env.timeout(5)
    timeout.callbacks.append(_note(env, log, "timeout's own callback"))

    def waiter() -> Generator[Any, Any, None]:
        got = yield FirstOf((reply, timeout))
        log.append((env.now, "timeout won" if got is timeout else "reply won"))
        got = yield reply
        log.append((env.now, f"reply {got}"))

    Task(env, waiter())
    env.timeout(5).callbacks.append(_note(env, log, "later same-time timeout"))
    env.timeout(1).callbacks.append(lambda _e: reply.send("ok", delay=6))
    env.run()
    assert log == [(5, "timeout's own callback"), (5, "timeout won"), (5, "later same-time timeout"),
                   (7, "reply ok")]


def test_a_fired_message_resumes_its_waiter_inside_the_caller() -> None:
    env, log = Environment(), []
    done = Message(env)

    def waiter() -> Generator[Any, Any, None]:
        got = yield done
        log.append((env.now, f"got {got}"))

    Task(env, waiter())
    env.timeout(2).callbacks.append(lambda _e: (done.fire(42), log.append((env.now, "after fire"))))
    env.run()
    assert log == [(2, "got 42"), (2, "after fire")]


def test_a_plain_simpy_environment_is_refused() -> None:
    with pytest.raises(TypeError, match="Urgent"):
        Instance(simpy.Environment(), 0, EngineConfig(), CostModel(TOY_COST))
    with pytest.raises(TypeError, match="Urgent"):
        Task(simpy.Environment(), iter(()))  # type: ignore[arg-type]
