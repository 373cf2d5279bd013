"""Hypothesis machines: every step conforms to the Z3 relation; `safe` keeps every property."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test
from conftest import examples

from llumverify.models.mutants import MUTANTS
from llumverify.protocol.api import Migration, start_migration
from llumverify.protocol.variants import VARIANTS
from llumverify.properties.machines import machine_for
from llumverify.properties.safety import decisive, violated

# derandomize and deadline come from the loaded profile (tests/conftest.py); no explain phase:
# on a machine it prints nothing and takes minutes after the failure has been shrunk
PROFILE = settings(max_examples=examples(300), stateful_step_count=50,
                   phases=[p for p in Phase if p is not Phase.explain],
                   suppress_health_check=[HealthCheck.too_slow])


def _run(name: str, check_properties: bool, profile: settings) -> None:
    machine = machine_for(VARIANTS[name], check_properties)
    run_state_machine_as_test(machine, settings=profile)


@pytest.mark.slow
def test_safe_keeps_every_property_and_conforms() -> None:
    _run("safe", True, PROFILE)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ae", "v010", "head"])
def test_code_variants_conform_to_their_relations(name: str) -> None:
    _run(name, False, settings(PROFILE, max_examples=examples(150)))


def test_machine_catches_a_violation() -> None:
    """The invariant check is live: a seeded bug (preemption keeps its blocks) must fail it."""
    bug = MUTANTS["preempt_keeps_blocks"].variant
    with pytest.raises(AssertionError, match="no_source_leak"):
        run_state_machine_as_test(machine_for(bug, check_properties=True),
                                  settings=settings(PROFILE, phases=[Phase.generate]))


def test_machine_catches_an_undecided_choice() -> None:
    """`decisive` is live in the machine too (it reads the enabled actions the machine already
    has): a final stage that may begin while a non-final one is still possible must fail it."""
    bug = MUTANTS["begin_stage_ignores_final"].variant
    with pytest.raises(AssertionError, match="not decisive"):
        run_state_machine_as_test(machine_for(bug, check_properties=True),
                                  settings=settings(PROFILE, phases=[Phase.generate]))


def _sweep(m: Migration, events: int) -> tuple[int, set[str]]:
    """Every run from `m` in which S and D take any move their guards allow and the world (the
    env and timeout actions) at most `events` moves, depth first, each state once. Every property
    is checked on every state and step, `decisive` on every state. (states seen, actions taken)"""
    world = {a.name for a in m.variant.actions if a.kind in ("env", "timeout")}
    seen: set[tuple[object, int]] = set()
    taken: set[str] = set()
    stack: list[tuple[Migration, int, tuple[str, ...]]] = [(m, events, ())]
    while stack:
        m, left, path = stack.pop()
        if (m.state, left) in seen:
            continue
        seen.add((m.state, left))
        now = m.enabled()
        assert decisive(m.state, m.variant, frozenset(now)), f"not decisive after {' '.join(path)}: {now}"
        for name in now:
            if name in world and not left:
                continue
            post = m.apply(name)
            broken = violated(post.state, m.state)
            assert not broken, f"{name} violated {broken} after {' '.join(path) or 'the start'}"
            taken.add(name)
            stack.append((post, left - (name in world), (*path, name)))
    return len(seen), taken


@pytest.mark.parametrize("name", ["safe", "pd"])
def test_two_world_events_anywhere_in_a_handshake_keep_every_property(name: str) -> None:
    """Exhaustive where the random machines are thin: every interleaving of a small migration (two
    stages under `safe`, one under `pd`; one shared prefix block) with any two world events (crash,
    finish, timeout, lease expiry, ...) at any points, S and D taking every move they may. The
    machines rarely put two events between D's commit and S's answer, and these slips need that:
    P03 slip: a D crash while S awaits the fence's answer resumes the request on S (run twice);
    P04 slip: the fence reads a request already finished on D as not committed (run twice);
    P08 slip: a release frees the shared prefix blocks into S's pool (one `finish` shows it).
    Every action of the variant is taken, so a guard that cuts the handshake short (every final
    stage aborting, say) fails here too. About 1,700 states (`safe`) and 900 (`pd`), under a second."""
    m = start_migration(blocks=3, shared_blocks=1, block_size=2, src_free=1, dst_free=5,
                        variant=VARIANTS[name], last_stage_blocks=1)
    states, taken = _sweep(m, events=2)
    never = sorted({a.name for a in VARIANTS[name].actions} - taken)
    assert not never, f"never taken: {never}"
    assert states > 500
