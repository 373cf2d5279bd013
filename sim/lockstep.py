"""Data-parallel ranks of one MoE engine stepping in lockstep (vLLM's DP + expert parallelism).

vLLM synchronises the forward passes of an MoE engine's data-parallel ranks: every MoE layer
exchanges the ranks' tokens, each rank pads its step to the busiest rank's token count, and a
rank with nothing to do runs a dummy step (vllm/v1/engine/core.py DPEngineCoreProc; the data
parallel deployment docs: "forward passes must be aligned"). So a step lasts as long as the
slowest rank's, and a request reaching an idle rank waits for the group's step in flight to end.

Here: each rank plans its next step as usual, one step at a time (no closed-form runs), and
joins the group's next step; when every rank that reaches the step boundary at this instant has
joined (a zero-delay event after the boundaries, which are urgent), the step starts with the
longest planned duration on every rank. A rank that wakes while a group step is in flight starts
at its end. The padding itself is in the step cost (sim/roofline.py MoEGroup: the MoE layers
priced at every rank's tokens).
"""

from __future__ import annotations

from typing import Protocol

from llumverify.sim.decode_run import DecodeRun
from llumverify.sim.waits import Environment


class Rank(Protocol):
    """What the group needs of an instance (sim/instance.py)."""

    def wake_at_step_end(self, run: DecodeRun, now: int) -> None: ...


def lockstep_ranks(model: str, dp: int) -> int:
    """How many consecutive instances step together: an MoE engine's dp ranks, else 1 (a dense
    model's data-parallel ranks are independent engines)."""
    from llumverify.sim.catalog import get_model

    return dp if dp > 1 and model and get_model(model).moe else 1


class LockstepGroup:
    """The ranks of one engine: the steps they joined at this instant, and when the step in flight ends."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.busy_until = 0  # end of the group step in flight (ns)
        self._joined: list[tuple[Rank, DecodeRun]] = []

    def next_start(self, now: int) -> int:
        """When a rank that wakes now can start a step: now, or the end of the group step in flight."""
        return max(now, self.busy_until)

    def join(self, inst: Rank, run: DecodeRun, now: int) -> None:
        """`inst` planned one step `run` starting now: it starts with the group's step."""
        if run.k_end != 1:
            raise ValueError("a lockstep rank plans one step at a time")
        if not self._joined:
            self.env.timeout(0).callbacks.append(self._launch)
        self._joined.append((inst, run))

    def _launch(self, _ev: object) -> None:
        now, joined = self.env.now, self._joined
        self._joined = []
        span = max(run.alpha for _, run in joined)
        for inst, run in joined:
            run.alpha = span
            inst.wake_at_step_end(run, now)
        self.busy_until = now + span
