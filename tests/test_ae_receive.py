"""The AE's final receive in the Z3 model: osdi24ae's D posts it when it grants the last blocks
and appends the request to its batch in the receive's done-callback
(vllm/engine/llm_engine.py:763-783); `ae`'s `d_alloc_ok` sets `d_recv`, its `d_copy` /
`d_copy_fail` end it (reports/protocol-findings.md, "the AE's final receive, posted at D's grant").

The ae lemmas (models/lemmas.py, `AE_RECEIVE_LEMMAS`) keep the properties that hold PROVED for
all sizes; each plausible one-line slip in the new actions is caught by one of them.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from llumverify.models import lemmas
from llumverify.models.bmc import violations
from llumverify.models.check import proof_of
from llumverify.models.induction import prove
from llumverify.protocol.api import GuardError, start_migration
from llumverify.protocol.ops import and_, ite, not_, or_
from llumverify.protocol.state import State
from llumverify.protocol.variants import AE, Flags, Variant, _ae_grant, _ae_receive, _shared
from llumverify.properties.safety import PROPERTIES, block_accounting

# PROVED for `ae` with the receive modelled; the first three were PROVED before it and drop to
# HOLDS without the ae lemmas, the other six were HOLDS (depth 12) before it
RELIED_ON = ("single_owner", "at_most_once", "block_accounting", "committed_kv_owned",
             "copy_into_reserved", "slot_discipline", "no_stale_kv", "kv_integrity",
             "commit_integrity")
PREDICATES = {n: p.predicate for n, p in PROPERTIES.items()}
STEPS = {n: p.step for n, p in PROPERTIES.items() if p.step is not None}


def test_the_ae_lemmas_are_inductive_and_prove_what_holds() -> None:
    proof = proof_of(AE)
    assert set(lemmas.AE_RECEIVE_LEMMAS) <= set(proof.invariant)  # Houdini dropped none
    assert set(RELIED_ON) <= proof.proved


def test_without_the_ae_lemmas_the_receive_costs_three_proofs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(lemmas.VARIANT_LEMMAS, "ae")
    proved = prove(AE, PREDICATES, STEPS).proved
    assert not {"single_owner", "at_most_once", "block_accounting"} & proved


# ---- plausible slips in the new actions, each caught by a property `ae` proves --------------

def _grant_posts_at_every_stage(s: State, v: Flags) -> State:
    return _shared("d_alloc_ok").effect(s, v).replace(d_recv=True)


def _grant_reserves_nothing(s: State, v: Flags) -> State:
    t = _ae_grant(s, v)
    return t.replace(d_res=ite(s.final, s.d_res, t.d_res), d_free=ite(s.final, s.d_free, t.d_free))


def _install_records_what_arrived(s: State, v: Flags) -> State:
    t = _ae_receive(failed=True)(s, v)
    return t.replace(d_nblk=ite(s.final, s.copied, t.d_nblk))


def _receive_fails_without_grant(s: State, v: Flags) -> object:
    return ite(s.final, and_(s.d_alive, or_(s.m_copy, not_(s.s_alive))), _shared("d_copy_fail").guard(s, v))


def _install_keeps_receive(failed: bool):  # type: ignore[no-untyped-def]
    def effect(s: State, v: Flags) -> State:
        t = _ae_receive(failed)(s, v)
        return t.replace(d_recv=ite(s.final, True, t.d_recv))
    return effect


def _slip(name: str, action: str, **change: object) -> Variant:
    return AE.derive(f"ae-slip:{name}", name, overrides={action: replace(AE.action(action), **change)})


SLIPS = {
    # D posts a receive with a callback at stage 0's grant too: S's death installs the request
    # before the final grant, on stage 0's blocks only
    "grant_posts_at_every_stage": (_slip("grant_posts_at_every_stage", "d_alloc_ok",
                                         effect=_grant_posts_at_every_stage), "committed_kv_owned", 8),
    # D posts the final receive without reserving its blocks
    "grant_reserves_nothing": (_slip("grant_reserves_nothing", "d_alloc_ok", effect=_grant_reserves_nothing),
                               "copy_into_reserved", 9),
    # the callback records the length that arrived, not the paused request's
    "install_records_what_arrived": (_slip("install_records_what_arrived", "d_copy_fail",
                                           effect=_install_records_what_arrived), "at_most_once", 9),
    # the receive's failure is taken for a posted one whether or not D posted it
    "receive_fails_without_grant": (_slip("receive_fails_without_grant", "d_copy_fail",
                                          guard=_receive_fails_without_grant), "committed_kv_owned", 8),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SLIPS))
def test_a_slip_in_the_receive_is_caught(name: str) -> None:
    v, prop, length = SLIPS[name]
    assert prop in proof_of(AE).proved
    found = violations(v, {prop: PREDICATES[prop]}, length, (), 0.0,
                       {prop: STEPS[prop]} if prop in STEPS else None).traces[prop]
    assert found is not None and len(found) == length, name


def test_a_receive_that_is_not_cleared_ends_twice() -> None:
    """The callback forgets that the receive is over: S's later death ends it again, and the
    second install overwrites the first one's blocks (`block_accounting`; found by BMC in 10
    steps, replayed here). In `ae` the second end is not enabled."""
    v = AE.derive("ae-slip:install_keeps_receive", "install_keeps_receive", overrides={
        "d_copy": replace(AE.action("d_copy"), effect=_install_keeps_receive(False)),
        "d_copy_fail": replace(AE.action("d_copy_fail"), effect=_install_keeps_receive(True))})
    steps = ["begin_stage", "d_alloc_ok", "s_alloc_ok", "d_copy", "s_copy_done", "begin_final",
             "crash_s", "d_alloc_ok", "d_copy_fail"]
    slip = start_migration(blocks=1, src_free=0, dst_free=1, variant=v, block_size=1, last_stage_blocks=0)
    ae = start_migration(blocks=1, src_free=0, dst_free=1, variant=AE, block_size=1, last_stage_blocks=0)
    for name in steps:
        slip, ae = slip.apply(name), ae.apply(name)
    assert block_accounting(ae.state) and block_accounting(slip.state)
    assert not block_accounting(slip.apply("d_copy_fail").state)
    with pytest.raises(GuardError):
        ae.apply("d_copy_fail")
