"""The closed-form decode run (sim/decode_run.py) against step-by-step sums and hand-worked values."""

from __future__ import annotations

from hypothesis import given, strategies as st

from llumverify.sim.decode_run import DecodeRun, allocation_prefix, steps_that_fit


def _run(bases: list[int], steps: int, bs: int, alpha: int, beta: int, free0: int, k_end: int) -> DecodeRun:
    hist = [0] * bs
    for b in bases:
        hist[b % bs] += 1
    return DecodeRun(0, k_end, free0, alpha, beta, len(bases), hist, steps,
                     allocation_prefix(hist, steps, bs))


def _allocations(bases: list[int], steps: int, bs: int, k: int) -> list[int]:
    """Blocks each of the first k steps allocates, one step at a time: a request whose KV length
    is a multiple of bs at a step's start writes its token into a new block."""
    return [sum((b + steps + j) % bs == 0 for b in bases) for j in range(k)]


def test_hand_worked_run() -> None:
    # 3 requests with KV lengths 4, 6, 7 (block size 4) after 0 steps; steps of 10 + 2j ns
    run = _run([4, 6, 7], steps=0, bs=4, alpha=10, beta=2, free0=5, k_end=6)
    assert [run.span(k) for k in range(5)] == [0, 10, 22, 36, 52]
    # lengths at step j: 4+j, 6+j, 7+j -> new blocks at j=0 (4), j=1 (8), j=2 (8); j=4 (8)...
    assert run.prefix == [0, 1, 2, 3, 3]
    assert [run.blocks_over(k) for k in range(7)] == [0, 1, 2, 3, 3, 4, 5]
    assert run.steps_done(35) == 2 and run.steps_done(36) == 3 and run.steps_done(10_000) == 6
    assert run.free_at(36) == 5 - 3  # steps 0-2 ended, step 3 in progress (allocates nothing)
    # used blocks: (cap - 5) + allocations so far, per step of 10, 12, 14 ns; cap = 8
    assert run.used_integral(3, capacity=8) == (3 + 1) * 10 + (3 + 2) * 12 + (3 + 3) * 14
    assert steps_that_fit(5, 3, run.prefix) == 6 and run.blocks_over(6) <= 5 < run.blocks_over(7)


def test_cut_ends_with_the_step_in_progress() -> None:
    run = _run([1, 2], steps=3, bs=4, alpha=7, beta=1, free0=10, k_end=20)
    assert run.cut(run.span(4) + 1) == run.span(5)  # step 4 in progress: the run ends after it
    assert run.k_end == 5 and run.end_ns == run.span(5)
    assert run.cut(run.span(4) + 2) is None  # already ends there


runs = st.tuples(
    st.lists(st.integers(0, 200), min_size=1, max_size=12),  # bases
    st.integers(0, 100),  # steps before the run
    st.sampled_from([1, 4, 16]),  # block size
    st.integers(1, 10_000),  # alpha
    st.integers(0, 50),  # beta
    st.integers(0, 60),  # free blocks
    st.integers(1, 80),  # planned steps
)


@given(runs)
def test_closed_forms_equal_step_by_step_sums(args: tuple) -> None:
    bases, steps, bs, alpha, beta, free0, k_end = args
    run = _run(bases, steps, bs, alpha, beta, free0, k_end)
    alloc = _allocations(bases, steps, bs, k_end + 1)
    durations = [alpha + beta * j for j in range(k_end + 1)]
    cap = free0 + 7
    for k in range(k_end + 1):
        assert run.span(k) == sum(durations[:k])
        assert run.blocks_over(k) == sum(alloc[:k])
        used = sum((cap - free0 + sum(alloc[:j + 1])) * durations[j] for j in range(k))
        assert run.used_integral(k, cap) == used
    for t in (0, 1, run.span(k_end) - 1, run.span(k_end), run.span(k_end) + 5):
        t = max(t, 0)
        assert run.steps_done(t) == min(max(k for k in range(k_end + 1) if run.span(k) <= t), k_end)
    fit = steps_that_fit(free0, len(bases), run.prefix)
    assert sum(_allocations(bases, steps, bs, fit)) <= free0 < sum(_allocations(bases, steps, bs, fit + 1))
