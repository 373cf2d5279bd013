"""What is kept across calls must give what a fresh computation gives: Encoding.at's packed renamings
(by the ids of the states renamed from and onto) and compiled.source's translations (by term id,
per target and naming). Both keys name Python objects or Z3 terms, so each test makes, uses and
drops many of them, where a freed object's id is soon another's."""

from __future__ import annotations

import z3

from llumverify.models import encoding
from llumverify.models.encoding import POST, PRE, Encoding, equal, variables
from llumverify.protocol import compiled
from llumverify.protocol.compiled import symbolic_state


def _encoding() -> Encoding:
    """An encoding over the template states whose step mentions pre, post and the label."""
    label = z3.Int("action")
    step = z3.And(equal(PRE, POST, skip=("req",)), POST.req == PRE.req + label)
    return Encoding(variant=None, pre=PRE, post=POST, init=z3.BoolVal(True), relations={},  # type: ignore[arg-type]
                    guards={}, effects={}, label=label, step=step)


def _substituted(enc: Encoding, pre, post, label) -> z3.ExprRef:  # type: ignore[no-untyped-def]
    """z3.substitute with every pair (what Encoding.at computed before it kept renamings)."""
    pairs = list(zip(variables(enc.pre), variables(pre)))
    if post is not None:
        pairs += list(zip(variables(enc.post), variables(post)))
    if label is not None:
        pairs.append((enc.label, label))
    return z3.substitute(enc.step, *pairs)


def test_at_renames_onto_each_post_and_label_of_one_state_and_onto_states_made_and_dropped() -> None:
    enc = _encoding()
    for i in range(12):
        a, b, c = (symbolic_state(f"{p}{i}_") for p in "abc")
        la, lb = z3.Int(f"la{i}"), z3.Int(f"lb{i}")
        # one pre-state with every post and label (a key missing post or label mixes them up)
        for post, label in ((None, None), (b, None), (c, None), (b, la), (b, lb), (c, lb), (None, la)):
            assert enc.at(enc.step, a, post, label).eq(_substituted(enc, a, post, label)), (i, post, label)
        del a, b, c, la, lb  # their ids are free for the next round's states


def test_at_keeps_a_bounded_number_of_renamings() -> None:
    enc = _encoding()
    for i in range(encoding._RENAMINGS_KEPT + 20):
        enc.at(enc.init, symbolic_state(f"k{i}_"))
    assert len(encoding._RENAMINGS) <= encoding._RENAMINGS_KEPT


def test_source_translates_terms_made_and_dropped_and_each_naming_and_target_apart() -> None:
    pre = compiled.PRE
    for i in range(200):
        e = pre.nblk + i  # a fresh term each round, freed after it: Z3 gives its id to a later term
        assert compiled.source(e, "tuple", compiled.attr) == f"(s.nblk + {i})"
        assert compiled.source(e, "tuple", str) == f"(nblk + {i})"
        assert compiled.source(e, "facade", compiled.attr) == f"add(s.nblk, {i})"
        del e
    both = z3.And(pre.s_alive, pre.nblk > 1)
    assert compiled.source(both, "tuple", compiled.attr) == "(s.s_alive and (1 < s.nblk))"
    assert compiled.source(both, "facade", compiled.attr) == "and_(s.s_alive, lt(1, s.nblk))"


def test_a_naming_of_its_own_is_translated_but_not_kept() -> None:
    """Only the package's namings (attr, str) keep translations: a new function per call, as a
    caller may write, leaves the kept tables as they were."""
    before = {k: len(v) for k, v in compiled._TRANSLATED.items()}
    for i in range(3):
        assert compiled.source(compiled.PRE.nblk + i, "tuple", lambda f: f"x.{f}") == f"(x.nblk + {i})"
    assert {k: len(v) for k, v in compiled._TRANSLATED.items()} == before
