"""What the global scheduler sees of an instance: a load report, possibly stale.

The simulator builds these; the policies are pure functions of them (no clock, no SimPy), so the
same rules run in the simulator, in property tests and, where worth it, under Z3.
"""

from __future__ import annotations

from typing import NamedTuple


class InstanceSnapshot(NamedTuple):
    """One instance's load as last reported to the global scheduler.

    A NamedTuple rather than a frozen dataclass: the simulator builds one per instance at every
    dispatch and migration round, and a tuple is built about 7x faster.
    """

    instance: int
    num_blocks: int  # T: total KV blocks
    watermark_blocks: int
    free_blocks: int  # physically free (a destination's reservations count as used)
    num_running: int  # R
    num_waiting: int  # Q
    waiting_prompt_blocks: float  # Wall: sum of prompt_len / block_size over waiting requests
    head_blocks: int  # blocks the head-of-line waiting request needs (0 if none waits)
    num_preempted: int = 0  # waiting requests that were preempted (sources for migration)
    hosts_priority: bool = False  # [P]: a high-priority request is queued or running here
    terminating: bool = False  # being drained by the autoscaler (reports F = -1000)
    dispatched: int = 0  # requests sent here so far (round-robin / static dispatch)
    predicted_blocks: float = 0.0  # Σ (prompt + predicted output) / block_size over running and waiting
    block_size: int = 16  # tokens per KV block (to turn an arriving prompt into blocks)
