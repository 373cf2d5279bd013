"""A decode run in closed form: k steps of one batch shape, executed as one event.

Between events nothing but counters changes in a decode batch, so an instance plans a *run* of
k steps at once. Step j (0-based) takes alpha + beta·j ns (its attention reads one more token per
request each step), so the run's first k steps take an arithmetic series, summed and inverted in
exact integer arithmetic. A request whose KV length (base + instance steps) is a multiple of the
block size at a step's start needs a new block for that step's token; with `hist[r]` requests of
base ≡ r (mod block_size), the allocations repeat every block_size steps, so blocks allocated
and the time integral of used blocks over any prefix of the run are closed forms too.

Why its own unit: every number the simulator reports about memory and time inside a run comes
from here, and tests/test_decode_run.py checks each formula against a step-by-step sum.
"""

from __future__ import annotations

import math
from itertools import accumulate


def allocation_prefix(hist: list[int], steps: int, bs: int) -> list[int]:
    """prefix[j] = blocks the first j steps allocate (j <= bs), for a batch whose requests have
    hist[r] members with base ≡ r (mod bs) when the instance has run `steps` decode steps."""
    return [0, *accumulate(step_order(hist, steps))]


def step_order(hist: list[int], steps: int) -> list[int]:
    """hist re-ordered by step: item j is the class that allocates at step j of the next bs
    (base + steps + j ≡ 0 mod bs), i.e. hist[(-(steps + j)) % bs]; sliced, not looped (hot path)."""
    r0 = (-steps) % len(hist)
    return hist[r0::-1] + hist[:r0:-1]


def steps_that_fit(free: int, n: int, prefix: list[int]) -> int:
    """The most steps whose allocations fit in `free` blocks, for n >= 1 running requests (each
    allocates once every bs = len(prefix) - 1 steps)."""
    bs = len(prefix) - 1
    q, rem = divmod(free, n)
    r = bs - 1
    while prefix[r] > rem:
        r -= 1
    return q * bs + r


class DecodeRun:
    """The run in progress on one instance: started at t0 with free0 free blocks, planned for
    k_end steps of n requests. `free0` moves when blocks are reserved or released mid-run (the
    run's allocations count from it); `k_end` moves down when the run is cut."""

    __slots__ = ("t0", "k_end", "free0", "alpha", "beta", "n", "bs", "steps", "hist", "prefix")

    def __init__(self, t0: int, k_end: int, free0: int, alpha: int, beta: int, n: int,
                 hist: list[int], steps: int, prefix: list[int]) -> None:
        self.t0 = t0
        self.k_end = k_end
        self.free0 = free0
        self.alpha = alpha
        self.beta = beta
        self.n = n
        self.bs = len(prefix) - 1
        self.steps = steps  # the instance's decode steps before the run
        self.hist = hist  # the batch's residues; constant while the run lasts
        self.prefix = prefix

    @property
    def end_ns(self) -> int:
        return self.t0 + self.span(self.k_end)

    def span(self, k: int) -> int:
        """Duration of the first k steps: Σ_{j<k} (alpha + beta·j)."""
        return k * self.alpha + self.beta * (k * (k - 1) // 2)

    def steps_done(self, elapsed: int) -> int:
        """Whole steps that have ended `elapsed` ns after the start (at most k_end)."""
        a, b = self.alpha, self.beta
        if b == 0:
            k = elapsed // a
        else:  # largest k >= 0 with b k^2 + c k <= 2 elapsed, c = 2a - b > 0: exact with isqrt
            c = 2 * a - b
            k = (math.isqrt(c * c + 8 * b * elapsed) - c) // (2 * b)
        return min(k, self.k_end)

    def in_progress(self, now: int) -> int:
        """Steps ended by `now`, not counting the last: the step at `now` has its blocks already."""
        return min(self.steps_done(now - self.t0), self.k_end - 1)

    def blocks_over(self, k: int) -> int:
        """Blocks the first k steps allocate."""
        q, r = divmod(k, self.bs)
        return q * self.n + self.prefix[r]

    def free_at(self, now: int) -> int:
        """Free blocks at `now`: the step in progress has taken its blocks."""
        return self.free0 - self.blocks_over(self.in_progress(now) + 1)

    def cut(self, now: int, after: int = 0) -> int | None:
        """End the run `after` steps after the step in progress (never later than planned); its new
        end time, or None if that changes nothing."""
        k = self.steps_done(now - self.t0) + 1 + after
        if k < self.k_end:
            self.k_end = k
            return self.t0 + self.span(k)
        return None

    def used_integral(self, k: int, capacity: int) -> int:
        """∫ used blocks dt over the first k steps (a step's blocks are used from its start).

        The class allocating first at step j (step_order) allocates at j, j + bs, ...: m of them
        before step k, m = q + 1 for j < r and q for j >= r (k = q·bs + r), each used from the
        step's start to the run's. Σ span(x) over those steps is a polynomial in j, so each
        group's sum needs only Σ h, Σ h·j and Σ h·j² over its classes: exact integers. Plain
        integer loops over hist (no slices, no map): the compiled build runs them as machine
        integers, and this runs once per decode run."""
        bs, a, b = self.bs, self.alpha, self.beta
        span = k * a + b * (k * (k - 1) // 2)
        q, r = divmod(k, bs)
        hist, r0 = self.hist, (-self.steps) % bs  # class first allocating at step j: hist[(r0 - j) % bs]
        total = (capacity - self.free0) * span
        for m, lo, hi in ((q + 1, 0, r), (q, r, bs)) if q else ((1, 0, r),):
            s0 = s1 = s2 = 0
            for j in range(lo, hi):
                h = hist[(r0 - j) % bs]
                s0 += h
                s1 += h * j
                s2 += h * j * j
            if not s0:
                continue
            t2, t3 = m * (m - 1) // 2, (m - 1) * m * (2 * m - 1) // 6
            twice = ((2 * a - b) * (m * s1 + bs * t2 * s0)
                     + b * (m * s2 + bs * m * (m - 1) * s1 + bs * bs * t3 * s0))  # 2 Σ h Σ span(x)
            total += m * span * s0 - twice // 2
        return total
