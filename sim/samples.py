"""Sample lists whose repeats cost nothing: an idle gap of simulated time adds one run, not one
entry per tick.

The sampler takes fragmentation and the time series every `sample_interval_s`; across a gap in
which no instance is active every sample repeats the last one (sim/cluster.py), so a 10^7 s gap
at one sample per second used to hold 10^7 floats per series. `Repeats` keeps (value, count)
runs and `Ticks` keeps the sample times as runs of an arithmetic progression of integer
nanoseconds. Both read like the lists they replace (len, iteration, indexing, equality with a
list), with the same float objects in the same order, so every summary computed from them is
bit-identical.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

NS = 1_000_000_000


class _Runs(Sequence[float]):
    """Common reading interface: subclasses define `__iter__` and `__len__`."""

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return list(self)[i]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        for j, x in enumerate(self):  # only tests and small reads index into the middle
            if j == i:
                return x
        raise IndexError(i)  # pragma: no cover

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, _Runs)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"


class Repeats(_Runs):
    """A list of floats stored as runs of one value."""

    def __init__(self) -> None:
        self.values: list[float] = []
        self.counts: list[int] = []
        self._n = 0

    def append(self, x: float) -> None:
        self.values.append(x)
        self.counts.append(1)
        self._n += 1

    def repeat(self, n: int) -> None:
        """Append the last value n more times."""
        if n > 0:
            self.counts[-1] += n
            self._n += n

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[float]:
        for v, c in zip(self.values, self.counts):
            for _ in range(c):
                yield v

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, int) and i in (-1, self._n - 1) and self._n:
            return self.values[-1]
        return super().__getitem__(i)

    def mean(self) -> float:
        """np.mean of the expanded list (the same pairwise sum, so the same float)."""
        return float(np.mean(np.repeat(np.array(self.values, dtype=float), self.counts)))


class Ticks(_Runs):
    """Sample times in seconds, each (base_ns + i * period_ns) / NS of a run."""

    def __init__(self) -> None:
        self.runs: list[tuple[int, int, int]] = []  # (base_ns, period_ns, count)
        self._n = 0

    def append_ns(self, t_ns: int) -> None:
        self.runs.append((t_ns, 0, 1))
        self._n += 1

    def extend_ns(self, first_ns: int, period_ns: int, n: int) -> None:
        """first_ns, first_ns + period_ns, ... (n times)."""
        if n > 0:
            self.runs.append((first_ns, period_ns, n))
            self._n += n

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[float]:
        for base, period, count in self.runs:
            for i in range(count):
                yield (base + i * period) / NS
