"""The freest instance without a scan: an index of dispatch freeness F_d (scheduler/freeness.py).

`least_loaded` and `pd.decode_target` take the instance with the highest F_d of a normal-priority
request, ties to the lowest id. Scanning builds a snapshot of every instance per decision, so a
request costs O(instances). This index answers the same question in O(changed + log instances):

- a max-heap of (F_d, id) keys, one live entry per instance (older entries are skipped by stamp);
- an instance that changed since the last query (`touch`, from the simulator at every event that
  moves its load) is re-keyed from a fresh snapshot at the next query;
- between its events an instance's F_d can only fall: a decode run allocates blocks as steps end
  while its queue and batch stay fixed. So a key is an upper bound of the instance's F_d now, and
  the top entry, re-read, is the answer once its key is exact (else it is re-keyed and the next
  top tried); an entry keyed within the same query is exact without a re-read. An F_d above its
  key means an event was not touched: an error, not a wrong choice.

Only exact snapshots and the policies' own `dispatch_freeness` decide: the choice is the scan's.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from llumverify.requests import NORMAL
from llumverify.scheduler.freeness import dispatch_freeness
from llumverify.scheduler.snapshot import InstanceSnapshot


class FreenessIndex:
    """The member with the highest F_d (normal priority), ties to the lowest id.

    `snapshot(id)` gives a member's exact load now, or None once it no longer belongs (crashed).
    """

    def __init__(self, snapshot: Callable[[int], InstanceSnapshot | None]) -> None:
        self._snapshot = snapshot
        self._heap: list[tuple[float, int, int]] = []  # (-F_d, id, stamp)
        self._stamp: dict[int, int] = {}  # member id -> stamp of its live entry
        self._dirty: dict[int, None] = {}  # members to re-key at the next query (insertion-ordered)
        self._stamps = 0

    def add(self, iid: int) -> None:
        """A new member (keyed at the next query)."""
        self._stamp[iid] = -1
        self._dirty[iid] = None

    def touch(self, iid: int) -> None:
        """The member's load changed: re-key it at the next query."""
        self._dirty[iid] = None

    def best(self) -> int | None:
        """The member a scan with least-loaded's rule would choose now; None if there is none."""
        exact = self._stamps  # entries stamped above this are keyed in this call: exact now
        for iid in self._dirty:
            if iid in self._stamp:
                snap = self._snapshot(iid)
                if snap is None:
                    del self._stamp[iid]
                else:
                    self._push(iid, dispatch_freeness(snap, NORMAL))
        self._dirty.clear()
        heap, stamp = self._heap, self._stamp
        if len(heap) > 2 * len(stamp) + 64:  # drop entries superseded since they were pushed
            self._heap = heap = [e for e in heap if stamp.get(e[1]) == e[2]]
            heapq.heapify(heap)
        while heap:
            key, iid, st = heap[0]
            if stamp.get(iid) != st:
                heapq.heappop(heap)
                continue
            if st > exact:  # keyed from a snapshot taken in this call: nothing has moved since
                return iid
            snap = self._snapshot(iid)
            if snap is None:
                del stamp[iid]
                heapq.heappop(heap)
                continue
            f = dispatch_freeness(snap, NORMAL)
            if f == -key:
                return iid
            if f > -key:
                raise RuntimeError(f"freeness index: instance {iid}'s F_d rose from {-key} to {f} "
                                   f"without a touch")
            heapq.heappop(heap)
            self._push(iid, f)
        return None

    def _push(self, iid: int, f: float) -> None:
        self._stamps += 1
        self._stamp[iid] = self._stamps
        heapq.heappush(self._heap, (-f, iid, self._stamps))
