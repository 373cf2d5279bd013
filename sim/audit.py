"""Conservation checks the simulator runs on itself, always on, each O(1) where it is called.

A failed check raises AuditError(name, detail); the CLI prints it as one line and exits 3.
"""

from __future__ import annotations


class AuditError(Exception):
    """The simulator broke one of its own invariants (a bug, not bad input)."""

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(f"audit '{name}' failed: {detail}")
        self.name = name
        self.detail = detail

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        """Rebuild from (name, detail): a sweep's worker process sends it back to the parent."""
        return (AuditError, (self.name, self.detail))


def check_blocks(where: str, free: int, held: int, reserved: int, capacity: int) -> None:
    """Blocks are never negative nor over capacity, and free + held + reserved == capacity."""
    if free < 0 or held < 0 or reserved < 0 or free > capacity:
        raise AuditError("blocks", f"{where}: free={free} held={held} reserved={reserved} capacity={capacity}")
    if free + held + reserved != capacity:
        raise AuditError("blocks", f"{where}: free {free} + held {held} + reserved {reserved} != capacity {capacity}")


def check_recount(where: str, held: int, recount: int) -> None:
    """The held-block counter equals the blocks the running requests' KV lengths need."""
    if held != recount:
        raise AuditError("blocks", f"{where}: held counter {held} != {recount} blocks recounted from KV lengths")


def check_clock(where: str, last_ns: int, now_ns: int) -> None:
    """Simulated time never runs backwards."""
    if now_ns < last_ns:
        raise AuditError("clock", f"{where}: time went from {last_ns} ns back to {now_ns} ns")


def check_status(rid: int, status: str) -> None:
    """An ended request is finished, or rejected or failed with a reason."""
    if status != "finished" and not (status.startswith(("rejected:", "failed:")) and ":" != status[-1]):
        raise AuditError("accounting", f"request {rid} ended with status {status!r}")


def check_ended(arrived: int, ended: int) -> None:
    """Every arriving request ended exactly once: finished, or rejected or failed with a reason.

    Together with `Request.end` (ending twice raises), the run's ledger (a request recorded twice
    raises, each record's status is checked: sim/records.py) and the placement check (a request
    held by two instances, or by one after it ended, raises) this is the exactly-once audit that
    instance failures and migrations must keep."""
    if ended != arrived:
        raise AuditError("accounting", f"{arrived} requests arrived but {ended} ended")


def check_littles_law(in_system_ns: int, sojourn_ns: int, tolerance: float = 0.01) -> None:
    """∫ (requests in the instances) dt equals Σ sojourn times of the records, within 1 %."""
    if abs(in_system_ns - sojourn_ns) > tolerance * max(sojourn_ns, 1):
        raise AuditError("littles_law", f"time-integral of requests in system {in_system_ns} ns "
                                        f"vs sum of sojourn times {sojourn_ns} ns")
