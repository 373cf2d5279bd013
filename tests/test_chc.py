"""models/chc.py, the second unbounded prover: a proof counts only if its certificate checks, so
neither a wrong strengthening nor a violated property can come out PROVED."""

from __future__ import annotations

import pytest
import z3

from llumverify.models import chc
from llumverify.models.check import check_variant, proof_of
from llumverify.models.mutants import MUTANTS
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


def test_a_violation_beyond_the_bmc_depth_stays_unproved() -> None:
    """`pd-early-free` loses the request in 5 steps: searched to 4, no_loss is still open when
    Spacer is asked, which must not prove it, so the verdict is HOLDS up to 4, not PROVED."""
    verdicts = {x.prop: x for x in check_variant(VARIANTS["pd-early-free"], depth=4)}
    assert (verdicts["no_loss"].verdict, verdicts["no_loss"].depth) == ("HOLDS", 4)
    full = {x.prop: x for x in check_variant(VARIANTS["pd-early-free"])}
    assert (full["no_loss"].verdict, full["no_loss"].depth) == ("VIOLATED", 5)
