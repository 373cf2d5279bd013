"""The engine on tiny hand-computed cases (toy costs: prefill step 100 ns, decode step 10 ns).

Each case runs on both execution paths: the closed-form runs must give the same times.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import specs_of, toy_config

from llumverify.sim.run import simulate

NS = 1e-9


def _run(rows, fast, **engine):
    res = simulate(specs_of(*rows), "round-robin", toy_config(fast=fast, **engine), keep_records=True)
    return {r.id: r for r in res.records}, res


@pytest.fixture(params=[True, False], ids=["fast", "step"])
def fast(request):
    return request.param


def test_single_request_prefills_then_decodes_one_token_per_step(fast):
    recs, _ = _run([(0.0, 5, 3)], fast)
    r = recs[0]
    assert (r.admitted_ns, r.first_token_ns, r.finish_ns) == (0, 100, 120)
    assert r.status == "finished" and r.preemptions == 0


def test_one_token_output_finishes_at_its_prefill(fast):
    recs, _ = _run([(0.0, 5, 1), (0.0, 3, 1)], fast)
    assert [recs[i].finish_ns for i in (0, 1)] == [100, 100]  # one prefill step for both


def test_watermark_blocks_admission_until_blocks_are_freed(fast):
    # 20 blocks of 4 tokens, watermark int(0.1 * 20) = 2: A takes 10 blocks; B needs 9 > 10 - 2.
    recs, _ = _run([(0.0, 40, 2), (0.0, 36, 2)], fast, num_blocks=20, watermark_frac=0.1)
    a, b = recs[0], recs[1]
    assert a.finish_ns == 110  # prefill 0-100, one decode step
    assert b.admitted_ns == 110 and b.first_token_ns == 210


def test_prompt_over_capacity_minus_watermark_is_rejected_at_arrival(fast):
    recs, res = _run([(0.0, 4 * 19, 1), (0.0, 4 * 18, 1)], fast, num_blocks=20, watermark_frac=0.1)
    assert recs[0].status == "rejected:prompt_exceeds_capacity" and recs[0].instance == -1
    assert recs[1].status == "finished"
    assert res.summary["rejected"] == 1


def test_sequence_that_could_never_be_recomputed_is_rejected(fast):
    recs, _ = _run([(0.0, 4, 3)], fast, num_blocks=1)  # prompt fits 1 block, KV of 6 tokens cannot
    assert recs[0].status == "rejected:sequence_exceeds_capacity"


def test_max_model_len_refuses_what_vllm_would_and_nothing_else(fast):
    # --max-model-len 9: a 10-token prompt is refused; a 6-token prompt asking for 4 more is refused (10 > 9,
    # vLLM's API server answers 400); 6 + 3 = 9 runs
    cfg = toy_config(fast=fast)
    cfg = replace(cfg, engine=replace(cfg.engine, max_model_len=9))
    res = simulate(specs_of((0.0, 10, 1), (0.0, 6, 4), (0.0, 6, 3)), "round-robin", cfg, keep_records=True)
    recs = {r.id: r for r in res.records}
    assert [recs[i].status for i in range(3)] == ["rejected:prompt_exceeds_max_model_len",
                                                  "rejected:sequence_exceeds_max_model_len", "finished"]
    assert res.summary["finished"] == 1 and res.summary["rejected"] == 2


def test_prefill_token_budget_splits_admission_over_steps(fast):
    recs, _ = _run([(0.0, 6, 3), (0.0, 6, 3)], fast, max_num_batched_tokens=10, max_num_seqs=2)
    a, b = recs[0], recs[1]
    assert a.first_token_ns == 100 and b.admitted_ns == 100 and b.first_token_ns == 200
    assert a.finish_ns == 220 and b.finish_ns == 220  # decode resumes for both after B's prefill


def test_max_num_seqs_keeps_the_second_request_waiting(fast):
    recs, _ = _run([(0.0, 4, 2), (0.0, 4, 2)], fast, max_num_seqs=1)
    assert recs[1].admitted_ns == recs[0].finish_ns == 110


def test_block_boundary_and_preemption_of_the_most_recently_admitted(fast):
    # 4 blocks of 4 tokens. A and B (prompt 4, output 10) are prefilled together (1 block each).
    # Decode steps 1-4 grow both to 8 tokens (2 blocks each, free 0); step 5 needs 2 blocks:
    # B, admitted after A, is preempted at t=140 with 5 tokens generated and re-queued at the
    # head; its recompute (9 tokens, 3 blocks) cannot fit until A finishes at t=190.
    recs, res = _run([(0.0, 4, 10), (0.0, 4, 10)], fast, num_blocks=4)
    a, b = recs[0], recs[1]
    assert a.preemptions == 0 and a.finish_ns == 190
    assert b.preemptions == 1
    assert b.first_token_ns == 100  # the first token counts, not the re-prefill's
    assert b.finish_ns == 190 + 100 + 4 * 10  # re-prefill emits token 6, then 4 decode steps
    assert b.preempt_loss_ns == 290 - 140
    assert res.summary["preemptions"] == 1


def test_preemption_loss_as_the_artifact_counts_it(fast):
    """engine.preemption_loss = "ae" (process_log.py:69-95): the same run, but B's loss is its wait from
    the kill (140) until its recompute is scheduled (190), plus the profiled prefill of its final
    output length padded to 8 (toy: 100) less a batch-8 decode step over as many tokens (toy: 10)."""
    cfg = toy_config(fast=fast, num_blocks=4)
    cfg = replace(cfg, engine=replace(cfg.engine, preemption_loss="ae"))
    res = simulate(specs_of((0.0, 4, 10), (0.0, 4, 10)), "round-robin", cfg, keep_records=True)
    b = {r.id: r for r in res.records}[1]
    assert b.preemptions == 1 and b.finish_ns == 190 + 100 + 4 * 10  # the run itself is unchanged
    assert b.preempt_loss_ns == (190 - 140) + (100 - 10)


def test_arrival_during_a_decode_run_is_admitted_at_the_next_step_boundary(fast):
    recs, _ = _run([(0.0, 4, 50), (125e-9, 4, 2)], fast)  # arrives inside decode step 120-130
    b = recs[1]
    assert b.admitted_ns == 130 and b.first_token_ns == 230


def test_finished_requests_free_all_their_blocks(fast):
    _, res = _run([(0.0, 7, 9), (0.0, 13, 4), (1e-7, 2, 30)], fast, num_blocks=12)
    assert res.summary["finished"] == 3  # the end-of-run audit checks every block came back


def test_a_spare_block_preempts_as_vllm_0_2_does(fast):
    """engine.spare_block (vLLM 0.2's can_append_slot, block_manager.py:124-129): 3 blocks of 4 tokens;
    A (prompt 4, output 6) and B (prompt 2, output 3) are prefilled together, one block each, 1 free.
    Without the rule the one new block of step 1 (A's) fits and both run through (B ends at 120, A at 150).
    vLLM 0.2 at t=100 appends A's slot (0 free), finds no free block for B and preempts it; B is back
    at 110 (prefill to 210), and at 210, with 0 free, A's turn already wants a block: B (the tail) is
    preempted again, back at 220, ends at 320 (loss 110 + 110). At 340 A is alone with 1 free block
    and itself takes it (the last sequence may), so it is not preempted and ends at 350."""
    rows = [(0.0, 4, 6), (0.0, 2, 3)]
    recs, _ = _run(rows, fast, num_blocks=3)
    assert (recs[0].finish_ns, recs[1].finish_ns, recs[1].preemptions) == (150, 120, 0)
    cfg = toy_config(fast=fast, num_blocks=3)
    cfg = replace(cfg, engine=replace(cfg.engine, spare_block=True))
    res = simulate(specs_of(*rows), "round-robin", cfg, keep_records=True)
    a, b = ({r.id: r for r in res.records}[i] for i in (0, 1))
    assert (a.preemptions, a.finish_ns) == (0, 350)
    assert (b.preemptions, b.first_token_ns, b.finish_ns, b.preempt_loss_ns) == (2, 100, 320, 220)
