"""Hypothesis machines: every step conforms to the Z3 relation; `safe` keeps every property."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test
from conftest import examples

from llumverify.models.mutants import MUTANTS
from llumverify.protocol.variants import VARIANTS
from llumverify.properties.machines import machine_for

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
