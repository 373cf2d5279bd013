"""sim/waits.py: Urgent timeouts take SimPy's URGENT place (with a process's start, before
same-time NORMAL events), through SimPy's public API."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import pytest
import simpy
from conftest import TOY_COST

from llumverify.config import EngineConfig
from llumverify.sim.costmodel import CostModel
from llumverify.sim.instance import Instance
from llumverify.sim.waits import Environment, Urgent

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


def test_a_plain_simpy_environment_is_refused() -> None:
    with pytest.raises(TypeError, match="Urgent"):
        Instance(simpy.Environment(), 0, EngineConfig(), CostModel(TOY_COST))
