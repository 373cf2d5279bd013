"""models/chc.py, the second unbounded prover: a proof counts only if its certificate checks, so
neither a wrong strengthening nor a violated property can come out PROVED."""

from __future__ import annotations

import pytest
import z3

from llumverify.models import chc
from llumverify.models.check import check_variant, proof_of
from llumverify.models.mutants import MUTANTS
from llumverify.models.encoding import encode
from llumverify.protocol.state import FIELDS
from llumverify.protocol.variants import VARIANTS
from llumverify.properties.safety import PROPERTIES

HEAD = VARIANTS["head"]
PROP = PROPERTIES["final_copy_from_held"]


def _certified(v: object, cert: z3.BoolRef) -> bool:
    return chc.certified(v, cert, PROP.predicate, PROP.step, proof_of(v).predicates)  # type: ignore[arg-type]


def test_only_an_inductive_certificate_that_implies_the_property_is_accepted() -> None:
    """`head`'s final_copy_from_held is not implied by its Houdini invariant (that is why it
    needs Spacer), so `true` is no certificate, and `false` fails the initial state."""
    cert = chc.strengthening(HEAD, PROP.predicate, PROP.step, proof_of(HEAD).predicates)
    assert cert is not None and _certified(HEAD, cert)
    assert not _certified(HEAD, z3.BoolVal(True))
    assert not _certified(HEAD, z3.BoolVal(False))


@pytest.mark.slow
def test_a_mutant_that_breaks_the_property_is_never_proved() -> None:
    """The named slip `free_before_final_copy` (S frees its blocks before D's final pull)
    violates final_copy_from_held in 4 steps: Spacer must not prove it, and the certificate that
    proves it for `head` must not pass as a proof for the mutant."""
    mutant = MUTANTS["free_before_final_copy"]
    assert mutant.expect == "final_copy_from_held"
    assert not chc.proves(mutant.variant, PROP.predicate, PROP.step, proof_of(mutant.variant).predicates)
    cert = chc.strengthening(HEAD, PROP.predicate, PROP.step, proof_of(HEAD).predicates)
    assert cert is not None and not _certified(mutant.variant, cert)


def test_the_resource_cap_gives_up_instead_of_proving() -> None:
    """Too few resource units: no answer, so the property stays with BMC (HOLDS or VIOLATED)."""
    assert chc.strengthening(HEAD, PROP.predicate, PROP.step, proof_of(HEAD).predicates, rlimit=100_000) is None


def test_a_wrong_answer_from_spacer_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """If Spacer claimed a strengthening that is not one, the property is not proved."""
    monkeypatch.setattr(chc, "strengthening", lambda *args, **kwargs: z3.BoolVal(True))
    assert not chc.proves(HEAD, PROP.predicate, PROP.step, proof_of(HEAD).predicates)


@pytest.mark.slow
def test_violations_beyond_the_bmc_depth_stay_unproved() -> None:
    """The slip `free_before_final_copy` breaks final_copy_from_held (a step property) in 4 steps
    and block_accounting and kv_intact (state properties) later: searched to 3, they are open when
    Spacer is asked, which must prove none of them, so each is HOLDS up to 3, not PROVED."""
    verdicts = {x.prop: x for x in check_variant(MUTANTS["free_before_final_copy"].variant, depth=3)}
    for name in ("final_copy_from_held", "block_accounting", "kv_intact"):
        assert (verdicts[name].verdict, verdicts[name].depth) == ("HOLDS", 3), name


def test_a_certificate_must_be_inductive_and_a_state_invariant() -> None:
    """A one-step look-ahead (every successor keeps the property) implies the step property but is
    not inductive; a formula over the post-state is no invariant of states at all; and for a state
    property (kv_intact of pd-resume-on-timeout, which Houdini's invariant does not imply) `true`
    is no certificate."""
    enc = encode(HEAD)
    inv = proof_of(HEAD).predicates
    successor_ok = z3.Implies(z3.And(enc.step, *(z3.And(p(enc.post)) for p in inv)),
                              z3.And(PROP.step(enc.pre, enc.post)))
    assert not _certified(HEAD, z3.ForAll([*(getattr(enc.post, f) for f in FIELDS), enc.label], successor_ok))
    assert not _certified(HEAD, successor_ok)
    v, kv = VARIANTS["pd-resume-on-timeout"], PROPERTIES["kv_intact"]
    assert not chc.certified(v, z3.BoolVal(True), kv.predicate, kv.step, proof_of(v).predicates)
