"""The checker: safe proved unbounded, code variants' findings, vacuity, mutants."""

from __future__ import annotations

import pytest

from llumverify.models.check import check_variant, reachability
from llumverify.models.mutants import MUTANTS, run_all
from llumverify.protocol.variants import VARIANTS
from llumverify.properties.safety import PROPERTIES


def test_safe_proves_every_property_unbounded() -> None:
    verdicts = check_variant(VARIANTS["safe"])
    assert {v.prop for v in verdicts if v.verdict == "PROVED"} == set(PROPERTIES)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_every_action_and_phase_is_reachable(name: str) -> None:
    missing = [g for g, t in reachability(VARIANTS[name]).items() if t is None]
    assert not missing


def test_head_commit_timeout_duplicates_the_request() -> None:
    verdicts = {v.prop: v for v in check_variant(VARIANTS["head"])}
    assert verdicts["single_owner"].verdict == "VIOLATED" and verdicts["single_owner"].depth == 7
    trace = verdicts["single_owner"].trace
    assert trace is not None
    # Z3 may order independent steps differently; the race itself is fixed.
    assert {"s_send_commit", "d_commit", "timeout_commit"} <= set(trace.actions)
    assert trace.actions.index("s_send_commit") < trace.actions.index("timeout_commit")
    lines = trace.render().splitlines()
    assert lines[0].startswith("  initial: bs=") and lines[-1].lstrip().startswith("7. ")


def test_every_mutant_is_killed_by_its_property() -> None:
    survivors = [r.mutant.name for r in run_all(14) if not r.killed]
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
