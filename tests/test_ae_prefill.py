"""A pull of KV that a running prefill is still writing (`no_pending_pull`), tried first on a
plausible one-line slip of `safe`'s: its selection takes the tail of its running batch while the
step that runs that request's prefill is in flight (the AE's LCFS appends `running[-1]`,
osdi24ae vllm/core/scheduler.py:160-170).
"""

from __future__ import annotations

from llumverify.models.check import check_variant
from llumverify.models.mutants import MUTANTS

STAGE0_PULL = ["begin_stage", "d_alloc_ok", "s_alloc_ok", "d_copy"]


def test_the_slip_passes_every_other_property() -> None:
    """`safe` whose selection takes the tail of its batch mid-prefill (named mutant
    `pick_tail_mid_prefill`) keeps every other safety property and `decisive`;
    `no_pending_pull` catches it in 4 steps, the first stage's pull."""
    m = MUTANTS["pick_tail_mid_prefill"]
    verdicts = {v.prop: v for v in check_variant(m.variant)}
    assert {n for n, v in verdicts.items() if v.verdict != "PROVED"} == {"no_pending_pull"}
    caught = verdicts["no_pending_pull"]
    assert caught.verdict == "VIOLATED" and caught.trace is not None
    assert list(caught.trace.actions) == STAGE0_PULL and caught.trace.states[0].kv_pending
    assert "kv_pending=True" in caught.trace.render().splitlines()[0]
