"""The checker: safe proved unbounded, code variants' findings, vacuity, mutants."""

from __future__ import annotations

import pytest

from llumverify.models.check import check_variant, reachability
from llumverify.models.mutants import MUTANTS, run_mutant
from llumverify.protocol.variants import VARIANTS
from llumverify.properties.safety import PROPERTIES


def test_safe_proves_every_property_unbounded() -> None:
    verdicts = check_variant(VARIANTS["safe"])
    assert {v.prop for v in verdicts if v.verdict == "PROVED"} == set(PROPERTIES)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_every_action_and_phase_is_reachable(name: str) -> None:
    missing = [g for g, t in reachability(VARIANTS[name]).items() if t is None]
    assert not missing


def test_head_findings_and_golden_trace() -> None:
    verdicts = {v.prop: v for v in check_variant(VARIANTS["head"])}
    assert verdicts["single_owner"].verdict == "VIOLATED" and verdicts["single_owner"].depth == 7
    trace = verdicts["single_owner"].trace
    assert trace is not None
    actions = [line.split()[1] for line in trace.render().splitlines()[1:]]
    assert actions == ["begin_final", "d_alloc_ok", "s_alloc_ok", "d_copy", "s_send_commit",
                       "d_commit", "timeout_commit"]
    last = trace.render().splitlines()[-1]
    assert last.split()[:3] == ["7.", "timeout_commit", "req=RUNNING"]


def test_every_mutant_is_killed_by_its_property() -> None:
    survivors = [m.name for m in MUTANTS.values() if not run_mutant(m, 14).killed]
    assert len(MUTANTS) >= 25 and not survivors


GOLDEN = """\
  initial: bs=16 wm=0 s_cap=5 d_cap=10 thr=16 nblk=2 tok=15 s_free=3 d_free=10
   1. begin_final      req=PAUSED pc=ALLOC final=True n=2 p_nblk=2 p_tok=15 m_alloc=True
   2. d_alloc_ok       d_res=2 d_free=8 d_slot=OURS lease=True m_alloc=False ack=OK
   3. timeout_alloc    req=RUNNING status=ABORTED_DST pc=DONE m_free=True ack=NONE
   4. decode           nblk=3 tok=0 s_blocks=3 s_free=2"""


def test_trace_printed_form_is_stable() -> None:
    """Golden output: what a user reads for a trace (built concretely, independent of Z3)."""
    from llumverify.models.trace import Trace
    from llumverify.protocol.api import start_migration

    m = start_migration(blocks=2, tokens_in_last_block=15, src_free=3, dst_free=10)
    states, actions = [m.state], ["begin_final", "d_alloc_ok", "timeout_alloc", "decode"]
    for a in actions:
        m = m.apply(a)
        states.append(m.state)
    assert Trace(tuple(actions), tuple(states)).render() == GOLDEN
