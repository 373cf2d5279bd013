"""The simulator's compiled actions (llumverify/protocol/compiled.py) are the facade's actions:
on every state of random walks, in every variant, the same actions are enabled and each gives
the same successor; compiled predicates give the facade's verdicts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from llumverify.protocol import compiled
from llumverify.protocol.api import start_migration
from llumverify.protocol.state import initial
from llumverify.protocol.variants import VARIANTS
from llumverify.properties.safety import PROPERTIES, violated

start = st.fixed_dictionaries({
    "blocks": st.integers(1, 40), "tokens_in_last_block": st.integers(0, 15),
    "src_free": st.integers(0, 50), "dst_free": st.integers(0, 60), "src_other": st.integers(0, 9),
    "dst_other": st.integers(0, 9), "watermark": st.integers(0, 4), "dst_slot_taken": st.booleans(),
})


@pytest.mark.slow
@pytest.mark.parametrize("name", list(VARIANTS))
@settings(max_examples=40, deadline=None)
@given(start=start, picks=st.lists(st.integers(0, 1_000), max_size=25))
def test_compiled_actions_are_the_facade_actions(name: str, start: dict, picks: list[int]) -> None:
    v = VARIANTS[name]
    fast = compiled.actions(v)
    assert list(fast) == [a.name for a in v.actions]
    assert all(fast[a.name] is not a for a in v.actions), "every action compiles"
    s = start_migration(variant=v, **start).state
    compiled_initial = compiled.predicate(initial)  # translated once: it was a Z3 walk per step
    for pick in picks:
        enabled = [a.name for a in v.actions if a.guard(s, v)]
        assert [n for n, a in fast.items() if a.guard(s, v)] == enabled
        assert bool(compiled_initial(s)) == bool(initial(s))
        bad = [n for n, p in PROPERTIES.items() if not p.predicate(s)]
        assert violated(s) == bad
        if not enabled:
            break
        n = enabled[pick % len(enabled)]
        nxt = v.action(n).effect(s, v)
        assert fast[n].effect(s, v) == nxt, n
        s = nxt


def test_a_compiled_effect_leaves_its_argument_as_it_was() -> None:
    """A compiled effect builds a new State and leaves its argument as it was."""
    v = VARIANTS["safe"]
    m = start_migration(blocks=3, src_free=5, dst_free=9, variant=v)
    before = m.state.as_dict()
    after = compiled.actions(v)["begin_stage"].effect(m.state, v)
    assert m.state.as_dict() == before and after.pc != m.state.pc


def test_the_translator_compiles_every_comparison_with_its_own_strictness_and_order() -> None:
    """Guards the translator's `>` and `>=` branches in the fast tier. The facade's `lt(0, x)` reaches Z3 as
    `x > 0` (Python reflects the comparison), as in the `s_oom`/`d_oom` guards, which the simulator never applies: a
    slip there (`>` compiled as `>=`) passed every fast test and `check`, and only the slow random walks above saw
    it. Each comparison of two fields is checked on states where they are below, equal and above."""
    import operator

    s = start_migration(blocks=5, tokens_in_last_block=0, src_free=1, dst_free=1).state
    pre = compiled.PRE
    for a, b in ((s.nblk, s.s_blocks), (s.nblk, s.s_free), (s.s_free, s.nblk)):  # equal, above, below
        state = s.replace(tok=0, n=a, copied=b)
        for op in (operator.lt, operator.le, operator.gt, operator.ge):
            src = compiled.source(op(pre.n, pre.copied), "tuple", compiled.attr)
            assert eval(f"lambda s: {src}")(state) == op(a, b), (op.__name__, a, b, src)  # noqa: S307
