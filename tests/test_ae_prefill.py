"""The AE's LCFS can pick a request whose prefill is still running: osdi24ae's
`get_migrating_seq_groups` scans the running batch from its tail for a decoding request but
appends the tail itself (vllm/core/scheduler.py:160-170), and the tail may be a request the step
in flight admitted (:242-248), its prompt's forward pass not yet over; stage 0 then sends its
blocks while that forward pass writes them. `ae` may start a migration with `kv_pending` set
(flag `picks_in_prefill`), `prefill_done` ends the forward pass, and `no_pending_pull` says a
pull never copies KV that is still being written (reports/protocol-findings.md,
"the AE's LCFS picks a request whose prefill is still running").
"""

from __future__ import annotations

import pytest

from llumverify.errors import UserError
from llumverify.models.check import check_variant, proof_of
from llumverify.models.mutants import MUTANTS
from llumverify.protocol.api import Migration, start_migration
from llumverify.protocol.variants import AE, VARIANTS
from llumverify.properties.safety import PROPERTIES, violated

STAGE0_PULL = ["begin_stage", "d_alloc_ok", "s_alloc_ok", "d_copy"]


def _mid_prefill(blocks: int = 2) -> Migration:
    return start_migration(blocks=blocks, src_free=0, dst_free=blocks, variant=AE, block_size=1,
                           prefill_running=True)


def _run(m: Migration, steps: list[str]) -> tuple[Migration, Migration]:
    pre = m
    for name in steps:
        pre, m = m, m.apply(name)
    return pre, m


def test_stage_0_pulls_what_the_prefill_is_still_writing() -> None:
    """The checker's 4-step trace, replayed: the stage-0 pull of a request picked mid-prefill
    breaks `no_pending_pull` and nothing else; had the prefill ended first it would not."""
    pre, post = _run(_mid_prefill(), STAGE0_PULL)
    assert post.state.copied == 1 and post.state.kv_pending
    assert violated(post.state, pre.state) == ["no_pending_pull"]
    pre, post = _run(_mid_prefill(), ["prefill_done", *STAGE0_PULL])
    assert violated(post.state, pre.state) == []


def test_a_stage_0_of_no_blocks_pulls_nothing() -> None:
    """A one-block request sends nothing in stage 0 (osdi24ae llm_engine.py:709, 720): no pull."""
    pre, post = _run(_mid_prefill(blocks=1), STAGE0_PULL)
    assert post.state.copied == 0 and violated(post.state, pre.state) == []


def test_a_request_mid_prefill_is_neither_decoded_nor_preempted() -> None:
    """The next step (its decode, or a schedule that preempts it) comes only after the step
    running the prefill has ended; a client abort (`finish`) may come at any time, and the
    forward pass ends whatever S did with the request meanwhile."""
    m = start_migration(blocks=2, src_free=1, dst_free=2, variant=AE, block_size=1,
                        prefill_running=True)  # a free block on S: a decode could take it
    now = set(m.enabled())
    assert {"prefill_done", "finish", "begin_stage"} <= now and not {"decode", "preempt"} & now
    assert {"decode", "preempt"} <= set(m.apply("prefill_done").enabled())
    assert "prefill_done" in m.apply("finish").enabled()
    paused = start_migration(blocks=1, src_free=0, dst_free=1, variant=AE, block_size=1,
                             last_stage_blocks=1, prefill_running=True)
    _, paused = _run(paused, ["begin_stage", "d_alloc_ok", "s_alloc_ok", "d_copy", "s_copy_done",
                              "begin_final"])
    assert "prefill_done" in paused.enabled()


@pytest.mark.parametrize("variant", sorted(set(VARIANTS) - {"ae"}))
def test_only_the_ae_starts_a_migration_mid_prefill(variant: str) -> None:
    with pytest.raises(UserError):
        start_migration(blocks=2, src_free=0, dst_free=2, variant=variant, prefill_running=True)


@pytest.mark.parametrize("variant", ["safe", "pd"])
def test_our_designs_prove_it(variant: str) -> None:
    assert "no_pending_pull" in proof_of(VARIANTS[variant]).proved


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["head", "v010", "pd-early-free", "pd-resume-on-timeout"])
def test_the_other_variants_prove_it(variant: str) -> None:
    assert "no_pending_pull" in proof_of(VARIANTS[variant]).proved


def test_the_slip_passes_every_other_property() -> None:
    """Tried before relying on the property: `safe` whose selection takes the tail of its batch
    mid-prefill (the AE's one-line slip, named mutant `pick_tail_mid_prefill`) keeps every other
    safety property and `decisive` but `kv_intact` (D then runs KV the prefill had not finished
    writing when it was pulled); `no_pending_pull` catches it in 4 steps, stage 0's pull."""
    m = MUTANTS["pick_tail_mid_prefill"]
    verdicts = {v.prop: v for v in check_variant(m.variant)}
    assert {n for n, v in verdicts.items() if v.verdict != "PROVED"} == {"no_pending_pull", "kv_intact"}
    assert verdicts["kv_intact"].verdict == "VIOLATED"
    caught = verdicts["no_pending_pull"]
    assert caught.verdict == "VIOLATED" and caught.trace is not None
    assert list(caught.trace.actions) == STAGE0_PULL and caught.trace.states[0].kv_pending
    assert "kv_pending=True" in caught.trace.render().splitlines()[0]


def test_ae_keeps_every_other_verdict_it_had() -> None:
    """The new field costs no proof of `ae`'s: what it proved before it still proves."""
    before = {"single_owner", "no_source_leak", "block_accounting", "committed_kv_owned",
              "copy_into_reserved", "no_decode_after_pause", "slot_discipline", "no_stale_kv",
              "kv_integrity", "at_most_once", "commit_integrity", "crash_stop",
              "channel_discipline", "lease_discipline", "token_growth", "fence_on_cause",
              "preemption_seen"}
    proved = proof_of(AE).proved
    assert before <= proved and "no_pending_pull" not in proved
    # kv_intact (issue #27): the AE's final send reads blocks S freed at D's grant, as
    # final_copy_from_held already says; abort_honoured (A5): a client's abort never reaches S
    assert set(PROPERTIES) - proved == {"no_loss", "no_leak", "commit_after_copy",
                                        "final_copy_from_held", "slot_released",
                                        "truthful_outcome", "abort_releases", "no_pending_pull",
                                        "kv_intact", "abort_honoured"}


def test_the_simulator_starts_ae_migrations_after_the_prefill() -> None:
    """Model-only: the simulator begins a migration at S's step boundary, where no forward pass
    is in flight, so it never picks a request mid-prefill and never takes `prefill_done`, even
    when the migration is ordered while the request's prefill runs (it ends at 100 ns)."""
    from test_migration import toy_cluster

    c = toy_cluster([(0.0, 6, 40)], (50, 0, 1), variant="ae")
    transitions = c.migrations.transitions
    assert c.migrations.stats.committed == 1
    assert not transitions[0][0].kv_pending
    assert "prefill_done" not in {name for _, name, _ in transitions}
